"""RSocket 1.0 numbers: frame types, error codes, flag bits and protocol limits."""

from __future__ import annotations

from enum import IntEnum
from struct import Struct
from typing import Final


class FrameType(IntEnum):
    SETUP = 0x01
    LEASE = 0x02
    KEEPALIVE = 0x03
    REQUEST_RESPONSE = 0x04
    REQUEST_FNF = 0x05
    REQUEST_STREAM = 0x06
    REQUEST_CHANNEL = 0x07
    REQUEST_N = 0x08
    CANCEL = 0x09
    PAYLOAD = 0x0A
    ERROR = 0x0B
    METADATA_PUSH = 0x0C
    RESUME = 0x0D
    RESUME_OK = 0x0E
    EXT = 0x3F


class ErrorCode(IntEnum):
    INVALID_SETUP = 0x001
    UNSUPPORTED_SETUP = 0x002
    REJECTED_SETUP = 0x003
    REJECTED_RESUME = 0x004
    CONNECTION_ERROR = 0x101
    CONNECTION_CLOSE = 0x102
    APPLICATION_ERROR = 0x201
    REJECTED = 0x202
    CANCELED = 0x203
    INVALID = 0x204


# Flag bits of the 10-bit flags field. 0x80 and 0x40 mean different things per frame type:
# FOLLOWS on REQUEST_* / PAYLOAD, RESPOND on KEEPALIVE, RESUME on SETUP
# (docs/FIELD-NOTES.md, "Frame-level forwarding: what bites").
FLAG_IGNORE: Final = 0x200
FLAG_METADATA: Final = 0x100
FLAG_FOLLOWS: Final = 0x80
FLAG_RESPOND: Final = 0x80
FLAG_RESUME: Final = 0x80
FLAG_LEASE: Final = 0x40
FLAG_COMPLETE: Final = 0x40
FLAG_NEXT: Final = 0x20
FLAGS_MASK: Final = 0x3FF

MAJOR_VERSION: Final = 1
MINOR_VERSION: Final = 0

# The TCP length prefix is 24 bits, so no frame body can exceed this (spec, "Framing").
MAX_FRAME_LENGTH: Final = 0xFFFFFF
# Stream ids and REQUEST_N are 31-bit values.
MAX_STREAM_ID: Final = 0x7FFFFFFF
MAX_REQUEST_N: Final = 0x7FFFFFFF
# KEEPALIVE and RESUME positions are 63-bit values.
MAX_POSITION: Final = 0x7FFFFFFFFFFFFFFF
# The first frame of a connection (SETUP) is refused above this before its body is awaited:
# a SETUP carries two MIME types and a small payload (credentials, options).
MAX_SETUP_LENGTH: Final = 64 * 1024
FRAME_HEADER_LENGTH: Final = 6  # stream id (4) + type and flags (2)
LENGTH_PREFIX_LENGTH: Final = 3

# Module-level structs: unpack_from on the receive buffer builds no intermediate bytes.
HEADER: Final = Struct(">IH")  # stream id, type << 10 | flags
PREFIXED_HEADER: Final = Struct(">BHIH")  # length prefix (high byte, low 16 bits), HEADER
U8: Final = Struct(">B")
U16: Final = Struct(">H")
U32: Final = Struct(">I")
U64: Final = Struct(">Q")


CONNECTION_LEVEL: Final = frozenset(
    int(t)
    for t in (
        FrameType.SETUP,
        FrameType.LEASE,
        FrameType.KEEPALIVE,
        FrameType.METADATA_PUSH,
        FrameType.RESUME,
        FrameType.RESUME_OK,
    )
)
"""The frame types that belong on stream 0 only."""


def misplaced_frame(frame_type: int, stream_id: int) -> str:
    """Why a frame of ``frame_type`` cannot be on stream ``stream_id`` (not 0)."""
    if frame_type in CONNECTION_LEVEL:
        return f"{FrameType(frame_type).name} must be on stream 0, not stream {stream_id}"
    return f"unexpected frame type 0x{frame_type:02x} on stream {stream_id}"
