"""Sans-I/O RSocket frame codec (the h11 shape).

Feed bytes with ``FrameDecoder.receive_data``; take frames with ``next_frame`` until it
returns ``NEED_DATA``. ``encode_frame`` gives the bytes of one frame, length prefix
included. Nothing here touches a socket or a clock, so the same code serves the asyncio
servers, the gevent Locust client and the tests.

A malformed frame from the peer raises ``RemoteProtocolError`` whose ``error_code`` is
the connection-level code to answer with (INVALID_SETUP for a bad SETUP,
CONNECTION_ERROR otherwise), and never any other exception: out-of-range field values
(a keepalive of 2^31, REQUEST_N of 0, a PAYLOAD with none of N/C/F, ...) are caught by
the frames' own checks and turned into it. The decoder is then in an error state and
refuses further data (the connection must be closed).
"""

from __future__ import annotations

from typing import Final

from lblab.errors import LocalProtocolError, RemoteProtocolError
from lblab.wire.codes import (
    CONNECTION_LEVEL,
    FLAG_COMPLETE,
    FLAG_FOLLOWS,
    FLAG_IGNORE,
    FLAG_LEASE,
    FLAG_METADATA,
    FLAG_NEXT,
    FLAG_RESPOND,
    FLAG_RESUME,
    FLAGS_MASK,
    FRAME_HEADER_LENGTH,
    HEADER,
    LENGTH_PREFIX_LENGTH,
    MAX_FRAME_LENGTH,
    MAX_SETUP_LENGTH,
    U16,
    U32,
    U64,
    ErrorCode,
    FrameType,
    misplaced_frame,
)
from lblab.wire.frames import (
    Cancel,
    Error,
    Ext,
    Frame,
    Keepalive,
    Lease,
    MetadataPush,
    Payload,
    RequestChannel,
    RequestFnf,
    RequestN,
    RequestResponse,
    RequestStream,
    Resume,
    ResumeOk,
    Setup,
)


class _NeedData:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NEED_DATA"


NEED_DATA: Final = _NeedData()
"""Sentinel from ``next_frame``: the buffer holds no complete frame yet."""


# ---------------------------------------------------------------- encoding


def _u24(n: int) -> bytes:
    return n.to_bytes(3, "big")


def _metadata_and_data(metadata: bytes | None, data: bytes) -> bytes:
    if metadata is None:
        return data
    return _u24(len(metadata)) + metadata + data


def _header(stream_id: int, frame_type: int, flags: int) -> bytes:
    return HEADER.pack(stream_id, (frame_type << 10) | (flags & FLAGS_MASK))


