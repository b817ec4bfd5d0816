"""The ansible path end to end, on a 5-host namespace testbed.

balancer, s1, s2, loader1, loader2 come up as namespaces with sshd; ``site.yml``
provisions them, then again on one host of each role (the second run must change
nothing); ``experiment.yml`` runs the
``tiny`` preset with Locust distributed over both loaders (master on loader1, one worker
on each) and fetches the run; the fetched directory must satisfy the results contract,
hold requests from both loaders with every request each worker counted, and name the
hosts; ``dask.yml`` then starts a Dask scheduler and workers on the same hosts, with
mutual TLS, and a sweep runs through them; ``lblab testbed down`` must leave nothing behind.

A stranger (a namespace on the testbed's bridge that is in no inventory) is refused at
every port the roles guard: the balancer's client, agent and admin ports, a server's
port, the Locust master's (which only loaders reach) and the Dask scheduler's and its
dashboard's; the Dask scheduler also refuses the controller when it has no certificate
of the testbed's CA, and the experiment and the sweep still complete through the firewall.

The playbooks build lblab from a snapshot of the source tree (tracked and new files),
so edits made to the working tree while the test runs cannot change the wheel between
the two provisioning runs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import psutil
import pyarrow.parquet as pq
import pytest

from lblab.procs import lblab_command
from lblab.results import TABLES, missing_columns
from tests.e2e.test_user_strategy import LEAST_OF_THREE, sha
from tests.run_fixture import PACED_LOAD

REPO = Path(__file__).resolve().parents[2]
NAME = "lbte"
SUBNET = "10.215.0.0/24"
HOME = Path("/tmp/lblab-testbed") / NAME
STRANGER = f"{NAME}-stranger"
STRANGER_ADDRESS = "10.215.0.250"
RECAP = re.compile(
    r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.root,
    pytest.mark.timeout(900),
    pytest.mark.skipif(os.geteuid() != 0, reason="the namespace testbed needs root"),
    pytest.mark.skipif(
        not Path("/usr/sbin/sshd").exists(), reason="needs openssh-server (scripts/setup)"
    ),
]


def _uv_binary() -> str | None:
    """The real uv executable (a pyenv shim is a shell script, not something to copy)."""
    for candidate in (os.environ.get("UV"), shutil.which("uv")):
        if candidate and Path(candidate).is_file():
            with open(candidate, "rb") as f:
                if f.read(4) == b"\x7fELF":
                    return candidate
    return None


def _snapshot(dest: Path) -> Path:
    files = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO, capture_output=True, check=True,
    ).stdout.decode().split("\0")  # fmt: skip
    for name in filter(None, files):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def _playbook(playbook: str, *extra: str, timeout: float = 400) -> dict[str, tuple[int, ...]]:
    env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "infra/ansible.cfg"), "ANSIBLE_NOCOLOR": "1"}
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(HOME / "inventory.yml"),
         str(REPO / "infra" / playbook), *extra],
        capture_output=True, text=True, timeout=timeout, env=env,
    )  # fmt: skip
    recap = {m[0]: tuple(int(x) for x in m[1:]) for m in RECAP.findall(proc.stdout)}
    assert proc.returncode == 0 and recap, (
        f"{playbook} failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-2000:]}"
    )
    return recap


def _add_stranger() -> None:
    """A host on the testbed's bridge that no inventory names (``lblab testbed down``
    removes it with the rest: its namespace and link carry the testbed's prefixes)."""
    link = f"{NAME}v99"
    for argv in (
        ["ip", "netns", "add", STRANGER],
        ["ip", "link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", STRANGER],
        ["ip", "link", "set", link, "master", f"{NAME}br", "up"],
        ["ip", "-n", STRANGER, "addr", "add", f"{STRANGER_ADDRESS}/24", "dev", "eth0"],
        ["ip", "-n", STRANGER, "link", "set", "eth0", "up"],
        ["ip", "-n", STRANGER, "link", "set", "lo", "up"],
    ):
        subprocess.run(argv, check=True, capture_output=True, timeout=30)


REACH = """
import errno, json, socket, sys
out = []
for target in sys.argv[1:]:
    host, port = target.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
        out.append("open")
    except OSError as exc:
        out.append({errno.ECONNREFUSED: "no listener", errno.EHOSTUNREACH: "firewall"}
                   .get(exc.errno, repr(exc)))
print(json.dumps(out))
"""


