"""Hostile input at the server's port: every bad byte gets the spec's answer, nothing more.

Raw frames over plain sockets against a real ``lblab server``: junk and absurd lengths
before SETUP are refused from the first bytes, idle connections are closed at the
SETUP deadline and capped, malformed frames close only their own connection, what one
connection holds across its streams is bounded, and absurd work sizes are refused
cheaply. After each case a well-behaved client is still served. Hypothesis feeds the
server mutated sessions directly (the balancer's checks in front of it are fuzzed in
``tests/property/test_balancer_fuzz.py``).
"""

from __future__ import annotations

import json
import random
import struct
import time

import pytest
from balancer_testbed import (
    RawClient,
    assert_a_refusal_ends_in_a_fin,
    client_setup,
    processes,
    raw_frame,
    start_server,
    wait_for,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from lblab.wire.codec import encode_frame
from lblab.wire.codes import ErrorCode, FrameType
from lblab.wire.frames import (
    Cancel,
    Error,
    Keepalive,
    Payload,
    RequestChannel,
    RequestN,
    RequestResponse,
    RequestStream,
)

SETUP_TIMEOUT_S = 1.0
MAX_PENDING_SETUP = 32
MIB = 2**20


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    logs = tmp_path_factory.mktemp("server-bad-input")
    child = start_server(
        "s1",
        logs,
        "--max-inflight",
        "64",
        "--setup-timeout",
        str(SETUP_TIMEOUT_S),
        "--max-pending-setup",
        str(MAX_PENDING_SETUP),
    )
    with processes(child):
        child.logs = logs
        yield child


def connect(server, *frames) -> RawClient:
    client = RawClient(server.ready["port"])
    client.send(client_setup(), *frames)
    return client


def work(work_bytes: int, **extra: object) -> bytes:
    return json.dumps({"work_bytes": work_bytes, **extra}).encode()


def still_serves(server) -> None:
    client = connect(server, RequestResponse(stream_id=1, data=work(0)))
    reply = client.recv()
    assert isinstance(reply, Payload) and json.loads(reply.data)["server"] == "s1", reply
    client.close()
    assert server.alive()
    assert "Traceback" not in (server.logs / "s1.log").read_text()


def expect_error(client: RawClient, code: ErrorCode, text: str = "", stream_id: int = 0) -> Error:
    frame = client.recv()
    assert isinstance(frame, Error), frame
    assert (frame.stream_id, frame.error_code) == (stream_id, code), frame
    assert text in frame.message, frame.message
    return frame


@pytest.mark.parametrize("seed", range(8))
def test_random_bytes_get_an_error_and_a_close_within_1s(server, seed):
    client = RawClient(server.ready["port"])
    client.send_raw(random.Random(seed).randbytes(256))
    frame = client.recv(timeout=1.0)
    assert isinstance(frame, Error) and frame.stream_id == 0, frame
    assert frame.error_code in (ErrorCode.INVALID_SETUP, ErrorCode.REJECTED_RESUME), frame
    assert client.closed(timeout=1.0)
    still_serves(server)


FIRST_BYTES = {
    "FF FF FF": (b"\xff\xff\xff", ErrorCode.INVALID_SETUP, "announces 16777215 bytes"),
    "request header": (
        raw_frame(1, FrameType.REQUEST_RESPONSE, 0)[:9],
        ErrorCode.INVALID_SETUP,
        "must be SETUP",
    ),
    "RESUME header": (raw_frame(0, FrameType.RESUME, 0)[:9], ErrorCode.REJECTED_RESUME, "resum"),
    "SETUP keepalive 2^31": (
        raw_frame(
            0,
            FrameType.SETUP,
            0,
            struct.pack(">HHII", 1, 0, 2**31, 1000) + b"\x01a\x01b",
        ),
        ErrorCode.INVALID_SETUP,
        "keepalive_ms",
    ),
}


@pytest.mark.parametrize("case", list(FIRST_BYTES))
def test_the_first_bytes_are_judged_at_once(server, case):
    data, code, text = FIRST_BYTES[case]
    client = RawClient(server.ready["port"])
    client.send_raw(data)
    expect_error(client, code, text)
    assert client.closed(timeout=1.0)
    still_serves(server)


def test_connections_without_setup_are_closed_at_the_deadline(server):
    clients = [RawClient(server.ready["port"]) for _ in range(5)]
    start = time.monotonic()
    for client in clients:
        expect_error(client, ErrorCode.INVALID_SETUP, "no SETUP within")
        assert client.closed()
    assert time.monotonic() - start < SETUP_TIMEOUT_S + 1.5


def test_too_many_connections_without_setup_close_the_oldest(server):
    idle = [RawClient(server.ready["port"]) for _ in range(MAX_PENDING_SETUP + 5)]
    try:
        still_serves(server)
        expect_error(idle[0], ErrorCode.REJECTED_SETUP, "waiting for their SETUP")
    finally:
        for client in idle:
            client.close()


MALFORMED = {
    "REQUEST_N of 0": raw_frame(1, FrameType.REQUEST_N, 0, bytes(4)),
    "REQUEST_STREAM too short for n": raw_frame(1, FrameType.REQUEST_STREAM, 0, b"\x00"),
    "metadata past the frame end": raw_frame(
        1, FrameType.REQUEST_RESPONSE, 0x100, b"\x00\x10\x00abc"
    ),
    "PAYLOAD with none of N/C/F": raw_frame(1, FrameType.PAYLOAD, 0, b"{}"),
    "LEASE of 2^31": raw_frame(0, FrameType.LEASE, 0, struct.pack(">II", 2**31, 1)),
    "KEEPALIVE on stream 1": raw_frame(1, FrameType.KEEPALIVE, 0, bytes(8)),
    "unknown type without IGNORE": raw_frame(1, 0x30, 0, b"x"),
    "frame shorter than its header": b"\x00\x00\x02ab",
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_a_malformed_frame_closes_only_its_connection(server, case):
    bystander = connect(server, RequestResponse(stream_id=1, data=work(300_000)))
    client = connect(server)
    client.send_raw(MALFORMED[case])
    expect_error(client, ErrorCode.CONNECTION_ERROR)
    assert client.closed()
    reply = bystander.recv()
    assert isinstance(reply, Payload) and json.loads(reply.data)["work_bytes"] == 300_000
    bystander.close()
    still_serves(server)


def test_frames_the_spec_says_to_ignore_are_ignored(server):
    client = connect(
        server,
        RequestN(stream_id=41, n=5),  # late frames of streams that do not exist
        Payload(stream_id=43, data=b"x", next=True),
    )
    client.send_raw(raw_frame(45, FrameType.CANCEL, 0) + raw_frame(1, 0x30, 0x200, b"ext"))
    client.send(RequestResponse(stream_id=1, data=work(0)))
    reply = client.recv()
    assert isinstance(reply, Payload) and reply.stream_id == 1, reply
    client.close()


def fragments(sid: int, total: int, first: bool, chunk: int = MIB) -> bytes:
    """``total`` bytes of a fragmented request on ``sid`` (all with FOLLOWS: unfinished)."""
    out = []
    for i in range(total // chunk):
        if first and i == 0:
            out.append(raw_frame(sid, FrameType.REQUEST_RESPONSE, 0x80, b"x" * chunk))
        else:
            out.append(raw_frame(sid, FrameType.PAYLOAD, 0x80 | 0x20, b"x" * chunk))
    return b"".join(out)


def test_what_one_connection_holds_is_bounded_across_its_streams(server):
    """Eight unfinished 9 MiB requests pass the 64 MiB per connection: the eighth is refused
    with a stream ERROR, the connection (a balancer's, shared) carries on."""
    client = connect(server)
    for i in range(8):
        client.send_raw(fragments(2 * i + 1, 9 * MIB, first=True))
    error = expect_error(client, ErrorCode.REJECTED, "unfinished requests", stream_id=15)
    assert "64" in error.message or str(64 * MIB) in error.message
    client.send_raw(raw_frame(15, FrameType.PAYLOAD, 0x80 | 0x20, b"more"))  # dropped
    for i in range(7):
        client.send_raw(raw_frame(2 * i + 1, FrameType.CANCEL, 0))  # frees what they held
    client.send(RequestResponse(stream_id=15, data=work(0)))  # the refused id, reused
    reply = client.recv()
    assert isinstance(reply, Payload) and reply.stream_id == 15, reply
    client.send_raw(fragments(103, 60 * MIB, first=True))  # room again after the CANCELs
    client.send(RequestResponse(stream_id=105, data=work(0)))
    reply = client.recv()
    assert isinstance(reply, Payload) and reply.stream_id == 105, reply
    client.close()
    still_serves(server)


def test_a_channel_that_ignores_its_credit_is_ended_not_buffered(server):
    """Channel items beyond what REQUEST_N granted queue up; past the cap the channel ends."""
    client = connect(server, RequestChannel(stream_id=1, initial_n=1, data=work(1_000_000)))
    item = raw_frame(1, FrameType.PAYLOAD, 0x20, b"x" * MIB)
    client.send_raw(item * 70)
    error = client.recv()
    while isinstance(error, RequestN | Payload):  # its credit and first answer come first
        error = client.recv()
    assert isinstance(error, Error) and error.stream_id == 1, error
    assert error.error_code == ErrorCode.REJECTED and "unfinished requests" in error.message
    client.send(RequestResponse(stream_id=3, data=work(0)))
    reply = client.recv()
    while not (isinstance(reply, Payload) and reply.stream_id == 3):
        assert reply.stream_id == 1, reply  # only late frames of the ended channel
        reply = client.recv()
    client.close()


def test_payload_fragments_of_no_stream_are_not_held(server):
    client = connect(server)
    client.send_raw(fragments(77, 70 * MIB, first=False))  # would pass the cap if held
    client.send(RequestResponse(stream_id=1, data=work(0)))
    reply = client.recv()
    assert isinstance(reply, Payload) and reply.stream_id == 1, reply
    client.close()


ABSURD_WORK = {
    "work_bytes of 16 MB": (work(16_000_000), "exceeds this server's cap of 2000000"),
    "10,000 items of 1 MB": (work(1_000_000, items=10_000), "bytes of work per stream"),
    "negative work_bytes": (work(-5), "must be >= 0"),
}


@pytest.mark.parametrize("case", list(ABSURD_WORK))
def test_absurd_work_sizes_are_refused_cheaply(server, case):
    data, text = ABSURD_WORK[case]
    client = connect(server)
    start = time.monotonic()
    client.send(RequestStream(stream_id=1, initial_n=1, data=data))
    expect_error(client, ErrorCode.APPLICATION_ERROR, text, stream_id=1)
    assert time.monotonic() - start < 0.5
    client.close()


def test_the_thesis_1_mb_work_volume_still_works(server):
    client = connect(server, RequestResponse(stream_id=1, data=work(1_000_000)))
    reply = client.recv(timeout=10)
    assert isinstance(reply, Payload) and json.loads(reply.data)["work_bytes"] == 1_000_000
    client.close()


SESSION_FRAMES = [
    RequestResponse(stream_id=1, data=work(100)),
    RequestResponse(stream_id=3, data=work(100)[:5], metadata=b"", follows=True),
    Payload(stream_id=3, data=work(100)[5:], next=True),
    RequestStream(stream_id=5, initial_n=2, data=work(100)),
    RequestN(stream_id=5, n=1),
    RequestChannel(stream_id=7, initial_n=1, data=work(100)),
    Payload(stream_id=7, data=work(100), next=True, complete=True),
    Cancel(stream_id=5),
    Keepalive(respond=True, data=b"k"),
]


@st.composite
def mutated_session(draw) -> bytes:
    frames = draw(st.lists(st.sampled_from(SESSION_FRAMES), min_size=1, max_size=6))
    data = bytearray(b"".join(encode_frame(f) for f in frames))
    for _ in range(draw(st.integers(0, 4))):
        i = draw(st.integers(0, len(data) - 1))
        if draw(st.booleans()):
            data[i] = draw(st.integers(0, 255))
        elif i + 4 <= len(data):
            value = draw(st.sampled_from([0, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]))
            data[i : i + 4] = struct.pack(">I", value)
    return encode_frame(client_setup()) + bytes(data)


@settings(max_examples=30, deadline=None)
@given(mutated_session())
def test_mutated_sessions_never_hurt_the_server(server, data):
    """Whatever a connection sends, the server answers or closes it, stays up, and its
    in-flight count returns to 0 once that connection is gone."""
    client = RawClient(server.ready["port"])
    client.send_raw(data)
    time.sleep(0.05)
    client.close()
    probe = connect(server)
    stream_ids = iter(range(1, 1000, 2))

    def idle() -> bool:
        probe.send(RequestResponse(stream_id=next(stream_ids), data=work(0)))
        reply = probe.recv()
        return isinstance(reply, Payload) and json.loads(reply.data)["inflight"] == 0

    wait_for(idle, 5, "the server's in-flight count back to 0")
    probe.close()
    assert server.alive()
    assert "Traceback" not in (server.logs / "s1.log").read_text()


def test_a_refused_setup_with_a_request_behind_it_ends_in_a_fin_not_a_reset(server):
    assert_a_refusal_ends_in_a_fin(server.ready["port"])


def test_a_connection_closed_for_a_protocol_error_gives_up_its_queued_work(tmp_path):
    """The server ends a connection's streams when it closes it, not when its lingering
    socket goes (``AcceptedConnection.on_close``): work no slot has taken is skipped at
    once, so the next client waits behind the request in service only."""
    slow = start_server("slow", tmp_path, "--workers", "1", "--delay-ms", "1000")
    with processes(slow):
        bad = connect(
            slow,
            RequestResponse(stream_id=1, data=work(0)),  # in the slot until t = 1 s
            RequestResponse(stream_id=3, data=work(0)),  # queued behind it
        )
        time.sleep(0.2)
        bad.send_raw(raw_frame(5, FrameType.REQUEST_N, 0))  # too short for its n
        expect_error(bad, ErrorCode.CONNECTION_ERROR)  # its socket stays open: it lingers
        start = time.monotonic()
        other = connect(slow, RequestResponse(stream_id=1, data=work(0)))
        reply = other.recv(timeout=10)
        waited = time.monotonic() - start
        bad.close()
        other.close()
    assert isinstance(reply, Payload), reply
    # about 0.8 s left of the first request, then its own 1 s; 2.8 s if the queued one ran
    assert waited < 2.4, f"waited {waited:.2f} s: the closed connection's queued work ran"
