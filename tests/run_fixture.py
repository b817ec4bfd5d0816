"""The ``tiny_run_dir`` fixture: one real ``lblab run --preset tiny`` per test session.

Real servers, agents, balancer and Locust on loopback, about 40 s on 2 cores. Every test
that needs a finished run directory (the runner's checks, the analysis notebooks and
report) shares it, so the suite pays for it once: on pytest-xdist workers too, where the
first worker that needs it makes it under a file lock and the others wait for it (the
pattern pytest-xdist documents for session fixtures).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from lblab.procs import lblab_command

TINY_TIMEOUT_S = 240
DONE = "tiny.done"

PACED_THINK = "think_time = [0.01, 0.01]"
"""For live tests that need requests flowing, not saturated servers: each user pauses 10 ms
between requests. The tiny preset's unpaced users take both cores for a phase's length,
from every test running beside it (a test of two killed and resumed runs went from 78 to
38 s of CPU)."""
PACED_LOAD = f"\n[load]\n{PACED_THINK}\n"
"""``PACED_THINK`` as a config layer's whole ``[load]`` table."""


def run_lblab(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """``lblab ARGS`` as a child process with a deadline; output captured."""
    return subprocess.run(
        lblab_command(*args), capture_output=True, text=True, timeout=timeout, check=False
    )


def wait_for_phases(
    proc: subprocess.Popen[str],
    run_dir: Path,
    ready: Callable[[list[dict[str, Any]]], bool],
    what: str,
    timeout: float = 90,
) -> list[dict[str, Any]]:
    """Poll the run's manifest until ``ready(phases)`` holds; returns the phases. Fails
    the test, naming ``what`` and the run's last words, if the run exits first or the
    deadline passes (the run is killed then)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(FileNotFoundError, ValueError, IndexError, KeyError):
            phases = json.loads((run_dir / "manifest.json").read_text())["phases"]
            if ready(phases):
                return phases
        time.sleep(0.1)
    proc.kill()
    pytest.fail(f"the run never reached {what}: {proc.communicate()[1][-3000:]}")


def _make_tiny_run(run_dir: Path) -> None:
    args = ["run", "--preset", "tiny", "--twin", "--out", str(run_dir)]
    result = run_lblab(args, TINY_TIMEOUT_S)
    if result.returncode != 0 or not (run_dir / "requests.parquet").exists():
        pytest.fail(
            f"lblab run --preset tiny exited {result.returncode}\n"
            f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-5000:]}"
        )


@pytest.fixture(scope="session")
def tiny_run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run of the ``tiny`` preset: requests, cpu, picks, manifest, its
    simulated twin (``--twin``) and the report."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        run_dir = tmp_path_factory.mktemp("runs") / "tiny"
        _make_tiny_run(run_dir)
        return run_dir
    shared = tmp_path_factory.getbasetemp().parent  # the workers' common folder
    run_dir = shared / "runs" / "tiny"
    deadline = time.monotonic() + TINY_TIMEOUT_S + 60
    with open(shared / "tiny.lock", "w") as lock:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail("another worker's tiny run did not finish in time")
                time.sleep(0.5)
        try:
            if not (shared / DONE).exists():
                _make_tiny_run(run_dir)  # a failure fails here, and the next worker retries
                (shared / DONE).write_text("done\n")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return run_dir
