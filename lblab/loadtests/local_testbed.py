"""The processes under test: servers, their agents and the balancer nodes.

``LocalProcesses`` starts them on loopback with ``lblab.procs.spawn`` (ports 0, learned
from the ready lines) and stops them by process group, so nothing outlives the run.
Timeline events act on it (kill, restart on the same port, drain by SIGTERM, add and
remove through the balancer's admin API, slow, fail, reject, cold and capacity by
``servers/slowdown.py``, pause and resume by SIGSTOP and SIGCONT), and ``restore`` puts
the configured pool back (resumed, at normal speed, failing and refusing nothing, at its
quota) before the next phase. A ``capacity`` quota is scaled as the servers' are. ``ExternalProcesses`` is a balancer someone else runs (the ansible
playbooks): the runner only switches its strategy and drives load at it.

``[testbed] balancers = K`` starts K independent balancer nodes ``b1`` .. ``bK`` over the
same servers, as many clients each balancing on their own would (rsocket-java's
``LoadbalanceRSocketClient``): each has its own pool, strategy state and picks; every
agent reports to all of them; the Locust users are spread over them
(``LoadSpec.balancers``) and each request says which one it went through.

Files each local process writes, under the run directory:
``raw/picks-local.jsonl`` (balancer ``--picks``; ``picks-local-b<k>.jsonl`` for the
second and later nodes), ``raw/cpu-<server>.jsonl`` (agent ``--out``),
``logs/<name>.log`` (stderr and stdout after the ready line).

The servers run on CPUs of their own and the harness on the others
(``loadtests/isolation.py``); the layout, and the factor the servers' quotas were
scaled by to fit theirs, are in ``facts()["cpu_layout"]``.
"""

from __future__ import annotations

import os
import secrets
import signal
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from lblab.balancer_names import balancer_names
from lblab.experiment.runconfig import RunConfig, ServerSpec, TestbedKind
from lblab.loadreport import REPORT_TOKEN_ENV
from lblab.loadtests.admin_client import AdminClient
from lblab.loadtests.isolation import CpuLayout, Isolation, plan_layout
from lblab.loadtests.processes import Processes
from lblab.procs import Child, lblab_command, spawn, stop
from lblab.servers.behaviour import NO_FAILURES, ColdStart, RateLimit
from lblab.servers.slowdown import NORMAL, Control, Slowdown, request_control, request_slowdown
from lblab.strategy.sources import copy_spec, sources_of

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


@dataclass
class ServerProcess:
    spec: ServerSpec
    weight: float
    port: int = 0
    server: Child | None = None
    agent: Child | None = None
    in_pool: bool = True
    paused: bool = False
    slowed: bool = False
    behaved: bool = False
    """A ``fail``, ``reject``, ``cold`` or ``capacity`` changed it (``restore`` undoes)."""

    @property
    def facts(self) -> dict[str, Any]:
        return dict(self.server.ready) if self.server else {}


def cpu_layout(config: RunConfig) -> CpuLayout:
    """The local testbed's CPU layout for ``config``: the preflight, which refuses (a
    ``ConfigError`` saying what would fit) a testbed this machine cannot isolate."""
    tb = config.testbed
    return plan_layout(
        {s.id: s.cpu_quota for s in config.servers},
        method=tb.isolation,
        harness_cpus=tb.harness_cpus or None,
    )


@dataclass(frozen=True)
class BalancerNode:
    """One running balancer node of the testbed."""

    name: str
    """``b1`` .. ``bK``: the ``balancer`` column of the requests table."""
    child: Child
    admin: AdminClient
    address: tuple[str, int]
    agent_port: int


