"""CPU isolation with real processes: each server in the server set, the harness (this
process and what it starts) in the other, the groups gone after; the preflight refuses
a testbed that cannot fit before anything runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lblab.experiment import runconfig
from lblab.loadtests.isolation import CPUSET_V1, cpuset_version
from lblab.loadtests.local_testbed import LocalProcesses
from tests.run_fixture import run_lblab

pytestmark = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="isolation needs 2 CPUs")


def cpuset_of(pid: int) -> str:
    """The process's group in the cgroup v1 cpuset hierarchy."""
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpuset" in controllers.split(","):
            return path
    return ""


def thread_cpus(pid: int) -> set[frozenset[int]]:
    """The CPU set of every thread of ``pid``."""
    return {frozenset(os.sched_getaffinity(int(tid))) for tid in os.listdir(f"/proc/{pid}/task")}


@pytest.mark.parametrize(
    "method",
    [
        pytest.param(
            "cpuset",
            marks=pytest.mark.skipif(cpuset_version() is None, reason="needs root and cpusets"),
        ),
        "affinity",
    ],
)
def test_each_server_runs_in_the_server_set_and_the_harness_in_the_other(
    tmp_path: Path, method: str
) -> None:
    config = runconfig.resolve(
        None,
        {
            "run": {"strategies": ["rr"], "scenarios": ["sp+sr"]},
            "servers": [{"id": "s1", "cpu_quota": 0.5}, {"id": "s2", "cpu_quota": 1.0}],
            "weights": {"s1": 1, "s2": 2},
            "testbed": {"isolation": method, "harness_cpus": 1},
        },
        {},
    )
    before = os.sched_getaffinity(0)
    testbed = LocalProcesses(config, tmp_path)
    layout = testbed.layout
    assert layout.method.startswith(method)
    assert layout.quota_scale == pytest.approx(1 / 1.5)  # 1.5 CPUs of quotas into one
    try:
        testbed.start("rr")
        servers = {sid: p.server.pid for sid, p in testbed.servers.items()}
        # The quotas the servers run with are the scaled ones.
        assert {sid: p.server.ready.get("id") for sid, p in testbed.servers.items()} == {
            "s1": "s1",
            "s2": "s2",
        }
        harness = [os.getpid(), testbed.balancer.pid]
        harness += [p.agent.pid for p in testbed.servers.values()]
        server_cpus, harness_cpus = set(layout.server_cpus), set(layout.harness_cpus)
        for pid in servers.values():  # every thread, the work pool's included
            assert thread_cpus(pid) == {frozenset(server_cpus)} or method == "cpuset"
        for pid in harness:
            assert set(os.sched_getaffinity(pid)) <= harness_cpus or method == "cpuset"
        if method == "cpuset":
            for pid in servers.values():
                assert f"lblab-servers-{os.getpid()}" in cpuset_of(pid), pid
            for pid in harness:
                assert f"lblab-harness-{os.getpid()}" in cpuset_of(pid), pid
            group = CPUSET_V1 / f"lblab-servers-{os.getpid()}"
            cpus = (group / "cpuset.cpus").read_text().strip()
            assert cpus == ",".join(map(str, layout.server_cpus)) or "-" in cpus
        facts = testbed.facts()["cpu_layout"]
        assert facts["quotas"]["s1"] == pytest.approx(1 / 3)
        assert facts["quotas_given"] == {"s1": 0.5, "s2": 1.0}
    finally:
        testbed.stop()
    assert os.sched_getaffinity(0) == before  # this process has its CPUs back
    if method == "cpuset":
        assert not list(CPUSET_V1.glob(f"lblab-*-{os.getpid()}"))


def test_the_preflight_refuses_a_testbed_that_cannot_fit_before_writing_anything(
    tmp_path: Path,
) -> None:
    config = tmp_path / "unfit.toml"
    config.write_text(
        'preset = "tiny"\n'
        + "".join(
            f'[[servers]]\nid = "{sid}"\ncpu_quota = {q}\n'
            for sid, q in (("s1", 0.05), ("s2", 0.05), ("s3", 2.0))
        )
    )
    out = tmp_path / "run"
    result = run_lblab(["run", "--config", str(config), "--out", str(out)], 60)
    assert result.returncode == 2, result.stderr[-2000:]
    line = result.stderr.strip().splitlines()[-1]
    assert "s1 would get" in line and "needs about" in line, line
    assert "Traceback" not in result.stderr
    assert not out.exists()
