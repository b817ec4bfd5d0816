"""Client side of the balancer: one ``ClientConnection`` per accepted RSocket connection.

SETUP handling (what the balancer does with a client's SETUP, docs/FIELD-NOTES.md,
"Frame-level forwarding: what bites"):
the first frame must be SETUP (RESUME gets REJECTED_RESUME, anything else
INVALID_SETUP), judged as soon as its 9 bytes of length prefix and header are in
(``check_first_frame``: a SETUP on stream 0 of at most 64 KiB), so junk is answered at
once rather than waited for. A connection starts with a 4 KiB buffer (grown only as
reads fill it, ``framing``); until its SETUP it
counts toward ``--max-pending-setup`` (the oldest such connection is closed when a new
one would exceed it) and must complete SETUP within ``--setup-timeout``;
``--max-connections`` caps the port (``lblab.admission``). A SETUP that arrives once
the balancer is stopping gets REJECTED_SETUP (its port is closed by then, so only a
connection accepted just before can send one). Version 1.x only (else
UNSUPPORTED_SETUP). The LEASE flag and a resume token get UNSUPPORTED_SETUP: leases
are per connection and the balancer issues none toward clients; it does not implement
resumption. The data MIME must be one the
backends speak or opaque bytes (``ACCEPTED_DATA_MIMES``), else UNSUPPORTED_SETUP naming
them, because payload bytes pass through untouched over backend connections whose SETUP
said ``application/json``. Any metadata MIME is accepted and its bytes pass through; only a
composite-metadata client has its routing key read for hash strategies. The SETUP
payload (e.g. credentials) is not forwarded: backend connections are shared, so it
could not be; the balancer has no authentication of its own. The client's keepalive
interval and max lifetime are honoured: its KEEPALIVEs are answered here (never
forwarded) and a client silent for longer than its max lifetime is closed.

Every stream frame a client sends is checked before it is forwarded (``frame_problem``:
lengths, flags, n values, metadata length within the frame, O(1) per frame); a
malformed one gets a connection ERROR on that client's connection only, so no client
can make a backend drop the connection all clients share. A PAYLOAD on a stream whose
request side the client already completed is dropped (a late frame), never forwarded.

METADATA_PUSH from a client is connection-level and has no single backend; the balancer
broadcasts it to every connected backend (a server-side cache flush or config push
should reach all servers). It is taken without its METADATA flag (rsocket-js 0.0.27
leaves it out) and forwarded with it.

A connection the balancer closes (a protocol error, a refused SETUP, a stop) ends its
streams at once but lingers up to ``LINGER_S``: shut for writing, what still arrives
read and dropped, so the peer gets our ERROR and a FIN, not a TCP reset
(``lblab.wire_asyncio.close_without_reset``).

Backpressure: the receive buffer holds at most one partial frame (bounded by
``--max-frame-bytes``). When responses pile up in the client's transport
(``pause_writing``) or a backend it feeds is not keeping up, the balancer stops reading
from this client until both clear; a client that lets ``CLIENT_MAX_PENDING_BYTES`` of
responses pile up unread is disconnected.
"""

from __future__ import annotations

import asyncio
import logging
from time import monotonic
from typing import Final, cast

from lblab.admission import Admission
from lblab.balancer.framing import frame_problem
from lblab.balancer.outbox import RoutedConnection
from lblab.balancer.streams import Stream
from lblab.balancer.wiring import Wiring
from lblab.errors import RemoteProtocolError
from lblab.wire.codec import encode_frame
from lblab.wire.codes import (
    FLAG_IGNORE,
    FLAG_METADATA,
    MAX_SETUP_LENGTH,
    ErrorCode,
    FrameType,
    misplaced_frame,
)
from lblab.wire.connection import Connection, Control, SetupPolicy
from lblab.wire.frames import Error
from lblab.wire.metadata import APPLICATION_JSON, COMPOSITE_METADATA
from lblab.wire_asyncio import close_without_reset

log = logging.getLogger("lblab.balancer.frontend")

