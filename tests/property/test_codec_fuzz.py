"""The codec against hostile bytes: whatever arrives, it only ever raises RemoteProtocolError.

Random byte streams, valid frames mutated (bytes flipped, cut short, length prefix
rewritten, fields set out of range) and the named out-of-range cases of issue 11, each
with the error code the spec asks for.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lblab.errors import RemoteProtocolError
from lblab.wire.codec import NEED_DATA, FrameDecoder, check_first_frame, encode_frame
from lblab.wire.codes import HEADER, ErrorCode, FrameType
from lblab.wire.frames import (
    Cancel,
    Error,
    Ext,
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

SETUP = Setup(
    keepalive_ms=1000,
    max_lifetime_ms=5000,
    metadata_mime="message/x.rsocket.composite-metadata.v0",
    data_mime="application/json",
    metadata=b"m",
    data=b"{}",
)
VALID = [
    SETUP,
    Lease(ttl_ms=10, number_of_requests=5, metadata=b"lm"),
    Keepalive(respond=True, last_received_position=7, data=b"d"),
    RequestResponse(stream_id=1, data=b"{}", metadata=b"abc"),
    RequestFnf(stream_id=9, data=b"f", follows=True),
    RequestStream(stream_id=5, initial_n=10, data=b"a", metadata=b"k"),
    RequestChannel(stream_id=7, initial_n=1, complete=True, metadata=b"x"),
    RequestN(stream_id=5, n=3),
    Cancel(stream_id=5),
    Payload(stream_id=1, data=b"x", metadata=b"y", next=True, follows=True),
    Error(stream_id=3, error_code=ErrorCode.REJECTED, message="busy"),
    MetadataPush(metadata=b"mm"),
    Resume(token=b"t", last_received_server_position=1, first_available_client_position=2),
    ResumeOk(last_received_client_position=4),
    Ext(stream_id=1, extended_type=5, data=b"e", metadata=b""),
]


def feed(data: bytes, chunk: int = 0, *, first_frame: bool = False) -> list[object]:
    """Decode ``data`` (in ``chunk``-byte pieces, 0: whole); return the frames."""
    decoder = FrameDecoder(first_frame=first_frame)
    frames: list[object] = []
    pieces = [data] if not chunk else [data[i : i + chunk] for i in range(0, len(data), chunk)]
    for piece in pieces:
        decoder.receive_data(piece)
        while (frame := decoder.next_frame()) is not NEED_DATA:
            frames.append(frame)
    return frames


def only_protocol_errors(data: bytes, chunk: int = 0, *, first_frame: bool = False) -> None:
    try:
        feed(data, chunk, first_frame=first_frame)
    except RemoteProtocolError as exc:
        assert isinstance(exc.error_code, int) and exc.error_code in set(ErrorCode)
        assert str(exc)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=512), st.integers(0, 17), st.booleans())
def test_random_bytes_only_raise_remote_protocol_error(data, chunk, first_frame):
    only_protocol_errors(data, chunk, first_frame=first_frame)


@st.composite
def mutated(draw) -> bytes:
    frames = draw(st.lists(st.sampled_from(VALID), min_size=1, max_size=4))
    data = bytearray(b"".join(encode_frame(f) for f in frames))
    for _ in range(draw(st.integers(1, 6))):
        how = draw(st.sampled_from(["flip", "cut", "length", "u32", "flags"]))
        i = draw(st.integers(0, len(data) - 1))
        if how == "flip":
            data[i] = draw(st.integers(0, 255))
        elif how == "cut":
            del data[i:]
        elif how == "length" and len(data) >= 3:
            data[0:3] = draw(st.integers(0, 0xFFFFFF)).to_bytes(3, "big")
        elif how == "u32" and i + 4 <= len(data):
            value = draw(st.sampled_from([0, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]))
            data[i : i + 4] = struct.pack(">I", value)
        elif how == "flags" and len(data) >= 9:
            data[7] = (data[7] & 0xFC) | draw(st.integers(0, 3))
            data[8] = draw(st.integers(0, 255))
        if not data:
            break
    return bytes(data)


@settings(max_examples=600, deadline=None)
@given(mutated(), st.integers(0, 9), st.booleans())
def test_mutated_frames_only_raise_remote_protocol_error(data, chunk, first_frame):
    only_protocol_errors(data, chunk, first_frame=first_frame)


def raw(stream_id: int, frame_type: int, flags: int, body: bytes = b"") -> bytes:
    frame = HEADER.pack(stream_id, frame_type << 10 | flags) + body
    return len(frame).to_bytes(3, "big") + frame


def setup_body(keepalive: int, lifetime: int) -> bytes:
    mime = b"\x10application/json"
    return struct.pack(">HHII", 1, 0, keepalive, lifetime) + mime + mime


OUT_OF_RANGE = {
    "SETUP keepalive 2^31": (raw(0, FrameType.SETUP, 0, setup_body(2**31, 10)), "INVALID_SETUP"),
    "SETUP lifetime 2^32-1": (
        raw(0, FrameType.SETUP, 0, setup_body(1, 2**32 - 1)),
        "INVALID_SETUP",
    ),
    "SETUP keepalive 0": (raw(0, FrameType.SETUP, 0, setup_body(0, 10)), "INVALID_SETUP"),
    "SETUP on stream 1": (raw(1, FrameType.SETUP, 0, setup_body(1, 10)), "INVALID_SETUP"),
    "SETUP metadata past the end": (
        raw(0, FrameType.SETUP, 0x100, setup_body(1, 10) + b"\x00\x00\x09ab"),
        "INVALID_SETUP",
    ),
    "REQUEST_N 0": (raw(1, FrameType.REQUEST_N, 0, bytes(4)), "CONNECTION_ERROR"),
    "REQUEST_N 2^31": (
        raw(1, FrameType.REQUEST_N, 0, struct.pack(">I", 2**31)),
        "CONNECTION_ERROR",
    ),
    "REQUEST_N without n": (raw(1, FrameType.REQUEST_N, 0, b"\x01"), "CONNECTION_ERROR"),
    "REQUEST_STREAM n 0": (raw(1, FrameType.REQUEST_STREAM, 0, bytes(4)), "CONNECTION_ERROR"),
    "REQUEST_STREAM too short for n": (
        raw(1, FrameType.REQUEST_STREAM, 0, b"\x00\x01"),
        "CONNECTION_ERROR",
    ),
    "REQUEST_CHANNEL too short for n": (
        raw(1, FrameType.REQUEST_CHANNEL, 0, b""),
        "CONNECTION_ERROR",
    ),
    "LEASE ttl 2^31": (
        raw(0, FrameType.LEASE, 0, struct.pack(">II", 2**31, 1)),
        "CONNECTION_ERROR",
    ),
    "LEASE count 2^32-1": (
        raw(0, FrameType.LEASE, 0, struct.pack(">II", 1, 2**32 - 1)),
        "CONNECTION_ERROR",
    ),
    "LEASE on stream 3": (raw(3, FrameType.LEASE, 0, struct.pack(">II", 1, 1)), "CONNECTION_ERROR"),
    "KEEPALIVE position 2^63": (
        raw(0, FrameType.KEEPALIVE, 0, struct.pack(">Q", 2**63)),
        "CONNECTION_ERROR",
    ),
    "PAYLOAD with none of N/C/F": (raw(1, FrameType.PAYLOAD, 0, b"x"), "CONNECTION_ERROR"),
    "PAYLOAD metadata past the end": (
        raw(1, FrameType.PAYLOAD, 0x120, b"\x00\x01\x00xx"),
        "CONNECTION_ERROR",
    ),
    "REQUEST_RESPONSE metadata length cut": (
        raw(1, FrameType.REQUEST_RESPONSE, 0x100, b"\x00"),
        "CONNECTION_ERROR",
    ),
    "REQUEST_RESPONSE on stream 0": (
        raw(0, FrameType.REQUEST_RESPONSE, 0, b"{}"),
        "CONNECTION_ERROR",
    ),
    "RESUME_OK position 2^63": (
        raw(0, FrameType.RESUME_OK, 0, struct.pack(">Q", 2**63)),
        "CONNECTION_ERROR",
    ),
    "stream id top bit": (raw(2**31 + 1, FrameType.CANCEL, 0), "CONNECTION_ERROR"),
    "unknown type without IGNORE": (raw(1, 0x30, 0, b""), "CONNECTION_ERROR"),
}


@pytest.mark.parametrize("case", list(OUT_OF_RANGE))
def test_out_of_range_values_get_the_right_code(case):
    data, code = OUT_OF_RANGE[case]
    with pytest.raises(RemoteProtocolError) as info:
        feed(data)
    assert info.value.error_code == ErrorCode[code]


def test_unknown_type_with_ignore_flag_is_dropped():
    assert feed(raw(1, 0x30, 0x200, b"xx") + encode_frame(Cancel(stream_id=1))) == [
        Cancel(stream_id=1)
    ]


FIRST_FRAMES = {
    "FF FF FF": (b"\xff\xff\xff", ErrorCode.INVALID_SETUP),
    "length 2": (b"\x00\x00\x02", ErrorCode.INVALID_SETUP),
    "REQUEST_RESPONSE header": (raw(1, FrameType.REQUEST_RESPONSE, 0)[:9], ErrorCode.INVALID_SETUP),
    "SETUP on stream 5": (raw(5, FrameType.SETUP, 0)[:9], ErrorCode.INVALID_SETUP),
    "RESUME header": (raw(0, FrameType.RESUME, 0)[:9], ErrorCode.REJECTED_RESUME),
}


@pytest.mark.parametrize("case", list(FIRST_FRAMES))
def test_first_frame_is_judged_from_its_header(case):
    data, code = FIRST_FRAMES[case]
    with pytest.raises(RemoteProtocolError) as info:
        check_first_frame(data, 0, len(data))
    assert info.value.error_code == code
    with pytest.raises(RemoteProtocolError):  # the decoder does it before the body arrives
        feed(data, first_frame=True)


def test_first_frame_check_passes_a_setup_and_then_anything():
    data = encode_frame(SETUP) + encode_frame(RequestN(stream_id=1, n=1))
    for cut in range(len(data) + 1):  # any prefix of a good start is fine so far
        check_first_frame(data, 0, cut)
    assert feed(data, 1, first_frame=True) == [SETUP, RequestN(stream_id=1, n=1)]
