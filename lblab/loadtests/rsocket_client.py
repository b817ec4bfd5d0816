"""A small blocking RSocket client on plain sockets, for load generation.

Locust runs on gevent, and an asyncio RSocket client inside it is fragile (docs/FIELD-NOTES.md,
"Locust"); a blocking client on the stdlib ``socket`` module is patched by gevent into a
cooperative one, and outside Locust it is simply blocking. It speaks through
``lblab.wire``: one persistent connection whose rules (SETUP per the wire contract,
KEEPALIVEs answered and ours sent when due, the peer's max lifetime, stream ids) are
``lblab.wire.connection``'s, and request-response with a deadline.

Theory of operation: one request at a time per connection (the caller is one Locust
user, or one slot of the open-loop pool). ``request_response`` sends the frame, then reads
frames until the PAYLOAD or ERROR of its own stream id arrives or the deadline passes.
Frames of older stream ids (late answers to timed-out requests, which we CANCELled) are
dropped, so a timeout leaves the connection usable. Under gevent the deadline is kept by
one timer per process (``loadtests/deadlines.py``), outside it by the socket's timeout.
A lost connection is replaced on the next call, and so is one whose peer has been silent
beyond its max lifetime (checked before each request: the peer has closed it by then, so
failing a request on it would only be noise). The request bytes are built once per
(metadata, data) and only the stream id is patched per request. One Locust process with
lblab's records spends about 23 us of CPU per 100 B request (bench_loadgen).
"""

from __future__ import annotations

import socket
import time
from dataclasses import dataclass
from typing import Any, Final

from lblab.errors import ApplicationError, LblabError
from lblab.failures import classify_error
from lblab.wire.codec import NEED_DATA, encode_frame
from lblab.wire.codes import U32, ErrorCode
from lblab.wire.connection import Connection, ConnectionFailed, PeerClosed
from lblab.wire.frames import Cancel, Error, Payload, RequestResponse, Setup
from lblab.wire.metadata import APPLICATION_JSON, COMPOSITE_METADATA

# 64 KiB reads: 1 MB payloads are 2.4x faster than with 1 KiB reads
# (docs/FIELD-NOTES.md, "rsocket-py 0.4.20 pitfalls").
READ_SIZE: Final = 65536
KEEPALIVE_MS: Final = 20_000
# Generous, so a user with long think times is not dropped by the balancer.
MAX_LIFETIME_MS: Final = 120_000
DEFAULT_SETUP_DATA: Final = b'{"client": "lblab-loadtest"}'


class RequestTimeout(LblabError):
    """No answer before the request's deadline (the stream was cancelled)."""


class ConnectionLost(LblabError):
    """The connection failed, was refused, or was closed by the peer."""


def classify_exception(exc: BaseException | None) -> tuple[str | None, str | None]:
    """The results contract's ``(error_kind, error_origin)`` for an exception raised by
    this client (``lblab/failures.py``); ``(None, None)`` for no exception."""
    if exc is None:
        return None, None
    if isinstance(exc, RequestTimeout):
        return "timeout", "client"
    if isinstance(exc, ConnectionLost | OSError):
        return "connection", "transport"
    if isinstance(exc, ApplicationError):
        return classify_error(exc.error_code, str(exc))
    return "other", "client"


@dataclass(frozen=True, slots=True)
class Response:
    data: bytes
    metadata: bytes | None


