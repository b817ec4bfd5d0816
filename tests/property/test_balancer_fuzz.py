"""A live balancer (in front of a real ``lblab server``) fed random and mutated byte streams.

After every example: the balancer is alive, it answered nothing before a SETUP but an
ERROR on stream 0 (and junk of 9 bytes or more got that ERROR and a close within 1 s),
the requests the fuzz client left behind were cancelled and accounted (GET /status:
outstanding and every backend's inflight back to 0), the server never had to drop its
shared connection, and a well-behaved client still gets its answer.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lblab.wire.codec import NEED_DATA, FrameDecoder, encode_frame
from lblab.wire.frames import (
    Cancel,
    Error,
    Keepalive,
    Payload,
    RequestChannel,
    RequestFnf,
    RequestN,
    RequestResponse,
    RequestStream,
)
from tests.integration.balancer_testbed import (
    RawClient,
    client_setup,
    processes,
    start_balancer,
    start_server,
    status_of,
    wait_for,
)

WORK = b'{"work_bytes": 100}'
CLIENT_FRAMES = [
    RequestResponse(stream_id=1, data=WORK),
    RequestResponse(stream_id=3, data=WORK, metadata=b"", follows=True),
    Payload(stream_id=3, data=b"}", next=True),
    RequestFnf(stream_id=5, data=WORK),
    RequestStream(stream_id=7, initial_n=2, data=WORK),
    RequestN(stream_id=7, n=1),
    RequestChannel(stream_id=9, initial_n=1, data=WORK),
    Payload(stream_id=9, data=WORK, next=True, complete=True),
    Cancel(stream_id=7),
    Keepalive(respond=True, data=b"k"),
    Error(stream_id=9, error_code=0x203, message="bye"),
]

ANSWERS = (Payload, Error, Keepalive, RequestN, Cancel)
"""What a balancer sends a client: answers, errors, keepalive echoes, a channel's flow control."""


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    logs = tmp_path_factory.mktemp("balancer-fuzz")
    server = start_server("s1", logs, "--max-inflight", "256")
    with processes(server) as kids:
        node = start_balancer([server], logs, "--setup-timeout", "1s", "--max-frame-bytes", "65536")
        kids.append(node)
        node.logs = logs
        yield node


def exchange(port: int, data: bytes, quiet_s: float = 0.15) -> tuple[list[object], bool]:
    """Send ``data``; collect the frames answered until the peer closes or is quiet."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=2)
    decoder = FrameDecoder()
    frames: list[object] = []
    closed = False
    try:
        sock.sendall(data)
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            sock.settimeout(quiet_s)
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            except ConnectionResetError:
                closed = True
                break
            if not chunk:
                closed = True
                break
            decoder.receive_data(chunk)
            while (frame := decoder.next_frame()) is not NEED_DATA:
                frames.append(frame)
    finally:
        sock.close()
    return frames, closed


def settled(node) -> None:
    def idle() -> bool:
        status = status_of(node)
        return status["outstanding"] == 0 and all(
            row["inflight"] == 0 for row in status["backends"]
        )

    wait_for(idle, 5, "the balancer's in-flight count back to 0")
    client = RawClient(node.ready["port"])
    client.send(client_setup(), RequestResponse(stream_id=1, data=WORK))
    reply = client.recv()
    assert isinstance(reply, Payload) and b'"server":"s1"' in reply.data, reply
    client.close()
    assert node.alive()
    assert "closing a connection" not in (node.logs / "s1.log").read_text()


@settings(max_examples=25, deadline=None)
@given(st.binary(min_size=1, max_size=300))
def test_random_bytes_before_setup(live, data):
    start = time.monotonic()
    frames, closed = exchange(live.ready["port"], data)
    assert all(isinstance(f, Error) and f.stream_id == 0 for f in frames), frames
    if len(data) >= 9:  # the whole header is in: judged at once
        assert len(frames) == 1 and closed, (frames, closed)
        assert time.monotonic() - start < 1.0
    settled(live)


@st.composite
def mutated_session(draw) -> bytes:
    frames = draw(st.lists(st.sampled_from(CLIENT_FRAMES), min_size=1, max_size=6))
    data = bytearray(b"".join(encode_frame(f) for f in frames))
    for _ in range(draw(st.integers(0, 4))):
        i = draw(st.integers(0, len(data) - 1))
        how = draw(st.sampled_from(["byte", "u32", "flags", "cut"]))
        if how == "byte":
            data[i] = draw(st.integers(0, 255))
        elif how == "u32" and i + 4 <= len(data):
            value = draw(st.sampled_from([0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]))
            data[i : i + 4] = struct.pack(">I", value)
        elif how == "flags" and i + 1 < len(data):
            data[i + 1] = draw(st.integers(0, 255))
        elif how == "cut":
            del data[i:]
            break
    return encode_frame(client_setup()) + bytes(data)


@pytest.mark.slow
@settings(max_examples=40, deadline=None)
@given(mutated_session())
def test_mutated_frames_after_setup(live, data):
    frames, _ = exchange(live.ready["port"], data)  # what comes back must decode cleanly
    assert all(isinstance(f, ANSWERS) for f in frames), frames
    settled(live)