def encode_frame_body(frame: Frame) -> bytes:
    """The frame without its 24-bit length prefix."""
    meta_flag = FLAG_METADATA if getattr(frame, "metadata", None) is not None else 0
    match frame:
        case Setup():
            flags = meta_flag | (FLAG_LEASE if frame.lease else 0)
            resume = b""
            if frame.resume_token is not None:
                flags |= FLAG_RESUME
                resume = U16.pack(len(frame.resume_token)) + frame.resume_token
            mm, dm = frame.metadata_mime.encode("ascii"), frame.data_mime.encode("ascii")
            body = (
                U16.pack(frame.major)
                + U16.pack(frame.minor)
                + U32.pack(frame.keepalive_ms)
                + U32.pack(frame.max_lifetime_ms)
                + resume
                + bytes((len(mm),))
                + mm
                + bytes((len(dm),))
                + dm
                + _metadata_and_data(frame.metadata, frame.data)
            )
            return _header(0, FrameType.SETUP, flags) + body
        case Lease():
            return (
                _header(0, FrameType.LEASE, meta_flag)
                + U32.pack(frame.ttl_ms)
                + U32.pack(frame.number_of_requests)
                + (frame.metadata or b"")
            )
        case Keepalive():
            return (
                _header(0, FrameType.KEEPALIVE, FLAG_RESPOND if frame.respond else 0)
                + U64.pack(frame.last_received_position)
                + frame.data
            )
        case RequestResponse() | RequestFnf():
            flags = meta_flag | (FLAG_FOLLOWS if frame.follows else 0)
            return _header(frame.stream_id, frame.frame_type, flags) + _metadata_and_data(
                frame.metadata, frame.data
            )
        case RequestStream():
            flags = meta_flag | (FLAG_FOLLOWS if frame.follows else 0)
            return (
                _header(frame.stream_id, FrameType.REQUEST_STREAM, flags)
                + U32.pack(frame.initial_n)
                + _metadata_and_data(frame.metadata, frame.data)
            )
        case RequestChannel():
            flags = (
                meta_flag
                | (FLAG_FOLLOWS if frame.follows else 0)
                | (FLAG_COMPLETE if frame.complete else 0)
            )
            return (
                _header(frame.stream_id, FrameType.REQUEST_CHANNEL, flags)
                + U32.pack(frame.initial_n)
                + _metadata_and_data(frame.metadata, frame.data)
            )
        case RequestN():
            return _header(frame.stream_id, FrameType.REQUEST_N, 0) + U32.pack(frame.n)
        case Cancel():
            return _header(frame.stream_id, FrameType.CANCEL, 0)
        case Payload():
            flags = (
                meta_flag
                | (FLAG_FOLLOWS if frame.follows else 0)
                | (FLAG_COMPLETE if frame.complete else 0)
                | (FLAG_NEXT if frame.next else 0)
            )
            return _header(frame.stream_id, FrameType.PAYLOAD, flags) + _metadata_and_data(
                frame.metadata, frame.data
            )
        case Error():
            return (
                _header(frame.stream_id, FrameType.ERROR, 0)
                + U32.pack(int(frame.error_code))
                + frame.message.encode("utf-8")
            )
        case MetadataPush():
            return _header(0, FrameType.METADATA_PUSH, FLAG_METADATA) + frame.metadata
        case Resume():
            return (
                _header(0, FrameType.RESUME, 0)
                + U16.pack(frame.major)
                + U16.pack(frame.minor)
                + U16.pack(len(frame.token))
                + frame.token
                + U64.pack(frame.last_received_server_position)
                + U64.pack(frame.first_available_client_position)
            )
        case ResumeOk():
            return _header(0, FrameType.RESUME_OK, 0) + U64.pack(
                frame.last_received_client_position
            )
        case Ext():
            flags = meta_flag | (FLAG_IGNORE if frame.ignore else 0)
            return (
                _header(frame.stream_id, FrameType.EXT, flags)
                + U32.pack(frame.extended_type)
                + _metadata_and_data(frame.metadata, frame.data)
            )
    raise TypeError(f"not a frame: {frame!r}")


def encode_frame(frame: Frame) -> bytes:
    """The frame as sent over TCP: 24-bit length prefix, then the body."""
    body = encode_frame_body(frame)
    return _u24(len(body)) + body


# ---------------------------------------------------------------- decoding


def _bad(message: str, code: ErrorCode = ErrorCode.CONNECTION_ERROR) -> RemoteProtocolError:
    return RemoteProtocolError(message, code)


class _Reader:
    """Cursor over one frame body; every read checks the bounds."""

    __slots__ = ("buf", "end", "name", "pos")

    def __init__(self, buf: bytes | memoryview, name: str) -> None:
        self.buf, self.pos, self.end, self.name = buf, FRAME_HEADER_LENGTH, len(buf), name

    def take(self, n: int) -> bytes:
        if self.pos + n > self.end:
            raise _bad(f"{self.name} frame is truncated: needs {n} more bytes at offset {self.pos}")
        out = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        return out

    def u8(self) -> int:
        return self.take(1)[0]

    def u16(self) -> int:
        return int.from_bytes(self.take(2), "big")

    def u24(self) -> int:
        return int.from_bytes(self.take(3), "big")

    def u32(self) -> int:
        return int.from_bytes(self.take(4), "big")

    def u64(self) -> int:
        return int.from_bytes(self.take(8), "big")

    def rest(self) -> bytes:
        out = bytes(self.buf[self.pos : self.end])
        self.pos = self.end
        return out

    def metadata_and_data(self, flags: int) -> tuple[bytes | None, bytes]:
        metadata = self.take(self.u24()) if flags & FLAG_METADATA else None
        return metadata, self.rest()


def decode_frame_body(body: bytes | memoryview) -> Frame | None:
    """Decode one frame body (no length prefix).

    Returns ``None`` for a frame of unknown type whose IGNORE flag is set (the spec says
    to drop it); raises ``RemoteProtocolError`` for anything malformed.
    """
    if len(body) < FRAME_HEADER_LENGTH:
        raise _bad(f"frame of {len(body)} bytes is shorter than the 6-byte header")
    stream_id, type_and_flags = HEADER.unpack_from(body, 0)
    if stream_id & 0x80000000:
        raise _bad("stream id has the reserved top bit set")
    type_id, flags = type_and_flags >> 10, type_and_flags & FLAGS_MASK
    try:
        frame_type = FrameType(type_id)
    except ValueError:
        if flags & FLAG_IGNORE:
            return None
        raise _bad(f"unknown frame type 0x{type_id:02x}") from None
    r = _Reader(body, frame_type.name)
    code = ErrorCode.INVALID_SETUP if frame_type is FrameType.SETUP else ErrorCode.CONNECTION_ERROR
    try:
        return _decode(frame_type, stream_id, flags, r)
    except RemoteProtocolError as exc:
        if code != exc.error_code and exc.error_code == ErrorCode.CONNECTION_ERROR:
            raise _bad(str(exc), code) from None
        raise
    except LocalProtocolError as exc:  # a field out of range, found by the frame's own checks
        raise _bad(f"malformed {frame_type.name} frame: {exc}", code) from None
    except ValueError as exc:  # UnicodeDecodeError of a MIME type
        raise _bad(f"malformed {frame_type.name} frame: {exc}", code) from None


