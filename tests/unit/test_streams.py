"""The balancer's sans-I/O frame walk on a buffer (stream ids: tests/unit/test_wire_connection.py)."""

from __future__ import annotations

import pytest

from lblab.balancer.framing import INITIAL_BUFFER_BYTES, FrameProtocol
from lblab.errors import RemoteProtocolError
from lblab.wire.codec import encode_frame
from lblab.wire.codes import FrameType
from lblab.wire.frames import Cancel, Keepalive, Payload, RequestResponse, RequestStream

# ---------------------------------------------------------------- frame walk


class Recorder(FrameProtocol):
    """Records each frame as (stream id, type, flags, bytes) and any protocol error."""

    __slots__ = ("errors", "frames")

    def __init__(self, max_frame_bytes: int = 0xFFFFFF) -> None:
        super().__init__(max_frame_bytes)
        self.frames: list[tuple[int, int, int, bytes]] = []
        self.errors: list[RemoteProtocolError] = []

    def on_frame(self, pos, length, stream_id, frame_type, flags):
        self.frames.append((stream_id, frame_type, flags, bytes(self.buf[pos : pos + 3 + length])))
        return True

    def protocol_error(self, exc):
        self.errors.append(exc)

    def feed(self, data: bytes, chunk: int) -> None:
        view = memoryview(data)
        while view:
            target = self.get_buffer(-1)
            n = min(len(target), len(view), chunk)
            target[:n] = view[:n]
            self.buffer_updated(n)
            view = view[n:]


FRAMES = [
    RequestResponse(stream_id=1, data=b'{"x": 1}', metadata=b"m"),
    Keepalive(respond=True, data=b"k"),
    RequestStream(stream_id=3, initial_n=5, data=b"s"),
    Payload(stream_id=1, data=b"p" * 300, follows=True),
    Cancel(stream_id=3),
]


@pytest.mark.parametrize("chunk", [1, 2, 5, 9, 17, 64, 1 << 20])
def test_walk_yields_every_frame_whatever_the_split(chunk):
    data = b"".join(encode_frame(f) for f in FRAMES)
    rec = Recorder()
    rec.feed(data, chunk)
    assert not rec.errors
    assert [r[3] for r in rec.frames] == [encode_frame(f) for f in FRAMES]
    assert [(r[0], r[1]) for r in rec.frames] == [(f.stream_id, f.frame_type) for f in FRAMES]
    assert rec.frames[3][2] & 0x80  # FOLLOWS seen on the PAYLOAD


def test_a_frame_larger_than_the_buffer_grows_it():
    big = encode_frame(RequestResponse(stream_id=1, data=b"z" * (3 * INITIAL_BUFFER_BYTES)))
    rec = Recorder()
    rec.feed(big + encode_frame(Cancel(stream_id=1)), 100_000)
    assert [r[3] for r in rec.frames] == [big, encode_frame(Cancel(stream_id=1))]


def test_a_grown_buffer_is_kept_while_large_frames_come_and_trimmed_after():
    big = encode_frame(RequestResponse(stream_id=1, data=b"z" * (3 * INITIAL_BUFFER_BYTES)))
    rec = Recorder()
    rec.feed(big, 100_000)
    grown = rec.buf
    assert len(grown) >= len(big)
    rec.trim()  # a large frame came since the last trim: kept
    rec.feed(big, 100_000)
    assert rec.buf is grown  # the second large frame reused it: no new allocation
    rec.trim()
    assert rec.buf is grown
    rec.trim()  # nothing large since the last trim: memory given back
    assert len(rec.buf) == INITIAL_BUFFER_BYTES
    rec.feed(big, 100_000)
    assert [r[3] for r in rec.frames] == [big] * 3


def test_a_length_prefix_alone_reserves_no_memory():
    rec = Recorder()
    rec.feed(b"\xff\xff\xff", 3)  # a 16 MiB frame announced, nothing more sent
    assert not rec.errors
    assert len(rec.buf) == INITIAL_BUFFER_BYTES


def test_a_length_over_the_limit_is_refused_before_the_body_arrives():
    rec = Recorder(max_frame_bytes=1000)
    rec.feed(b"\x00\x10\x00", 3)  # a 4096-byte frame announced, nothing more sent
    assert len(rec.errors) == 1 and "exceeds the limit of 1000" in str(rec.errors[0])
    assert rec.errors[0].error_code == 0x101


def test_a_length_under_the_header_is_refused():
    rec = Recorder()
    rec.feed(b"\x00\x00\x04abcd", 8)
    assert rec.errors and "shorter than the 6-byte header" in str(rec.errors[0])


def test_frame_type_values_match_the_spec():
    rec = Recorder()
    rec.feed(encode_frame(Cancel(stream_id=9)), 100)
    assert rec.frames[0][:2] == (9, FrameType.CANCEL)


# ---------------------------------------------------------------- replay buffer


def test_a_request_larger_than_the_replay_bound_is_let_go_not_kept():
    from lblab.balancer.strategies.base import RequestView
    from lblab.balancer.streams import MAX_REPLAY_BYTES, Stream

    stream = Stream(None, 1, FrameType.REQUEST_RESPONSE, RequestView(request_id=1), 0.0, 1.0)
    chunk = bytearray(MAX_REPLAY_BYTES // 4)
    for _ in range(4):
        stream.keep(chunk)
    assert stream.saved is not None and len(stream.saved) == 4
    stream.keep(b"x")  # one byte past the bound: nothing is held for a replay any more
    assert stream.saved is None
    stream.keep(chunk)
    assert stream.saved is None
    fnf = Stream(None, 3, FrameType.REQUEST_FNF, RequestView(request_id=2), 0.0, 1.0)
    fnf.keep(chunk)  # never replayed, never kept
    assert fnf.saved is None
