"""The namespace testbed: N "hosts" on one machine, reachable over ssh like VMs.

Theory of operation. Each host is a Linux network namespace ``<name>-<host>`` with one
veth link (``eth0`` inside, ``<name>v<i>`` outside) on a bridge ``<name>br`` that carries
the first address of a private test subnet (10.213.0.0/24 by default). The namespaces
get no default route, so their traffic can reach only the testbed's own addresses and
their own loopback; the bridge is not enslaved to any real interface.

Namespaces share the machine's filesystem, so every host gets its own tree
``<root>/<name>/<host>/`` (the inventory's ``lblab_root``) and the roles use only paths
under it. Every host runs:

- an ``sshd`` started with ``ip netns exec`` (own host key, the controller's key
  authorised; ``known_hosts`` and ``ssh_config`` for the controller are written too);
- the lblab supervisor (``infra/supervisor.py``), the host's service manager, since
  there is no systemd here. It is started with ``nsenter --net`` only: ``ip netns exec``
  would also remount ``/sys`` and hide the cgroup v1 hierarchy (docs/FIELD-NOTES.md, "Linux facilities"). Started
  this way, from the host side of the mount namespace, the services it runs see
  ``/sys/fs/cgroup/cpu``, so ``lblab server --cpu-quota`` puts itself into a CPU-quota
  cgroup exactly as it does on a real host.

Everything made is recorded in ``<root>/<name>/state.json``. ``up`` creates only what
is missing (running it twice is harmless); ``down`` kills every process in the
namespaces, removes the ``lblab-*`` cgroups those processes were in, then deletes
namespaces, links, the bridge and the tree. It works from the naming convention even
when the state file is lost.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lblab.config import parse_assignments
from lblab.errors import ConfigError, LblabError

DEFAULT_ROOT = Path("/tmp/lblab-testbed")
DEFAULT_SUBNET = "10.213.0.0/24"
CGROUP_ROOT = Path("/sys/fs/cgroup")
CGROUP_PREFIX = "lblab-"  # the servers' own groups (servers/cpulimit.py)
SSHD = Path("/usr/sbin/sshd")
SFTP_SERVER = Path("/usr/lib/openssh/sftp-server")
# Interface names are at most 15 bytes (IFNAMSIZ - 1): "<name>v<i>" with a name of at
# most 8 characters and up to 99 hosts stays within it.
_NAME = re.compile(r"^[a-z][a-z0-9]{0,7}$")
SMALL_QUOTA = 0.25
LARGE_QUOTA = 0.75
COMMAND_TIMEOUT_S = 30.0
READY_TIMEOUT_S = 15.0


class TestbedError(LblabError):
    """A step of bringing the testbed up or down failed; the message says which."""


@dataclass(frozen=True)
class HostPlan:
    """One host of the testbed: its inventory name, group, address and server capacity."""

    name: str
    group: str  # "balancer" | "servers" | "loaders"
    index: int
    address: str
    cpu_quota: float | None = None


@dataclass(frozen=True)
class TestbedSpec:
    """What ``lblab testbed up`` builds; validated once, here."""

    name: str = "lbt"
    hosts: int = 5
    loaders: int = 1
    subnet: str = DEFAULT_SUBNET
    root: Path = DEFAULT_ROOT
    quotas: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise ConfigError(
                f"--name: {self.name!r} must be 1-8 lowercase letters or digits starting "
                "with a letter (it prefixes interface names, which Linux caps at 15 bytes)"
            )
        if not 3 <= self.hosts <= 40:
            raise ConfigError(
                f"--hosts: {self.hosts} is out of range; a testbed has 3 to 40 hosts "
                "(one balancer, --loaders loaders, the rest servers)"
            )
        if not 1 <= self.loaders <= self.hosts - 2:
            raise ConfigError(
                f"--loaders: {self.loaders} does not fit {self.hosts} hosts; give 1 to "
                f"{self.hosts - 2} (one balancer and at least one server need the rest)"
            )
        try:
            net = ipaddress.ip_network(self.subnet)
        except ValueError:
            raise ConfigError(
                f"--subnet: {self.subnet!r} is not a network; write e.g. {DEFAULT_SUBNET}"
            ) from None
        if net.version != 4 or not net.is_private or net.is_loopback:
            raise ConfigError(
                f"--subnet: {self.subnet} must be a private IPv4 network (10/8, 172.16/12 "
                "or 192.168/16) so testbed traffic never leaves this machine"
            )
        if net.num_addresses < self.hosts + 12:
            raise ConfigError(
                f"--subnet: {self.subnet} is too small for {self.hosts} hosts; use a /24"
            )
        servers = {h.name for h in self.plan() if h.group == "servers"}
        unknown = sorted(set(self.quotas) - servers)
        if unknown:
            raise ConfigError(
                f"--quotas: {', '.join(unknown)} are not servers of this testbed; "
                f"servers are {', '.join(sorted(servers))}"
            )
        for host, quota in self.quotas.items():
            if not 0.01 <= quota <= os.cpu_count():  # type: ignore[operator]
                raise ConfigError(
                    f"--quotas: {host}={quota} is not a CPU share between 0.01 and the "
                    f"machine's {os.cpu_count()} CPUs"
                )

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.subnet)

    @property
    def bridge(self) -> str:
        return f"{self.name}br"

    @property
    def bridge_address(self) -> str:
        return str(self.network.network_address + 1)

    @property
    def home(self) -> Path:
        return self.root / self.name

    def plan(self) -> list[HostPlan]:
        """Host 1 balances, the last ``loaders`` load (``loader1``..), the ones between serve.

        Servers are ``s1``..``sN`` (the thesis names): all small (0.25 CPU) but the last,
        which is large (0.75 CPU), unless ``quotas`` says otherwise.
        """
        n_servers = self.hosts - 1 - self.loaders
        base = self.network.network_address + 10
        hosts = [HostPlan("balancer", "balancer", 1, str(base + 1))]
        for i in range(1, n_servers + 1):
            name = f"s{i}"
            default = LARGE_QUOTA if i == n_servers and n_servers > 1 else SMALL_QUOTA
            quota = self.quotas.get(name, default)
            hosts.append(HostPlan(name, "servers", i + 1, str(base + i + 1), quota))
        for i in range(1, self.loaders + 1):
            index = n_servers + 1 + i
            hosts.append(HostPlan(f"loader{i}", "loaders", index, str(base + index)))
        return hosts

    def namespace(self, host: HostPlan) -> str:
        return f"{self.name}-{host.name}"

    def veth(self, host: HostPlan) -> str:
        return f"{self.name}v{host.index}"


def parse_quotas(value: str | None) -> dict[str, float]:
    """``{"s1": 0.25, "s3": 0.75}`` from ``s1=0.25,s3=0.75``."""
    out: dict[str, float] = {}
    for host, raw in parse_assignments(value or "", "--quotas").items():
        try:
            out[host] = float(raw)
        except ValueError:
            raise ConfigError(
                f"--quotas: {host}={raw!r} is not a number; write e.g. s1=0.25"
            ) from None
    return out


# --- running commands ----------------------------------------------------------------


def require_root() -> None:
    """Refuse clearly, before touching anything, when we cannot make namespaces."""
    if os.geteuid() != 0:
        raise ConfigError(
            "the namespace testbed needs root (network namespaces, veth links, cgroups, "
            "sshd); run it as root, e.g. `sudo uv run lblab testbed up`"
        )
    missing = [
        str(p)
        for p in (SSHD, Path(shutil.which("ip") or "/usr/sbin/ip"), Path("/usr/bin/nsenter"))
        if not p.exists()
    ]
    if missing or not shutil.which("ssh-keygen"):
        raise ConfigError(
            f"the testbed needs {', '.join(missing) or 'ssh-keygen'}; install them with "
            "`scripts/setup` (apt packages openssh-server, iproute2, util-linux)"
        )


def _run(argv: Sequence[str], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise TestbedError(
            f"`{' '.join(argv)}` did not finish within {COMMAND_TIMEOUT_S:.0f}s"
        ) from None
    if check and proc.returncode != 0:
        raise TestbedError(
            f"`{' '.join(argv)}` failed: {proc.stderr.strip() or proc.stdout.strip()}"
        )
    return proc


def _link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def _namespaces() -> set[str]:
    return {p.name for p in Path("/run/netns").glob("*")} if Path("/run/netns").is_dir() else set()


def _namespace_pids(ns: str) -> list[int]:
    proc = _run(["ip", "netns", "pids", ns], check=False)
    return [int(p) for p in proc.stdout.split()] if proc.returncode == 0 else []


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return raw.decode(errors="replace").split("\0")


def _running(pid: int | None, marker: str) -> bool:
    """``pid`` is alive and its command line mentions ``marker`` (guards against pid reuse)."""
    return bool(pid) and any(marker in part for part in _cmdline(pid))  # type: ignore[arg-type]


def _wait_port(address: str, port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((address, port), timeout=1.0):
                return
        except OSError as exc:
            if time.monotonic() > deadline:
                raise TestbedError(
                    f"{address}:{port} did not accept within {timeout:.0f}s: {exc}"
                ) from None
            time.sleep(0.05)


def _wait_path(path: Path, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise TestbedError(f"{what} did not come up within {timeout:.0f}s; log {log}:\n{tail}")
        time.sleep(0.05)


def _detach(argv: Sequence[str], log: Path) -> int:
    """Start a daemon in its own session with output to ``log``; returns its pid."""
    with log.open("ab") as out:
        popen = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True
        )
    return popen.pid


# --- state ---------------------------------------------------------------------------


def state_path(spec: TestbedSpec) -> Path:
    return spec.home / "state.json"


def load_state(name: str, root: Path = DEFAULT_ROOT) -> dict[str, Any] | None:
    path = root / name / "state.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except json.JSONDecodeError as exc:
        raise TestbedError(
            f"{path} is corrupt ({exc}); run `lblab testbed down --name {name}`"
        ) from None


def _save_state(spec: TestbedSpec, state: dict[str, Any]) -> None:
    tmp = state_path(spec).with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n")
    os.replace(tmp, state_path(spec))


# --- up ------------------------------------------------------------------------------


def up(spec: TestbedSpec) -> dict[str, Any]:
    """Create whatever part of the testbed is missing; returns the state (also saved)."""
    require_root()
    old = load_state(spec.name, spec.root)
    wanted = {
        "hosts": spec.hosts,
        "loaders": spec.loaders,
        "subnet": spec.subnet,
        "quotas": {h.name: h.cpu_quota for h in spec.plan() if h.cpu_quota},
    }
    # A state file from before --loaders existed had one loader.
    if old and {k: old["spec"].get(k, 1 if k == "loaders" else None) for k in wanted} != wanted:
        raise ConfigError(
            f"testbed {spec.name!r} already exists with {old['spec']['hosts']} hosts "
            f"({old['spec'].get('loaders', 1)} loaders) on "
            f"{old['spec']['subnet']} and quotas {old['spec']['quotas']}; run "
            f"`lblab testbed down --name {spec.name}` first"
        )
    _check_subnet_free(spec)
    spec.home.mkdir(parents=True, exist_ok=True)
    state: dict[str, Any] = old or {
        "spec": {"name": spec.name, "root": str(spec.root), **wanted},
        "bridge": spec.bridge,
        "hosts": {},
    }
    _save_state(spec, state)  # record intent first: a failed `up` can still be taken down
    key = _controller_key(spec)
    _bridge_up(spec)
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    for host in spec.plan():
        entry = state["hosts"].setdefault(host.name, {})
        entry.update(
            asdict(host),
            namespace=spec.namespace(host),
            veth=spec.veth(host),
            root=str(spec.home / host.name),
        )
        _host_up(spec, host)
        entry["sshd_pid"] = _sshd_up(spec, host, entry.get("sshd_pid"))
        entry["supervisor_pid"] = _supervisor_up(spec, host, entry.get("supervisor_pid"))
        _save_state(spec, state)
    for host in spec.plan():
        _wait_port(host.address, 22, READY_TIMEOUT_S)
    _write_known_hosts(spec)
    _write_ssh_config(spec, key)
    _write_inventory(spec, key)
    return state


def _check_subnet_free(spec: TestbedSpec) -> None:
    """Refuse a subnet that overlaps a route of this machine other than our own bridge."""
    routes = json.loads(_run(["ip", "-j", "-4", "route", "show", "table", "all"]).stdout or "[]")
    for route in routes:
        dst = route.get("dst", "")
        if (
            dst in ("", "default")
            or route.get("dev") == spec.bridge
            or route.get("type") in ("local", "broadcast")
        ):
            continue
        try:
            other = ipaddress.ip_network(dst, strict=False)
        except ValueError:
            continue
        if other.overlaps(spec.network) and not other.is_loopback:
            raise ConfigError(
                f"--subnet: {spec.subnet} overlaps the route {dst} via {route.get('dev')}; "
                "pick a private subnet this machine does not use, e.g. 10.213.0.0/24"
            )


def _controller_key(spec: TestbedSpec) -> Path:
    folder = spec.home / "controller"
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = folder / "id_ed25519"
    if not key.exists():
        _keygen(key, f"lblab-testbed-{spec.name}")
    (folder / "authorized_keys").write_text(key.with_suffix(".pub").read_text())
    return key


def _keygen(path: Path, comment: str) -> None:
    """A passphrase-less ed25519 key pair at ``path`` (and ``path.pub``)."""
    _run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)])


def _bridge_up(spec: TestbedSpec) -> None:
    if not _link_exists(spec.bridge):
        _run(["ip", "link", "add", spec.bridge, "type", "bridge"])
    cidr = f"{spec.bridge_address}/{spec.network.prefixlen}"
    if cidr not in _run(["ip", "-4", "-o", "addr", "show", "dev", spec.bridge]).stdout:
        _run(["ip", "addr", "add", cidr, "dev", spec.bridge])
    _run(["ip", "link", "set", spec.bridge, "up"])


def _host_up(spec: TestbedSpec, host: HostPlan) -> None:
    ns, veth = spec.namespace(host), spec.veth(host)
    if ns not in _namespaces():
        _run(["ip", "netns", "add", ns])
    if not _link_exists(veth):
        _run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns])
    _run(["ip", "link", "set", veth, "master", spec.bridge, "up"])
    cidr = f"{host.address}/{spec.network.prefixlen}"
    if cidr not in _run(["ip", "-n", ns, "-4", "-o", "addr", "show", "dev", "eth0"]).stdout:
        _run(["ip", "-n", ns, "addr", "add", cidr, "dev", "eth0"])
    _run(["ip", "-n", ns, "link", "set", "eth0", "up"])
    _run(["ip", "-n", ns, "link", "set", "lo", "up"])
    for sub in ("etc/ssh", "run", "log"):
        (spec.home / host.name / sub).mkdir(parents=True, exist_ok=True)


def _sshd_up(spec: TestbedSpec, host: HostPlan, pid: int | None) -> int:
    base = spec.home / host.name
    conf = base / "etc/ssh/sshd_config"
    if _running(pid, str(conf)):
        return pid  # type: ignore[return-value]
    hostkey = base / "etc/ssh/ssh_host_ed25519_key"
    if not hostkey.exists():
        _keygen(hostkey, f"{host.name}.{spec.name}")
    conf.write_text(
        "\n".join(
            [
                f"# lblab testbed {spec.name}: host {host.name}",
                f"ListenAddress {host.address}:22",
                f"HostKey {hostkey}",
                f"PidFile {base / 'run/sshd.pid'}",
                f"AuthorizedKeysFile {spec.home / 'controller/authorized_keys'}",
                "PermitRootLogin prohibit-password",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                # The key lives under /tmp (mode 1777), which StrictModes would refuse.
                "StrictModes no",
                "PrintMotd no",
                "MaxSessions 50",
                "MaxStartups 50:30:100",
                f"Subsystem sftp {SFTP_SERVER}",
                "",
            ]
        )
    )
    log = base / "log/sshd.log"
    return _detach(
        [
            "ip",
            "netns",
            "exec",
            spec.namespace(host),
            str(SSHD),
            "-D",
            "-f",
            str(conf),
            "-E",
            str(log),
        ],
        log,
    )


def _supervisor_up(spec: TestbedSpec, host: HostPlan, pid: int | None) -> int:
    from lblab.infra import supervisor

    folder = spec.home / host.name / "supervisor"
    if _running(pid, str(folder)) and supervisor.ping(folder):
        return pid  # type: ignore[return-value]
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "supervisor.log"
    sock = supervisor.socket_path(folder)
    sock.unlink(missing_ok=True)
    new_pid = _detach(
        [
            "nsenter",
            f"--net=/run/netns/{spec.namespace(host)}",
            "--",
            sys.executable,
            "-m",
            "lblab.infra.supervisor",
            "serve",
            "--dir",
            str(folder),
        ],
        log,
    )
    _wait_path(sock, READY_TIMEOUT_S, f"the supervisor of {host.name}", log)
    return new_pid


def _write_known_hosts(spec: TestbedSpec) -> None:
    lines = []
    for host in spec.plan():
        pub = (spec.home / host.name / "etc/ssh/ssh_host_ed25519_key.pub").read_text().split()
        lines.append(f"{host.address} {pub[0]} {pub[1]}")
    (spec.home / "controller/known_hosts").write_text("\n".join(lines) + "\n")


def _write_ssh_config(spec: TestbedSpec, key: Path) -> None:
    blocks = []
    for host in spec.plan():
        blocks.append(
            f"Host {host.name} {host.address}\n"
            f"  HostName {host.address}\n"
            "  User root\n"
            f"  IdentityFile {key}\n"
            "  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {spec.home / 'controller/known_hosts'}\n"
            "  StrictHostKeyChecking yes\n"
        )
    (spec.home / "ssh_config").write_text("\n".join(blocks))


def _write_inventory(spec: TestbedSpec, key: Path) -> None:
    """The ansible inventory: groups balancer, servers (with cpu quotas) and loaders."""
    groups: dict[str, dict[str, Any]] = {"balancer": {}, "servers": {}, "loaders": {}}
    for host in spec.plan():
        hostvars: dict[str, Any] = {
            "ansible_host": host.address,
            "lblab_root": str(spec.home / host.name),
        }
        if host.group == "servers":
            hostvars["server_id"] = host.name
            hostvars["server_cpu_quota"] = host.cpu_quota
        groups[host.group][host.name] = hostvars
    inventory = {
        "all": {
            "vars": {
                "ansible_user": "root",
                "ansible_ssh_private_key_file": str(key),
                "ansible_ssh_common_args": f"-F {spec.home / 'ssh_config'}",
                "ansible_python_interpreter": "/usr/bin/python3",
                "lblab_testbed": spec.name,
            },
            "children": {g: {"hosts": hosts} for g, hosts in groups.items()},
        }
    }
    # JSON is valid YAML, and ansible reads a .yml inventory either way.
    (spec.home / "inventory.yml").write_text(json.dumps(inventory, indent=2) + "\n")


# --- down ----------------------------------------------------------------------------


def down(name: str, root: Path = DEFAULT_ROOT) -> list[str]:
    """Remove everything testbed ``name`` made; returns what was removed (empty if nothing)."""
    require_root()
    if not _NAME.match(name):
        raise ConfigError(
            f"--name: {name!r} is not a testbed name (1-8 lowercase letters or digits)"
        )
    state = load_state(name, root)
    removed: list[str] = []
    namespaces = {ns for ns in _namespaces() if ns.startswith(f"{name}-")}
    if state:
        namespaces |= {h["namespace"] for h in state["hosts"].values()} & _namespaces()
    # Processes first (supervisors stop their services on SIGTERM), then links.
    victims = {pid for ns in namespaces for pid in _namespace_pids(ns)}
    if state:
        victims |= {
            h[k]
            for h in state["hosts"].values()
            for k, marker in (("sshd_pid", "sshd"), ("supervisor_pid", "supervisor"))
            if _running(h.get(k), marker) and str(root / name) in " ".join(_cmdline(h[k]))
        }
    cgroups = _cgroups_of(victims)
    if victims:
        _terminate(victims)
        removed.append(f"{len(victims)} processes")
    for ns in sorted(namespaces):
        _run(["ip", "netns", "del", ns])
        removed.append(f"netns {ns}")
    links = [
        p.name
        for p in Path("/sys/class/net").iterdir()
        if re.fullmatch(rf"{name}(v\d+|br)", p.name)
    ]
    for link in sorted(links, key=lambda n: n.endswith("br")):
        # A veth vanishes with its peer's namespace, maybe while we look.
        if _link_exists(link) and _run(["ip", "link", "del", link], check=False).returncode == 0:
            removed.append(f"link {link}")
    for group in sorted(cgroups):
        if group.is_dir():
            _rmdir_cgroup(group)
            removed.append(f"cgroup {group.relative_to(CGROUP_ROOT)}")
    if (root / name).exists():
        shutil.rmtree(root / name)
        removed.append(f"files {root / name}")
    with contextlib.suppress(OSError):
        root.rmdir()  # only if no other testbed lives there
    return removed


def _terminate(pids: set[int], timeout: float = 10.0) -> None:
    """SIGTERM, wait until gone or ``timeout``, then SIGKILL the rest."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while pids and time.monotonic() < deadline:
            pids = {p for p in pids if Path(f"/proc/{p}").exists() and not _zombie(p)}
            time.sleep(0.05)
        if not pids:
            return
    raise TestbedError(f"processes {sorted(pids)} survived SIGKILL")


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _cgroups_of(pids: set[int]) -> set[Path]:
    """The ``lblab-*`` cgroup v1 groups (any hierarchy) that ``pids`` are in."""
    groups = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
                _, controllers, path = line.split(":", 2)
                top = path.lstrip("/").split("/", 1)[0]
                if controllers and top.startswith(CGROUP_PREFIX):
                    for controller in controllers.split(","):
                        groups.add(CGROUP_ROOT / controller / path.lstrip("/"))
    return groups


