"""A run loses and corrupts nothing: killed with SIGKILL mid-phase, none of its
processes outlives it and its resume holds no row of the killed attempt; a results
filesystem that fills mid-phase stops the run with one clear line, a readable folder
and a run that ``--resume`` finishes once there is room."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from lblab.analysis.load import open_results
from lblab.procs import lblab_command
from tests.full_disk import fill, needs_root, small_filesystem
from tests.run_fixture import PACED_LOAD, run_lblab, wait_for_phases

pytestmark = pytest.mark.slow

# Phases long enough that the Locust of a killed attempt, without a parent watch, would
# still be sending when the resume starts (it ran on for the phase's full length).
TWO_PHASES = (
    """
preset = "tiny"
[run]
strategies = ["lc"]
scenarios = ["sp+sr", "mp+sr"]
duration = "{duration}"
warmup = "0s"
"""
    + PACED_LOAD
)


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())


def start_run(tmp_path: Path, run_dir: Path, duration: str) -> subprocess.Popen[str]:
    config = tmp_path / "two.toml"
    config.write_text(TWO_PHASES.format(duration=duration))
    return subprocess.Popen(
        lblab_command("run", "--config", str(config), "--out", str(run_dir), "--no-report"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def wait_for_load(proc: subprocess.Popen[str], run_dir: Path, phase: int) -> dict:
    """Wait until Locust of ``phase`` has started its users; returns the phase entry."""

    def loading(phases: list[dict]) -> bool:
        entry = phases[phase]
        folder = run_dir / "raw" / "phases" / entry["key"] / entry.get("attempt", "-")
        return entry["status"] == "running" and any(folder.glob("progress-*.json"))

    return wait_for_phases(proc, run_dir, loading, f"phase {phase}'s load")[phase]


def processes_of(run_dir: Path) -> list[psutil.Process]:
    """Every process whose command line names the run directory (servers, agents, the
    balancer and Locust all do: their output files and Locust's spec are under it)."""
    found = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            if any(str(run_dir) in part for part in p.info["cmdline"] or []):
                found.append(p)
    return found


def wait_until_gone(run_dir: Path, seconds: float) -> list[psutil.Process]:
    deadline = time.monotonic() + seconds
    while (alive := processes_of(run_dir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return alive


def test_a_killed_run_leaves_no_process_and_its_resume_no_row_of_the_killed_attempt(
    tmp_path: Path,
) -> None:
    run_dir = tmp_path / "run"
    proc = start_run(tmp_path, run_dir, "12s")
    killed = wait_for_load(proc, run_dir, 0)
    time.sleep(2.0)  # well inside the phase: Locust is sending
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=10)

    # Every process of the run dies with it: Locust at once, the testbed's parts within
    # their owner check (1 s) and their stop.
    leftovers = wait_until_gone(run_dir, 8.0)
    assert leftovers == [], [p.cmdline()[:4] for p in leftovers]
    killed_folder = run_dir / "raw" / "phases" / killed["key"] / killed["attempt"]
    assert any(killed_folder.glob("requests-*.json"))  # it did record before dying

    result = run_lblab(["run", "--resume", "--out", str(run_dir), "--no-report"], 150)
    assert result.returncode == 0, result.stderr[-3000:]
    m = manifest(run_dir)
    rerun = m["phases"][0]
    assert rerun["status"] == "done"
    assert rerun["attempt"] != killed["attempt"]
    assert not killed_folder.exists()  # the killed attempt's records are gone, not merged
    requests = pd.read_parquet(run_dir / "requests.parquet")
    rows = requests[requests.scenario == "sp+sr"]
    # Only the rerun's own requests: as many as its Locust counted, all sent after it
    # started, and (a live backend pool) next to no failures.
    assert len(rows) == rerun["requests"] == rerun["locust_requests"] > 0
    assert rows.t_sent.min() >= rerun["start"]
    assert (~rows.ok).sum() <= 0.01 * len(rows), rows[~rows.ok].error_kind.value_counts()
    assert rerun["unaccounted"] == 0
    assert processes_of(run_dir) == []


@pytest.mark.root
@needs_root
def test_a_full_results_filesystem_is_one_clear_line_a_readable_folder_and_a_resumable_run(
    tmp_path: Path,
) -> None:
    with small_filesystem(tmp_path / "fs", 64) as fs:
        run_dir = fs / "run"
        proc = start_run(tmp_path, run_dir, "8s")
        wait_for_load(proc, run_dir, 1)  # the first phase is done and kept
        time.sleep(1.5)
        filler = fill(fs)
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"the run did not stop on a full disk: {proc.communicate()[1][-3000:]}")
        assert proc.returncode == 74, err[-3000:]
        assert "Traceback" not in err, err[-3000:]
        last = err.strip().splitlines()[-1]
        assert last.startswith("error: cannot write") and "No space left" in last, last
        assert str(run_dir) in last and "--resume" in last, last
        assert processes_of(run_dir) == []
        m = manifest(run_dir)
        assert m["status"] == "failed"
        assert "No space left" in m["attempts"][-1]["error"]
        assert [p["status"] for p in m["phases"]] == ["done", "failed"]
        logs = run_dir / "logs"
        for log in logs.glob("*.log"):
            assert "Traceback" not in log.read_text(errors="replace"), log.name
        assert not list(run_dir.rglob(".*.tmp"))  # nothing half-written is left

        # What is left is readable: the finished phase's rows, from its parts.
        kept = open_results(run_dir).table("requests")
        assert set(kept.scenario) == {"sp+sr"} and len(kept) > 0

        # lblab report in place, on a still full disk (the run freed its reserve): one
        # line, not a traceback.
        second = fill(fs)
        report = run_lblab(["report", str(run_dir)], 120)
        assert report.returncode == 74, report.stderr[-2000:]
        assert "Traceback" not in report.stderr
        assert report.stderr.strip().startswith("error: cannot write"), report.stderr

        filler.unlink()
        second.unlink()
        result = run_lblab(["run", "--resume", "--out", str(run_dir), "--no-report"], 150)
        assert result.returncode == 0, result.stderr[-3000:]
        m = manifest(run_dir)
        assert [p["status"] for p in m["phases"]] == ["done", "done"]
        requests = pd.read_parquet(run_dir / "requests.parquet")
        assert set(requests.scenario) == {"sp+sr", "mp+sr"}
        for phase in m["phases"]:
            assert phase["unaccounted"] == 0, phase