def _decode(frame_type: FrameType, stream_id: int, flags: int, r: _Reader) -> Frame:
    follows = bool(flags & FLAG_FOLLOWS)
    if stream_id != 0 and frame_type in CONNECTION_LEVEL:
        raise _bad(misplaced_frame(frame_type, stream_id))
    match frame_type:
        case FrameType.SETUP:
            major, minor = r.u16(), r.u16()
            keepalive, lifetime = r.u32(), r.u32()
            token = r.take(r.u16()) if flags & FLAG_RESUME else None
            metadata_mime = r.take(r.u8()).decode("ascii")
            data_mime = r.take(r.u8()).decode("ascii")
            metadata, data = r.metadata_and_data(flags)
            if not keepalive or not lifetime or not metadata_mime or not data_mime:
                raise _bad(
                    "SETUP needs non-zero keepalive and lifetime and both MIME types",
                    ErrorCode.INVALID_SETUP,
                )
            return Setup(
                major=major,
                minor=minor,
                keepalive_ms=keepalive,
                max_lifetime_ms=lifetime,
                resume_token=token,
                lease=bool(flags & FLAG_LEASE),
                metadata_mime=metadata_mime,
                data_mime=data_mime,
                metadata=metadata,
                data=data,
            )
        case FrameType.LEASE:
            ttl, number = r.u32(), r.u32()
            return Lease(
                ttl_ms=ttl,
                number_of_requests=number,
                metadata=r.rest() if flags & FLAG_METADATA else None,
            )
        case FrameType.KEEPALIVE:
            return Keepalive(
                respond=bool(flags & FLAG_RESPOND), last_received_position=r.u64(), data=r.rest()
            )
        case FrameType.METADATA_PUSH:
            return MetadataPush(metadata=r.rest())
        case FrameType.RESUME:
            major, minor = r.u16(), r.u16()
            token = r.take(r.u16())
            return Resume(
                major=major,
                minor=minor,
                token=token,
                last_received_server_position=r.u64(),
                first_available_client_position=r.u64(),
            )
        case FrameType.RESUME_OK:
            return ResumeOk(last_received_client_position=r.u64())
        case FrameType.ERROR:
            code = r.u32()
            return Error(
                stream_id=stream_id,
                error_code=_error_code(code),
                message=r.rest().decode("utf-8", "replace"),
            )
    if stream_id == 0:
        raise _bad(f"{frame_type.name} must not use stream id 0")
    match frame_type:
        case FrameType.REQUEST_RESPONSE:
            metadata, data = r.metadata_and_data(flags)
            return RequestResponse(
                stream_id=stream_id, metadata=metadata, data=data, follows=follows
            )
        case FrameType.REQUEST_FNF:
            metadata, data = r.metadata_and_data(flags)
            return RequestFnf(stream_id=stream_id, metadata=metadata, data=data, follows=follows)
        case FrameType.REQUEST_STREAM:
            n = r.u32()
            metadata, data = r.metadata_and_data(flags)
            return RequestStream(
                stream_id=stream_id, initial_n=n, metadata=metadata, data=data, follows=follows
            )
        case FrameType.REQUEST_CHANNEL:
            n = r.u32()
            metadata, data = r.metadata_and_data(flags)
            return RequestChannel(
                stream_id=stream_id,
                initial_n=n,
                metadata=metadata,
                data=data,
                follows=follows,
                complete=bool(flags & FLAG_COMPLETE),
            )
        case FrameType.REQUEST_N:
            return RequestN(stream_id=stream_id, n=r.u32())
        case FrameType.CANCEL:
            return Cancel(stream_id=stream_id)
        case FrameType.PAYLOAD:
            metadata, data = r.metadata_and_data(flags)
            return Payload(
                stream_id=stream_id,
                metadata=metadata,
                data=data,
                follows=follows,
                complete=bool(flags & FLAG_COMPLETE),
                next=bool(flags & FLAG_NEXT),
            )
        case FrameType.EXT:
            ext = r.u32()
            metadata, data = r.metadata_and_data(flags)
            return Ext(
                stream_id=stream_id,
                extended_type=ext,
                metadata=metadata,
                data=data,
                ignore=bool(flags & FLAG_IGNORE),
            )
    raise _bad(f"unhandled frame type {frame_type.name}")  # pragma: no cover - enum is closed


