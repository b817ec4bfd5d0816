"""Backend side of the balancer: one persistent RSocket connection per backend.

``Backend`` is a pool member's connection manager: it connects, sends the balancer's
own SETUP (data ``application/json``, metadata composite, SETUP data
``{"client": "lblab-balancer", "reports": [...]}`` and the LEASE flag as the strategy
needs) and a KEEPALIVE, and counts the backend up only once it has answered (a TCP
accept alone proves nothing: a stopped process's kernel still accepts). It keeps the
connection alive with its own KEEPALIVEs, and on loss reconnects with jittered
exponential backoff (the pool eases the backend back in with slow start).

A hung backend (alive, connected, silent: SIGSTOP, a blocked event loop) is found by
its missing KEEPALIVE answers: silent for ``HUNG_AFTER_S`` it is ejected (counted, with
the pool's backoff) and held DOWN for as long as the silence lasts, so no ejection can
run out into a backend that still cannot answer; its in-flight requests end at
``--request-timeout``. Once it answers again it is UP when its ejection has run out,
and slow start eases it back in. Silent for ``SILENT_LOST_S`` its connection is
closed and reopened.

``BackendConnection`` walks the backend's frames: PAYLOAD and ERROR go back to the
client stream they answer (stream id rewritten in the copy); REQUEST_N and CANCEL (a
channel's responder side) too; KEEPALIVE is answered here and never forwarded; LEASE
sets the view's allowance; METADATA_PUSH carries pushed load reports; a stream-0
CONNECTION_CLOSE error means the backend drains. A frame on one of the balancer's own
probe streams (``probes``) goes to the router's ``Prober``, never to a client.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from time import monotonic
from typing import Final, cast

import orjson

from lblab.backoff import RECONNECT_BASE_S, RECONNECT_MAX_S, jittered_backoff
from lblab.balancer.health import HUNG_AFTER_S, SILENT_LOST_S
from lblab.balancer.outbox import RoutedConnection
from lblab.balancer.streams import ClientPort, ProbeStream, Stream
from lblab.balancer.wiring import Wiring
from lblab.errors import RemoteProtocolError
from lblab.wire.codec import encode_frame
from lblab.wire.codes import (
    FLAG_IGNORE,
    U32,
    ErrorCode,
    FrameType,
    misplaced_frame,
)
from lblab.wire.connection import Connection, Control
from lblab.wire.frames import Cancel, Error, Keepalive, Setup
from lblab.wire.metadata import APPLICATION_JSON, COMPOSITE_METADATA
from lblab.wire_asyncio import within

log = logging.getLogger("lblab.balancer.backend")

KEEPALIVE_MS: Final = 1_000
"""Our KEEPALIVE interval toward backends: one 9-byte frame a second per backend is
nothing, and it bounds how long a hung backend goes unnoticed."""
CONNECT_TIMEOUT_S: Final = 3.0
BACKEND_WRITE_HIGH_BYTES: Final = 4 * 1024 * 1024
"""Pause the clients feeding a backend once this much is queued toward it: 4 MiB holds
64 in-flight 64 KB requests or four 1 MB ones, so normal pipelining never pauses."""

_pack_u32: Final = U32.pack_into
_unpack_u32: Final = U32.unpack_from
_STREAM_FRAMES: Final = frozenset(
    (FrameType.PAYLOAD, FrameType.ERROR, FrameType.REQUEST_N, FrameType.CANCEL)
)
"""What a backend may send on a stream the balancer opened."""
_LIVENESS_FRAMES: Final = frozenset((FrameType.KEEPALIVE, FrameType.LEASE, FrameType.METADATA_PUSH))
"""Connection-level frames that show the backend accepted our SETUP and is serving."""


@dataclass(frozen=True, slots=True)
class BackendAddress:
    id: str
    host: str
    port: int
    weight: float = 1.0

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


class BackendConnection(RoutedConnection):
    __slots__ = (
        "answered",
        "backend",
        "backend_id",
        "blocked_clients",
        "draining",
        "ids",
        "paused",
        "probes",
        "retired",
        "retired_at",
        "streams",
        "wiring",
    )

    def __init__(self, backend: Backend) -> None:
        wiring = backend.wiring
        super().__init__(wiring.max_frame_bytes, wiring.outbox)
        self.backend = backend
        self.backend_id = backend.id
        self.wiring = wiring
        self.streams: dict[int, Stream] = {}
        self.probes: dict[int, ProbeStream] = {}
        reports, lease = wiring.events.setup_wants()
        setup = Setup(
            keepalive_ms=KEEPALIVE_MS,
            max_lifetime_ms=round(SILENT_LOST_S * 1000),
            metadata_mime=COMPOSITE_METADATA,
            data_mime=APPLICATION_JSON,
            data=orjson.dumps({"client": "lblab-balancer", "reports": list(reports)}),
            lease=lease,
        )
        self.rsocket = Connection.connecting(
            setup, monotonic(), max_frame_length=wiring.max_frame_bytes
        )
        self.rsocket.send(Keepalive(respond=True))  # its answer proves the backend serves
        self.ids = self.rsocket.ids
        self.paused = False
        self.blocked_clients: set[ClientPort] = set()
        self.draining = False
        self.retired = False
        self.retired_at = 0.0
        self.answered: asyncio.Future[bool] = wiring.loop.create_future()
        """True once the backend has answered our first KEEPALIVE; False if it closed first."""

    # ------------------------------------------------------------ asyncio hooks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport = cast(asyncio.Transport, transport)  # uvloop's: duck-typed
        transport.set_write_buffer_limits(high=BACKEND_WRITE_HIGH_BYTES)
        transport.write(self.rsocket.data_to_send())

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.rsocket.peer_gone()
        if not self.answered.done():
            self.answered.set_result(False)
        for client in self.blocked_clients:
            client.unblock(self)
        self.blocked_clients.clear()
        reason = str(exc) if exc else "closed by the backend"
        self.wiring.router.backend_lost(self, reason, monotonic())
        self.backend.connection_closed(self)

    def pause_writing(self) -> None:
        """The backend is not keeping up: stop reading from the clients that feed it."""
        self.paused = True
        for stream in self.streams.values():
            client = stream.client
            if client not in self.blocked_clients:
                self.blocked_clients.add(client)
                client.block(self)

    def resume_writing(self) -> None:
        self.paused = False
        for client in self.blocked_clients:
            client.unblock(self)
        self.blocked_clients.clear()

    # ------------------------------------------------------------ writes

    def write(self, frame: bytes | bytearray, client: ClientPort) -> None:
        """Forward a client's frame; a client writing into a paused backend is paused too."""
        self.send(frame)
        if self.paused and client not in self.blocked_clients:
            self.blocked_clients.add(client)
            client.block(self)

    def send_cancel(self, backend_sid: int) -> None:
        self.send(encode_frame(Cancel(stream_id=backend_sid)))

    # ------------------------------------------------------------ frames from the backend

    def on_frame(self, pos: int, length: int, sid: int, frame_type: int, flags: int) -> bool:
        if not sid:
            return self._control_frame(pos, length, frame_type, flags)
        stream = self.streams.get(sid)
        if stream is None:
            if sid in self.probes:
                self.wiring.router.prober.answer(
                    self, sid, bytes(self.mv[pos + 3 : pos + 3 + length]), monotonic()
                )
                return True
            if FrameType.REQUEST_RESPONSE <= frame_type <= FrameType.REQUEST_CHANNEL:
                return self._server_request(sid, frame_type)
            return True  # late frame of an ended stream: drop
        if frame_type not in _STREAM_FRAMES:
            if flags & FLAG_IGNORE:
                return True
            self.protocol_error(RemoteProtocolError(misplaced_frame(frame_type, sid)))
            return False
        frame = self.buf[pos : pos + 3 + length]
        _pack_u32(frame, 3, stream.client_sid)
        self.wiring.router.backend_frame(stream, frame, frame_type, flags, monotonic())
        return True

    def _control_frame(self, pos: int, length: int, frame_type: int, flags: int) -> bool:
        """Stream 0: the rules are the connection's (``lblab.wire.connection``)."""
        rsocket = self.rsocket
        verdict = rsocket.control_frame(self.buf, pos, length, 0, frame_type, flags)
        if verdict is Control.FAILED:
            self._failed()
            return False
        if verdict is Control.PEER_CLOSED:
            closed = rsocket.peer_closed
            assert closed is not None
            if closed.code == ErrorCode.CONNECTION_CLOSE:
                self.draining = True
                self.backend.draining(self)
                return True
            log.warning(
                "backend %s closed the connection: 0x%x %s",
                self.backend.id,
                closed.code,
                closed.message,
            )
            self.close()
            return False
        if verdict is Control.NONE:
            out = rsocket.data_to_send()  # a KEEPALIVE answer
            if out:
                self.send(out)
            return True
        if not self.answered.done():  # a KEEPALIVE answer, a LEASE or a push: it serves
            self.answered.set_result(True)
        if verdict is Control.LEASE:
            self.wiring.events.backend_lease(
                self.backend_id,
                rsocket.lease_ttl_ms / 1000.0,
                rsocket.lease_requests,
                monotonic(),
            )
        elif verdict is Control.METADATA_PUSH:
            self.wiring.events.push_report(
                self.backend_id, self.mv[pos + 9 : pos + 3 + length], monotonic()
            )
        return True

    def _server_request(self, sid: int, frame_type: int) -> bool:
        """The balancer routes client requests only; a backend's own request is refused."""
        if frame_type != FrameType.REQUEST_FNF:
            self.send(
                encode_frame(
                    Error(
                        stream_id=sid,
                        error_code=ErrorCode.REJECTED,
                        message="the balancer does not route requests from backends",
                    )
                )
            )
        return True

    def protocol_error(self, exc: RemoteProtocolError) -> None:
        self.rsocket.close(exc.error_code, str(exc))
        self._failed()

    def _failed(self) -> None:
        """The connection closed itself (``rsocket.failure``): send its ERROR, then close."""
        failure = self.rsocket.failure
        if failure is not None:
            log.warning("backend %s: %s", self.backend.id, failure.message)
        self.wiring.events.protocol_failure()
        self.send(self.rsocket.data_to_send())
        self.close()


