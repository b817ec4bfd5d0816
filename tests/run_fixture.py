"""The ``tiny_run_dir`` fixture: one real ``lblab run --preset tiny`` per test session.

Real servers, agents, balancer and Locust on loopback, about 40 s on 2 cores. Every test
that needs a finished run directory (the runner's checks, the analysis notebooks and
report) shares it, so the suite pays for it once.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from lblab.procs import lblab_command

TINY_TIMEOUT_S = 240


def run_lblab(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """``lblab ARGS`` as a child process with a deadline; output captured."""
    return subprocess.run(
        lblab_command(*args), capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture(scope="session")
def tiny_run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run of the ``tiny`` preset: requests, cpu, picks, manifest, its
    simulated twin (``--twin``) and the report."""
    run_dir = tmp_path_factory.mktemp("runs") / "tiny"
    args = ["run", "--preset", "tiny", "--twin", "--out", str(run_dir)]
    result = run_lblab(args, TINY_TIMEOUT_S)
    if result.returncode != 0 or not (run_dir / "requests.parquet").exists():
        pytest.fail(
            f"lblab run --preset tiny exited {result.returncode}\n"
            f"stdout:\n{result.stdout[-3000:]}\nstderr:\n{result.stderr[-5000:]}"
        )
    return run_dir