def _error_code(code: int) -> ErrorCode | int:
    try:
        return ErrorCode(code)
    except ValueError:
        return code


def check_first_frame(
    buf: bytes | bytearray, pos: int, available: int, max_length: int = MAX_SETUP_LENGTH
) -> None:
    """Judge a connection's first frame from the bytes in so far, before its body arrives.

    It must be a SETUP on stream 0 of 6..``max_length`` bytes: the length is checked once
    its 3 bytes are in, the stream id and type once the 9 bytes of prefix and header
    are, so junk or an absurd length prefix is refused at once rather than waited for.
    RESUME is answered REJECTED_RESUME (nothing in lblab resumes); anything else is
    INVALID_SETUP.
    """
    if available < LENGTH_PREFIX_LENGTH:
        return
    length = (buf[pos] << 16) | (buf[pos + 1] << 8) | buf[pos + 2]
    if available >= LENGTH_PREFIX_LENGTH + FRAME_HEADER_LENGTH:
        stream_id, type_and_flags = HEADER.unpack_from(buf, pos + LENGTH_PREFIX_LENGTH)
        frame_type = type_and_flags >> 10
        if frame_type == FrameType.RESUME:
            raise _bad("resumption is not supported", ErrorCode.REJECTED_RESUME)
        if frame_type != FrameType.SETUP:
            raise _bad(
                f"the first frame must be SETUP, not type 0x{frame_type:02x}",
                ErrorCode.INVALID_SETUP,
            )
        if stream_id != 0:
            raise _bad(f"SETUP must be on stream 0, not {stream_id}", ErrorCode.INVALID_SETUP)
    if not FRAME_HEADER_LENGTH <= length <= max_length:
        raise _bad(
            f"the first frame announces {length} bytes; a SETUP is "
            f"{FRAME_HEADER_LENGTH}..{max_length} bytes",
            ErrorCode.INVALID_SETUP,
        )


class FrameDecoder:
    """Accumulates TCP bytes and yields whole frames.

    One ``bytearray`` with a read cursor; the consumed head is dropped once per
    ``receive_data`` call, not per frame. ``max_frame_length`` caps a frame body: a
    length prefix above it is answered with CONNECTION_ERROR before the body arrives,
    so a peer cannot make us buffer more than the cap. Bytes are held only as they
    arrive (a length prefix reserves nothing). With ``first_frame=True`` (a server's
    side of a connection) the first frame is judged by ``check_first_frame`` as soon as
    its header is in.
    """

    __slots__ = ("_buf", "_error", "_first", "_pos", "max_frame_length")

    def __init__(
        self, max_frame_length: int = MAX_FRAME_LENGTH, *, first_frame: bool = False
    ) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._error: RemoteProtocolError | None = None
        self._first = first_frame
        self.max_frame_length = max_frame_length

    def receive_data(self, data: bytes) -> None:
        if self._error is not None:
            raise self._error
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as frames."""
        return len(self._buf) - self._pos

    def next_frame(self) -> Frame | _NeedData:
        if self._error is not None:
            raise self._error
        while True:
            buf, pos = self._buf, self._pos
            if self._first:
                try:
                    check_first_frame(
                        buf, pos, len(buf) - pos, min(MAX_SETUP_LENGTH, self.max_frame_length)
                    )
                except RemoteProtocolError as exc:
                    self._error = exc
                    raise
            if len(buf) - pos < LENGTH_PREFIX_LENGTH:
                return NEED_DATA
            length = (buf[pos] << 16) | (buf[pos + 1] << 8) | buf[pos + 2]
            if length > self.max_frame_length:
                self._error = _bad(
                    f"frame of {length} bytes exceeds the limit of {self.max_frame_length} bytes"
                )
                raise self._error
            end = pos + LENGTH_PREFIX_LENGTH + length
            if len(buf) < end:
                return NEED_DATA
            body = memoryview(buf)[pos + LENGTH_PREFIX_LENGTH : end]
            self._pos = end
            try:
                frame = decode_frame_body(body)
            except RemoteProtocolError as exc:
                self._error = exc
                raise
            finally:
                body.release()
            self._first = False
            if frame is not None:
                return frame
