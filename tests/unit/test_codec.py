"""Codec: every frame type round-trips, byte for byte, fed whole and split at every offset."""

from __future__ import annotations

import pytest

from lblab.errors import RemoteProtocolError
from lblab.wire.codec import NEED_DATA, FrameDecoder, encode_frame
from lblab.wire.codes import ErrorCode
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

FRAMES = [
    Setup(
        keepalive_ms=1000,
        max_lifetime_ms=5000,
        data_mime="application/json",
        metadata_mime="message/x.rsocket.composite-metadata.v0",
        metadata=b"m",
        data=b"hi",
    ),
    Setup(
        keepalive_ms=1,
        max_lifetime_ms=2,
        data_mime="a",
        metadata_mime="b",
        lease=True,
        resume_token=b"tok",
    ),
    Lease(ttl_ms=10, number_of_requests=5, metadata=b"lm"),
    Keepalive(respond=True, last_received_position=7, data=b"d"),
    RequestResponse(stream_id=1, data=b"{}", metadata=b"abc"),
    RequestResponse(stream_id=3, data=b"", metadata=b"", follows=True),
    RequestFnf(stream_id=9, data=b"f"),
    RequestStream(stream_id=5, initial_n=10, data=b"a"),
    RequestChannel(stream_id=7, initial_n=1, complete=True, metadata=b"x"),
    RequestN(stream_id=5, n=3),
    Cancel(stream_id=5),
    Payload(stream_id=1, data=b"x", next=True, complete=True),
    Payload(stream_id=1, data=b"x" * 300, metadata=b"y", next=True, follows=True),
    Error(stream_id=3, error_code=ErrorCode.REJECTED, message="overloaded: try elsewhere"),
    Error(stream_id=0, error_code=ErrorCode.CONNECTION_ERROR, message="bad"),
    MetadataPush(metadata=b"mm"),
    Resume(token=b"t", last_received_server_position=1, first_available_client_position=2),
    ResumeOk(last_received_client_position=4),
    Ext(stream_id=1, extended_type=5, data=b"e"),
]

# Hand-checked bytes for one frame, so the encoder is pinned to the spec, not to itself.
KNOWN_BYTES = [
    (
        Payload(stream_id=1, data=b"ok", next=True, complete=True),
        bytes.fromhex("000008000000012860") + b"ok",
    ),
    (RequestN(stream_id=5, n=3), bytes.fromhex("00000a00000005200000000003")),
    (Cancel(stream_id=2), bytes.fromhex("000006000000022400")),
]


def drain(decoder: FrameDecoder) -> list:
    out = []
    while (frame := decoder.next_frame()) is not NEED_DATA:
        out.append(frame)
    return out


@pytest.mark.parametrize("frame", FRAMES, ids=lambda f: type(f).__name__)
def test_round_trip(frame) -> None:
    d = FrameDecoder()
    d.receive_data(encode_frame(frame))
    assert drain(d) == [frame]
    assert d.buffered == 0


@pytest.mark.parametrize(("frame", "raw"), KNOWN_BYTES, ids=lambda x: type(x).__name__)
def test_known_bytes(frame, raw: bytes) -> None:
    assert encode_frame(frame) == raw


def test_split_at_every_offset() -> None:
    stream = b"".join(encode_frame(f) for f in FRAMES)
    for cut in range(len(stream) + 1):
        d = FrameDecoder()
        d.receive_data(stream[:cut])
        got = drain(d)
        d.receive_data(stream[cut:])
        got += drain(d)
        assert got == FRAMES, cut


def test_byte_at_a_time() -> None:
    stream = b"".join(encode_frame(f) for f in FRAMES)
    d = FrameDecoder()
    got = []
    for i in range(len(stream)):
        d.receive_data(stream[i : i + 1])
        got += drain(d)
    assert got == FRAMES


@pytest.mark.parametrize(
    ("raw", "code", "words"),
    [
        (bytes.fromhex("000006000000018000"), ErrorCode.CONNECTION_ERROR, "unknown frame type"),
        (bytes.fromhex("000003000000"), ErrorCode.CONNECTION_ERROR, "shorter than"),
        (bytes.fromhex("0000080000000004000000"), ErrorCode.INVALID_SETUP, "SETUP"),
        (bytes.fromhex("000006000000001000"), ErrorCode.CONNECTION_ERROR, "stream id 0"),
    ],
)
def test_malformed_frames_raise_remote_errors(raw: bytes, code: ErrorCode, words: str) -> None:
    d = FrameDecoder()
    d.receive_data(raw)
    with pytest.raises(RemoteProtocolError, match=words) as info:
        d.next_frame()
    assert info.value.error_code == code
    with pytest.raises(RemoteProtocolError):  # stays in error
        d.next_frame()


def test_unknown_type_with_ignore_flag_is_skipped() -> None:
    d = FrameDecoder()
    d.receive_data(bytes.fromhex("000006000000018200") + encode_frame(Cancel(stream_id=1)))
    assert drain(d) == [Cancel(stream_id=1)]


def test_oversized_length_prefix_refused_before_body_arrives() -> None:
    d = FrameDecoder(max_frame_length=1024)
    d.receive_data(b"\x00\x08\x00")
    with pytest.raises(RemoteProtocolError, match="exceeds the limit"):
        d.next_frame()
