"""Frame walking on an ``asyncio.BufferedProtocol`` receive buffer (the uvloop echo-server shape).

The kernel reads straight into one preallocated ``bytearray``; ``buffer_updated`` walks
the complete frames in it with a cursor, reading the 24-bit length, the stream id and the
type/flags word with one call of the module-level ``PREFIXED_HEADER`` struct. Each frame is
handed to ``on_frame`` as ints (offset, length, stream id, type, flags): no frame objects,
no per-frame slices. The subclass rewrites stream ids in place (``U32.pack_into``) and
copies the frame out once, for the outgoing write.

The buffer only ever holds one partial frame beyond what was walked, so its size is
bounded by the largest frame allowed (``max_frame_bytes``). A frame whose declared
length exceeds the limit is refused as soon as its length prefix arrives. A length
prefix reserves nothing by itself: for a partial frame the buffer grows to at most
twice what has arrived plus ``GROW_STEP_BYTES`` (so 3 bytes cannot reserve 16 MiB, and
a frame that does arrive is still copied O(1) times per byte). A grown buffer is kept
while the connection keeps receiving large frames (regrowing it for every 1 MB frame
cost ~0.4 ms a request in zero-filled allocations and copies) and shrinks back to
``buffer_bytes`` at the first ``trim`` (the node's lifetime check, every 0.25 s) after
it has stopped needing it.

``frame_problem`` checks a client's stream frame's fixed fields from the buffer (lengths,
flags, n values, the metadata length against the frame's end) in O(1), so a frame a
backend would call malformed (and answer by dropping its one shared connection) is
refused at the client connection it came from.
"""

from __future__ import annotations

import asyncio
from typing import Final

from mypy_extensions import mypyc_attr

from lblab.errors import RemoteProtocolError
from lblab.wire.codes import (
    FLAG_COMPLETE,
    FLAG_FOLLOWS,
    FLAG_METADATA,
    FLAG_NEXT,
    FRAME_HEADER_LENGTH,
    LENGTH_PREFIX_LENGTH,
    MAX_REQUEST_N,
    MAX_STREAM_ID,
    PREFIXED_HEADER,
    U32,
    ErrorCode,
    FrameType,
)

INITIAL_BUFFER_BYTES: Final = 256 * 1024
"""Receive buffer of a busy connection. 256 KiB holds ~64 pipelined 10 KB requests per
read, so one read (one system call) serves many frames; larger frames grow the buffer
for as long as they need it. A connection that starts smaller (a client's, 4 KiB, so
a thousand idle clients hold 4 MiB) doubles its resting size up to this each time a
read fills the buffer."""
MIN_READ_BYTES: Final = 64 * 1024
"""Compact the buffer before a read when less than this is free at its tail."""
GROW_STEP_BYTES: Final = 64 * 1024
"""Least growth for a partial frame larger than the buffer (module docstring)."""
_PREFIX_AND_HEADER: Final = LENGTH_PREFIX_LENGTH + FRAME_HEADER_LENGTH
_unpack_prefixed_header: Final = PREFIXED_HEADER.unpack_from
"""A frame's length prefix (high byte, low 16 bits) and header in one call: compiled,
each index into a ``bytearray`` is a generic call too."""


