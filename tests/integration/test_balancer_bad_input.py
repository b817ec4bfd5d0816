"""Bad input gets the right connection ERROR and closes that connection only.

Raw frames over plain sockets (``lblab.wire``) against a live balancer started with a
small ``--max-frame-bytes``; after every case a well-behaved rsocket-py client must
still be served.
"""

from __future__ import annotations

import asyncio
import random

import pytest
from balancer_testbed import (
    RawClient,
    client_setup,
    processes,
    rsocket_client,
    start_balancer,
    start_echo,
    status_of,
)
from rsocket.payload import Payload

from lblab.wire.codes import HEADER, ErrorCode, FrameType
from lblab.wire.frames import Error, Keepalive, RequestResponse, Resume
from lblab.wire.frames import Payload as PayloadFrame

MAX_FRAME = 4096


@pytest.fixture(scope="module")
def balancer(tmp_path_factory):
    logs = tmp_path_factory.mktemp("bad-input")
    backend = start_echo("e0", logs, "--delay-ms", "300")
    with processes(backend) as kids:
        node = start_balancer([backend], logs, "--max-frame-bytes", str(MAX_FRAME))
        kids.append(node)
        yield node


def still_serves(balancer) -> None:
    async def go():
        async with rsocket_client(balancer.ready["port"]) as client:
            return await asyncio.wait_for(client.request_response(Payload(b"{}")), 5)

    assert asyncio.run(go()).data == b"{}"
    assert balancer.alive()


def raw_frame(stream_id: int, frame_type: int, flags: int, body: bytes = b"") -> bytes:
    frame = HEADER.pack(stream_id, frame_type << 10 | flags) + body
    return len(frame).to_bytes(3, "big") + frame


def expect_connection_error(client: RawClient, code: ErrorCode, text: str = "") -> Error:
    frame = client.recv()
    assert isinstance(frame, Error), frame
    assert frame.stream_id == 0
    assert frame.error_code == code, frame
    assert text in frame.message
    assert client.closed()
    return frame


SETUP_CASES = {
    "request before SETUP": (
        lambda c: c.send(RequestResponse(stream_id=1, data=b"{}")),
        ErrorCode.INVALID_SETUP,
        "first frame must be SETUP",
    ),
    "wrong major version": (
        lambda c: c.send(client_setup(major=2, minor=0)),
        ErrorCode.UNSUPPORTED_SETUP,
        "version 2.0",
    ),
    "lease flag": (
        lambda c: c.send(client_setup(lease=True)),
        ErrorCode.UNSUPPORTED_SETUP,
        "no leases",
    ),
    "resume token in SETUP": (
        lambda c: c.send(client_setup(resume_token=b"tok")),
        ErrorCode.UNSUPPORTED_SETUP,
        "resumption",
    ),
    "RESUME": (
        lambda c: c.send(
            Resume(token=b"t", last_received_server_position=0, first_available_client_position=0)
        ),
        ErrorCode.REJECTED_RESUME,
        "resumption",
    ),
    "unsupported data MIME": (
        lambda c: c.send(client_setup(data_mime="text/csv")),
        ErrorCode.UNSUPPORTED_SETUP,
        "text/csv",
    ),
    "malformed SETUP": (
        lambda c: c.send_raw(raw_frame(0, FrameType.SETUP, 0, b"\x00\x01")),
        ErrorCode.INVALID_SETUP,
        "truncated",
    ),
}


@pytest.mark.parametrize("case", list(SETUP_CASES))
def test_bad_setup(balancer, case):
    send, code, text = SETUP_CASES[case]
    client = RawClient(balancer.ready["port"])
    send(client)
    expect_connection_error(client, code, text)
    still_serves(balancer)


AFTER_SETUP_CASES = {
    "unknown frame type without IGNORE": (
        raw_frame(1, 0x30, 0, b"xx"),
        "unexpected frame type 0x30",
    ),
    "frame over --max-frame-bytes": (
        raw_frame(1, FrameType.REQUEST_RESPONSE, 0, b"x" * (MAX_FRAME + 1)),
        f"exceeds the limit of {MAX_FRAME} bytes",
    ),
    "frame shorter than its header": (b"\x00\x00\x02ab", "shorter than the 6-byte header"),
    "second SETUP": (None, "only be sent once"),
    "LEASE from a client": (raw_frame(0, FrameType.LEASE, 0, bytes(8)), "did not negotiate"),
}


@pytest.mark.parametrize("case", list(AFTER_SETUP_CASES))
def test_bad_frames_after_setup(balancer, case):
    data, text = AFTER_SETUP_CASES[case]
    client = RawClient(balancer.ready["port"])
    client.send(client_setup())
    if data is None:
        client.send(client_setup())
    else:
        client.send_raw(data)
    expect_connection_error(client, ErrorCode.CONNECTION_ERROR, text)
    still_serves(balancer)


def test_unknown_frame_with_ignore_flag_is_dropped(balancer):
    client = RawClient(balancer.ready["port"])
    client.send(client_setup())
    client.send_raw(raw_frame(1, 0x30, 0x200, b"xx"))
    client.send(RequestResponse(stream_id=1, data=b'{"a": 1}'))
    reply = client.recv()
    assert isinstance(reply, PayloadFrame) and reply.data == b'{"a": 1}'
    client.close()


def test_random_bytes(balancer):
    rng = random.Random(20261121)
    for _ in range(5):
        client = RawClient(balancer.ready["port"])
        client.send_raw(rng.randbytes(300))
        frame = client.recv()
        if frame is not None:  # a length prefix too long for the junk gets no answer...
            assert isinstance(frame, Error) and frame.stream_id == 0
        client.close()  # ...until the sender closes, which must not hurt the balancer
    still_serves(balancer)


def test_length_prefix_longer_than_data_then_close(balancer):
    client = RawClient(balancer.ready["port"])
    client.send(client_setup())
    client.send_raw(b"\x00\x01\x00" + b"partial")
    client.close()
    still_serves(balancer)


def test_setup_and_requests_in_one_segment(balancer):
    client = RawClient(balancer.ready["port"])
    client.send(
        client_setup(),
        RequestResponse(stream_id=1, data=b'{"n": 1}'),
        RequestResponse(stream_id=3, data=b'{"n": 3}'),
    )
    replies = {f.stream_id: f.data for f in (client.recv(), client.recv())}
    assert replies == {1: b'{"n": 1}', 3: b'{"n": 3}'}
    client.close()


def test_stream_id_reused_while_live(balancer):
    client = RawClient(balancer.ready["port"])
    client.send(
        client_setup(),
        RequestResponse(stream_id=1, data=b"{}"),
        RequestResponse(stream_id=1, data=b"{}"),
    )
    expect_connection_error(client, ErrorCode.CONNECTION_ERROR, "stream id 1 reused")
    still_serves(balancer)
    status = status_of(balancer)
    assert status["outstanding"] == 0  # the abandoned request was cancelled and accounted


def test_keepalive_is_answered_at_the_balancer(balancer):
    client = RawClient(balancer.ready["port"])
    client.send(client_setup(), Keepalive(respond=True, last_received_position=42, data=b"ping"))
    reply = client.recv()
    assert reply == Keepalive(respond=False, last_received_position=42, data=b"ping")
    client.close()


def test_client_silent_past_its_max_lifetime_is_closed(balancer):
    client = RawClient(balancer.ready["port"])
    client.send(client_setup(keepalive_ms=100, max_lifetime_ms=500))
    expect_connection_error(client, ErrorCode.CONNECTION_ERROR, "max lifetime")
