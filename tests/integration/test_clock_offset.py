"""A distributed phase measures each Locust worker's clock against its master's.

A real master with one local worker and one more worker started as a far loader would
be (its own ``LBLAB_LOADER``), whose clock is set ahead by a known amount through the
test-only ``--lblab-test-clock-skew-ms``. Both measured offsets must hold the truth
within their bound: the NTP bound is exact, whatever the load on the machine.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from lblab.experiment.runconfig import LoadConfig
from lblab.loadtests import loadgen
from lblab.loadtests.clocks import read_clocks
from lblab.loadtests.loadspec import LoadSpec
from lblab.loadtests.records import LOADER_ENV
from lblab.scenarios import builtin_scenario
from tests.integration.test_locust_hub import balancer  # noqa: F401 (the fixture)

pytestmark = pytest.mark.slow  # three Locust processes: ~30 s on a busy 2-core machine

SKEW_MS = 250.0
RUN_TIME_S = 3.0
ROUNDING_MS = 0.01  # clocks.json keeps 3 decimals of a ms


def test_master_measures_each_workers_clock_offset_within_its_bound(
    balancer: tuple[str, int],  # noqa: F811
    tmp_path: Path,
) -> None:
    records = tmp_path / "records"
    spec = LoadSpec(
        run_id="clocks",
        scenario=builtin_scenario("sp+sr"),
        strategy="rr",
        replication=1,
        request_timeout=5,
        records_dir=str(records),
        generators=2,
        duration=RUN_TIME_S,
    )
    load = LoadConfig(users=2, spawn_rate=2)
    bind = ("127.0.0.1", loadgen.free_port())
    run = loadgen.start(spec, load, *balancer, 1, records / "locust.log", expect=1, bind=bind)
    far = subprocess.Popen(
        [*loadgen.worker_command(*bind), "--lblab-test-clock-skew-ms", str(SKEW_MS)],
        env={**os.environ, LOADER_ENV: "far"},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + RUN_TIME_S + loadgen.WORKERS_WAIT_S
    try:
        while not run.finished():
            assert time.monotonic() < deadline, "Locust did not finish"
            time.sleep(0.1)
        assert run.main.popen.returncode == 0, (records / "locust.log").read_text()[-2000:]
    finally:
        run.stop()
        far.terminate()
        far.wait(timeout=15)
    clocks = read_clocks(records)
    assert clocks is not None, "the master wrote no clocks.json"
    workers = clocks["workers"]
    assert clocks["asked"] == 2 and len(workers) == 2, clocks
    by_loader = {w["loader"]: w for w in workers.values()}
    assert set(by_loader) == {"far", loadgen_host_loader()}, by_loader
    for loader, truth in ((loadgen_host_loader(), 0.0), ("far", SKEW_MS)):
        w = by_loader[loader]
        assert w["rounds"] >= 3, w
        assert abs(w["offset_ms"] - truth) <= w["bound_ms"] + ROUNDING_MS, (loader, w)
        # Fine enough to tell the skew from none (busy 2-core machine: a few ms).
        assert w["bound_ms"] < SKEW_MS / 2, (loader, w)


def loadgen_host_loader() -> str:
    from lblab.loadtests.records import loader_name

    return loader_name()