class RSocketClient:
    """One RSocket connection; ``request_response`` may be called again after any error."""

    __slots__ = (
        "_rsocket",
        "_sock",
        "_templates",
        "_watch",
        "connect_timeout",
        "host",
        "port",
        "setup_data",
    )

    def __init__(
        self,
        host: str,
        port: int,
        *,
        setup_data: bytes = DEFAULT_SETUP_DATA,
        connect_timeout: float = 5.0,
    ) -> None:
        self.host, self.port = host, port
        self.setup_data = setup_data
        self.connect_timeout = connect_timeout
        self._sock: socket.socket | None = None
        self._rsocket: Connection | None = None
        self._watch: Any = None
        """Under gevent, the hub's ``DeadlineWatch``: the socket then has no timeout."""
        # (metadata, data) -> frame bytes with stream id 1; bounded by the few distinct cells.
        self._templates: dict[tuple[bytes | None, bytes], bytes] = {}

    @property
    def connected(self) -> bool:
        return self._sock is not None

    def connect(self) -> None:
        """Open the TCP connection and send SETUP (RSocket does not acknowledge it)."""
        self.close()
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        except OSError as exc:
            raise ConnectionLost(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if hasattr(sock, "_wait"):  # a gevent socket: deadlines by the hub's one timer
            from lblab.loadtests.deadlines import deadline_watch

            sock.settimeout(None)
            self._watch = deadline_watch()
        self._sock = sock
        setup = Setup(
            keepalive_ms=KEEPALIVE_MS,
            max_lifetime_ms=MAX_LIFETIME_MS,
            metadata_mime=COMPOSITE_METADATA,
            data_mime=APPLICATION_JSON,
            data=self.setup_data,
        )
        self._rsocket = rsocket = Connection.connecting(setup, time.monotonic())
        self._send(rsocket.data_to_send())

    def close(self) -> None:
        self._rsocket = None
        if self._sock is not None:
            sock, self._sock = self._sock, None
            sock.close()

    def request_response(self, data: bytes, metadata: bytes | None, timeout: float) -> Response:
        """Send one request and wait for its answer, at most ``timeout`` seconds.

        Raises ``RequestTimeout``, ``ConnectionLost`` or ``ApplicationError`` (an ERROR
        frame on the stream; ``error_code`` says REJECTED, APPLICATION_ERROR, ...).
        """
        now = time.monotonic()
        deadline = now + timeout
        rsocket = self._rsocket
        if rsocket is None or rsocket.tick(now) is not None:
            self.connect()  # not connected yet, or the peer is silent beyond its lifetime
            rsocket = self._rsocket
            assert rsocket is not None
        stream_id = rsocket.next_stream_id()
        out = rsocket.data_to_send()  # our KEEPALIVE, when due
        watch = self._watch
        if watch is not None:
            watch.enter(deadline)
        try:
            self._send(out + self._request_bytes(stream_id, metadata, data))
            return self._await(stream_id, deadline)
        except RequestTimeout:
            if self._sock is not None:
                if watch is not None:  # the CANCEL gets as long as the request had
                    watch.enter(time.monotonic() + timeout)
                self._send(encode_frame(Cancel(stream_id=stream_id)))
            raise
        finally:
            if watch is not None:
                watch.leave()

    # ------------------------------------------------------------ internals

    def _request_bytes(self, stream_id: int, metadata: bytes | None, data: bytes) -> bytes:
        key = (metadata, data)
        template = self._templates.get(key)
        if template is None:
            if len(self._templates) > 64:
                self._templates.clear()
            template = encode_frame(RequestResponse(stream_id=1, metadata=metadata, data=data))
            self._templates[key] = template
        # Bytes 0..2 are the length prefix, 3..6 the stream id.
        return template[:3] + U32.pack(stream_id) + template[7:]

    def _send(self, data: bytes) -> None:
        sock = self._sock
        assert sock is not None
        try:
            # ``send`` first: gevent's ``sendall`` asks the kernel for the send buffer's
            # size (a ``getsockopt``) on every call; one ``send`` takes a request whole
            # unless the buffer is full (large packages), and ``sendall`` sends the rest.
            sent = sock.send(data)
            if sent < len(data):
                sock.sendall(memoryview(data)[sent:])
        except OSError as exc:
            self.close()
            raise ConnectionLost(f"send to {self.host}:{self.port} failed: {exc}") from exc

    def _await(self, stream_id: int, deadline: float) -> Response:
        rsocket = self._rsocket
        assert rsocket is not None
        sent_just_now = True
        while True:
            event = rsocket.next_event()
            if event is NEED_DATA:
                self._receive(rsocket, deadline, wait_first=sent_just_now)
                sent_just_now = False
                continue
            match event:
                case Payload(stream_id=sid) if sid == stream_id:
                    return Response(event.data, event.metadata)
                case Error(stream_id=sid) if sid == stream_id:
                    raise ApplicationError(event.message, event.error_code)
                case PeerClosed():
                    self.close()
                    raise ConnectionLost(
                        f"connection error from {self.host}:{self.port}: "
                        f"{_code_name(event.code)} {event.message}"
                    )
                case ConnectionFailed():
                    self._send(rsocket.data_to_send())  # our ERROR saying what was wrong
                    self.close()
                    raise ConnectionLost(
                        f"protocol error from {self.host}:{self.port}: {event.message}"
                    )
                # Anything else (late frames of cancelled streams, KEEPALIVE answers) is dropped.

    def _receive(self, rsocket: Connection, deadline: float, *, wait_first: bool) -> None:
        sock = self._sock
        assert sock is not None
        out = rsocket.data_to_send()  # KEEPALIVE answers, before we block
        if out:
            self._send(out)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RequestTimeout("no response before the deadline")
        gevent_socket = self._watch is not None  # set by ``connect`` for a gevent socket
        if not gevent_socket:
            sock.settimeout(remaining)
        try:
            if wait_first and gevent_socket:
                _wait_readable(sock)
            chunk = sock.recv(READ_SIZE)
        except TimeoutError:
            raise RequestTimeout("no response before the deadline") from None
        except OSError as exc:
            self.close()
            raise ConnectionLost(f"receive from {self.host}:{self.port} failed: {exc}") from exc
        if not chunk:
            self.close()
            raise ConnectionLost(f"{self.host}:{self.port} closed the connection")
        rsocket.receive_data(chunk)


def _wait_readable(sock: socket.socket) -> None:
    """Under gevent, wait on the socket's own read watcher (the socket has no timeout
    there: ``loadtests/deadlines.py`` ends the wait at the deadline) before the
    first ``recv`` after a send: gevent's ``recv`` tries the read first, and right after a
    send the answer is never there yet, so every request paid for a read failing with
    EAGAIN and the exception around it (with the ``send`` change in ``_send``, 20.4 -> 17.1
    us of CPU per request for ten gevent users against ``benchmarks/echo_server.py``).
    Later reads of the same answer try first, as gevent does: its rest is usually there. A
    stdlib socket's ``recv`` blocks instead, so only a gevent socket comes here. gevent is
    pinned; ``_wait`` and ``_read_event`` are its socket's own."""
    sock._wait(sock._read_event)  # type: ignore[attr-defined]


def _code_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"0x{code:x}"