@mypyc_attr(allow_interpreted_subclasses=True)
class FrameProtocol(asyncio.BufferedProtocol):
    """Base of the balancer's connections: buffer management and the frame walk.

    ``on_frame(pos, length, stream_id, frame_type, flags)`` gets the offset of the
    frame's length prefix in ``self.buf`` and the body length; it returns False to stop
    the walk (the connection was closed). It may rewrite bytes of that frame in place.
    """

    __slots__ = (
        "_end",
        "_large",
        "_start",
        "buf",
        "buffer_bytes",
        "max_frame_bytes",
        "mv",
        "transport",
    )

    def __init__(self, max_frame_bytes: int, buffer_bytes: int = INITIAL_BUFFER_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.buffer_bytes = buffer_bytes
        """The buffer's resting size; raise it and the next read grows the buffer."""
        self.buf = bytearray(buffer_bytes)
        self.mv = memoryview(self.buf)
        self._start = 0
        self._end = 0
        self._large = False
        """A frame larger than ``buffer_bytes`` arrived since the last ``trim``."""
        self.transport: asyncio.Transport | None = None

    # ------------------------------------------------------------ asyncio hooks

    def get_buffer(self, sizehint: int) -> memoryview:
        size = len(self.buf)
        if size - self._end < MIN_READ_BYTES:
            self._compact(max(size, self.buffer_bytes))
        return self.mv[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        end = self._end + nbytes
        self._end = end
        buf = self.buf
        if end == len(buf) and self.buffer_bytes < INITIAL_BUFFER_BYTES:
            self.buffer_bytes *= 2  # the read filled the buffer: more was waiting
        pos = self._start
        limit = self.max_frame_bytes
        # Typed: struct's values are Any, and compiled, arithmetic on Any is generic.
        high: int
        low: int
        stream_id: int
        type_flags: int
        while end - pos >= _PREFIX_AND_HEADER:
            high, low, stream_id, type_flags = _unpack_prefixed_header(buf, pos)
            length = (high << 16) | low
            if length > limit or length < FRAME_HEADER_LENGTH:
                self._start = pos
                self.protocol_error(_bad_length(length, limit))
                return
            frame_end = pos + LENGTH_PREFIX_LENGTH + length
            if frame_end > end:
                break
            # Called on self (not a bound method held in a local): compiled, that is a
            # native call with unboxed ints; through a bound method it boxed all five.
            if not self.on_frame(pos, length, stream_id, type_flags >> 10, type_flags & 0x3FF):
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
            need = LENGTH_PREFIX_LENGTH + length
            if need > self.buffer_bytes:
                self._large = True
            if need > len(buf) - pos:
                have = end - pos
                self._compact(max(len(buf), min(need, 2 * have + GROW_STEP_BYTES)))

    def drop_unread(self) -> None:
        """Forget what was read and not yet walked (a closed connection's input)."""
        self._start = self._end = 0

    def trim(self) -> None:
        """Give a grown buffer's memory back once no large frame has arrived since the
        last call (called periodically)."""
        if self._large:
            self._large = False
        elif len(self.buf) > self.buffer_bytes:
            self._compact(max(self.buffer_bytes, self._end - self._start))

    # ------------------------------------------------------------ buffer

    def _compact(self, capacity: int) -> None:
        """Move the unread tail to the front, into a buffer of ``capacity`` bytes if that
        differs from the current size (and holds the tail)."""
        start, end = self._start, self._end
        if capacity != len(self.buf) and capacity >= end - start:
            new = bytearray(capacity)
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


_unpack_u32: Final = U32.unpack_from
_FNF: Final = int(FrameType.REQUEST_FNF)
_REQUEST_N: Final = int(FrameType.REQUEST_N)
_CANCEL: Final = int(FrameType.CANCEL)
_PAYLOAD: Final = int(FrameType.PAYLOAD)
_NCF: Final = FLAG_NEXT | FLAG_COMPLETE | FLAG_FOLLOWS


def frame_problem(
    buf: bytearray, pos: int, length: int, sid: int, frame_type: int, flags: int
) -> str | None:
    """What makes a client's REQUEST_*, REQUEST_N, CANCEL, PAYLOAD or ERROR frame malformed.

    None if nothing; O(1) reads of ``buf`` (~0.5 us). ``pos`` is the frame's length
    prefix, ``length`` its body (>= 6, checked by the walk). Checked: the stream id's
    reserved bit; REQUEST_STREAM / REQUEST_CHANNEL / REQUEST_N long enough for their n,
    and n in 1..2^31-1; PAYLOAD with at least one of NEXT, COMPLETE, FOLLOWS; ERROR long
    enough for its code; and with the METADATA flag, the 3-byte metadata length inside
    the frame and the metadata not running past its end.
    """
    if sid > MAX_STREAM_ID:
        return f"stream id {sid} has the reserved top bit set"
    at = pos + LENGTH_PREFIX_LENGTH + FRAME_HEADER_LENGTH  # first byte after the header
    if frame_type <= _FNF or frame_type == _PAYLOAD:
        if frame_type == _PAYLOAD and not flags & _NCF:
            return "PAYLOAD with none of the NEXT, COMPLETE, FOLLOWS flags"
    elif frame_type <= _REQUEST_N:  # REQUEST_STREAM, REQUEST_CHANNEL, REQUEST_N
        if length < FRAME_HEADER_LENGTH + 4:
            return f"{FrameType(frame_type).name} of {length} bytes is too short for its n"
        n = _unpack_u32(buf, at)[0]
        if not 0 < n <= MAX_REQUEST_N:
            return f"{FrameType(frame_type).name} n must be in 1..{MAX_REQUEST_N}, not {n}"
        if frame_type == _REQUEST_N:
            return None
        at += 4
    elif frame_type == _CANCEL:
        return None
    else:  # ERROR
        if length < FRAME_HEADER_LENGTH + 4:
            return f"ERROR of {length} bytes is too short for its error code"
        return None
    if flags & FLAG_METADATA:
        end = pos + LENGTH_PREFIX_LENGTH + length
        if end - at < 3:
            return f"{FrameType(frame_type).name} has the METADATA flag but no metadata length"
        mlen = _unpack_u32(buf, at - 1)[0] & 0xFFFFFF  # 3 bytes: mask the byte before
        if at + 3 + mlen > end:
            return (
                f"{FrameType(frame_type).name} metadata of {mlen} bytes runs past the end of "
                f"its {length}-byte frame"
            )
    return None


def _bad_length(length: int, limit: int) -> RemoteProtocolError:
    if length < FRAME_HEADER_LENGTH:
        return RemoteProtocolError(
            f"frame of {length} bytes is shorter than the 6-byte header", ErrorCode.CONNECTION_ERROR
        )
    return RemoteProtocolError(
        f"frame of {length} bytes exceeds the limit of {limit} bytes (--max-frame-bytes)",
        ErrorCode.CONNECTION_ERROR,
    )
