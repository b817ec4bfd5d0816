"""CPU taken from outside the experiment is seen (``loadtests/probe.py``, the
``disturbance`` check of ``lblab/validity.py``).

A busy loop pinned to the servers' CPU, or to the harness's, started beside a real
``lblab run`` and not by it, must be flagged. A quiet run is not asserted to pass: this machine is shared, and
other work on it is exactly what the check reports.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from lblab.loadtests.probe import CpuProbe
from lblab.procs import lblab_command
from lblab.validity import DISTURBANCE_WARN
from lblab.windows import Window
from tests.run_fixture import PACED_LOAD, wait_for_phases

pytestmark = pytest.mark.slow

CPUS = sorted(os.sched_getaffinity(0))
LAST = CPUS[-1]


def spin(cpu: int, pidfile: Path | None = None) -> str:
    """Python code spinning on ``cpu``, first writing its pid to ``pidfile``."""
    tell = f"open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n" if pidfile else ""
    return f"import os\nos.sched_setaffinity(0, {{{cpu}}})\n{tell}while True:\n    pass"


def hog(cpu: int) -> subprocess.Popen[bytes]:
    """Spinning on ``cpu``; this test's child, no descendant of ``lblab run``."""
    return subprocess.Popen([sys.executable, "-c", spin(cpu)])


def run_beside(cpu: int, tmp_path: Path) -> dict[str, Any]:
    """A tiny one-phase run with a hog on ``cpu`` from the start of its phase (the hog,
    not the load, is the test: the users are paced, and the hog does not spin through
    the testbed's start): its manifest."""
    config = tmp_path / "paced.toml"
    config.write_text('preset = "tiny"\n' + PACED_LOAD)
    run_dir = tmp_path / "run"
    args = ["run", "--config", str(config), "--strategies", "rr", "--scenarios", "sp+sr"]
    run = subprocess.Popen(
        lblab_command(*args, "--duration", "4s", "--no-report", "--out", str(run_dir)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    wait_for_phases(run, run_dir, lambda phases: phases[0]["status"] == "running", "its phase")
    proc = hog(cpu)
    try:
        _, err = run.communicate(timeout=120)
    finally:
        run.kill()
        proc.kill()
        proc.wait()
    assert run.returncode == 0, err[-3000:]
    return dict(json.loads((run_dir / "manifest.json").read_text()))


@pytest.mark.skipif(len(CPUS) < 2, reason="isolation needs two CPUs")
def test_a_cpu_hog_beside_the_servers_is_flagged(tmp_path: Path) -> None:
    # The last CPU: where the servers run (``isolation.plan_layout`` gives the harness
    # the first CPUs).
    m = run_beside(LAST, tmp_path)
    run_dir = tmp_path / "run"
    (phase,) = m["phases"]
    check = next(c for c in phase["verdicts"] if c["name"] == "disturbance")
    measured = phase["harness_cpu"]["disturbance"]
    servers = measured["servers"]
    assert measured["isolated"] and LAST in servers["cpus"]
    assert LAST in m["testbed"]["cpu_layout"]["server_cpus"]
    assert check["level"] in ("warn", "fail"), (check, measured)
    assert check["figure"].startswith(f"outside {servers['outside_cores']:.2f} cores, steal ")
    assert "on the servers' CPUs" in check["figure"]
    assert servers["outside_cores"] > DISTURBANCE_WARN * len(servers["cpus"])
    # The servers' own CPU as the probe counts it (their processes' CPU times) is what
    # their agents measured of their cgroups: the hog was not taken for a server.
    cpu = pd.read_parquet(run_dir / "cpu.parquet")
    quotas = m["testbed"]["cpu_layout"]["quotas"]
    inside = cpu[cpu.window == "inside"].groupby("server").cpu_percent.mean()
    agents = sum(inside[s] / 100 * quotas[s] for s in inside.index)
    assert servers["experiment_cores"] == pytest.approx(agents, abs=0.1), (servers, agents)


@pytest.mark.skipif(len(CPUS) < 2, reason="isolation needs two CPUs")
def test_a_cpu_hog_beside_the_harness_is_flagged(tmp_path: Path) -> None:
    """Locust and the balancer slowed by a stranger offer less load: in a quick run a hog
    on the harness's CPU cut sp+sr throughput by a fifth, and no check saw it."""
    m = run_beside(CPUS[0], tmp_path)
    (phase,) = m["phases"]
    check = next(c for c in phase["verdicts"] if c["name"] == "disturbance")
    harness = phase["harness_cpu"]["disturbance"]["harness"]
    assert CPUS[0] in harness["cpus"] and CPUS[0] in m["testbed"]["cpu_layout"]["harness_cpus"]
    assert check["level"] in ("warn", "fail"), (check, harness)
    assert f"; outside {harness['outside_cores']:.2f}, steal " in check["figure"]
    assert "of the harness's CPUs: Locust and the balancer" in check["why"]
    assert harness["outside_cores"] > DISTURBANCE_WARN * len(harness["cpus"])


@pytest.mark.skipif(len(CPUS) < 2, reason="the probe's process and the loops get CPUs apart")
def test_the_probe_counts_descendants_as_the_experiment_and_strangers_as_outside(
    tmp_path: Path,
) -> None:
    # This test is the runner: a grandchild spins (through a child that waits for it), and
    # a stranger (``setsid -f`` forks it away and exits) spins on the same CPU; the probe
    # sits on the others.
    os.sched_setaffinity(0, set(CPUS[:-1]))
    parent = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {spin(LAST)!r}])"
    child = subprocess.Popen([sys.executable, "-c", parent], start_new_session=True)
    pidfile = tmp_path / "stranger.pid"
    subprocess.run(["setsid", "-f", sys.executable, "-c", spin(LAST, pidfile)], check=True)
    try:
        probe = CpuProbe()
        probe.watch({})
        start = time.time()
        while time.time() - start < 3.0:
            time.sleep(0.25)  # the runner's tick: the probe measures CPU used over time
            probe.sample()
        measured = probe.cores(Window(start, time.time()))["disturbance"]
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the child and the grandchild
        child.wait()
        if pidfile.exists():
            os.kill(int(pidfile.read_text()), signal.SIGKILL)
        os.sched_setaffinity(0, set(CPUS))
    assert pidfile.exists(), "the stranger never started"
    servers = measured["servers"]  # the loops' CPU is off this process's: "servers"
    assert measured["isolated"] and servers["cpus"] == [LAST]
    # Two loops share the CPU (with whatever else runs there): each gets a good part.
    assert servers["experiment_cores"] > 0.15 and servers["outside_cores"] > 0.15, measured
