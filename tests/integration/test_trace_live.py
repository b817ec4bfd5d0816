"""The trace model live: real headless Locust through a real balancer to real servers,
sending a trace's requests on its schedule, with its shapes, once each."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow.compute as pc
import pytest

from lblab.experiment.runconfig import LoadConfig
from lblab.loadtests.loadspec import LoadSpec
from lblab.loadtests.record_table import read_records
from lblab.procs import Child, lblab_command, spawn, stop
from lblab.scenarios import Scenario
from lblab.traces import TraceWindow, schedule
from tests.integration.test_locust import run_locust

# 40 requests, bursts and lulls, every shape its own (a request sent twice would show).
TIMES = [0.0, 0.01, 0.02, 0.03, 0.5, 0.52, 0.9, 1.4, 1.41, 1.42] * 4
TRACE = "time_s,package_bytes,work_bytes\n" + "".join(
    f"{t + 1.5 * (i // 10):.3f},{200 + 37 * i},{1000 * (i + 1)}\n" for i, t in enumerate(TIMES)
)


@pytest.fixture(scope="module")
def balancer() -> Iterator[tuple[str, int]]:
    """Two unequal servers (the second sleeps 5 ms a request) behind least connections."""
    children: list[Child] = []
    try:
        for sid, extra in (("s1", ()), ("s2", ("--delay-ms", "5"))):
            children.append(spawn(sid, lblab_command("server", "--id", sid, "--port", "0", *extra)))
        backends = [
            arg
            for c in children
            for arg in ("--backend", f"{c.ready['id']}=127.0.0.1:{c.ready['port']}")
        ]
        bal = spawn("balancer", lblab_command("balancer", "--port", "0", "-s", "lc", *backends))
        children.append(bal)
        yield "127.0.0.1", int(bal.ready["port"])
    finally:
        for child in reversed(children):
            stop(child, timeout=5)


def trace_spec(tmp_path: Path, window: TraceWindow, **kw: object) -> LoadSpec:
    return LoadSpec(
        run_id="it",
        scenario=Scenario("mytrace", (), window),
        strategy="lc",
        replication=1,
        model="trace",
        rate=40.0,
        duration=30.0,
        request_timeout=5,
        records_dir=str(tmp_path / "records"),
        **kw,  # type: ignore[arg-type]
    )


def test_one_generator_sends_each_request_at_its_due_time_with_its_shape(
    balancer: tuple[str, int], tmp_path: Path
) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(TRACE)
    window = TraceWindow(source=str(path), loop=True)
    spec = trace_spec(tmp_path, window, count=50)  # a pass and a quarter: it loops
    load = LoadConfig(model="trace", trace=str(path), rate=40.0, count=50, trace_loop=True)
    assert run_locust(balancer, spec, load) == 0
    table = read_records(tmp_path / "records").sort_by("t_sent")
    planned = list(schedule(window, 40.0).sends(most=50))
    assert table.num_rows == 50
    shapes = list(
        zip(table["package_bytes"].to_pylist(), table["work_bytes"].to_pylist(), strict=True)
    )
    assert shapes == [(p, w) for _, p, w in planned]
    assert shapes[40] == shapes[0]  # the second pass
    sent = table["t_sent"].to_pylist()
    # t_sent is the due time: the schedule's own offsets, bursts and lulls alike.
    assert [t - sent[0] for t in sent] == pytest.approx([d for d, _, _ in planned], abs=1e-6)
    assert set(table["cell"].to_pylist()) == {"mytrace"}
    assert pc.all(table["ok"]).as_py()
    assert set(table["server"].to_pylist()) == {"s1", "s2"}


def test_two_processes_split_the_trace_and_stop_at_its_end(
    balancer: tuple[str, int], tmp_path: Path
) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(TRACE)
    window = TraceWindow(source=str(path))
    spec = trace_spec(tmp_path, window, generators=2)
    load = LoadConfig(model="trace", trace=str(path), rate=40.0)
    # 30 s of phase, but the trace's 40 requests at 40/s end within a second: so does the run.
    assert run_locust(balancer, spec, load, workers=2) == 0
    planned = [(p, w) for _, p, w in schedule(window, 40.0).sends()]
    table = read_records(tmp_path / "records")
    shapes = list(
        zip(table["package_bytes"].to_pylist(), table["work_bytes"].to_pylist(), strict=True)
    )
    assert sorted(shapes) == sorted(planned)  # every request once, none twice
    by_writer: dict[str, list[tuple[float, int, int]]] = {}
    for chunk in (tmp_path / "records").glob("requests-*.json"):
        cols = json.loads(chunk.read_bytes())
        rows = zip(cols["t_sent"], cols["package_bytes"], cols["work_bytes"], strict=True)
        by_writer.setdefault(chunk.name.split("-")[2], []).extend(rows)
    halves = sorted(sorted((p, w) for _, p, w in rows) for rows in by_writer.values())
    # Process i sends requests i, i + 2, ...: the even and the odd ones.
    assert halves == sorted([sorted(planned[0::2]), sorted(planned[1::2])])
    assert pc.all(table["ok"]).as_py()
    assert len(list(itertools.chain.from_iterable(by_writer.values()))) == 40
