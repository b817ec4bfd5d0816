"""Measured windows on a real run: one window per phase, every row labelled, one req/s.

The ``tiny`` preset's run (``tiny_run_dir``: real servers, agents, balancer, Locust).
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from lblab.analysis.load import open_results
from lblab.analysis.metrics import summarize
from lblab.experiment.summary import summary_rows
from lblab.windows import AFTER, BEFORE, INSIDE, LABELS

pytestmark = pytest.mark.slow


def _phases(run_dir: Path) -> list[dict]:
    return json.loads((run_dir / "manifest.json").read_text())["phases"]


def test_every_row_of_every_table_says_where_it_falls(tiny_run_dir: Path) -> None:
    for table in ("requests", "cpu", "picks"):
        df = pd.read_parquet(tiny_run_dir / f"{table}.parquet")
        assert set(df["window"]) <= set(LABELS) and (df["window"] == INSIDE).any(), table
        assert df["warmup"].eq(df["window"] == BEFORE).all(), table
    for phase in _phases(tiny_run_dir):
        w = phase["window"]
        assert w["seconds"] == pytest.approx(3.0)  # tiny: 3 s measured after 1 s warm-up
        assert w["start"] == pytest.approx(phase["load_start"] + 1.0)


def test_cpu_samples_outside_the_load_are_not_measured(tiny_run_dir: Path) -> None:
    """rr on mp+mr keeps the two small servers busy for the whole load: every sample
    labelled inside the window reads them busy (an idle sample from before or after the
    load, if the window were misplaced, reads about 0 %), and the idle samples of the
    phase are labelled outside it. Each sample covers the 0.25 s before its time, so the
    first one inside starts at or after the window's start; the last one may straddle
    the end of the load (Locust's timer starts before its users' first request: on a
    busy machine the last sample read 46 %), so "busy" is at least a quarter."""
    cpu = pd.read_parquet(tiny_run_dir / "cpu.parquet")
    cell = cpu[(cpu.strategy == "rr") & (cpu.scenario == "mp+mr") & cpu.server.isin(["s1", "s2"])]
    inside = cell[cell.window == INSIDE]
    assert len(inside) >= 2 * 10, len(inside)  # 3 s at 4 samples a second, per server
    phase = next(p for p in _phases(tiny_run_dir) if p["key"].endswith("mp+mr-rr"))
    # Where the run found its CPUs taken by other work (its disturbance check: the suite's
    # other workers), a server can be starved mid-window (9.5 % in one suite run, with
    # 55-61 % of the servers' CPU taken); the idle samples and the times still place it.
    disturbance = next(c for c in phase["verdicts"] if c["name"] == "disturbance")
    if disturbance["level"] == "pass":
        assert (inside.cpu_percent >= 25).all(), inside.cpu_percent.tolist()
    idle = cell[cell.cpu_percent < 5]
    assert len(idle) > 0 and (idle.window != INSIDE).all(), idle.window.tolist()
    assert (cell[cell.window == AFTER].t > phase["window"]["end"]).all()
    assert inside.t.min() - 0.25 >= phase["window"]["start"] - 1e-6
    assert inside.t.max() <= phase["window"]["end"]


def test_progress_summary_and_report_show_one_throughput(tiny_run_dir: Path) -> None:
    """The same phase never shows two different req/s: manifest (progress line), summary
    table, analysis (report) all count ok requests inside the window / its length."""
    by_phase = {(p["scenario"], p["strategy"]): p["ok_per_s_window"] for p in _phases(tiny_run_dir)}
    summary = {(r["scenario"], r["strategy"]): r["ok_per_s"] for r in summary_rows(tiny_run_dir)}
    units = summarize(open_results(tiny_run_dir)).units
    report = {(u.scenario, u.strategy): u.throughput_rps for u in units.itertuples()}
    assert by_phase.keys() == summary.keys() == report.keys()
    for key, rate in by_phase.items():
        assert summary[key] == pytest.approx(rate) and report[key] == pytest.approx(rate), key
