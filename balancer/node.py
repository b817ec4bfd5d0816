"""The balancer node: a frame-level RSocket router driving the sans-I/O ``Pool``.

Theory of operation
-------------------
Clients connect to ``--port`` (``frontend.ClientConnection``); the node keeps ONE
connection per backend (``backend.Backend`` / ``BackendConnection``) with its own SETUP
and keepalives. A new request frame from a client asks ``Pool.pick`` for a backend,
gets a fresh odd stream id on that backend's connection, and is forwarded as bytes:
the frame is copied once out of the receive buffer, its stream id rewritten in the
copy with ``pack_into``, and the copy written. Every later frame of the stream
(fragments, REQUEST_N, CANCEL, channel payloads; PAYLOAD/ERROR back) is found in one
dict lookup (``router.Stream``) and forwarded the same way. Payloads are never decoded
except where a strategy asks for it (routing keys, response load reports).

Accounting follows ALGORITHMS.md "Health": ``Pool.dispatch`` when a request is sent and
``Pool.complete`` exactly once per dispatch, on every outcome (``finish``): response,
ERROR, timeout, CANCEL, client gone, backend gone. A REJECTED answer before any
response frame is replayed on another backend (``MAX_ATTEMPTS``), which is what makes
draining servers lose nothing.

Time: ``loop.time()`` (monotonic) is the pool's ``now``; picks are logged in epoch
seconds via a fixed offset. One periodic timer (``TICK_S``) ends timeouts, runs
``Pool.tick`` (ejections, slow start, dynamic weights), checks keepalive lifetimes,
retires replaced connections and flushes the picks log: no per-request timers.
A FIFO deadline queue suffices for timeouts because every request gets the same timeout,
so deadlines are appended in order. Measured per request (uvloop, 200k requests, this
VM): deque append + popleft 0.16 us, heapq push + pop 2.5 us, ``loop.call_at`` + cancel
5.8 us.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from balancer import checks
from balancer.backend import Backend, BackendConnection
from balancer.health import HealthConfig
from balancer.outbox import Outbox
from balancer.picklog import FLUSH_INTERVAL_S, PickLog
from balancer.pool import BackendSpec, Pool
from balancer.router import INTERACTIONS, REPLAYABLE, Stream
from balancer.strategies.base import Health, Outcome, RequestView, Strategy
from balancer.strategies.registry import make_strategy
from lblab.admission import MAX_CONNECTIONS, MAX_PENDING_SETUP, SETUP_TIMEOUT_S
from lblab.errors import ConfigError, RemoteProtocolError
from lblab.failures import KIND_BY_CODE, balancer_message, is_server_fault
from lblab.loadreport import LoadReport
from lblab.wire.codec import encode_frame
from lblab.wire.codes import (
    FLAG_COMPLETE,
    FLAG_FOLLOWS,
    FLAG_METADATA,
    MAX_FRAME_LENGTH,
    U32,
    ErrorCode,
    FrameType,
)
from lblab.wire.frames import Cancel, Error
from lblab.wire.metadata import LOAD_REPORT, ROUTING_KEY, find_entry

log = logging.getLogger("lblab.balancer")

TICK_S = 0.05
"""Resolution of timeouts, ejection ends and slow start steps (50 ms: 0.2 % of the
default 30 s timeout, and cheap: one callback per tick, not one timer per request)."""
MAX_ATTEMPTS = 3
"""Tries of one request across backends when they answer REJECTED (DESIGN "Reliability")."""
LIFETIME_CHECK_S = 0.25
"""How often connections are checked against their peers' max lifetime, and backends
for silence (``backend.HUNG_AFTER_S``)."""
NO_BACKEND_MESSAGE = balancer_message("rejected", "no backend available")
COMPACT_DEADLINES_AT = 4096
"""Deadline queue length above which ended streams are swept out of it."""

_pack_u32 = U32.pack_into
_RR = FrameType.REQUEST_RESPONSE
_FNF = FrameType.REQUEST_FNF
_CHANNEL = FrameType.REQUEST_CHANNEL
_PAYLOAD = FrameType.PAYLOAD
_REQUEST_N = FrameType.REQUEST_N
_CANCEL = FrameType.CANCEL
_ERROR = FrameType.ERROR


@dataclass(frozen=True, slots=True)
class BackendAddress:
    id: str
    host: str
    port: int
    weight: float = 1.0

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


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
    picks: Path | None = None
    request_timeout_s: float = 30.0
    max_frame_bytes: int = MAX_FRAME_LENGTH
    seed: int | None = None
    setup_timeout_s: float = SETUP_TIMEOUT_S
    max_connections: int = MAX_CONNECTIONS
    max_pending_setup: int = MAX_PENDING_SETUP
    health: HealthConfig = field(default_factory=HealthConfig)
    """Passive ejection, slow start and panic (``balancer/health.py``)."""

    def __post_init__(self) -> None:
        ids = [b.id for b in self.backends]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"backend ids must be unique, got {', '.join(ids)}")
        if self.admin_port is not None:
            checks.check_admin_bind(self.admin_host, self.admin_token)
        own_ports = [p for p in (self.port, self.agent_port, self.admin_port) if p]
        for b in self.backends:
            checks.check_backend_id(b.id)
            checks.check_host(b.host, f"--backend {b.id}")
            if checks.self_loop(b.host, b.port, own_ports):
                raise ConfigError(
                    f"--backend {b.id}={b.address} is this balancer's own port: requests "
                    "would loop through it; give a server's address"
                )
        if not 0 < self.request_timeout_s <= 3600:
            raise ConfigError(
                f"--request-timeout must be in (0, 3600] seconds, not {self.request_timeout_s}"
            )
        if not 64 <= self.max_frame_bytes <= MAX_FRAME_LENGTH:
            raise ConfigError(
                f"--max-frame-bytes must be in 64..{MAX_FRAME_LENGTH} (the 24-bit length "
                f"prefix), not {self.max_frame_bytes}"
            )


class BalancerNode:
    """Owns the pool, the strategy, every connection and the periodic timer."""

    def __init__(self, config: NodeConfig, loop: asyncio.AbstractEventLoop) -> None:
        self.config = config
        self.loop = loop
        self.rng = random.Random(config.seed)
        self.jitter = random.Random()
        """Reconnect jitter; kept apart so it does not shift the strategy's seeded draws."""
        self.weights = {b.id: b.weight for b in config.backends}
        self.strategy: Strategy = make_strategy(
            config.strategy, config.strategy_options, rng=self.rng, weights=self.weights
        )
        self.strategy_options: dict[str, str] = dict(config.strategy_options)
        now = loop.time()
        self.pool = Pool(
            [BackendSpec(b.id, b.weight) for b in config.backends],
            self.strategy,
            health=config.health,
            now=now,
        )
        self.outbox = Outbox(loop)
        self.backends: dict[str, Backend] = {}
        for b in config.backends:
            self.backends[b.id] = Backend(self, b, in_pool_up=True)
        self.clients: set[Any] = set()
        self.deadlines: deque[Stream] = deque()
        self.timeout_s = config.request_timeout_s
        self.epoch_offset = time.time() - now
        self.picklog = PickLog(config.picks) if config.picks else None
        self.request_seq = 0
        self.retiring: list[BackendConnection] = []
        self.servers: list[asyncio.Server] = []
        self.stats = {"protocol_errors": 0, "rejected_no_backend": 0, "replays": 0, "timeouts": 0}
        self._apply_strategy_flags()
        self._tick_handle: asyncio.TimerHandle | None = None
        self._next_lifetime_check = now
        self._next_flush = now + FLUSH_INTERVAL_S

    def _apply_strategy_flags(self) -> None:
        s = self.strategy
        self.uses_routing_key = bool(getattr(s, "uses_routing_key", False))
        self.uses_response_reports = bool(getattr(s, "uses_response_reports", False))
        self.uses_push_reports = bool(getattr(s, "uses_push_reports", False))
        self.uses_leases = bool(getattr(s, "uses_leases", False))

    def setup_wants(self) -> tuple[tuple[str, ...], bool]:
        """Report kinds and the LEASE flag the current strategy needs in backend SETUPs."""
        reports = tuple(
            kind
            for kind, wanted in (
                ("response", self.uses_response_reports),
                ("push", self.uses_push_reports),
            )
            if wanted
        )
        return reports, self.uses_leases

    # ------------------------------------------------------------ lifecycle

    async def start(self, connect_timeout: float = 5.0) -> None:
        """Listen, connect every backend (waiting up to ``connect_timeout`` for the first
        attempts, so early requests are not refused), start the periodic timer."""
        from balancer.admin import start_admin
        from balancer.agent_listener import start_agent_listener
        from balancer.frontend import ClientConnection

        waits = [b.start() for b in self.backends.values()]
        if waits:
            await asyncio.wait_for(asyncio.gather(*waits), connect_timeout)
        host, admin_host = self.config.host, self.config.admin_host
        listeners = [
            (
                "--port",
                self.config.port,
                lambda p: self.loop.create_server(lambda: ClientConnection(self), host, p),
            ),
            ("--agent-port", self.config.agent_port, lambda p: start_agent_listener(self, host, p)),
            ("--admin-port", self.config.admin_port, lambda p: start_admin(self, admin_host, p)),
        ]
        for flag, port, listen in listeners:
            if port is None:
                continue
            try:
                self.servers.append(await listen(port))
            except OSError as exc:
                raise ConfigError(f"{flag} {port}: cannot listen: {exc}") from exc
        self._tick_handle = self.loop.call_later(TICK_S, self._tick)

    def ports(self) -> dict[str, int | None]:
        names = ["port"]
        if self.config.agent_port is not None:
            names.append("agent_port")
        if self.config.admin_port is not None:
            names.append("admin_port")
        out: dict[str, int | None] = {"port": None, "agent_port": None, "admin_port": None}
        for name, server in zip(names, self.servers, strict=True):
            out[name] = server.sockets[0].getsockname()[1]
        return out

    async def close(self, grace_s: float = 2.0) -> None:
        """Stop accepting, let in-flight streams finish for up to ``grace_s``, then close all."""
        for server in self.servers:
            server.close()
        deadline = self.loop.time() + grace_s
        while any(c.streams for c in self.clients) and self.loop.time() < deadline:
            await asyncio.sleep(TICK_S)
        if self._tick_handle is not None:
            self._tick_handle.cancel()
        for client in list(self.clients):
            client.close()
        for backend in self.backends.values():
            backend.stop()
        if self.picklog is not None:
            self.picklog.close()

    # ------------------------------------------------------------ client side

    def open_stream(
        self, client: Any, pos: int, length: int, sid: int, frame_type: int, flags: int
    ) -> bool:
        """A client's REQUEST_* frame: pick a backend and forward it (the hot path)."""
        if sid in client.streams:
            client.protocol_error(
                RemoteProtocolError(f"stream id {sid} reused while that stream is still live")
            )
            return False
        now = self.loop.time()
        key = None
        if self.uses_routing_key and flags & FLAG_METADATA and client.composite_metadata:
            key = self._routing_key(client.buf, pos, length, frame_type)
        self.request_seq += 1
        request = RequestView(
            request_id=self.request_seq,
            interaction=INTERACTIONS[frame_type],
            package_bytes=length,
            routing_key=key,
            client_address=client.address,
        )
        stream = Stream(client, sid, frame_type, request, now, now + self.timeout_s)
        follows = flags & FLAG_FOLLOWS
        if frame_type == _CHANNEL:
            stream.client_open = bool(follows or not flags & FLAG_COMPLETE)
        else:
            stream.client_open = bool(follows)
        frame = client.buf[pos : pos + 3 + length]
        if not self._dispatch(stream, now):
            self.stats["rejected_no_backend"] += 1
            if frame_type != _FNF:
                client.send_error(sid, ErrorCode.REJECTED, NO_BACKEND_MESSAGE)
            if follows:
                # Swallow the remaining fragments of a request nobody will take.
                stream.done = True
                client.streams[sid] = stream
            return True
        _pack_u32(frame, 3, stream.backend_sid)
        stream.backend.write(frame, client)
        stream.keep(frame)
        if frame_type == _FNF and not follows:
            self.finish(stream, True, None)
            return True
        client.streams[sid] = stream
        self.deadlines.append(stream)
        return True

    def _dispatch(self, stream: Stream, now: float) -> bool:
        """Pick a backend for ``stream`` and register it there; False when none is eligible."""
        view = self.pool.pick(stream.request, now)
        if view is None:
            return False
        backend = self.backends[view.id]
        conn = backend.conn
        if conn is None:  # pool and connection disagree for a moment: treat as down
            backend.mark_down()
            return self._dispatch(stream, now)
        if self.picklog is not None:
            self.picklog.record(now + self.epoch_offset, view.id, view.inflight, self.strategy.name)
        bsid = conn.ids.allocate(conn.streams)
        stream.backend = conn
        stream.backend_sid = bsid
        stream.view = view
        conn.streams[bsid] = stream
        if stream.frame_type != _FNF:
            self.pool.dispatch(view, stream.request, now)
        return True

    def client_stream_frame(
        self, client: Any, pos: int, length: int, sid: int, frame_type: int, flags: int
    ) -> bool:
        """PAYLOAD / REQUEST_N / CANCEL / ERROR from a client: follow the stream to its backend."""
        stream = client.streams.get(sid)
        if stream is None:
            return True  # late frame of an ended stream
        if stream.done:  # fragments of a request that was refused
            if not flags & FLAG_FOLLOWS or frame_type != _PAYLOAD:
                del client.streams[sid]
            return True
        frame = client.buf[pos : pos + 3 + length]
        _pack_u32(frame, 3, stream.backend_sid)
        stream.backend.write(frame, client)
        if frame_type == _PAYLOAD:
            if stream.latency_ms is None:
                stream.keep(frame)
            if not flags & FLAG_FOLLOWS:
                if stream.frame_type == _CHANNEL:
                    if flags & FLAG_COMPLETE:
                        stream.client_open = False
                        if not stream.backend_open:
                            self.finish(stream, True, None)
                elif stream.client_open:
                    stream.client_open = False
                    if stream.frame_type == _FNF:
                        self.finish(stream, True, None)
        elif frame_type in (_CANCEL, _ERROR):  # ERROR ends a channel both ways
            self.finish(stream, True, "canceled")
        return True

    def client_gone(self, client: Any) -> None:
        """A client connection closed: CANCEL its backend streams, account each once."""
        self.clients.discard(client)
        for stream in list(client.streams.values()):
            if not stream.done and stream.backend is not None:
                stream.backend.send_cancel(stream.backend_sid)
            self.finish(stream, True, "canceled")
        client.streams.clear()

    # ------------------------------------------------------------ backend side

    def backend_error(
        self, stream: Stream, conn: BackendConnection, code: int, frame: bytearray
    ) -> None:
        """An ERROR frame from a backend on ``stream`` (``frame`` already holds the client id)."""
        if code == ErrorCode.REJECTED and self._replayable(stream) and self._replay(stream):
            return
        stream.client.send(frame)
        # The message starts after prefix (3), stream id (4), type/flags (2) and code (4).
        fault = is_server_fault(code, frame, 13)
        self.finish(stream, False, KIND_BY_CODE.get(code, "other"), server_fault=fault)

    @staticmethod
    def _replayable(stream: Stream) -> bool:
        """Not answered yet, fully received, of a replayable kind, tries left."""
        return (
            stream.latency_ms is None
            and stream.saved is not None
            and stream.frame_type in REPLAYABLE
            and not stream.client_open
            and stream.request.attempt + 1 < MAX_ATTEMPTS
        )

    def _replay(self, stream: Stream) -> bool:
        """Send a REJECTED request to another backend; False if none is eligible."""
        now = self.loop.time()
        view, conn = stream.view, stream.backend
        assert view is not None and conn is not None
        conn.streams.pop(stream.backend_sid, None)
        self.pool.complete(
            view,
            stream.request,
            Outcome(ok=False, latency_ms=(now - stream.t0) * 1000.0, error_kind="rejected"),
            now,
        )
        request = stream.request
        stream.request = replace(
            request, exclude=request.exclude | {view.id}, attempt=request.attempt + 1
        )
        stream.view = None
        stream.backend = None
        if not self._dispatch(stream, now):
            return False
        self.stats["replays"] += 1
        saved = stream.saved
        assert saved is not None
        new_sid = stream.backend_sid
        for frame in saved:
            _pack_u32(frame, 3, new_sid)
            stream.backend.write(frame, stream.client)
        return True

    def finish(
        self, stream: Stream, ok: bool, error_kind: str | None, *, server_fault: bool = False
    ) -> None:
        """End a stream: drop both mappings and account the outcome exactly once.

        ``error_kind`` "canceled" (the client cancelled or left) is recorded as a
        success for the backend: it was not the backend's failure, and counting it
        would eject backends that serve long streams clients cancel by design.
        Fire-and-forget is picked (and counted as a pick) but never dispatched to the
        pool's in-flight accounting: it has no answer, so it has no in-flight time or
        latency, and a 0 ms "completion" would drag latency estimates down.
        """
        if stream.done:
            return
        stream.done = True
        stream.client.streams.pop(stream.client_sid, None)
        conn = stream.backend
        if conn is not None:
            conn.streams.pop(stream.backend_sid, None)
        stream.saved = None
        view = stream.view
        if view is not None and stream.frame_type != _FNF:
            now = self.loop.time()
            latency = stream.latency_ms
            if latency is None:
                latency = (now - stream.t0) * 1000.0
            if error_kind == "canceled":
                error_kind = None
            outcome = Outcome(
                ok=ok, latency_ms=latency, error_kind=error_kind, server_fault=server_fault
            )
            self.pool.complete(view, stream.request, outcome, now)
        if conn is not None and conn.retired and not conn.streams:
            conn.close()

    def backend_lost(self, backend: Backend, conn: BackendConnection, reason: str) -> None:
        """A backend connection closed: fail its streams with an error naming the backend."""
        message = balancer_message("connection", f"backend {backend.id} connection lost: {reason}")
        for stream in list(conn.streams.values()):
            # After CONNECTION_CLOSE the backend has finished every stream it accepted
            # (spec: it waits for them), so an unanswered request was never processed.
            if conn.draining and self._replayable(stream) and self._replay(stream):
                continue
            if not stream.done:
                stream.client.send_error(stream.client_sid, ErrorCode.APPLICATION_ERROR, message)
            self.finish(stream, False, "connection")
        conn.streams.clear()

    def backend_up(self, backend: Backend) -> None:
        if backend.id in self.backends:
            self.pool.set_state(backend.id, Health.UP, self.loop.time())

    def backend_down(self, backend: Backend) -> None:
        self.pool.set_state(backend.id, Health.DOWN, self.loop.time())

    def backend_hung(self, backend: Backend, silent_s: float) -> None:
        """A connected backend stopped answering our KEEPALIVEs: eject it and hold it
        DOWN until it answers again (``backend_answering``)."""
        if backend.id not in self.backends:
            return
        log.warning("backend %s silent for %.1f s: ejected as hung", backend.id, silent_s)
        now = self.loop.time()
        self.pool.set_state(backend.id, Health.EJECTED, now)
        self.pool.set_state(backend.id, Health.DOWN, now)

    def backend_answering(self, backend: Backend, now: float) -> None:
        """A hung backend answers again: UP once its ejection has run out."""
        if backend.id in self.backends:
            log.warning("backend %s answers again", backend.id)
            self.pool.set_state(backend.id, Health.UP, now)

    def backend_draining(self, backend: Backend) -> None:
        """The backend sent CONNECTION_CLOSE: no new requests, in-flight ones finish."""
        if backend.id in self.backends:
            self.pool.set_state(backend.id, Health.DRAINING, self.loop.time())

    def response_report(self, backend_id: str, metadata: bytes | memoryview) -> None:
        """Response metadata of a backend, parsed only when the strategy uses the reports."""
        try:
            raw = find_entry(metadata, LOAD_REPORT)
            if raw is not None:
                self.pool.report(backend_id, LoadReport.from_json(raw), self.loop.time())
        except RemoteProtocolError as exc:
            log.debug("ignoring a malformed load report from %s: %s", backend_id, exc)

    def push_report(self, backend_id: str, metadata: bytes | memoryview) -> None:
        if self.uses_push_reports:
            self.response_report(backend_id, metadata)

    def agent_report(self, report: LoadReport) -> bool:
        """A LoadReport from an agent; False if it names no backend of the pool."""
        if report.server not in self.backends:
            return False
        self.pool.report(report.server, report, self.loop.time())
        return True

    # ------------------------------------------------------------ periodic work

    def _tick(self) -> None:
        now = self.loop.time()
        try:
            self._expire(now)
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

    def _expire(self, now: float) -> None:
        deadlines = self.deadlines
        if len(deadlines) > COMPACT_DEADLINES_AT and len(deadlines) > 4 * self.pool.outstanding:
            # Ended streams wait in the queue until their deadline; at 10k req/s and a 30 s
            # timeout that is 300k records, so drop the ended ones now and then (O(n), rare).
            deadlines = self.deadlines = deque(s for s in deadlines if not s.done)
        while deadlines and deadlines[0].deadline <= now:
            stream = deadlines.popleft()
            if stream.done or (stream.latency_ms is not None and stream.frame_type != _RR):
                continue  # ended, or a stream/channel that already answered
            self.stats["timeouts"] += 1
            backend_id = stream.view.id if stream.view is not None else "?"
            stream.client.send_error(
                stream.client_sid,
                ErrorCode.APPLICATION_ERROR,
                balancer_message(
                    "timeout",
                    f"timed out after {self.timeout_s:g} s at the balancer (backend {backend_id})",
                ),
            )
            if stream.backend is not None:
                stream.backend.send_cancel(stream.backend_sid)
            self.finish(stream, False, "timeout")

    def _check_lifetimes(self, now: float) -> None:
        for client in list(self.clients):
            client.check_lifetime(now)
        for backend in self.backends.values():
            backend.check_lifetime(now)
        for conn in list(self.retiring):
            if conn.closed:
                self.retiring.remove(conn)
            elif not conn.streams or now > conn.retired_at + self.timeout_s:
                conn.close()

    # ------------------------------------------------------------ runtime changes (admin)

    def set_strategy(self, name: str, options: Mapping[str, str] | None = None) -> None:
        """Swap the strategy (fresh state); re-SETUP backends if it needs other signals."""
        strategy: Strategy = make_strategy(name, options, rng=self.rng, weights=self.weights)
        before = self.setup_wants()
        self.strategy = strategy
        self.strategy_options = dict(options or {})
        self._apply_strategy_flags()
        self.pool.set_strategy(strategy, self.loop.time())
        if self.setup_wants() != before:
            for backend in self.backends.values():
                backend.resetup()

    def add_backend(self, backend_id: str, host: str, port: int, weight: float = 1.0) -> None:
        if backend_id in self.backends:
            raise ConfigError(f"backend {backend_id!r} is already in the pool")
        checks.check_backend_id(backend_id)
        checks.check_host(host, f"backend {backend_id}")
        if not 0 < weight < math.inf:
            raise ConfigError(f"backend weight must be a finite number > 0, not {weight}")
        now = self.loop.time()
        address = BackendAddress(backend_id, host, port, weight)
        self.weights[backend_id] = weight
        self.pool.add(BackendSpec(backend_id, weight), now)
        self.pool.set_state(backend_id, Health.DOWN, now)
        backend = Backend(self, address, in_pool_up=False)
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
        self.pool.remove(backend_id, self.loop.time())
        backend.retire()

    # ------------------------------------------------------------ helpers

    @staticmethod
    def _routing_key(buf: bytearray, pos: int, length: int, frame_type: int) -> bytes | None:
        """The routing-key entry of a request's composite metadata (only for hash strategies)."""
        start = pos + 9
        if frame_type in (FrameType.REQUEST_STREAM, FrameType.REQUEST_CHANNEL):
            start += 4
        mlen = (buf[start] << 16) | (buf[start + 1] << 8) | buf[start + 2]
        end = min(start + 3 + mlen, pos + 3 + length)
        try:
            return find_entry(memoryview(buf)[start + 3 : end], ROUTING_KEY)
        except RemoteProtocolError:
            return None

    def connection_error_frame(self, code: int, message: str) -> bytes:
        self.stats["protocol_errors"] += 1
        return encode_frame(Error(stream_id=0, error_code=code, message=message))

    @staticmethod
    def cancel_frame(sid: int) -> bytes:
        return encode_frame(Cancel(stream_id=sid))