def _rmdir_cgroup(path: Path, timeout: float = 5.0) -> None:
    """A killed task leaves its cgroup a moment later; rmdir says EBUSY until then."""
    deadline = time.monotonic() + timeout
    while path.is_dir():
        try:
            path.rmdir()
        except OSError as exc:
            if time.monotonic() > deadline:
                raise TestbedError(f"cannot remove cgroup {path}: {exc}") from None
            time.sleep(0.05)


# --- status --------------------------------------------------------------------------


def status(name: str, root: Path = DEFAULT_ROOT) -> dict[str, Any]:
    """What exists of testbed ``name`` right now (probed, not just the state file)."""
    state = load_state(name, root)
    namespaces = _namespaces()
    hosts = {}
    for host, h in (state or {}).get("hosts", {}).items():
        hosts[host] = {
            "group": h["group"],
            "address": h["address"],
            "cpu_quota": h.get("cpu_quota"),
            "namespace": h["namespace"] in namespaces,
            "link": _link_exists(h["veth"]),
            "sshd": _running(h.get("sshd_pid"), "sshd"),
            "supervisor": _running(h.get("supervisor_pid"), "supervisor"),
        }
    leftovers = sorted(
        ns
        for ns in namespaces
        if ns.startswith(f"{name}-")
        and ns not in {h["namespace"] for h in (state or {}).get("hosts", {}).values()}
    )
    return {
        "name": name,
        "exists": state is not None,
        "bridge": _link_exists(f"{name}br"),
        "cgroups": sorted(
            str(g.relative_to(CGROUP_ROOT))
            for g in _cgroups_of(
                {p for ns in namespaces if ns.startswith(f"{name}-") for p in _namespace_pids(ns)}
            )
        ),
        "inventory": str(root / name / "inventory.yml") if state else None,
        "ssh_config": str(root / name / "ssh_config") if state else None,
        "hosts": hosts,
        "stray_namespaces": leftovers,
    }
