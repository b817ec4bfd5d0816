"""RSocket frames as frozen values.

Every frame is a ``@dataclass(frozen=True, slots=True, kw_only=True)`` that checks its
own fields, so an illegal frame cannot be built (``LocalProtocolError``). The codec in
``lblab.wire.codec`` turns these into bytes and back; the balancer's forwarding path does
not build them at all (it reads headers into ints and forwards byte ranges).
"""

from __future__ import annotations

from dataclasses import dataclass

from lblab.errors import LocalProtocolError
from lblab.wire.codes import MAX_POSITION, MAX_REQUEST_N, MAX_STREAM_ID, ErrorCode, FrameType


def _check_stream_id(stream_id: int, *, connection_level: bool) -> None:
    if connection_level:
        if stream_id != 0:
            raise LocalProtocolError(
                f"a connection-level frame must use stream id 0, not {stream_id}"
            )
    elif not 0 < stream_id <= MAX_STREAM_ID:
        raise LocalProtocolError(f"stream id must be in 1..{MAX_STREAM_ID}, not {stream_id}")


def _check_n(n: int, field: str) -> None:
    if not 0 < n <= MAX_REQUEST_N:
        raise LocalProtocolError(f"{field} must be in 1..{MAX_REQUEST_N}, not {n}")


def _check_position(position: int, field: str) -> None:
    if not 0 <= position <= MAX_POSITION:
        raise LocalProtocolError(f"{field} must be a 63-bit value, not {position}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Setup:
    keepalive_ms: int
    max_lifetime_ms: int
    metadata_mime: str
    data_mime: str
    metadata: bytes | None = None
    data: bytes = b""
    major: int = 1
    minor: int = 0
    lease: bool = False
    resume_token: bytes | None = None
    stream_id: int = 0
    frame_type = FrameType.SETUP

    def __post_init__(self) -> None:
        _check_stream_id(self.stream_id, connection_level=True)
        for name in ("keepalive_ms", "max_lifetime_ms"):
            value = getattr(self, name)
            if not 0 < value <= MAX_STREAM_ID:
                raise LocalProtocolError(f"SETUP {name} must be in 1..{MAX_STREAM_ID}, not {value}")
        for name in ("metadata_mime", "data_mime"):
            mime = getattr(self, name)
            if not mime.isascii() or not 0 < len(mime) <= 255:
                raise LocalProtocolError(f"SETUP {name} must be 1..255 ASCII bytes, not {mime!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease:
    ttl_ms: int
    number_of_requests: int
    metadata: bytes | None = None
    stream_id: int = 0
    frame_type = FrameType.LEASE

    def __post_init__(self) -> None:
        _check_stream_id(self.stream_id, connection_level=True)
        if (
            not 0 <= self.ttl_ms <= MAX_STREAM_ID
            or not 0 <= self.number_of_requests <= MAX_STREAM_ID
        ):
            raise LocalProtocolError("LEASE ttl_ms and number_of_requests must be 31-bit values")


@dataclass(frozen=True, slots=True, kw_only=True)
class Keepalive:
    respond: bool
    last_received_position: int = 0
    data: bytes = b""
    stream_id: int = 0
    frame_type = FrameType.KEEPALIVE

    def __post_init__(self) -> None:
        _check_stream_id(self.stream_id, connection_level=True)
        _check_position(self.last_received_position, "KEEPALIVE last received position")


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestResponse:
    stream_id: int
    data: bytes = b""
    metadata: bytes | None = None
    follows: bool = False
    frame_type = FrameType.REQUEST_RESPONSE

    def __post_init__(self) -> None:
        _check_stream_id(self.stream_id, connection_level=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestFnf:
    stream_id: int
    data: bytes = b""
    metadata: bytes | None = None
    follows: bool = False
    frame_type = FrameType.REQUEST_FNF

    def __post_init__(self) -> None:
        _check_stream_id(self.stream_id, connection_level=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestStream:
    stream_id: int
    initial_n: int
    data: bytes = b""
    metadata: bytes | None = None
    follows: bool = False
    frame_type = FrameType.REQUEST_STREAM

    def __post_init__(self) -> None:
        _check_stream_id(self.stream_id, connection_level=False)
        _check_n(self.initial_n, "REQUEST_STREAM initial_n")


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestChannel:
    stream_id: int
    initial_n: int
    data: bytes = b""
    metadata: bytes | None = None
    follows: bool = False
    complete: bool = False
    frame_type = FrameType.REQUEST_CHANNEL

    def __post_init__(self) -> None:
        _check_stream_id(self.stream_id, connection_level=False)
        _check_n(self.initial_n, "REQUEST_CHANNEL initial_n")


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestN:
    stream_id: int
    n: int
    frame_type = FrameType.REQUEST_N

    def __post_init__(self) -> None:
        _check_stream_id(self.stream_id, connection_level=False)
        _check_n(self.n, "REQUEST_N n")


@dataclass(frozen=True, slots=True, kw_only=True)
class Cancel:
    stream_id: int
    frame_type = FrameType.CANCEL

    def __post_init__(self) -> None:
        _check_stream_id(self.stream_id, connection_level=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Payload:
    stream_id: int
    data: bytes = b""
    metadata: bytes | None = None
    follows: bool = False
    complete: bool = False
    next: bool = False
    frame_type = FrameType.PAYLOAD

    def __post_init__(self) -> None:
        _check_stream_id(self.stream_id, connection_level=False)
        if not (self.complete or self.next or self.follows):
            raise LocalProtocolError(
                "a PAYLOAD frame needs at least one of next, complete, follows"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class Error:
    stream_id: int
    error_code: ErrorCode | int
    message: str = ""
    frame_type = FrameType.ERROR

    def __post_init__(self) -> None:
        if self.stream_id < 0 or self.stream_id > MAX_STREAM_ID:
            raise LocalProtocolError(f"ERROR stream id out of range: {self.stream_id}")
        if not 0 <= int(self.error_code) <= 0xFFFFFFFF:
            raise LocalProtocolError(f"error code must fit 32 bits, not {self.error_code}")


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataPush:
    metadata: bytes
    stream_id: int = 0
    frame_type = FrameType.METADATA_PUSH

    def __post_init__(self) -> None:
        _check_stream_id(self.stream_id, connection_level=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class Resume:
    token: bytes
    last_received_server_position: int
    first_available_client_position: int
    major: int = 1
    minor: int = 0
    stream_id: int = 0
    frame_type = FrameType.RESUME

    def __post_init__(self) -> None:
        _check_stream_id(self.stream_id, connection_level=True)
        _check_position(self.last_received_server_position, "RESUME last received position")
        _check_position(self.first_available_client_position, "RESUME first available position")


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumeOk:
    last_received_client_position: int
    stream_id: int = 0
    frame_type = FrameType.RESUME_OK

    def __post_init__(self) -> None:
        _check_stream_id(self.stream_id, connection_level=True)
        _check_position(self.last_received_client_position, "RESUME_OK position")


@dataclass(frozen=True, slots=True, kw_only=True)
class Ext:
    stream_id: int
    extended_type: int
    data: bytes = b""
    metadata: bytes | None = None
    ignore: bool = False
    frame_type = FrameType.EXT


Frame = (
    Setup
    | Lease
    | Keepalive
    | RequestResponse
    | RequestFnf
    | RequestStream
    | RequestChannel
    | RequestN
    | Cancel
    | Payload
    | Error
    | MetadataPush
    | Resume
    | ResumeOk
    | Ext
)
