"""Write batching: one system call per destination per loop iteration, not one per frame.

uvloop 0.23's ``transport.write`` sends at once when nothing is queued (a ``send`` per
call), and on these VMs a loopback ``send`` costs 20-60 us, far more than forwarding a
frame in Python (~2 us, docs/FIELD-NOTES.md, "Speeds"). So frames are not written as they are routed:
``RoutedConnection.send`` appends them to the destination's ``out`` list, and
``Outbox.flush`` hands each destination its list with one ``writelines`` (one
``writev``). The flush is scheduled with ``call_soon`` when the first frame is queued,
so it runs once the event loop has handled every connection that was readable: frames
from several clients' reads bound for one backend leave in one system call (at 64 in
flight over 3 client connections, strace counted 0.25 ``writev`` per request against
0.41 with a flush per read), for the price of one ``call_soon`` per iteration.
"""

from __future__ import annotations

import asyncio

from lblab.balancer.framing import INITIAL_BUFFER_BYTES, FrameProtocol
from lblab.wire.codes import ErrorCode
from lblab.wire.connection import Connection


class Outbox:
    __slots__ = ("dirty", "loop", "scheduled")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.dirty: list[RoutedConnection] = []
        self.scheduled = False

    def mark(self, conn: RoutedConnection) -> None:
        self.dirty.append(conn)
        if not self.scheduled:
            self.scheduled = True
            self.loop.call_soon(self.flush)

    def flush(self) -> None:
        self.scheduled = False
        dirty = self.dirty
        if not dirty:
            return
        self.dirty = []
        for conn in dirty:
            conn.flush_out()


class RoutedConnection(FrameProtocol):
    """A balancer connection: frames walked from its reads, frames sent in batches.

    ``rsocket`` is the connection's rules (``lblab.wire.connection``), set by the
    subclass for its role."""

    __slots__ = ("active", "closed", "out", "outbox", "rsocket")

    rsocket: Connection

    def __init__(
        self, max_frame_bytes: int, outbox: Outbox, buffer_bytes: int = INITIAL_BUFFER_BYTES
    ) -> None:
        super().__init__(max_frame_bytes, buffer_bytes)
        self.outbox = outbox
        self.out: list[bytes | bytearray] = []
        self.closed = False
        self.active = False
        """Set by every read; the lifetime check clears it (cheaper than a clock per read)."""

    def buffer_updated(self, nbytes: int) -> None:
        if self.closed:  # lingering after our close (``shut``): what still arrives is dropped
            self.drop_unread()
            return
        self.active = True
        FrameProtocol.buffer_updated(self, nbytes)

    def send(self, frame: bytes | bytearray) -> None:
        """Queue a frame; it leaves with the next flush."""
        if self.closed:
            return
        out = self.out
        if not out:
            self.outbox.mark(self)
        out.append(frame)

    def flush_out(self) -> None:
        out = self.out
        if out:
            self.out = []
            if not self.closed:
                self.transport.writelines(out)  # type: ignore[union-attr]

    def close(self) -> None:
        """Send what is queued, then close (``shut``)."""
        if not self.closed and self.transport is not None:
            self.flush_out()
            self.closed = True
            self.shut(self.transport)

    def shut(self, transport: asyncio.Transport) -> None:
        """Close the transport of a connection just closed; a client connection lingers
        instead (``ClientConnection.shut``)."""
        transport.close()

    def close_connection(self, message: str) -> None:
        """End the connection as the spec's CONNECTION_CLOSE says (its streams have
        ended): that ERROR on stream 0 after what is queued, then close."""
        if not self.closed and self.transport is not None:
            self.rsocket.close(ErrorCode.CONNECTION_CLOSE, message)
            self.send(self.rsocket.data_to_send())
            self.close()
