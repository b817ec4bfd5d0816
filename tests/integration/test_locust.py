"""Real headless Locust through a real balancer to real servers, short runs."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.compute as pc
import pytest
from balancer_testbed import balancer_over_servers

from lblab.experiment.runconfig import LoadConfig
from lblab.loadtests import loadgen
from lblab.loadtests.loadspec import LoadSpec
from lblab.loadtests.record_table import read_records
from lblab.scenarios import builtin_scenario

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def balancer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, int]]:
    with balancer_over_servers(tmp_path_factory.mktemp("locust"), ("s1",), ("s2",)) as address:
        yield address


def run_locust(address: tuple[str, int], spec: LoadSpec, load: LoadConfig, workers: int = 0) -> int:
    run = loadgen.start(spec, load, *address, workers, Path(spec.records_dir) / "locust.log")
    deadline = time.monotonic() + spec.duration + spec.request_timeout + 40
    try:
        while not run.finished():
            assert time.monotonic() < deadline, "Locust did not finish"
            time.sleep(0.1)
        return run.main.popen.returncode
    finally:
        run.stop()


def spec_for(tmp_path: Path, **kw: object) -> LoadSpec:
    return LoadSpec(
        run_id="it",
        scenario=builtin_scenario("sp+sr"),
        strategy="rr",
        replication=1,
        request_timeout=5,
        records_dir=str(tmp_path / "records"),
        **kw,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("workers", [0, 2])
def test_closed_model_records_exactly_what_locust_counted(
    balancer: tuple[str, int], tmp_path: Path, workers: int
) -> None:
    spec = spec_for(tmp_path, generators=max(1, workers), duration=3.0)
    code = run_locust(balancer, spec, LoadConfig(users=4, spawn_rate=8), workers)
    assert code == 0
    table = read_records(tmp_path / "records")
    counted = loadgen.locust_request_count(tmp_path / "records")
    assert counted is not None and counted >= 4  # at least one request per user
    if workers:
        # The master's total misses the workers' last stats report when it quits at the
        # end of -t while workers still finish their in-flight requests; records don't.
        assert table.num_rows >= counted
    else:
        assert table.num_rows == counted
    assert pc.all(table["ok"]).as_py()
    assert set(table["server"].to_pylist()) == {"s1", "s2"}
    # The load lasts its duration from its first request (the window's definition), not
    # from Locust's -t timer, which starts before the users connect; -t is a safety net
    # 15 s later that a phase ending itself never reaches.
    first = pc.min(table["t_sent"]).as_py()
    answered = pc.add(table["t_sent"], pc.divide(table["latency_ms"], 1000.0))
    assert pc.max(answered).as_py() >= first + spec.duration
    assert pc.max(table["t_sent"]).as_py() < first + spec.duration + 1.0
    writers = {p.name.split("-")[2] for p in (tmp_path / "records").glob("requests-*.json")}
    assert len(writers) == max(1, workers)  # each worker recorded its own requests


def test_open_model_sends_on_schedule_whatever_the_answers(
    balancer: tuple[str, int], tmp_path: Path
) -> None:
    spec = spec_for(tmp_path, model="open", rate=40.0, count=30, duration=0.0)
    load = LoadConfig(model="open", rate=40.0, count=30)
    assert run_locust(balancer, spec, load) == 0
    table = read_records(tmp_path / "records").sort_by("t_sent")
    assert table.num_rows == 30
    sent = table["t_sent"].to_pylist()
    gaps = [b - a for a, b in itertools.pairwise(sent)]
    # t_sent is the due time: exactly 25 ms apart, not when the sender got round to it.
    assert gaps == pytest.approx([0.025] * 29, abs=1e-6)
    assert pc.all(table["ok"]).as_py()
