"""The Locust process must never stall its users, and a phase must last its ``-t``.

Regression tests for a stall seen in every live phase (``quick``: p95 of 1-6 s, one
phase with 66 requests where its neighbours had thousands): 2 s into each phase the
recorder's first flush made pyarrow import pandas on the gevent hub, which froze every
user of the process for 1 s on an idle machine and up to 5.7 s on a busy one. And the
phases were 1-3 s shorter than asked, because Locust's ``--run-time`` timer read a
gevent clock that had not moved during the locustfile's imports.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from balancer_testbed import balancer_over_servers

from lblab.experiment.runconfig import LoadConfig
from lblab.loadtests import loadgen
from lblab.loadtests.loadspec import LoadSpec
from lblab.loadtests.record_table import read_records
from lblab.scenarios import builtin_scenario

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

# What a Locust process does with a request once its users run: record it, then flush.
# Any module imported during that is an import on the gevent hub while users wait.
FLUSH_PROBE = """
import json, sys
from types import SimpleNamespace
import lblab.loadtests.locustfile as lf
from lblab.scenarios import builtin_scenario
from lblab.loadtests.loadspec import LoadSpec

spec = LoadSpec(run_id="probe", scenario=builtin_scenario("sp+sr"), strategy="rr",
                replication=1, records_dir=sys.argv[1])
env = SimpleNamespace(parsed_options=SimpleNamespace(lblab_spec=spec.to_json()))
before = set(sys.modules)
lf._recording.on_request(env, "sp+sr", 1.5, {
    "t_sent": 1.0, "error_kind": None, "error_origin": None, "package_bytes": 100, "work_bytes": 10000,
    "server": "s1",
})
lf._recording.flush()
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_recording_and_flushing_imports_nothing_while_users_run(tmp_path: Path) -> None:
    # A fresh interpreter: this test process has long imported pandas.
    result = subprocess.run(
        [sys.executable, "-c", FLUSH_PROBE, str(tmp_path / "records")],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    imported = json.loads(result.stdout.strip().splitlines()[-1])
    assert imported == [], f"imported on the hub at the first flush: {imported[:20]}"
    assert list((tmp_path / "records").glob("requests-*.json")), "the flush wrote no chunk"


@pytest.fixture(scope="module")
def balancer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    with balancer_over_servers(tmp_path_factory.mktemp("hub"), ("s1",), ("s2",)) as address:
        yield address


RUN_TIME_S = 5.0
MAX_SEND_GAP_S = 0.6
"""Longest pause of all users together that is not a stall: with the fixes the longest
was 0.28 s (load average 6 on 2 cores); the stall was 1.0 s idle and up to 5.7 s busy."""


def test_closed_phase_sends_without_pause_for_its_whole_run_time(
    balancer: tuple[str, int], tmp_path: Path
) -> None:
    records = tmp_path / "records"
    spec = LoadSpec(
        run_id="hub",
        scenario=builtin_scenario("sp+sr"),
        strategy="rr",
        replication=1,
        request_timeout=5,
        records_dir=str(records),
        duration=RUN_TIME_S,
    )
    load = LoadConfig(users=4, spawn_rate=4)
    run = loadgen.start(spec, load, *balancer, 0, records / "locust.log")
    deadline = time.monotonic() + RUN_TIME_S + 40
    try:
        while not run.finished():
            assert time.monotonic() < deadline, "Locust did not finish"
            time.sleep(0.1)
        assert run.main.popen.returncode == 0
    finally:
        run.stop()
    t_sent = sorted(read_records(records)["t_sent"].to_pylist())
    assert len(t_sent) > 100
    gaps = [b - a for a, b in itertools.pairwise(t_sent)]
    worst = max(range(len(gaps)), key=gaps.__getitem__)
    assert gaps[worst] < MAX_SEND_GAP_S, (
        f"no request was sent for {gaps[worst]:.2f} s, {t_sent[worst] - t_sent[0]:.2f} s "
        "into the phase: the Locust process stalled"
    )
    span = t_sent[-1] - t_sent[0]
    assert span > RUN_TIME_S - 0.5, f"-t {RUN_TIME_S:g}s gave only {span:.2f} s of load"
