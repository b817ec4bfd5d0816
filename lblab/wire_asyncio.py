"""The asyncio adapter of a server-role ``lblab.wire.connection.Connection``.

``AcceptedConnection`` is the thin I/O shell every lblab port that accepts RSocket
connections through ``asyncio.Protocol`` shares (the server, the balancer's agent
port): it feeds received bytes to the connection, writes what the connection queues,
runs one timer for the connection's ``tick`` (SETUP deadline, max lifetime) and
applies the port's connection caps (``lblab.admission``). The rules themselves are
the connection's; a subclass only handles stream frames (``on_frame``) and the
accepted SETUP (``on_setup``).

``within`` is the one deadline every lblab task puts on an await (a connect, a SETUP
answer, a wait for a stop): unlike ``asyncio.wait_for`` on Python 3.11 it never
swallows the task's own cancellation.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Final, TypeVar

from lblab.admission import Admission
from lblab.errors import RemoteProtocolError
from lblab.wire.codec import NEED_DATA
from lblab.wire.codes import MAX_FRAME_LENGTH, ErrorCode
from lblab.wire.connection import (
    Connection,
    ConnectionFailed,
    Event,
    PeerClosed,
    SetupAccepted,
    SetupPolicy,
)
from lblab.wire.frames import Frame, Setup

log = logging.getLogger(__name__)

T = TypeVar("T")

LINGER_S: Final = 1.0
"""How long a connection we closed goes on reading (and dropping) what its peer sends,
and its last bytes have to leave: a peer that reads answers the ERROR and FIN with its
own close within a round trip (milliseconds here); the bound is for one that does not,
and keeps what a flood of such peers holds to a second's worth of sockets."""


def close_without_reset(
    transport: asyncio.Transport,
    loop: asyncio.AbstractEventLoop,
    admission: Admission,
    conn: object,
) -> None:
    """Close ``transport`` once what is queued has left, with a FIN rather than a reset.

    A socket closed with unread bytes in its receive queue, or that receives bytes after,
    makes the kernel answer with a TCP reset. A peer that sent a request right behind a
    SETUP we refuse then gets ECONNRESET with our ERROR, and a client library may fail on
    that instead of reading the ERROR (rsocket-js 1.0 dies on it unhandled). So our side
    is shut for writing once the queue drains, what still arrives is read and dropped, and
    the transport closes when the peer closes its side, or is aborted ``LINGER_S`` after
    (with whatever a peer that does not read left queued).

    Only a connection the port's caps count (``Admission.open``) lingers, and it leaves
    the caps' pending-SETUP queue at once: a connection the caps refused closes at once,
    so a flood holds no more sockets than the caps allow.
    """
    if conn not in admission.open or not transport.can_write_eof():
        transport.close()
        return
    admission.closing(conn)
    transport.write_eof()
    if not transport.is_reading():  # paused for backpressure: what arrives must be drained
        transport.resume_reading()
    loop.call_later(LINGER_S, transport.abort)  # a no-op once the transport is gone


async def within(timeout_s: float, awaitable: Awaitable[T]) -> T:
    """``await awaitable``, raising ``TimeoutError`` after ``timeout_s`` seconds.

    Use this, not ``asyncio.wait_for``: on Python 3.11 ``wait_for`` runs the awaitable
    as a second task, and when its own task is cancelled just as that inner task
    finishes it returns the inner result, or raises the inner error, instead of
    ``CancelledError`` (CPython gh-86296; 3.12 rebuilt ``wait_for`` on
    ``asyncio.timeout``). A reconnect loop that catches the connect error then goes on
    as if never cancelled, and whoever awaits it waits forever: 117 of 400 seeded
    random cancels of the agent's link were lost so
    (``tests/integration/test_cancel_race.py``).
    ``asyncio.timeout`` awaits in the calling task and counts cancellations
    (``Task.cancelling``), so a cancel from outside always ends the await as
    ``CancelledError``, even when it coincides with the deadline."""
    async with asyncio.timeout(timeout_s):
        return await awaitable


