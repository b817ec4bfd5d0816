"""``lblab run`` end to end: real servers, agents, balancer and Locust on loopback."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import psutil
import pytest

from lblab.procs import lblab_command
from lblab.results import ERROR_KINDS, SCHEMAS, missing_columns
from tests.run_fixture import PACED_LOAD, run_lblab, wait_for_phases

pytestmark = pytest.mark.slow


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "manifest.json").read_text())


def write_config(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def assert_complete(run_dir: Path) -> pd.DataFrame:
    """Contract columns; one row per request Locust counted; successes name a server."""
    tables = {t: pd.read_parquet(run_dir / f"{t}.parquet") for t in SCHEMAS}
    for name, df in tables.items():
        assert not missing_columns(name, list(df.columns)), name
    requests = tables["requests"]
    for phase in manifest(run_dir)["phases"]:
        assert phase["status"] == "done", phase
        rows = requests[
            (requests.scenario == phase["scenario"])
            & (requests.strategy == phase["strategy"])
            & (requests.replication == phase["replication"])
        ]
        assert len(rows) == phase["requests"] == phase["locust_requests"] > 0, phase["key"]
    ok = requests[requests.ok]
    assert ok.server.notna().all()
    assert requests[~requests.ok].error_kind.isin(ERROR_KINDS).all()
    assert requests.ok.eq(requests.error_kind.isna()).all()
    assert requests.latency_ms.ge(0).all()
    return requests


def test_tiny_run_writes_every_table_and_accounts_for_every_request(tiny_run_dir: Path) -> None:
    requests = assert_complete(tiny_run_dir)
    m = manifest(tiny_run_dir)
    assert m["status"] == "done" and not m["simulated"]
    assert m["cpu_limit_method"] in ("cgroup", "duty-cycle", "none")
    assert {"locust", "rsocket", "pyarrow"} <= set(m["software"])
    servers = {"s1", "s2", "s3"}
    assert set(requests[requests.ok].server) == servers
    cpu = pd.read_parquet(tiny_run_dir / "cpu.parquet")
    picks = pd.read_parquet(tiny_run_dir / "picks.parquet")
    for phase in m["phases"]:
        sel = (cpu.scenario == phase["scenario"]) & (cpu.strategy == phase["strategy"])
        assert set(cpu[sel].server) == servers, phase["key"]
        psel = (picks.scenario == phase["scenario"]) & (picks.strategy == phase["strategy"])
        assert psel.sum() > 0, phase["key"]
    assert cpu.cpu_percent.between(0, 150).all()
    # Warm-up rows are kept and marked, the first second of each phase.
    assert requests.warmup.any() and (~requests.warmup).any()


def test_killing_servers_mid_phase_records_the_failures_and_loses_nothing(
    tmp_path: Path,
) -> None:
    # One server killed: the balancer may replay its in-flight requests elsewhere. All
    # killed: requests must fail (REJECTED at the balancer, or lost in flight) until s1
    # is restarted on its old port.
    config = write_config(
        tmp_path / "kill.toml",
        """
preset = "tiny"
[run]
strategies = ["rr"]
scenarios = ["sp+mr"]
duration = "6s"
warmup = "0s"
[[timeline]]
at = "1.5s"
action = "kill"
server = "s2"
[[timeline]]
at = "2.5s"
action = "kill"
server = "s1"
[[timeline]]
at = "2.5s"
action = "kill"
server = "s3"
[[timeline]]
at = "4s"
action = "restart"
server = "s1"
"""
        + PACED_LOAD,
    )
    run_dir = tmp_path / "run"
    result = run_lblab(["run", "--config", str(config), "--out", str(run_dir), "--no-report"], 150)
    assert result.returncode == 0, result.stderr[-3000:]
    requests = assert_complete(run_dir)
    (phase,) = manifest(run_dir)["phases"]
    events = phase["timeline"]
    assert [(e["action"], e["server"], e["ok"]) for e in events] == [
        ("kill", "s2", True), ("kill", "s1", True), ("kill", "s3", True), ("restart", "s1", True),
    ]  # fmt: skip
    failed = requests[~requests.ok]
    assert len(failed) >= 1, "with every server dead, requests must fail"
    assert failed.error_kind.isin(ERROR_KINDS).all()
    # Nothing from s2 after it died (an answer in flight at the kill may land just after).
    late = requests[requests.ok & requests.server.eq("s2") & (requests.t_sent > events[0]["t"] + 1)]
    assert late.empty


def test_ctrl_c_stops_cleanly_and_resume_finishes_the_run(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "two.toml",
        """
preset = "tiny"
[run]
strategies = ["lc"]
scenarios = ["sp+sr", "mp+sr"]
duration = "4s"
warmup = "0s"
"""
        + PACED_LOAD,
    )
    run_dir = tmp_path / "run"
    proc = subprocess.Popen(
        lblab_command("run", "--config", str(config), "--out", str(run_dir), "--no-report"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # As from a terminal: a pytest-xdist worker ignores SIGINT, and a child inherits
        # that (Python then installs no KeyboardInterrupt handler).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    wait_for_phases(
        proc,
        run_dir,
        lambda phases: phases[0]["status"] == "done" and phases[1]["status"] == "running",
        "its second phase",
    )
    time.sleep(1.0)  # let the second phase's Locust start, so it too must be stopped
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-3000:]
    m = manifest(run_dir)
    assert m["status"] == "interrupted"
    assert [p["status"] for p in m["phases"]] == ["done", "interrupted"]
    first_start = m["phases"][0]["start"]
    # No orphans: nothing is left running from this run directory.
    leftovers = [
        p.info["pid"]
        for p in psutil.process_iter(["pid", "cmdline"])
        if any(str(run_dir) in part for part in (p.info["cmdline"] or []))
    ]
    assert leftovers == []
    # What was measured is kept.
    done = pd.read_parquet(run_dir / "requests.parquet")
    assert set(done.scenario) == {"sp+sr"}

    result = run_lblab(["run", "--resume", "--out", str(run_dir), "--no-report"], 120)
    assert result.returncode == 0, result.stderr[-3000:]
    m = manifest(run_dir)
    assert [p["status"] for p in m["phases"]] == ["done", "done"]
    assert m["phases"][0]["start"] == first_start  # not run again
    assert len(m["attempts"]) == 2
    requests = assert_complete(run_dir)
    assert set(requests.scenario) == {"sp+sr", "mp+sr"}