@dataclass
class LocalProcesses:
    config: RunConfig
    run_dir: Path
    servers: dict[str, ServerProcess] = field(default_factory=dict)
    nodes: list[BalancerNode] = field(default_factory=list)
    changed: bool = False  # a timeline event altered the pool since the last restore
    report_token: str = field(default_factory=lambda: secrets.token_urlsafe(32), repr=False)
    """This run's, given to the balancers and agents in their environment only (never
    on a command line, where ``ps`` shows it, nor in the manifest)."""
    layout: CpuLayout = field(init=False)
    isolation: Isolation = field(init=False)

    kind = TestbedKind.LOCAL

    @property
    def balancer(self) -> Child | None:
        """The first balancer node's process (the only one unless ``balancers`` > 1)."""
        return self.nodes[0].child if self.nodes else None

    @property
    def address(self) -> tuple[str, int]:
        return self.nodes[0].address

    @property
    def addresses(self) -> dict[str, tuple[str, int]]:
        """Every balancer node's address by name, in order."""
        return {node.name: node.address for node in self.nodes}

    def balancer_addresses(self) -> tuple[str, ...]:
        """Every node's ``HOST:PORT`` when there are several; none with one (Locust's
        ``--host`` is then the address)."""
        if len(self.nodes) < 2:
            return ()
        return tuple(f"{host}:{port}" for host, port in self.addresses.values())

    def __post_init__(self) -> None:
        self.layout = cpu_layout(self.config)
        self.isolation = Isolation(self.layout)

    def running_spec(self, spec: ServerSpec) -> ServerSpec:
        """The spec a server runs with: its quota scaled to fit the servers' CPUs."""
        if spec.cpu_quota is None or self.layout.quota_scale == 1.0:
            return spec
        return replace(spec, cpu_quota=spec.cpu_quota * self.layout.quota_scale)

    def harness_pids(self, locust: Sequence[Child]) -> dict[str, list[int]]:
        """The processes whose CPU the checks read: Locust's, the balancers', the agents'."""
        return {
            "locust": [c.pid for c in locust],
            "balancer": [node.child.pid for node in self.nodes],
            "agents": [p.agent.pid for p in self.servers.values() if p.agent],
        }

    def harness_cores(self) -> float:
        """The cores the harness may use without taking them from the servers."""
        if self.layout.isolated:
            return float(len(self.layout.harness_cpus))
        quotas = [s.cpu_quota for s in self.config.servers]
        return float(len(self.layout.machine_cpus)) - sum(q or 1.0 for q in quotas)

    @property
    def logs(self) -> Path:
        return self.run_dir / "logs"

    @property
    def raw(self) -> Path:
        return self.run_dir / "raw"

    def start(self, strategy: str) -> None:
        self.logs.mkdir(parents=True, exist_ok=True)
        self.raw.mkdir(parents=True, exist_ok=True)
        for spec in self.config.servers:
            weight = self.config.weights.get(spec.id, 1.0)
            self.servers[spec.id] = ServerProcess(self.running_spec(spec), weight)
        try:
            # This process first: all it starts is born on the harness's CPUs.
            self.isolation.enter_harness()
            # Each start waits for a ready line (about 1 s of interpreter start-up): start
            # the servers together, then the balancer, then the agents together.
            _all(self._start_server, self.servers.values())
            self._start_balancers(strategy)
            _all(self._start_agent, self.servers.values())
        except BaseException:
            self.stop()
            raise

    def _start_server(self, proc: ServerProcess) -> None:
        argv = lblab_command(
            "server", "--id", proc.spec.id, "--host", "127.0.0.1", "--port", str(proc.port),
            *proc.spec.argv(),
        )  # fmt: skip
        proc.server = spawn(
            f"server {proc.spec.id}",
            argv,
            ready_timeout=READY_TIMEOUT_S,
            log_path=self.logs / f"server-{proc.spec.id}.log",
        )
        proc.port = int(proc.server.ready["port"])
        self.isolation.place_server(proc.server.pid)

    def _start_agent(self, proc: ServerProcess) -> None:
        assert proc.server is not None
        cgroup = proc.server.ready.get("cgroup")
        target = ["--cgroup", str(cgroup)] if cgroup else ["--pid", str(proc.server.pid)]
        argv = lblab_command(
            "agent", "--server", proc.spec.id, *target,
            "--report-to", ",".join(f"127.0.0.1:{n.agent_port}" for n in self.nodes),
            "--interval", str(self.config.testbed.agent_interval),
            "--out", str(self.raw / f"cpu-{proc.spec.id}.jsonl"),
        )  # fmt: skip
        if proc.spec.cpu_quota is not None and not cgroup:
            # A duty-cycled server's 100 % is its quota, not a whole CPU.
            argv += ["--allowance", str(proc.spec.cpu_quota)]
        proc.agent = spawn(
            f"agent {proc.spec.id}",
            argv,
            ready_timeout=READY_TIMEOUT_S,
            log_path=self.logs / f"agent-{proc.spec.id}.log",
            env=self._token_env(),
        )

    def _start_balancers(self, strategy: str) -> None:
        """``b1`` .. ``bK`` at once; each that started is in ``nodes`` (to be stopped)
        even when another failed to."""
        names = balancer_names(self.config.testbed.balancers)
        with ThreadPoolExecutor(max_workers=16) as pool:
            futures = [pool.submit(self._start_balancer, name, strategy) for name in names]
        self.nodes = [f.result() for f in futures if f.exception() is None]
        for future in futures:
            future.result()  # the first failure, if any

    def _start_balancer(self, name: str, strategy: str) -> BalancerNode:
        cfg = self.config
        first = name == "b1"  # its files keep the names of a one-balancer testbed
        argv = lblab_command(
            "balancer", "--host", "127.0.0.1", "--port", "0", "--agent-port", "0",
            "--admin-port", "0", "--strategy", strategy,
            "--picks", str(self.raw / ("picks-local.jsonl" if first else f"picks-local-{name}.jsonl")),
            "--request-timeout", str(cfg.request_timeout),
        )  # fmt: skip
        for proc in self.servers.values():
            argv += ["--backend", f"{proc.spec.id}=127.0.0.1:{proc.port}"]
        weights = {p.spec.id: p.weight for p in self.servers.values()}
        argv += ["--weights", ",".join(f"{k}={v:g}" for k, v in weights.items())]
        for source in sources_of(cfg.strategies):
            argv += ["--load-strategy", copy_spec(self.run_dir, source)]
        for key, value in cfg.strategy_options.get(strategy, {}).items():
            argv += ["--strategy-option", f"{key}={value}"]
        argv += cfg.health_flags()
        argv += list(cfg.testbed.balancer_args)
        child = spawn(
            "balancer" if first else f"balancer {name}",
            argv,
            ready_timeout=READY_TIMEOUT_S,
            log_path=self.logs / ("lblab.balancer.log" if first else f"lblab.balancer-{name}.log"),
            env=self._token_env(),
        )
        ready = child.ready
        return BalancerNode(
            name,
            child,
            AdminClient("127.0.0.1", int(ready["admin_port"])),
            ("127.0.0.1", int(ready["port"])),
            int(ready["agent_port"]),
        )

    def _token_env(self) -> dict[str, str]:
        return {**os.environ, REPORT_TOKEN_ENV: self.report_token}

    # ------------------------------------------------------------ between phases

    def set_strategy(self, strategy: str) -> None:
        options = self.config.strategy_options.get(strategy, {})
        for node in self.nodes:
            node.admin.set_strategy(strategy, options)

    def check_alive(self) -> list[str]:
        """Names of processes that should run and do not (a crash between phases)."""
        dead = [] if self.nodes else ["balancer"]
        for node in self.nodes:
            if not node.child.alive():
                dead.append("balancer" if len(self.nodes) == 1 else f"balancer {node.name}")
        for sid, proc in self.servers.items():
            if proc.in_pool and (proc.server is None or not proc.server.alive()):
                dead.append(f"server {sid}")
        return dead

    def restore(self) -> None:
        """Bring the pool back to the configured servers after timeline events."""
        configured = {s.id for s in self.config.servers}
        for sid, proc in list(self.servers.items()):
            if proc.server is not None and proc.server.alive():  # a killed one starts anew
                if proc.paused:
                    self.resume(sid)
                if proc.slowed:
                    self.slow(sid, NORMAL.factor, NORMAL.add_ms)
                if proc.behaved:  # its spec's quota is scaled already
                    request_control(proc.server.pid, _as_started(proc.spec))
            proc.paused = proc.slowed = proc.behaved = False
            if sid not in configured:
                self.remove(sid)
                del self.servers[sid]
            elif not proc.in_pool:
                self.add(sid)
            elif proc.server is None or not proc.server.alive():
                self.restart(sid)
        self.changed = False

    # ------------------------------------------------------------ timeline actions

    def kill(self, sid: str) -> None:
        proc = self.servers[sid]
        if proc.server is not None:
            stop(proc.server, timeout=2, sig=signal.SIGKILL)
        self._stop_agent(proc)
        self.changed = True

    def drain(self, sid: str) -> None:
        """SIGTERM: the server rejects new requests, finishes in-flight ones, exits."""
        proc = self.servers[sid]
        if proc.server is not None and proc.server.alive():
            proc.server.popen.send_signal(signal.SIGTERM)
        self.changed = True

    def restart(self, sid: str) -> None:
        """Start the server again on its old port (the balancer reconnects to it)."""
        proc = self.servers[sid]
        if proc.server is not None and proc.server.alive():
            stop(proc.server, timeout=STOP_TIMEOUT_S)
        self._stop_agent(proc)
        self._start_server(proc)
        self._start_agent(proc)
        self.changed = True

    def add(self, sid: str, spec: ServerSpec | None = None, weight: float = 1.0) -> None:
        proc = self.servers.get(sid)
        if proc is None:
            if spec is None:
                raise ValueError(f"cannot add {sid!r}: no server spec")
            proc = self.servers[sid] = ServerProcess(self.running_spec(spec), weight, in_pool=False)
        if proc.server is None or not proc.server.alive():
            self._start_server(proc)
            self._start_agent(proc)
        for node in self.nodes:
            node.admin.add_backend(sid, f"127.0.0.1:{proc.port}", proc.weight)
        proc.in_pool = True
        self.changed = True

    def remove(self, sid: str) -> None:
        """Take the server out of the pool first, then stop it (a scale-in)."""
        proc = self.servers[sid]
        for node in self.nodes:
            node.admin.remove_backend(sid)
        proc.in_pool = False
        if proc.server is not None:
            stop(proc.server, timeout=STOP_TIMEOUT_S)
        self._stop_agent(proc)
        self.changed = True

    def slow(self, sid: str, factor: float, add_ms: float) -> None:
        """Every request's service time times ``factor`` plus ``add_ms`` (1, 0: normal)."""
        proc = self.servers[sid]
        if proc.server is None or not proc.server.alive():
            raise RuntimeError(f"server {sid} is not running")
        slowdown = Slowdown(factor, add_ms)
        request_slowdown(proc.server.pid, slowdown)
        proc.slowed = slowdown != NORMAL
        self.changed = True

    def control(self, sid: str, control: Control) -> None:
        """A ``fail``, ``reject``, ``cold`` or ``capacity`` change (its quota scaled)."""
        proc = self.servers[sid]
        if proc.server is None or not proc.server.alive():
            raise RuntimeError(f"server {sid} is not running")
        if control.cpu_quota is not None:
            control = replace(control, cpu_quota=control.cpu_quota * self.layout.quota_scale)
        request_control(proc.server.pid, control)
        proc.behaved = True
        self.changed = True

    def pause(self, sid: str) -> None:
        """SIGSTOP the server's process group: a hung backend (alive, connected, silent)."""
        self._signal(sid, signal.SIGSTOP)
        self.servers[sid].paused = True
        self.changed = True

    def resume(self, sid: str) -> None:
        """SIGCONT: the paused server answers again (its backlog first)."""
        self._signal(sid, signal.SIGCONT)
        self.servers[sid].paused = False

    def _signal(self, sid: str, sig: int) -> None:
        proc = self.servers[sid]
        if proc.server is None or not proc.server.alive():
            raise RuntimeError(f"server {sid} is not running")
        os.killpg(proc.server.pid, sig)

    def _stop_agent(self, proc: ServerProcess) -> None:
        if proc.agent is not None:
            stop(proc.agent, timeout=3)
            proc.agent = None

    # ------------------------------------------------------------ teardown and facts

    def stop(self) -> None:
        """Stop everything: the balancers first (they flush their picks), then the rest."""
        for node in self.nodes:
            stop(node.child, timeout=STOP_TIMEOUT_S)
        for proc in self.servers.values():
            self._stop_agent(proc)
            if proc.server is not None:
                if proc.paused and proc.server.alive():
                    os.killpg(proc.server.pid, signal.SIGCONT)  # else SIGTERM waits
                stop(proc.server, timeout=STOP_TIMEOUT_S)
        self.isolation.release()

    def facts(self) -> dict[str, Any]:
        servers = {sid: p.facts for sid, p in self.servers.items()}
        methods = sorted({str(f.get("cpu_limit", "unknown")) for f in servers.values()})
        return {
            "kind": "local",
            "balancer": self.balancer.ready if self.balancer else None,
            "balancers": {node.name: node.child.ready for node in self.nodes},
            "servers": servers,
            "cpu_limit_method": methods[0] if len(methods) == 1 else methods,
            "cpu_layout": self.layout.facts(),
        }