ACCEPTED_DATA_MIMES: Final = (APPLICATION_JSON, "application/binary", "application/octet-stream")
"""Data MIME types a client may declare: what the backends' SETUP declares (docs/DESIGN.md,
"Wire contract"), or opaque bytes that claim no encoding. Payloads are forwarded
untouched, so a client declaring another encoding (CBOR, protobuf, text) would be
mislabelled. ``application/binary`` is rsocket-java's default and
``application/octet-stream`` the generic one: a client left at its library's defaults
works through the balancer as it does against a server, and a body that is not JSON
gets the server's APPLICATION_ERROR saying so."""
CLIENT_WRITE_HIGH_BYTES: Final = 2 * 1024 * 1024
"""Responses queued toward one client before we stop reading its requests: two 1 MB
responses, or ~200 10 KB ones (asyncio's default 64 KiB would pause on every 1 MB)."""
CLIENT_MAX_PENDING_BYTES: Final = 64 * 1024 * 1024
"""Responses queued toward one client before it is disconnected as not reading."""

CLIENT_BUFFER_BYTES: Final = 4096
"""A client connection's first receive buffer: a SETUP is ~100 bytes (up to 64 KiB grows
it), and busy clients grow it to ``INITIAL_BUFFER_BYTES`` within a few reads."""

_STREAM_FRAMES: Final = frozenset(
    (FrameType.PAYLOAD, FrameType.REQUEST_N, FrameType.CANCEL, FrameType.ERROR)
)
_FIRST_REQUEST: Final = int(FrameType.REQUEST_RESPONSE)
_LAST_REQUEST: Final = int(FrameType.REQUEST_CHANNEL)
KEEPALIVE_MIN_LENGTH: Final = 14
"""Header (6) and the 8-byte last received position."""


