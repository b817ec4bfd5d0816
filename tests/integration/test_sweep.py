"""``lblab sweep`` on real Dask clusters: a local one, a killed sweep rerun, an external one.

Each test starts its own cluster on loopback (a ``LocalCluster``, or ``dask scheduler``
and two ``dask worker`` processes from the project's environment), waits for it with a
deadline, and stops every process it started.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from lblab.sweep.grid import load_sweep
from lblab.sweep.report import build_report
from lblab.sweep.run import POINTS, POINTS_LOG, run_sweep, sweep_folder
from tests.run_fixture import lblab_command, run_lblab

pytestmark = pytest.mark.slow

SWEEP = """
[base]
requests = {requests}
service = "exp:5ms"
[[base.servers]]
count = 6
[[base.servers]]
count = 2
speed = 1
[grid]
strategy = ["p2c", "rr", "lc"]
rate = [600, 1100]
"servers.1.speed" = [1, 3]
"""
COLUMNS = [
    "rate", "servers.1.speed", "strategy", "seed", "requests", "throughput_rps", "mean_ms",
    "p50_ms", "p95_ms", "p99_ms", "p999_ms", "failure_rate", "imbalance", "worker", "wall_s",
    "error", "key",
]  # fmt: skip
DEADLINE_S = 90.0


def sweep_file(folder: Path, requests: int) -> Path:
    path = folder / "sweep.toml"
    path.write_text(SWEEP.format(requests=requests))
    return path


def test_a_sweep_on_a_local_cluster_writes_rows_and_a_winner_map(tmp_path: Path) -> None:
    source = sweep_file(tmp_path, 1500)
    sweep = load_sweep(source)
    assert len(sweep.points) == 12
    # A point that fails where it runs (the file was checked on the driver): recorded.
    broken = dataclasses.replace(
        sweep.points[0], settings={**sweep.points[0].settings, "servers": "many"}, key="broken"
    )
    sweep = dataclasses.replace(sweep, points=(*sweep.points, broken))
    out = tmp_path / "out"
    sweep_folder(out, sweep, source, force=False)
    outcome = run_sweep(sweep, out, workers=2)
    assert (outcome.planned, outcome.ran, outcome.failed) == (13, 13, 1)

    table = pd.read_parquet(outcome.table)
    assert list(table.columns) == COLUMNS
    assert len(table) == 13
    failed = table[table["error"].notna()]
    assert list(failed["key"]) == ["broken"]
    assert "servers" in failed["error"].iloc[0]
    good = table[table["error"].isna()]
    assert set(good["worker"]) <= {"0", "1"}
    assert (good["requests"] == 1500).all() and (good["failure_rate"] == 0).all()
    assert (good["p50_ms"] <= good["p99_ms"]).all() and (good["p99_ms"] <= good["p999_ms"]).all()
    assert good["throughput_rps"].between(500, 1200).all()
    assert (good["imbalance"] >= 1).all()

    page = build_report(out).read_text()
    assert "best p99 (lower is better): servers.1.speed x rate" in page
    assert page.count("data:image/png;base64,") == 1
    assert (out / "report" / "map-rate-servers.1.speed.png").stat().st_size > 1000
    throughput = build_report(out, [("servers.1.speed", "rate")], "throughput").read_text()
    assert "best throughput (higher is better): rate x servers.1.speed" in throughput


def points_written(out: Path) -> dict[str, float]:
    return {p.stem: p.stat().st_mtime_ns for p in (out / POINTS).glob("*.parquet")}


def test_a_killed_sweep_reruns_only_the_missing_points(tmp_path: Path) -> None:
    source = sweep_file(tmp_path, 5000)  # ~0.3 s a point: the kill lands mid-way
    out = tmp_path / "out"
    args = ["sweep", str(source), "--out", str(out), "--workers", "1"]
    child = subprocess.Popen(
        lblab_command(*args),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its cluster's processes too: one group to kill
    )
    try:
        deadline = time.monotonic() + DEADLINE_S
        while len(points_written(out)) < 2 and child.poll() is None:
            assert time.monotonic() < deadline, "no 2 points written in time"
            time.sleep(0.05)
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    before = points_written(out)
    assert 2 <= len(before) < 12, f"the kill came too late: {len(before)} points written"

    result = run_lblab(args, DEADLINE_S)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"(12 points, {12 - len(before)} run now" in result.stdout
    after = points_written(out)
    assert len(after) == 12
    assert not list((out / POINTS).glob(".*.tmp"))  # what the kill cut short is cleaned
    assert all(after[k] == t for k, t in before.items())  # no finished point rewritten
    logged = Counter(
        json.loads(line)["key"] for line in (out / POINTS_LOG).read_text().splitlines()
    )
    assert set(logged) <= set(after) and max(logged.values()) == 1  # none ran twice
    assert len(pd.read_parquet(out / "sweep.parquet")) == 12


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def dask_cluster() -> Iterator[str]:
    """``dask scheduler`` and two ``dask worker`` processes on loopback, started by hand
    as a user would; yields the scheduler's address once both workers have joined."""
    from distributed import Client

    dask = str(Path(sys.executable).parent / "dask")
    address = f"tcp://127.0.0.1:{free_port()}"
    host, port = address.removeprefix("tcp://").split(":")
    commands = [
        [dask, "scheduler", "--host", host, "--port", port, "--dashboard-address", "127.0.0.1:0"],
        *(
            [dask, "worker", address, "--name", name, "--host", host, "--nthreads", "1",
             "--nworkers", "1", "--no-dashboard"]
            for name in ("w1", "w2")
        ),
    ]  # fmt: skip
    procs = [
        subprocess.Popen(
            c, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        for c in commands
    ]
    try:
        with Client(address, timeout=DEADLINE_S) as client:
            client.wait_for_workers(2, timeout=DEADLINE_S)
        yield address
    finally:
        for p in reversed(procs):
            os.killpg(p.pid, signal.SIGTERM)
        for p in reversed(procs):
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=5)


def test_a_sweep_on_an_external_scheduler(tmp_path: Path, dask_cluster: str) -> None:
    source = sweep_file(tmp_path, 1500)
    out = tmp_path / "out"
    result = run_lblab(
        ["sweep", str(source), "--out", str(out), "--scheduler", dask_cluster], DEADLINE_S
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"dask: {dask_cluster}, 2 workers" in result.stderr
    table = pd.read_parquet(out / "sweep.parquet")
    assert len(table) == 12 and table["error"].isna().all()
    assert set(table["worker"]) <= {"w1", "w2"}
    assert (out / "report" / "index.html").exists()
