"""Frame walking on an ``asyncio.BufferedProtocol`` receive buffer (the uvloop echo-server shape).

The kernel reads straight into one preallocated ``bytearray``; ``buffer_updated`` walks
the complete frames in it with a cursor, reading the 24-bit length with shifts and the
stream id and type/flags word with the module-level ``HEADER`` struct. Each frame is
handed to ``on_frame`` as ints (offset, length, stream id, type, flags): no frame objects,
no per-frame slices. The subclass rewrites stream ids in place (``U32.pack_into``) and
copies the frame out once, for the outgoing write.

The buffer only ever holds one partial frame beyond what was walked, so its size is
bounded by the largest frame allowed (``max_frame_bytes``): a peer cannot make us
buffer more than that. A frame whose declared length exceeds the limit is refused as
soon as its length prefix arrives, before any of its body is buffered.
"""

from __future__ import annotations

import asyncio

from lblab.errors import RemoteProtocolError
from lblab.wire.codes import FRAME_HEADER_LENGTH, HEADER, LENGTH_PREFIX_LENGTH, ErrorCode

INITIAL_BUFFER_BYTES = 256 * 1024
"""Receive buffer per connection. 256 KiB holds ~64 pipelined 10 KB requests per read, so
one read (one system call) serves many frames; larger frames grow the buffer."""
MIN_READ_BYTES = 64 * 1024
"""Compact the buffer before a read when less than this is free at its tail."""
_PREFIX_AND_HEADER = LENGTH_PREFIX_LENGTH + FRAME_HEADER_LENGTH
_unpack_header = HEADER.unpack_from


class FrameProtocol(asyncio.BufferedProtocol):
    """Base of the balancer's connections: buffer management and the frame walk.

    ``on_frame(pos, length, stream_id, frame_type, flags)`` gets the offset of the
    frame's length prefix in ``self.buf`` and the body length; it returns False to stop
    the walk (the connection was closed). It may rewrite bytes of that frame in place.
    """

    __slots__ = ("_end", "_start", "buf", "max_frame_bytes", "mv", "transport")

    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.buf = bytearray(INITIAL_BUFFER_BYTES)
        self.mv = memoryview(self.buf)
        self._start = 0
        self._end = 0
        self.transport: asyncio.Transport | None = None

    # ------------------------------------------------------------ asyncio hooks

    def get_buffer(self, sizehint: int) -> memoryview:
        if len(self.buf) - self._end < MIN_READ_BYTES:
            self._compact(len(self.buf))
        return self.mv[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        end = self._end + nbytes
        self._end = end
        buf = self.buf
        pos = self._start
        limit = self.max_frame_bytes
        on_frame = self.on_frame
        while end - pos >= _PREFIX_AND_HEADER:
            length = (buf[pos] << 16) | (buf[pos + 1] << 8) | buf[pos + 2]
            if length > limit or length < FRAME_HEADER_LENGTH:
                self._start = pos
                self.protocol_error(_bad_length(length, limit))
                return
            frame_end = pos + LENGTH_PREFIX_LENGTH + length
            if frame_end > end:
                break
            stream_id, type_flags = _unpack_header(buf, pos + LENGTH_PREFIX_LENGTH)
            if not on_frame(pos, length, stream_id, type_flags >> 10, type_flags & 0x3FF):
                return
            pos = frame_end
        if pos == end:
            self._start = self._end = 0
            return
        self._start = pos
        if end - pos >= LENGTH_PREFIX_LENGTH:
            length = (buf[pos] << 16) | (buf[pos + 1] << 8) | buf[pos + 2]
            if length > limit or length < FRAME_HEADER_LENGTH:
                self.protocol_error(_bad_length(length, limit))
                return
            if LENGTH_PREFIX_LENGTH + length > len(buf) - pos:
                self._compact(LENGTH_PREFIX_LENGTH + length)

    # ------------------------------------------------------------ buffer

    def _compact(self, capacity: int) -> None:
        """Move the unread tail to the front, into a bigger buffer if ``capacity`` asks."""
        start, end = self._start, self._end
        if capacity > len(self.buf):
            size = len(self.buf)
            while size < capacity:
                size *= 2
            new = bytearray(size)
            new[: end - start] = self.mv[start:end]
            self.buf, self.mv = new, memoryview(new)
        elif start:
            self.buf[: end - start] = self.mv[start:end]
        self._start, self._end = 0, end - start

    # ------------------------------------------------------------ for subclasses

    def on_frame(self, pos: int, length: int, stream_id: int, frame_type: int, flags: int) -> bool:
        raise NotImplementedError

    def protocol_error(self, exc: RemoteProtocolError) -> None:
        """The peer broke the protocol: answer with a connection ERROR and close."""
        raise NotImplementedError


def _bad_length(length: int, limit: int) -> RemoteProtocolError:
    if length < FRAME_HEADER_LENGTH:
        return RemoteProtocolError(
            f"frame of {length} bytes is shorter than the 6-byte header", ErrorCode.CONNECTION_ERROR
        )
    return RemoteProtocolError(
        f"frame of {length} bytes exceeds the limit of {limit} bytes (--max-frame-bytes)",
        ErrorCode.CONNECTION_ERROR,
    )