class AcceptedConnection(asyncio.Protocol):
    """One accepted connection: bytes in and out, the tick timer, the caps."""

    def __init__(
        self,
        policy: SetupPolicy,
        admission: Admission,
        loop: asyncio.AbstractEventLoop,
        *,
        max_frame_length: int = MAX_FRAME_LENGTH,
    ) -> None:
        self.loop = loop
        self.who = policy.who
        self.admission = admission
        self.rsocket = Connection.accepting(policy, loop.time(), max_frame_length=max_frame_length)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self._tick_timer: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------ for subclasses

    def on_open(self) -> None:
        """The caps let the connection in (before its SETUP)."""

    def on_setup(self, setup: Setup) -> None:
        """The policy accepted ``setup``."""

    def on_frame(self, frame: Event | Frame) -> None:
        """A stream frame, or an event the connection leaves to the endpoint (KEEPALIVE
        answers, METADATA_PUSH). May raise ``RemoteProtocolError`` to end the connection."""

    def on_close(self) -> None:
        """We closed the connection (``close_with_error``): end its work now; its socket
        may linger (``close_without_reset``) until ``on_lost``."""

    def on_lost(self) -> None:
        """The transport is gone (after ``closed`` is set)."""

    # ------------------------------------------------------------ asyncio hooks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # uvloop's is no asyncio.Transport subclass
        if self.admission.admit(self):
            self.on_open()
            self._tick_timer = self.loop.call_at(self.rsocket.next_tick_at, self._tick)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.rsocket.peer_gone()
        if self._tick_timer is not None:
            self._tick_timer.cancel()
        self.admission.gone(self)
        self.on_lost()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        rsocket = self.rsocket
        rsocket.receive_data(data)
        try:
            while not self.closed:
                event = rsocket.next_event()
                if event is NEED_DATA:
                    break
                match event:
                    case SetupAccepted():
                        self.admission.setup_done(self)
                        if self._tick_timer is not None:  # from the SETUP deadline to lifetime
                            self._tick_timer.cancel()
                        self._tick()
                        self.on_setup(event.setup)
                    case ConnectionFailed():
                        self.close_with_error(event.code, event.message)
                    case PeerClosed():
                        log.info("peer closed the connection: 0x%x %s", event.code, event.message)
                        self.closed = True
                        self.transport.close()  # type: ignore[union-attr]
                    case _:
                        self.on_frame(event)  # type: ignore[arg-type]
        except RemoteProtocolError as exc:  # a rule of the endpoint's own
            self.close_with_error(exc.error_code, str(exc))
        self.flush()

    # ------------------------------------------------------------ writing

    def flush(self) -> None:
        """Write what the connection queued (KEEPALIVE answers, its closing ERROR)."""
        out = self.rsocket.data_to_send()
        if out and self.transport is not None:
            self.transport.write(out)

    def close_with_error(self, code: int, message: str, *, logged: bool = True) -> None:
        """End the connection with a connection ERROR of ``code``; ``logged=False`` for
        an endpoint that logs the refusal itself (throttled)."""
        if self.closed:
            return
        if logged:
            log.warning("%s closes a connection: %s", self.who, message)
        self.rsocket.close(code, message)
        self.flush()
        self.closed = True
        if self.transport is not None:
            close_without_reset(self.transport, self.loop, self.admission, self)
        self.on_close()

    def refuse(self, message: str) -> None:
        """Turned away by the connection caps (``lblab.admission``)."""
        self.close_with_error(ErrorCode.REJECTED_SETUP, message)

    def _tick(self) -> None:
        self._tick_timer = None
        if self.closed:
            return
        failed = self.rsocket.tick(self.loop.time())
        if failed is not None:
            self.close_with_error(failed.code, failed.message)
            return
        self.flush()
        self._tick_timer = self.loop.call_at(self.rsocket.next_tick_at, self._tick)