@dataclass
class ExternalProcesses:
    """A balancer (and servers, agents) started by someone else, e.g. the ansible roles."""

    config: RunConfig
    run_dir: Path
    kind = TestbedKind.EXTERNAL
    changed = False

    def __post_init__(self) -> None:
        tb = self.config.testbed
        assert tb.balancer is not None
        self.address = tb.balancer
        self.admin = AdminClient(*tb.admin) if tb.admin else None

    def start(self, strategy: str) -> None:
        (self.run_dir / "raw").mkdir(parents=True, exist_ok=True)

    def set_strategy(self, strategy: str) -> None:
        if self.admin is None:
            return  # one strategy, whatever the balancer runs (checked in runconfig)
        self.admin.set_strategy(strategy, self.config.strategy_options.get(strategy, {}))

    def check_alive(self) -> list[str]:
        return []

    def restore(self) -> None:
        """Nothing to restore: the runner changed nothing."""

    def stop(self) -> None:
        """Nothing to stop: the runner started nothing."""

    def balancer_addresses(self) -> tuple[str, ...]:
        """One balancer: Locust's ``--host``."""
        return ()

    def harness_pids(self, locust: Sequence[Child]) -> dict[str, list[int]]:
        """The processes whose CPU the checks read: here only Locust's."""
        return {"locust": [c.pid for c in locust]}

    def harness_cores(self) -> None:
        """Not known: the harness here is only Locust, on a machine someone else runs."""
        return None

    def facts(self) -> dict[str, Any]:
        return {
            "kind": "external",
            "balancer": "{}:{}".format(*self.address),
            "admin": None if self.admin is None else self.admin.base,
            "cpu_limit_method": "external",
        }


def _as_started(spec: ServerSpec) -> Control:
    """What puts a server back as it started: failing and refusing nothing, warm, at its
    own quota (already scaled)."""
    return Control(fail=NO_FAILURES, reject=RateLimit(), cold=ColdStart(), cpu_quota=spec.cpu_quota)


def _all(start: Callable[[ServerProcess], None], procs: Iterable[ServerProcess]) -> None:
    """Run ``start`` for every process at once; re-raise the first failure."""
    with ThreadPoolExecutor(max_workers=16) as pool:
        for future in [pool.submit(start, p) for p in procs]:
            future.result()


def make_processes(config: RunConfig, run_dir: Path) -> Processes:
    """The processes of a live run (``testbed.kind`` local or external)."""
    if config.testbed.kind == TestbedKind.EXTERNAL:
        return ExternalProcesses(config, run_dir)
    return LocalProcesses(config, run_dir)
