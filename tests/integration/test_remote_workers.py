"""Locust workers "on another host", on loopback: ``lblab locust-workers`` + ``--collect``.

The runner's master expects one worker it does not start (kept by ``lblab
locust-workers``, writing under a folder of its own as a second loader host would) next
to one local worker. After the run only the local records are in the run; once the
other folder is copied into ``raw/phases`` (what ``infra/experiment.yml`` does between
hosts), ``lblab run --collect`` merges them: every request either writer counted has its
row, labelled with the loader that sent it.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from lblab.loadtests.loadgen import free_port
from lblab.procs import lblab_command
from tests.run_fixture import run_lblab

pytestmark = pytest.mark.slow

RUN_TIMEOUT_S = 150
ONE_PHASE = ["--preset", "tiny", "--strategies", "rr", "--scenarios", "sp+sr"]


def test_expect_workers_needs_an_address_to_bind() -> None:
    result = run_lblab(["run", *ONE_PHASE, "--expect-workers", "2", "--print-config"], 30)
    assert result.returncode == 2
    assert "--locust-master-bind" in result.stderr


def test_remote_worker_records_join_the_run_with_collect(tmp_path: Path) -> None:
    port = free_port()
    far_root = tmp_path / "far"
    keeper = subprocess.Popen(
        lblab_command(
            "locust-workers", "--master", f"127.0.0.1:{port}", "--loader", "far",
            "--records-root", str(far_root),
        ),
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    run_dir = tmp_path / "run"
    try:
        result = run_lblab(
            [
                "run", *ONE_PHASE, "--duration", "2s", "--warmup", "0s", "--locust-workers",
                "1", "--expect-workers", "1", "--locust-master-bind", f"127.0.0.1:{port}",
                "--out", str(run_dir), "--no-report",
            ],
            RUN_TIMEOUT_S,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
    finally:
        keeper.send_signal(signal.SIGTERM)
        _, err = keeper.communicate(timeout=30)
    assert keeper.returncode == 0, err.decode()[-2000:]

    here = socket.gethostname()
    (phase,) = json.loads((run_dir / "manifest.json").read_text())["phases"]
    assert phase["status"] == "done" and set(phase["loaders"]) == {here}, phase
    far_phases = far_root / run_dir.name / "raw" / "phases"
    assert list((far_phases / phase["key"] / phase["attempt"]).glob("requests-far-*.json"))

    shutil.copytree(far_phases, run_dir / "raw" / "phases", dirs_exist_ok=True)
    collected = run_lblab(["run", "--collect", "--out", str(run_dir), "--no-report"], 60)
    assert collected.returncode == 0, collected.stderr[-3000:]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    (phase,) = manifest["phases"]
    requests = pq.read_table(run_dir / "requests.parquet").to_pandas()
    counts = requests.loader.value_counts().to_dict()
    assert set(counts) == {here, "far"} and all(n > 0 for n in counts.values())
    assert phase["loaders"] == counts and phase["requests"] == len(requests)
    assert phase["unaccounted"] == 0
    assert len(requests) >= phase["locust_requests"] > 0
    assert requests.ok.all() and manifest["status"] == "done" and manifest["collected"]
    # Two loaders now: the master measured both workers' clocks (loadtests.clocks).
    assert len(phase["clocks"]["workers"]) == 2, phase.get("clocks")
    (clocks,) = [c for c in phase["verdicts"] if c["name"] == "clocks"]
    assert clocks["level"] in ("pass", "warn") and "not measured" not in clocks["figure"], clocks
