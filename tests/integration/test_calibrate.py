"""``lblab calibrate`` recovers a known cost model from a run whose servers sleep.

A simulated run of a file with sleeping servers (fixed and exponential ``delay_ms``),
whose cost per request besides the sleep is given (``[testbed] service``): calibrating
that run must give back the cost given, not the cost plus the sleeps, because the
sleeps the file declares are taken out first. Without them taken out, ``a`` would come
out near the mean sleep (10 ms).
"""

from __future__ import annotations

import re
import textwrap

import pytest

from lblab.experiment.runconfig import ServerSpec
from lblab.simulator.simulated_testbed import mean_sleeps_ms
from tests.run_fixture import run_lblab

GIVEN_A_MS = 1.5
FILE = textwrap.dedent(
    f"""\
    [run]
    name = "calibrate-sleeps"
    strategies = ["rr"]
    scenarios = ["sp+sr", "sp+mr", "lp+sr"]
    duration = "20s"
    warmup = "1s"
    replications = 1
    max_replications = 0

    [load]
    model = "open"
    rate = 60
    arrival = "poisson"

    [testbed]
    kind = "simulated"
    service = "json:a={GIVEN_A_MS}ms,b=6.73e-8,c=2.65e-9"

    [[servers]]
    id = "s1"
    delay_ms = 10

    [[servers]]
    id = "s2"
    delay_ms = 10
    delay_dist = "exp"

    [[servers]]
    id = "s3"
    """
)


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory):
    folder = tmp_path_factory.mktemp("calibrate")
    (folder / "sleeps.toml").write_text(FILE)
    run = run_lblab(
        ["run", "--config", str(folder / "sleeps.toml"), "--out", str(folder / "run"),
         "--no-report"],
        timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    done = run_lblab(["calibrate", str(folder / "run")], timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_the_declared_sleeps_are_taken_out_and_said(calibrated) -> None:
    assert "mean sleep taken out first (s1 10 ms, s2 10 ms)" in calibrated.stderr


def test_the_fit_gives_back_the_cost_besides_the_sleeps(calibrated) -> None:
    found = re.search(r"json:a=([0-9.e+-]+)ms,b=([0-9.e+-]+),c=([0-9.e+-]+)", calibrated.stdout)
    assert found, calibrated.stdout
    a_ms, b, c = (float(x) for x in found.groups())
    # s2's exponential sleeps scatter around their mean (sd 10 ms a request, about 1,200
    # of the 3,700 requests): a's standard error is near 10 / sqrt(3,700) = 0.16 ms and
    # more with the three shapes' spread (a = 1.52 ms when written). Left in, the sleeps
    # would make a about 6.7 ms (two servers of three sleep 10 ms).
    assert a_ms == pytest.approx(GIVEN_A_MS, abs=0.6), calibrated.stdout
    assert b == pytest.approx(6.73e-8, rel=0.2), calibrated.stdout
    assert c == pytest.approx(2.65e-9, rel=0.3), calibrated.stdout


def test_sleeps_are_read_only_from_servers_that_sleep() -> None:
    given = [{"id": "s1", "delay_ms": 10}, {"id": "s2", "delay_ms": 0}, {"id": "s3"},
             {"id": "s4", "delay_ms": 4, "delay_dist": "exp"}]  # fmt: skip
    servers = [ServerSpec.from_table(s, "servers") for s in given]
    assert mean_sleeps_ms(servers) == {"s1": 10.0, "s4": 4.0}
    assert mean_sleeps_ms([]) == {}