def _reach(namespace: str, targets: list[str]) -> dict[str, str]:
    """How a TCP connect from ``namespace`` to each HOST:PORT ends: "open", "no listener"
    (a reset) or "firewall" (the roles' reject, ICMP admin-prohibited)."""
    proc = subprocess.run(
        ["ip", "netns", "exec", namespace, sys.executable, "-c", REACH, *targets],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    return dict(zip(targets, json.loads(proc.stdout), strict=True))


def _addresses() -> dict[str, str]:
    hosts = json.loads((HOME / "inventory.yml").read_text())["all"]["children"]
    return {h: v["ansible_host"] for group in hosts.values() for h, v in group["hosts"].items()}


def _check_firewall() -> None:
    """The stranger meets the firewall at every guarded port; the testbed's hosts pass it
    (their connects end at the port: nothing listens between experiments); the Locust
    master's port lets in loaders only."""
    at = _addresses()
    balancer = [f"{at['balancer']}:{p}" for p in (7878, 7879, 9100)]
    master = f"{at['loader1']}:5557"
    guarded = [*balancer, f"{at['s1']}:7001", f"{at['s2']}:7001", master]
    assert set(_reach(STRANGER, guarded).values()) == {"firewall"}
    assert set(_reach(f"{NAME}-loader2", [*balancer, master]).values()) == {"no listener"}
    assert set(_reach(f"{NAME}-s1", balancer).values()) == {"no listener"}
    assert _reach(f"{NAME}-s1", [master]) == {master: "firewall"}
    unguarded = f"{at['balancer']}:7999"  # a port no role guards: the stranger reaches it
    assert _reach(STRANGER, [unguarded]) == {unguarded: "no listener"}


def test_site_twice_experiment_and_down(tmp_path: Path) -> None:
    uv = _uv_binary()
    if uv is None:
        pytest.skip("no uv binary to copy to the hosts (run the suite with `uv run pytest`)")
    subprocess.run(lblab_command("testbed", "down", "--name", NAME), check=True, timeout=60)
    source = _snapshot(tmp_path / "src")
    results = tmp_path / "results"
    # A strategy of the user's own, in a file on the controller, for every playbook (as an
    # inventory's vars would be): the roles put it on the balancer (loaded at start, so the
    # runner switches to it by name) and on the loader (the run's -s), named by its sha256.
    mine = tmp_path / "elsewhere" / "least_of_three.py"
    mine.parent.mkdir()
    mine.write_text(LEAST_OF_THREE)
    own = {"lblab_strategy_files": {"least-of-3": f"{mine}:LeastOfThree"}}
    extra = ["-e", f"common_project_dir={source}", "-e", f"common_uv_source={uv}",
             "-e", json.dumps(own)]  # fmt: skip
    try:
        up = subprocess.run(
            lblab_command(
                "testbed", "up", "--name", NAME, "--hosts", "5", "--loaders", "2",
                "--subnet", SUBNET,
            ),
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert up.returncode == 0, up.stderr
        _add_stranger()

        first = _playbook("site.yml", *extra)
        assert set(first) == {"balancer", "s1", "s2", "loader1", "loader2"}
        assert all(r[1] > 0 for r in first.values())  # the first run did install things
        # Idempotence is a role's: the second run checks each role on one of its hosts
        # (s2 and loader2 run the same roles with other ids), at 3/5 of the full cost.
        once_per_role = ("balancer", "s1", "loader1")
        second = _playbook("site.yml", *extra, "--limit", ",".join(once_per_role))
        assert {h: r[1] for h, r in second.items()} == dict.fromkeys(once_per_role, 0), second
        _check_firewall()

        # tiny with rr and the user's own: two scenarios each, four phases, enough to show that
        # the hosts' records join phase by phase (each phase costs ~10 s of start-up). Its
        # users are paced (a config file the loader role copies): requests flow without
        # taking both cores from the rest of the suite. The role's default poll (5 s): each
        # poll is a module run on the loader, about 0.6 s of CPU with ansible's own.
        paced = tmp_path / "paced.toml"
        paced.write_text(PACED_LOAD)
        _playbook(
            "experiment.yml", *extra, "-e", "loader_preset=tiny", "-e", f"lblab_results_dir={results}",
            "-e", f"loader_config_file={paced}",
            "-e", "loader_workers_per_host=1",
            "-e", json.dumps({"loader_run_args": ["--strategies", "rr"]}), timeout=600,
        )  # fmt: skip
        (run,) = results.iterdir()
        for table in TABLES:
            data = pq.read_table(run / f"{table}.parquet")
            assert missing_columns(table, data.column_names) == [], table
            assert data.num_rows > 0, table
            # Rows name the testbed's servers: the hosts s1 and s2 answered and were sampled.
            assert set(data.column("server").drop_null().to_pylist()) == {"s1", "s2"}, table
        manifest = json.loads((run / "manifest.json").read_text())
        assert manifest["testbed"]["kind"] == "external"
        assert manifest["config"]["run"]["expect_workers"] == 2
        requests = pq.read_table(run / "requests.parquet").to_pandas()
        assert sorted(p["strategy"] for p in manifest["phases"]) == [
            *["least-of-3"] * 2,
            "rr",
            "rr",
        ]
        record = manifest["strategy_sources"]["least-of-3"]
        assert record["sha256"] == sha(mine), record
        assert (run / record["copy"]).read_bytes() == mine.read_bytes()
        picked = set(pq.read_table(run / "picks.parquet").column("strategy").to_pylist())
        assert picked == {"rr", "least-of-3"}, picked  # the balancer host ran it
        for phase in manifest["phases"]:
            assert phase["status"] == "done", phase
            rows = requests[requests.strategy.eq(phase["strategy"])
                            & requests.scenario.eq(phase["scenario"])]  # fmt: skip
            # Both loaders' workers sent load in every phase, and every request a worker
            # counted has its row (the master's own count may miss the last second).
            assert set(rows.loader) == {"loader1", "loader2"}, phase["key"]
            assert phase["loaders"] == rows.loader.value_counts().to_dict(), phase["key"]
            assert phase["unaccounted"] == 0 and len(rows) == phase["requests"], phase["key"]
            assert len(rows) >= phase["locust_requests"] > 0, phase["key"]
        hosts = json.loads((run / "hosts.json").read_text())
        assert hosts["s1"] == ["servers"] and hosts["loader2"] == ["loaders"]
        _sweep_on_the_hosts(extra, tmp_path)
    finally:
        down = subprocess.run(
            lblab_command("testbed", "down", "--name", NAME),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert down.returncode == 0, down.stderr
    assert not [p for p in Path("/sys/class/net").iterdir() if p.name.startswith(NAME)]
    assert not list(Path("/run/netns").glob(f"{NAME}-*"))
    assert not HOME.exists()
    left = [
        p.info["cmdline"]
        for p in psutil.process_iter(["cmdline", "status"])
        if p.info["status"] != psutil.STATUS_ZOMBIE
        and str(HOME) in " ".join(p.info["cmdline"] or [])
    ]
    assert left == []  # no sshd, supervisor, server, agent or balancer of the testbed
    cgroups = [g.name for g in Path("/sys/fs/cgroup/cpu").glob("lblab-s[12]-*")]
    assert all(psutil.pid_exists(int(g.rsplit("-", 1)[1])) for g in cgroups), cgroups


SWEEP_FILE = """
[base]
requests = 1500
servers = 4
service = "exp:5ms"
[grid]
strategy = ["p2c", "rr"]
rate = [300, 600]
"""


def _sweep_on_the_hosts(extra: list[str], tmp_path: Path) -> None:
    """infra/dask.yml on the provisioned hosts: the scheduler on the balancer host, a
    worker on each server, all on mutual TLS; a sweep from the controller runs on them;
    stopping leaves none. (On the same hosts as the experiment: a testbed of its own cost
    150 s more.)"""
    from distributed import Client, Security

    tls = tmp_path / "dask-tls"  # made by the play, as in ~/.config/lblab/dask-tls
    extra = [*extra, "-e", f"dask_tls_dir={tls}"]
    started = _playbook("dask.yml", *extra)
    assert set(started) == {"balancer", "s1", "s2"}
    assert sorted(p.name for p in tls.iterdir()) == ["ca.key", "ca.pem", "cert.pem", "key.pem"]
    balancer = _addresses()["balancer"]
    address = f"tls://{balancer}:8786"
    ports = [f"{balancer}:8786", f"{balancer}:8787"]  # the scheduler and its dashboard
    assert set(_reach(STRANGER, ports).values()) == {"firewall"}
    assert set(_reach(f"{NAME}-s1", ports).values()) == {"open"}
    # The controller passes the firewall, but the scheduler takes only the testbed's CA.
    for stranger_address, security in ((address, Security.temporary()),
                                       (f"tcp://{balancer}:8786", None)):  # fmt: skip
        with pytest.raises(OSError):
            Client(stranger_address, security=security, timeout=5).close()
    ours = Security(
        tls_ca_file=str(tls / "ca.pem"), tls_client_cert=str(tls / "cert.pem"),
        tls_client_key=str(tls / "key.pem"), require_encryption=True,
    )  # fmt: skip
    with Client(address, security=ours, timeout=60) as client:
        client.wait_for_workers(2, timeout=120)
    (tmp_path / "sweep.toml").write_text(SWEEP_FILE)
    out = tmp_path / "sweep"
    sweep = subprocess.run(
        lblab_command("sweep", str(tmp_path / "sweep.toml"), "--out", str(out),
                      "--scheduler", address, "--tls-dir", str(tls)),
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    table = pq.read_table(out / "sweep.parquet").to_pandas()
    assert len(table) == 4 and table["error"].isna().all()
    assert set(table["worker"]) <= {"s1", "s2", "s3"}
    _playbook("dask.yml", *extra, "-e", "dask_state=stopped")
    dask = [
        p.info["cmdline"]
        for p in psutil.process_iter(["cmdline", "status"])
        if p.info["status"] != psutil.STATUS_ZOMBIE
        and f"{HOME}/" in " ".join(p.info["cmdline"] or [])
        and "dask" in " ".join(p.info["cmdline"] or [])
    ]
    assert dask == []  # the scheduler and every worker stopped
    assert set(_reach(STRANGER, ports).values()) == {"no listener"}  # its table went too