class ClientConnection(RoutedConnection):
    __slots__ = (
        "address",
        "admission",
        "blockers",
        "composite_metadata",
        "setup_done",
        "streams",
        "wiring",
    )

    def __init__(self, wiring: Wiring, admission: Admission, setup_timeout_s: float) -> None:
        super().__init__(wiring.max_frame_bytes, wiring.outbox, CLIENT_BUFFER_BYTES)
        self.wiring = wiring
        self.admission = admission
        policy = SetupPolicy(
            who="the balancer",
            setup_timeout_s=setup_timeout_s,
            data_mimes=ACCEPTED_DATA_MIMES,
            max_setup_bytes=min(MAX_SETUP_LENGTH, wiring.max_frame_bytes),
        )
        self.rsocket = Connection.accepting(
            policy, monotonic(), max_frame_length=wiring.max_frame_bytes
        )
        self.streams: dict[int, Stream] = {}
        self.address: str | None = None
        self.setup_done = False
        self.composite_metadata = False
        self.blockers: set[object] = set()

    # ------------------------------------------------------------ asyncio hooks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport = cast(asyncio.Transport, transport)  # uvloop's: duck-typed
        peer = transport.get_extra_info("peername")
        self.address = peer[0] if peer else None
        transport.set_write_buffer_limits(high=CLIENT_WRITE_HIGH_BYTES)
        if not self.admission.admit(self):
            return
        self.wiring.events.client_opened(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.rsocket.peer_gone()
        self.admission.gone(self)
        self.wiring.events.client_closed(self)

    def shut(self, transport: asyncio.Transport) -> None:
        """Close without a TCP reset (``close_without_reset``), and end this client's
        streams now rather than when the socket is gone; the node counts the client
        open until then (a stop waits for its last bytes to leave)."""
        close_without_reset(transport, self.wiring.loop, self.admission, self)
        self.wiring.router.client_gone(self, monotonic())

    def buffer_updated(self, nbytes: int) -> None:
        if not self.setup_done and not self.closed:
            start = self._start
            if self.rsocket.check_prefix(self.buf, start, self._end + nbytes - start):
                self._failed()
                return
        RoutedConnection.buffer_updated(self, nbytes)

    def pause_writing(self) -> None:
        self.block(self)

    def resume_writing(self) -> None:
        self.unblock(self)

    # ------------------------------------------------------------ flow control

    def block(self, reason: object) -> None:
        """Stop reading this client until every reason has been lifted."""
        if not self.blockers and not self.closed:
            self.transport.pause_reading()  # type: ignore[union-attr]
        self.blockers.add(reason)

    def unblock(self, reason: object) -> None:
        self.blockers.discard(reason)
        if not self.blockers and not self.closed:
            self.transport.resume_reading()  # type: ignore[union-attr]

    # ------------------------------------------------------------ writes

    def send_error(self, sid: int, code: int, message: str) -> None:
        self.send(encode_frame(Error(stream_id=sid, error_code=code, message=message)))

    def protocol_error(self, exc: RemoteProtocolError) -> None:
        """Answer with a connection-level ERROR and close this connection only."""
        self.rsocket.close(exc.error_code, str(exc))
        self._failed()

    def _failed(self) -> None:
        """The connection closed itself (``rsocket.failure``): send its ERROR, then close."""
        failure = self.rsocket.failure
        if failure is not None:
            log.info("client %s: %s (0x%03x)", self.address, failure.message, failure.code)
        if not self.closed and self.transport is not None:
            self.wiring.events.protocol_failure()
            self.send(self.rsocket.data_to_send())
            self.close()

    def refuse(self, message: str) -> None:
        """Turned away by the connection caps (``lblab.admission``)."""
        self.protocol_error(RemoteProtocolError(message, ErrorCode.REJECTED_SETUP))

    def check_lifetime(self, now: float) -> None:
        """The connection's deadlines (SETUP, max lifetime), and a client not reading."""
        self.trim()
        rsocket = self.rsocket
        if self.active:
            self.active = False
            rsocket.active = True
        if rsocket.tick(now) is not None:
            self._failed()
        elif (
            self.transport is not None
            and self.transport.get_write_buffer_size() > CLIENT_MAX_PENDING_BYTES
        ):
            self.protocol_error(
                RemoteProtocolError(
                    f"over {CLIENT_MAX_PENDING_BYTES} bytes of responses left unread"
                )
            )

    # ------------------------------------------------------------ frames from the client

    def on_frame(self, pos: int, length: int, sid: int, frame_type: int, flags: int) -> bool:
        if self.closed:
            return False
        if sid and self.setup_done:
            is_request = _FIRST_REQUEST <= frame_type <= _LAST_REQUEST
            if is_request or frame_type in _STREAM_FRAMES:
                problem = frame_problem(self.buf, pos, length, sid, frame_type, flags)
                if problem is not None:
                    self.protocol_error(RemoteProtocolError(problem))
                    return False
                router = self.wiring.router
                now = monotonic()
                if not is_request:
                    router.client_frame(self, self.buf, pos, length, sid, frame_type, flags, now)
                    return True
                try:
                    router.open_stream(self, self.buf, pos, length, sid, frame_type, flags, now)
                except RemoteProtocolError as exc:
                    self.protocol_error(exc)
                    return False
                return True
            if frame_type == FrameType.EXT and flags & FLAG_IGNORE:
                return True
            if frame_type > FrameType.RESUME_OK and flags & FLAG_IGNORE:
                return True  # an unknown type the sender marked ignorable
            self.protocol_error(RemoteProtocolError(misplaced_frame(frame_type, sid)))
            return False
        return self._control_frame(pos, length, sid, frame_type, flags)

    def _control_frame(self, pos: int, length: int, sid: int, frame_type: int, flags: int) -> bool:
        """Stream 0, and the SETUP: the rules are the connection's (``lblab.wire.connection``)."""
        rsocket = self.rsocket
        verdict = rsocket.control_frame(self.buf, pos, length, sid, frame_type, flags)
        if verdict is Control.NONE or verdict is Control.KEEPALIVE_ANSWER:
            out = rsocket.data_to_send()  # a KEEPALIVE answer
            if out:
                self.send(out)
            return True
        if verdict is Control.METADATA_PUSH:  # it goes to every backend
            frame = bytearray(self.buf[pos : pos + 3 + length])
            frame[7] |= FLAG_METADATA >> 8  # forwarded as the spec writes it (taken without)
            self.wiring.events.broadcast(bytes(frame), self)
            return True
        if verdict is Control.SETUP_ACCEPTED:
            if self.wiring.router.stopping:  # accepted before the port closed
                self.refuse("the balancer is stopping; connect to another")
                return False
            assert rsocket.setup is not None
            self.setup_done = True
            self.admission.setup_done(self)
            self.composite_metadata = rsocket.setup.metadata_mime == COMPOSITE_METADATA
            return True
        if verdict is Control.PEER_CLOSED:
            self.close()  # the client ends the connection (e.g. CONNECTION_CLOSE)
            return False
        self._failed()  # Control.FAILED; a LEASE (none negotiated) is one
        return False