class Backend:
    """A pool member: its address, its current connection and the reconnect loop."""

    __slots__ = (
        "_first",
        "_pool_up",
        "_task",
        "_wake",
        "address",
        "attempts",
        "conn",
        "hung",
        "id",
        "stopped",
        "wiring",
    )

    def __init__(self, wiring: Wiring, address: BackendAddress, *, in_pool_up: bool) -> None:
        self.wiring = wiring
        self.address = address
        self.id = address.id
        self.conn: BackendConnection | None = None
        self.attempts = 0
        self.stopped = False
        self.hung = False
        """Held DOWN because the current connection went silent (see the module doc)."""
        self._pool_up = in_pool_up
        """Whether the pool holds this backend UP (it does for startup backends)."""
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Future[None] | None = None
        self._first: asyncio.Future[None] = wiring.loop.create_future()

    def start(self) -> asyncio.Future[None]:
        """Start the connect loop; the returned future resolves after the first attempt."""
        self._task = self.wiring.loop.create_task(self._run(), name=f"backend-{self.id}")
        return self._first

    async def _run(self) -> None:
        loop = self.wiring.loop
        while not self.stopped:
            conn = await self._connect()
            if not self._first.done():
                self._first.set_result(None)
            if conn is None:
                if self.conn is None:  # (a failed re-SETUP leaves the old connection serving)
                    self.mark_down()
                await asyncio.sleep(self._backoff())
                continue
            self._adopt(conn)
            self._wake = loop.create_future()
            await self._wake
            # Read again after the wait (``connection_closed`` may have cleared it). The
            # assignment is in ``_adopt`` so that no narrowing of ``self.conn`` reaches
            # here: compiled, a narrowed read is a type check, and None would fail it.
            if self.conn is None and not self.stopped:
                await asyncio.sleep(self._backoff())

    def _adopt(self, conn: BackendConnection) -> None:
        """``conn`` serves from now on."""
        old, self.conn = self.conn, conn
        self.attempts = 0
        self.hung = False
        if old is not None:
            self._retire(old)  # a re-SETUP: the old connection finishes its streams
        elif not self._pool_up:
            self._pool_up = True
            self.wiring.events.backend_up(self.id)

    async def _connect(self) -> BackendConnection | None:
        """Connect, SETUP, and wait for the first KEEPALIVE answer, all within
        ``CONNECT_TIMEOUT_S``; None (and the reason logged) if any of it fails."""
        conn = BackendConnection(self)
        loop = self.wiring.loop
        deadline = monotonic() + CONNECT_TIMEOUT_S
        try:
            await within(
                CONNECT_TIMEOUT_S,
                loop.create_connection(lambda: conn, self.address.host, self.address.port),
            )
            answered = await within(max(deadline - monotonic(), 0.0), asyncio.shield(conn.answered))
            problem = None if answered else "closed the connection before answering"
        except TimeoutError:
            problem = f"no RSocket answer within {CONNECT_TIMEOUT_S:g} s"
        except OSError as exc:
            problem = str(exc)
        if problem is None:
            return conn
        conn.close()
        self.attempts += 1
        if self.attempts == 1 or self.attempts % 20 == 0:
            log.warning("backend %s at %s: %s", self.id, self.address.address, problem)
        return None

    def _backoff(self) -> float:
        return jittered_backoff(
            self.attempts, RECONNECT_BASE_S, RECONNECT_MAX_S, self.wiring.jitter
        )

    def _wake_up(self) -> None:
        if self._wake is not None and not self._wake.done():
            self._wake.set_result(None)

    def mark_down(self) -> None:
        self.wiring.events.backend_down(self.id)  # idempotent in the pool
        self._pool_up = False

    def connection_closed(self, conn: BackendConnection) -> None:
        """Called once the node has failed ``conn``'s streams."""
        if conn is self.conn:
            self.conn = None
            self.mark_down()
            self._wake_up()

    def draining(self, conn: BackendConnection) -> None:
        if conn is self.conn and self._pool_up:
            self.wiring.events.backend_draining(self.id)

    def check_lifetime(self, now: float) -> None:
        """The connection's deadlines (our KEEPALIVE, its max lifetime); hung after
        ``HUNG_AFTER_S`` of silence, answering again once it is heard."""
        conn = self.conn
        if conn is None or conn.closed:
            return
        conn.trim()
        rsocket = conn.rsocket
        if conn.active:
            conn.active = False
            rsocket.active = True
            if self.hung:
                self.hung = False
                if not conn.draining:
                    self.wiring.events.backend_answering(self.id, now)
        if rsocket.tick(now) is not None:
            log.warning(
                "backend %s silent for %.0f s: reconnecting", self.id, now - rsocket.last_received
            )
            conn.send(rsocket.data_to_send())
            conn.close()
            return
        if now - rsocket.last_received > HUNG_AFTER_S and not self.hung:
            self.hung = True
            self.wiring.events.backend_hung(self.id, now - rsocket.last_received)
        out = rsocket.data_to_send()  # our KEEPALIVE, when due
        if out:
            conn.send(out)

    def resetup(self) -> None:
        """Open a new connection whose SETUP asks for what the new strategy needs.

        Until it is up, the old connection keeps serving; then the old one takes no new
        streams and closes when its in-flight streams have ended.
        """
        if self.conn is not None:
            self._wake_up()

    def _retire(self, conn: BackendConnection) -> None:
        conn.retired = True
        conn.retired_at = monotonic()
        self.wiring.events.retiring(conn)
        if not conn.streams:
            conn.close()

    def retire(self) -> None:
        """Removed from the pool: no reconnects; close once its streams have ended."""
        self.stopped = True
        conn, self.conn = self.conn, None
        self._wake_up()
        if conn is not None and not conn.closed:
            self._retire(conn)

    def stop(self, message: str) -> None:
        """The node stops: no reconnects; the connection ends with CONNECTION_CLOSE."""
        self.stopped = True
        if self.conn is not None:
            self.conn.close_connection(message)
        if self._task is not None:
            self._task.cancel()
