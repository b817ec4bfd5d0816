"""The namespace testbed: up twice is harmless, hosts answer ssh, down leaves nothing.

Needs root (namespaces, veth links). A 3-host testbed on a subnet of its own, so a
developer's default testbed (``lbt``, 10.213.0.0/24) is left alone.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from lblab.errors import ConfigError
from lblab.infra import netns_testbed as testbed
from lblab.procs import lblab_command

NAME = "lbtf"
SUBNET = "10.216.0.0/24"

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="the namespace testbed needs root")


def _lblab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(lblab_command(*args), capture_output=True, text=True, timeout=90)


def _leftovers(name: str) -> list[str]:
    links = [p.name for p in Path("/sys/class/net").iterdir() if p.name.startswith(name)]
    netns = [p.name for p in Path("/run/netns").glob(f"{name}-*")]
    procs = subprocess.run(
        ["pgrep", "-f", f"lblab-testbed/{name}/"], capture_output=True, text=True
    )
    return links + netns + procs.stdout.split()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "Bad_Name"}, "--name"),
        ({"hosts": 2}, "--hosts"),
        ({"subnet": "8.8.8.0/24"}, "private"),
        ({"subnet": "10.0.0.0/30"}, "too small"),
        ({"quotas": {"s9": 0.5}}, "not servers"),
    ],
)
def test_bad_specs_name_the_field(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        testbed.TestbedSpec(**kwargs)  # type: ignore[arg-type]


def test_plan_has_one_balancer_one_loader_and_unequal_servers() -> None:
    plan = testbed.TestbedSpec(hosts=5).plan()
    assert [h.name for h in plan] == ["balancer", "s1", "s2", "s3", "loader1"]
    assert [h.cpu_quota for h in plan if h.group == "servers"] == [0.25, 0.25, 0.75]
    assert len({h.address for h in plan}) == 5


def test_without_root_it_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ConfigError, match="needs root"):
        testbed.up(testbed.TestbedSpec(name=NAME, hosts=3, subnet=SUBNET))


@pytest.mark.slow
@root_only
def test_up_twice_status_ssh_down(tmp_path: Path) -> None:
    assert _lblab("testbed", "down", "--name", NAME).returncode == 0  # a clean start
    try:
        first = _lblab("testbed", "up", "--name", NAME, "--hosts", "3", "--subnet", SUBNET)
        assert first.returncode == 0, first.stderr
        state = json.loads((testbed.DEFAULT_ROOT / NAME / "state.json").read_text())
        again = _lblab("testbed", "up", "--name", NAME, "--hosts", "3", "--subnet", SUBNET)
        assert again.returncode == 0, again.stderr
        state_again = json.loads((testbed.DEFAULT_ROOT / NAME / "state.json").read_text())
        # Nothing was restarted: the same sshd and supervisor processes serve.
        for host, h in state["hosts"].items():
            for key in ("sshd_pid", "supervisor_pid"):
                assert state_again["hosts"][host][key] == h[key]

        other = _lblab("testbed", "up", "--name", NAME, "--hosts", "4", "--subnet", SUBNET)
        assert other.returncode == 2 and "down --name" in other.stderr

        status = _lblab("testbed", "status", "--name", NAME, "--json")
        assert status.returncode == 0, status.stdout
        report = json.loads(status.stdout)
        assert set(report["hosts"]) == {"balancer", "s1", "loader1"}
        assert all(
            all(h[k] for k in ("namespace", "link", "sshd", "supervisor"))
            for h in report["hosts"].values()
        )

        # Each host is reachable over ssh with host-key checking and sees only its own address.
        config = testbed.DEFAULT_ROOT / NAME / "ssh_config"
        out = subprocess.run(
            ["ssh", "-F", str(config), "-o", "BatchMode=yes", "s1", "ip -4 -o addr show; ip route"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        assert "10.216.0.12/24" in out.stdout
        assert "default" not in out.stdout  # no way out of the testbed
        inventory = json.loads((testbed.DEFAULT_ROOT / NAME / "inventory.yml").read_text())
        assert inventory["all"]["children"]["servers"]["hosts"]["s1"]["server_cpu_quota"] == 0.25
    finally:
        down = _lblab("testbed", "down", "--name", NAME)
    assert down.returncode == 0, down.stderr
    assert "netns lbtf-s1" in down.stdout
    assert _leftovers(NAME) == []
    assert "nothing to remove" in _lblab("testbed", "down", "--name", NAME).stdout
    assert json.loads(_lblab("testbed", "status", "--name", NAME, "--json").stdout)["hosts"] == {}
