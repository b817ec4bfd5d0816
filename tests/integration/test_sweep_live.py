"""``lblab sweep --live-check``: a cell run live on the local testbed beside its simulation,
and a sweep folder with damaged files (one line, or the damaged point not counted done)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from lblab.sweep.grid import load_sweep
from lblab.sweep.point import FIGURES
from lblab.sweep.run import POINTS, consolidate, finished, sweep_folder, write_point
from tests.run_fixture import run_lblab

pytestmark = pytest.mark.slow

# Three sleeping servers (20, 20 and 10 ms a request): 200 requests/s in all. The cell at
# 40/s can run live; the one at 5000/s cannot (and is said so).
SWEEP = """
[base]
requests = 2000
service = "fixed:20ms"
[[base.servers]]
count = 2
[[base.servers]]
count = 1
speed = 2
[grid]
strategy = ["rr", "lc"]
rate = [40, 5000]
"""
LIVE_SECONDS = 3
DEADLINE_S = 240


def test_a_cell_is_run_live_and_shown_beside_its_simulation(tmp_path: Path) -> None:
    source = tmp_path / "sweep.toml"
    source.write_text(SWEEP)
    out = tmp_path / "out"
    args = ["sweep", str(source), "--out", str(out), "--workers", "1"]
    args += ["--live-check", "2", "--live-seconds", str(LIVE_SECONDS)]
    result = run_lblab(args, DEADLINE_S)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "1 cells cannot run live: rate 5000/s is over the 400/s" in result.stderr
    assert "live check 1/1 (rate=40): " in result.stderr

    live = pd.read_parquet(out / "live-check.parquet")
    assert sorted(zip(live.strategy, live.source, strict=True)) == [
        ("lc", "measured"), ("lc", "simulated"), ("rr", "measured"), ("rr", "simulated"),
    ]  # fmt: skip
    assert (live["rate"] == 40).all()
    assert (live["requests"] == 40 * LIVE_SECONDS).all()  # the same count, both sides
    assert (live["failure_rate"] == 0).all()
    measured = live[live.source == "measured"].set_index("strategy")
    simulated = live[live.source == "simulated"].set_index("strategy")
    # The live servers sleep the simulated service: 20 ms on s1 and s2, 10 ms on the
    # twice as fast s3, as each server measured it (its slot time: the sleep and a
    # fraction of a millisecond of JSON work), whatever the harness adds on a busy
    # machine; end to end no request is faster than simulated.
    run = next((out / "live-check").iterdir()) / "run"
    service = pd.read_parquet(run / "requests.parquet").groupby("server")["service_ms"]
    assert service.min().to_dict() == pytest.approx({"s1": 20, "s2": 20, "s3": 10}, abs=0.9)
    assert (measured["mean_ms"] >= simulated["mean_ms"] - 1).all()
    assert set(measured["checks"]) <= {"pass", "warn", "fail"}
    assert (run / "manifest.json").is_file()

    page = (out / "report" / "index.html").read_text()
    assert "Measured against simulated (live checks)" in page
    assert "the measured best is the simulated one in <b>" in page

    # A rerun finds the check done: no live run again.
    before = (run / "requests.parquet").stat().st_mtime_ns
    again = run_lblab(args, DEADLINE_S)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "live check 1/1 (rate=40): done before" in again.stderr
    assert (run / "requests.parquet").stat().st_mtime_ns == before


def test_damaged_sweep_files_are_named_or_run_again(tmp_path: Path) -> None:
    source = tmp_path / "sweep.toml"
    source.write_text(SWEEP.replace("rate = [40, 5000]", "rate = [40]"))
    sweep = load_sweep(source)
    out = tmp_path / "out"
    sweep_folder(out, sweep, source, force=False)
    for point in sweep.points:  # as if run: a row each, no error
        write_point(out, sweep, point, dict.fromkeys(FIGURES, 1.0) | {"error": None})
    assert finished(out) == {p.key for p in sweep.points}
    consolidate(out, sweep)

    # A damaged point file: that point is not done, and runs again on a rerun.
    damaged = out / POINTS / f"{sweep.points[0].key}.parquet"
    damaged.write_bytes(b"\0" * 10)
    assert finished(out) == {sweep.points[1].key}

    # A damaged sweep.parquet: one line that says what to do.
    (out / "sweep.parquet").write_bytes(b"PAR1 not really")
    result = run_lblab(["sweep", "report", str(out)], 60)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "sweep.parquet is not a readable sweep table" in lines[0]
    assert "rebuilds sweep.parquet from the points/ folder" in lines[0]
