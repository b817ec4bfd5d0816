"""The balancer node: the composition root of the frame-level RSocket balancer.

Clients connect to ``--port`` (``frontend.ClientConnection``); the node keeps ONE
connection per backend (``backend.Backend``) with its own SETUP and keepalives. Every
frame is routed by the sans-I/O ``router.Router`` (stream table, deadlines, replay,
exactly-once accounting with the ``Pool``); the node owns the sockets, the periodic
timer and the runtime changes of the admin API, and turns the connections' lifecycle
events (``wiring.NodeEvents``) into pool state.

Time: ``time.monotonic()`` is the pool's ``now`` everywhere in the balancer, not
uvloop's ``loop.time()``, which counts whole milliseconds (every latency the strategies
saw was 0, 1, 2... ms); picks are logged in epoch seconds via a fixed offset. One
periodic timer (``TICK_S``) ends timeouts, runs
``Pool.tick`` (ejections, slow start, dynamic weights), checks keepalive lifetimes,
retires replaced connections and flushes the picks log: no per-request timers.

Stopping (``close``, on SIGTERM or SIGINT; docs/DESIGN.md, "Reliability rules"): the
router refuses every new request (REJECTED, not processed) and the client and agent
ports close, so new connections are refused; the streams in flight get
``--drain-timeout`` to end, then the router cuts what is left (a CANCELED ERROR each, a
CANCEL to its backend) and every client and backend connection ends with
CONNECTION_CLOSE. The admin API answers until then, so a stop can be watched.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lblab.admission import MAX_CONNECTIONS, MAX_PENDING_SETUP, SETUP_TIMEOUT_S, Admission
from lblab.balancer import input_checks
from lblab.balancer.aperture import Subset
from lblab.balancer.backend import Backend, BackendAddress, BackendConnection
from lblab.balancer.budgets import (
    BACKEND_HELD_BYTES,
    CLIENT_HELD_BYTES,
    CLIENT_STREAMS,
    MAX_CLIENT_STREAMS,
    MAX_HELD_BUDGET,
)
from lblab.balancer.frontend import ClientConnection
from lblab.balancer.health import HealthConfig
from lblab.balancer.node_counters import counter_values
from lblab.balancer.outbox import Outbox
from lblab.balancer.picklog import FLUSH_INTERVAL_S, PickLog
from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.router import Router
from lblab.balancer.strategies.base import Health, Strategy, decision_counts
from lblab.balancer.strategies.registry import make_strategy
from lblab.balancer.streams import BackendPort, ClientPort
from lblab.balancer.wiring import Wiring
from lblab.config import check_token, check_weight
from lblab.errors import ConfigError, RemoteProtocolError
from lblab.loadreport import REPORT_TOKEN_ENV, LoadReport
from lblab.wire.codes import MAX_FRAME_LENGTH
from lblab.wire.metadata import LOAD_REPORT, find_entry
from lblab.wire_asyncio import within

log = logging.getLogger("lblab.balancer")

TICK_S = 0.05
"""Resolution of timeouts, ejection ends and slow start steps (50 ms: 0.2 % of the
default 30 s timeout, and cheap: one callback per tick, not one timer per request)."""
DRAIN_TIMEOUT_S = 2.0
"""Default grace for the streams in flight when the balancer stops: well inside the
stop timeouts of the harness that stops it (5 s in tests, 10 s in the local testbed)."""
CLOSE_WAIT_S = 1.0
"""After the last frames are queued, how long to let the transports flush and close."""
STOP_MESSAGE = "the balancer is stopping"
"""The CONNECTION_CLOSE message toward clients and backends."""
LIFETIME_CHECK_S = 0.25
"""How often connections are checked against their peers' max lifetime, and backends
for silence (``health.HUNG_AFTER_S``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeConfig:
    """Everything ``lblab balancer`` was told; checked once here."""

    backends: tuple[BackendAddress, ...]
    strategy: str = "rr"
    strategy_options: Mapping[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"
    port: int = 7878
    agent_port: int | None = None
    admin_port: int | None = None
    admin_host: str = "127.0.0.1"
    admin_token: str | None = field(default=None, repr=False)
    report_token: str | None = field(default=None, repr=False)
    """The token an agent's SETUP must carry (``agent_listener``); None: any peer reports."""
    picks: Path | None = None
    request_timeout_s: float = 30.0
    drain_timeout_s: float = DRAIN_TIMEOUT_S
    """On stop, how long the streams in flight may take to end before they are cut."""
    max_frame_bytes: int = MAX_FRAME_LENGTH
    client_max_streams: int = CLIENT_STREAMS
    client_max_held_bytes: int = CLIENT_HELD_BYTES
    backend_max_held_bytes: int = BACKEND_HELD_BYTES
    """Per-client budgets (``balancer/budgets.py``)."""
    seed: int | None = None
    setup_timeout_s: float = SETUP_TIMEOUT_S
    max_connections: int = MAX_CONNECTIONS
    max_pending_setup: int = MAX_PENDING_SETUP
    health: HealthConfig = field(default_factory=HealthConfig)
    """Passive ejection, slow start and panic (``balancer/health.py``)."""
    aperture: Subset | None = None
    """The aperture this balancer took (``balancer/aperture.py``): ``backends`` are its
    members, weighted by their share of the window; shown in ``/status``."""

    def __post_init__(self) -> None:
        ids = [b.id for b in self.backends]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"backend ids must be unique, got {', '.join(ids)}")
        if self.admin_port is not None:
            input_checks.check_admin_bind(self.admin_host, self.admin_token)
        if self.report_token is not None:
            check_token(self.report_token, "--report-token", REPORT_TOKEN_ENV)
        own_ports = [p for p in (self.port, self.agent_port, self.admin_port) if p]
        for b in self.backends:
            input_checks.check_backend_id(b.id)
            input_checks.check_host(b.host, f"--backend {b.id}")
            if input_checks.self_loop(b.host, b.port, own_ports):
                raise ConfigError(
                    f"--backend {b.id}={b.address} is this balancer's own port: requests "
                    "would loop through it; give a server's address"
                )
        if not 0 < self.request_timeout_s <= 3600:
            raise ConfigError(
                f"--request-timeout must be in (0, 3600] seconds, not {self.request_timeout_s}"
            )
        if not 0 <= self.drain_timeout_s <= 3600:
            raise ConfigError(
                f"--drain-timeout must be in [0, 3600] seconds, not {self.drain_timeout_s}"
            )
        if not 64 <= self.max_frame_bytes <= MAX_FRAME_LENGTH:
            raise ConfigError(
                f"--max-frame-bytes must be in 64..{MAX_FRAME_LENGTH} (the 24-bit length "
                f"prefix), not {self.max_frame_bytes}"
            )
        if not 1 <= self.client_max_streams <= MAX_CLIENT_STREAMS:
            raise ConfigError(
                f"--client-max-streams must be in 1..{MAX_CLIENT_STREAMS}, not "
                f"{self.client_max_streams}"
            )
        for flag, value in (
            ("--client-max-held-bytes", self.client_max_held_bytes),
            ("--backend-max-held-bytes", self.backend_max_held_bytes),
        ):
            if not 1 <= value <= MAX_HELD_BUDGET:
                raise ConfigError(f"{flag} must be in 1..{MAX_HELD_BUDGET} bytes, not {value}")


@dataclass(frozen=True, slots=True)
class NodeSnapshot:
    """What the node is doing at one instant: all the admin API reads (``/status`` is
    ``status()``, ``/metrics`` is built from the same snapshot)."""

    strategy: str
    options: Mapping[str, str]
    backends: list[dict[str, Any]]
    """One row per backend: the pool's (state, load, every counter), its address,
    whether it is connected, its last load report and lease."""
    clients: int
    paused_clients: int
    outstanding: int
    counters: Mapping[str, int]
    """The node's and the router's counters."""
    decisions: Mapping[str, int] = field(default_factory=dict)
    """The current strategy's own counters of what it decided (``decision_counts``)."""
    aperture: Subset | None = None

    def status(self) -> dict[str, Any]:
        """``GET /status``'s JSON (``aperture`` with one: ``Subset.describe``)."""
        return {
            "strategy": self.strategy,
            "options": dict(self.options),
            "backends": self.backends,
            "clients": self.clients,
            "paused_clients": self.paused_clients,
            "outstanding": self.outstanding,
            **self.counters,
            "decisions": dict(self.decisions),
            **({} if self.aperture is None else {"aperture": self.aperture.describe()}),
        }


class BalancerNode:
    """Owns the pool, the strategy, the router, every connection and the periodic timer."""

    def __init__(self, config: NodeConfig, loop: asyncio.AbstractEventLoop) -> None:
        self.config = config
        self.loop = loop
        self.rng = random.Random(config.seed)
        self.weights = {b.id: b.weight for b in config.backends}
        self.strategy: Strategy = make_strategy(
            config.strategy, config.strategy_options, rng=self.rng, weights=self.weights
        )
        self.strategy_options: dict[str, str] = dict(config.strategy_options)
        now = time.monotonic()
        self.pool = Pool(
            [BackendSpec(b.id, b.weight) for b in config.backends],
            self.strategy,
            health=config.health,
            now=now,
        )
        self.picklog = PickLog(config.picks) if config.picks else None
        self.router = Router(
            self.pool,
            self,
            timeout_s=config.request_timeout_s,
            picks=self.picklog,
            epoch_offset=time.time() - now,
            client_streams=config.client_max_streams,
            client_held_bytes=config.client_max_held_bytes,
            backend_held_bytes=config.backend_max_held_bytes,
        )
        self.stats = self.router.stats
        self.wiring = Wiring(
            loop=loop,
            outbox=Outbox(loop),
            router=self.router,
            events=self,
            max_frame_bytes=config.max_frame_bytes,
            jitter=random.Random(),
        )
        self.admission = Admission(
            config.max_connections, config.max_pending_setup, "the balancer's client port"
        )
        self.backends: dict[str, Backend] = {
            b.id: Backend(self.wiring, b, in_pool_up=True) for b in config.backends
        }
        self.clients: set[ClientConnection] = set()
        self.retired: list[BackendPort] = []
        self.servers: dict[str, asyncio.Server] = {}
        self._tick_handle: asyncio.TimerHandle | None = None
        self._next_lifetime_check = now
        self._next_flush = now + FLUSH_INTERVAL_S

    def counters(self) -> dict[str, int]:
        """The node's and the router's counters, for the admin API."""
        return counter_values(self.stats)

    def snapshot(self) -> NodeSnapshot:
        """The node now, as the admin API shows it."""
        now = time.monotonic()
        rows = self.pool.status()
        for row in rows:
            backend_id = str(row["id"])
            backend = self.backends.get(backend_id)
            row["held_bytes"] = 0
            if backend is not None:
                row["address"] = backend.address.address
                row["connected"] = backend.conn is not None and not backend.conn.closed
                if backend.conn is not None:
                    row["held_bytes"] = self.router.budgets.held_on(backend.conn)
            view = self.pool.get(backend_id)
            report = view.last_report
            row["last_report"] = (
                None
                if report is None or view.report_at is None
                else {
                    "source": report.source,
                    "age_s": round(now - view.report_at, 3),
                    "cpu_util": report.cpu_util,
                    "qps": report.qps,
                }
            )
            row["lease_remaining"] = view.lease_remaining
        return NodeSnapshot(
            strategy=self.strategy.name,
            options=dict(self.strategy_options),
            backends=rows,
            clients=len(self.clients),
            paused_clients=sum(1 for c in self.clients if c.blockers),
            outstanding=self.pool.outstanding,
            counters=self.counters(),
            decisions=decision_counts(self.strategy),
            aperture=self.config.aperture,
        )

    def setup_wants(self) -> tuple[tuple[str, ...], bool]:
        s = self.strategy
        wanted = (("response", s.uses_response_reports), ("push", s.uses_push_reports))
        return tuple(kind for kind, on in wanted if on), s.uses_leases

    # ------------------------------------------------------------ lifecycle

    async def start(self, connect_timeout: float = 5.0) -> None:
        """Connect every backend (waiting up to ``connect_timeout`` for the first attempts,
        so early requests are not refused), listen on ``--port``, start the timer."""
        waits = [b.start() for b in self.backends.values()]
        if waits:
            await within(connect_timeout, asyncio.gather(*waits))
        setup_timeout_s = self.config.setup_timeout_s
        await self.listen(
            "port",
            self.config.port,
            lambda p: self.loop.create_server(
                lambda: ClientConnection(self.wiring, self.admission, setup_timeout_s),
                self.config.host,
                p,
            ),
        )
        self._tick_handle = self.loop.call_later(TICK_S, self._tick)

    async def listen(
        self, name: str, port: int, open_server: Callable[[int], Awaitable[asyncio.Server]]
    ) -> None:
        """Open one of the node's ports (``port``, ``agent_port``, ``admin_port``); a port
        that cannot be opened is a ``ConfigError`` naming its flag."""
        try:
            self.servers[name] = await open_server(port)
        except OSError as exc:
            flag = "--" + name.replace("_", "-")
            raise ConfigError(f"{flag} {port}: cannot listen: {exc}") from exc

    def ports(self) -> dict[str, int | None]:
        """The bound port of each of ``port``, ``agent_port``, ``admin_port`` (None: closed)."""
        ports: dict[str, int | None] = {}
        for name in ("port", "agent_port", "admin_port"):
            server = self.servers.get(name)
            sockets = server.sockets if server is not None else ()
            ports[name] = sockets[0].getsockname()[1] if sockets else None
        return ports

    async def close(self) -> None:
        """Stop: refuse new requests and connections at once, let the streams in flight
        end within ``drain_timeout_s``, cut the rest, then close every connection with
        CONNECTION_CLOSE (the module docstring)."""
        grace_s = self.config.drain_timeout_s
        self.router.stop()
        for name in ("port", "agent_port"):
            if name in self.servers:
                self.servers[name].close()
        in_flight = self._in_flight()
        log.info("stopping: new requests refused, %d in flight get %g s", in_flight, grace_s)
        deadline = time.monotonic() + grace_s
        while in_flight and (left := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(TICK_S, left))
            in_flight = self._in_flight()
        if in_flight:
            log.warning("stopping: %d streams still in flight after %g s: cut", in_flight, grace_s)
            now = time.monotonic()
            for client in self.clients:
                self.router.cut(client, grace_s, now)
        if self._tick_handle is not None:
            self._tick_handle.cancel()
        for client in list(self.clients):
            client.close_connection(STOP_MESSAGE)
        for backend in self.backends.values():
            backend.stop(STOP_MESSAGE)
        for conn in self.retired:
            assert isinstance(conn, BackendConnection)
            conn.close_connection(STOP_MESSAGE)
        if "admin_port" in self.servers:
            self.servers["admin_port"].close()
        if self.picklog is not None:
            self.picklog.close()
        deadline = time.monotonic() + CLOSE_WAIT_S
        while self._open() and (left := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(TICK_S, left))
        log.info(
            "stopped: %d requests refused while stopping, %d cut",
            self.stats.rejected_stopping,
            self.stats.cut_at_stop,
        )

    def _in_flight(self) -> int:
        """Streams not yet ended, over every client (a refused request's swallowed
        fragments do not count)."""
        return sum(not s.done for c in self.clients for s in c.streams.values())

    def _open(self) -> bool:
        """Whether a client or backend transport has yet to close (its frames to flush)."""
        return bool(self.clients) or any(b.conn is not None for b in self.backends.values())

    # ------------------------------------------------------------ Connections (router)

    def connection(self, backend_id: str) -> BackendConnection | None:
        backend = self.backends.get(backend_id)
        return None if backend is None else backend.conn

    def connection_missing(self, backend_id: str) -> None:
        backend = self.backends.get(backend_id)
        if backend is not None:
            backend.mark_down()
        else:
            self.pool.set_state(backend_id, Health.DOWN, time.monotonic())

    # ------------------------------------------------------------ NodeEvents (connections)

    def client_opened(self, client: ClientPort) -> None:
        assert isinstance(client, ClientConnection)
        self.clients.add(client)

    def client_closed(self, client: ClientPort) -> None:
        self.clients.discard(client)  # type: ignore[arg-type]
        self.router.client_gone(client, time.monotonic())

    def broadcast(self, frame: bytes, client: ClientPort) -> None:
        for backend in self.backends.values():
            conn = backend.conn
            if conn is not None and not conn.closed:
                conn.write(frame, client)

    def backend_up(self, backend_id: str) -> None:
        if backend_id in self.backends:
            self.pool.set_state(backend_id, Health.UP, time.monotonic())

    def backend_down(self, backend_id: str) -> None:
        if backend_id in self.backends:
            self.pool.set_state(backend_id, Health.DOWN, time.monotonic())

    def backend_hung(self, backend_id: str, silent_s: float) -> None:
        """A connected backend stopped answering our KEEPALIVEs: eject it and hold it
        DOWN until it answers again (``backend_answering``)."""
        if backend_id not in self.backends:
            return
        log.warning("backend %s silent for %.1f s: ejected as hung", backend_id, silent_s)
        now = time.monotonic()
        self.pool.set_state(backend_id, Health.EJECTED, now)
        self.pool.set_state(backend_id, Health.DOWN, now)

    def backend_answering(self, backend_id: str, now: float) -> None:
        """A hung backend answers again: UP once its ejection has run out."""
        if backend_id in self.backends:
            log.warning("backend %s answers again", backend_id)
            self.pool.set_state(backend_id, Health.UP, now)

    def backend_draining(self, backend_id: str) -> None:
        """The backend sent CONNECTION_CLOSE: no new requests, in-flight ones finish."""
        if backend_id in self.backends:
            self.pool.set_state(backend_id, Health.DRAINING, time.monotonic())

    def backend_lease(self, backend_id: str, ttl_s: float, count: int, now: float) -> None:
        if backend_id in self.pool:
            self.pool.lease(backend_id, count, now + ttl_s)

    def push_report(self, backend_id: str, metadata: memoryview, now: float) -> None:
        if not self.strategy.uses_push_reports or backend_id not in self.pool:
            return
        try:
            raw = find_entry(metadata, LOAD_REPORT)
            if raw is not None:
                self.pool.report(backend_id, LoadReport.from_json(raw), now)
        except RemoteProtocolError as exc:
            log.debug("ignoring a malformed load report from %s: %s", backend_id, exc)

    def retiring(self, conn: BackendPort) -> None:
        self.retired.append(conn)

    def protocol_failure(self) -> None:
        self.stats.protocol_errors += 1

    def agent_bad_token(self) -> int:
        """An agent connection refused for no or a wrong report token; how many so far."""
        self.stats.agent_connections_bad_token += 1
        return self.stats.agent_connections_bad_token

    def agent_bad_source(self) -> int:
        """An agent-port report refused for a server's in-band source; how many so far."""
        self.stats.agent_reports_bad_source += 1
        return self.stats.agent_reports_bad_source

    def agent_report(self, report: LoadReport) -> bool:
        """A LoadReport from an agent; False if it names no backend of the pool."""
        if report.server not in self.backends:
            return False
        self.pool.report(report.server, report, time.monotonic())
        return True

    # ------------------------------------------------------------ periodic work

    def _tick(self) -> None:
        now = time.monotonic()
        try:
            self.router.expire(now)
            self.pool.tick(now)
            if now >= self._next_lifetime_check:
                self._next_lifetime_check = now + LIFETIME_CHECK_S
                self._check_lifetimes(now)
            if self.picklog is not None and now >= self._next_flush:
                self._next_flush = now + FLUSH_INTERVAL_S
                self.picklog.flush()
        except Exception:  # a task boundary: log and keep ticking, or timeouts would stop
            log.exception("balancer tick failed")
        self._tick_handle = self.loop.call_later(TICK_S, self._tick)

    def _check_lifetimes(self, now: float) -> None:
        for client in list(self.clients):
            client.check_lifetime(now)
        for backend in self.backends.values():
            backend.check_lifetime(now)
        for conn in list(self.retired):
            assert isinstance(conn, BackendConnection)
            if conn.closed:
                self.retired.remove(conn)
            elif not conn.streams or now > conn.retired_at + self.router.timeout_s:
                conn.close()

    # ------------------------------------------------------------ runtime changes (admin)

    def set_strategy(self, name: str, options: Mapping[str, str] | None = None) -> None:
        """Swap the strategy (fresh state); re-SETUP backends if it needs other signals."""
        strategy: Strategy = make_strategy(name, options, rng=self.rng, weights=self.weights)
        before = self.setup_wants()
        self.strategy = strategy
        self.strategy_options = dict(options or {})
        self.pool.set_strategy(strategy, time.monotonic())
        if self.setup_wants() != before:
            for backend in self.backends.values():
                backend.resetup()

    def add_backend(self, backend_id: str, host: str, port: int, weight: float = 1.0) -> None:
        if self.router.stopping:
            raise ConfigError("the balancer is stopping; it takes no new backends")
        if backend_id in self.backends:
            raise ConfigError(f"backend {backend_id!r} is already in the pool")
        input_checks.check_backend_id(backend_id)
        input_checks.check_host(host, f"backend {backend_id}")
        weight = check_weight(weight, f"backend {backend_id}")
        now = time.monotonic()
        address = BackendAddress(backend_id, host, port, weight)
        self.weights[backend_id] = weight
        self.pool.add(BackendSpec(backend_id, weight), now)
        self.pool.set_state(backend_id, Health.DOWN, now)
        backend = Backend(self.wiring, address, in_pool_up=False)
        self.backends[backend_id] = backend
        backend.start()

    def remove_backend(self, backend_id: str) -> None:
        """Take a backend out: new requests go elsewhere, its in-flight ones finish."""
        backend = self.backends.pop(backend_id, None)
        if backend is None:
            raise ConfigError(
                f"no backend {backend_id!r} in the pool; have {', '.join(self.backends) or 'none'}"
            )
        self.weights.pop(backend_id, None)
        self.pool.remove(backend_id, time.monotonic())
        backend.retire()
