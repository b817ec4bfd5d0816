"""Bad input gets the right connection ERROR and closes that connection only.

Raw frames over plain sockets (``lblab.wire``) against a live balancer started with a
small ``--max-frame-bytes``; after every case a well-behaved rsocket-py client must
still be served. The ``guarded`` balancer fronts a real ``lblab server`` (which drops a
connection on a malformed frame) and checks the guards: first-frame check, SETUP
deadline, connection caps, memory per connection, frames checked before forwarding.
"""

from __future__ import annotations

import asyncio
import random
import struct
import time

import psutil
import pytest
from balancer_testbed import (
    RawClient,
    assert_a_refusal_ends_in_a_fin,
    client_setup,
    metric,
    processes,
    raw_frame,
    rsocket_client,
    start_balancer,
    start_echo,
    start_server,
    status_of,
)
from rsocket.payload import Payload

from lblab.wire.codec import encode_frame
from lblab.wire.codes import ErrorCode, FrameType
from lblab.wire.frames import Error, Keepalive, RequestFnf, RequestResponse, Resume
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


GOOD_REQUEST = b'{"work_bytes": 0}'


def still_serves(balancer) -> None:
    """A well-behaved rsocket-py client gets its answer (an echo, or a server's JSON)."""

    async def go():
        async with rsocket_client(balancer.ready["port"]) as client:
            return await asyncio.wait_for(client.request_response(Payload(GOOD_REQUEST)), 5)

    data = bytes(asyncio.run(go()).data)
    assert data == GOOD_REQUEST or b'"server":' in data, data
    assert balancer.alive()


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


def protocol_errors(balancer) -> float:
    """The node's ``protocol_errors`` counter, as ``/metrics`` shows it."""
    return metric(balancer, "protocol_errors_total")


@pytest.mark.parametrize("case", list(SETUP_CASES))
def test_bad_setup(balancer, case):
    send, code, text = SETUP_CASES[case]
    before = protocol_errors(balancer)
    client = RawClient(balancer.ready["port"])
    send(client)
    expect_connection_error(client, code, text)
    still_serves(balancer)
    assert protocol_errors(balancer) == before + 1  # each connection counted once


AFTER_SETUP_CASES = {
    "unknown frame type without IGNORE": (
        raw_frame(1, 0x30, 0, b"xx"),
        "unexpected frame type 0x30",
    ),
    "METADATA_PUSH on a stream (rsocket_rust 0.7.5 sends it on stream 1)": (
        raw_frame(1, FrameType.METADATA_PUSH, 0x100, b"m"),
        "METADATA_PUSH must be on stream 0, not stream 1",
    ),
    "frame over --max-frame-bytes": (
        raw_frame(1, FrameType.REQUEST_RESPONSE, 0, b"x" * (MAX_FRAME + 1)),
        f"exceeds the limit of {MAX_FRAME} bytes",
    ),
    "frame shorter than its header": (b"\x00\x00\x02ab", "shorter than the 6-byte header"),
    "second SETUP": (None, "only be sent once"),
    "LEASE from a client": (raw_frame(0, FrameType.LEASE, 0, bytes(8)), "did not negotiate"),
    "KEEPALIVE without a position": (raw_frame(0, FrameType.KEEPALIVE, 0x80, b"ab"), "63-bit"),
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


@pytest.mark.parametrize("seed", range(8))
def test_random_bytes_get_an_error_and_a_close_within_1s(balancer, seed):
    client = RawClient(balancer.ready["port"])
    client.send_raw(random.Random(seed).randbytes(256))
    frame = client.recv(timeout=1.0)
    assert isinstance(frame, Error) and frame.stream_id == 0, frame
    assert frame.error_code in (ErrorCode.INVALID_SETUP, ErrorCode.REJECTED_RESUME), frame
    assert client.closed(timeout=1.0)
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


# ---------------------------------------------------------------- guards: a real server behind

SETUP_TIMEOUT_S = 1.0
MAX_PENDING_SETUP = 64


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """A balancer with the default frame limit in front of a real ``lblab server``."""
    logs = tmp_path_factory.mktemp("guarded")
    server = start_server("s1", logs, "--max-inflight", "256")
    with processes(server) as kids:
        node = start_balancer(
            [server],
            logs,
            "--setup-timeout",
            f"{SETUP_TIMEOUT_S}s",
            "--max-pending-setup",
            str(MAX_PENDING_SETUP),
            "--max-connections",
            "1500",
        )
        kids.append(node)
        node.logs = logs
        yield node


def server_closed_a_connection(node) -> bool:
    return "closing a connection" in (node.logs / "s1.log").read_text()


def rss_mib(child) -> float:
    return psutil.Process(child.pid).memory_info().rss / 2**20


def test_ff_ff_ff_before_setup_is_refused_at_once(guarded):
    client = RawClient(guarded.ready["port"])
    client.send_raw(b"\xff\xff\xff")
    expect_connection_error(client, ErrorCode.INVALID_SETUP, "announces 16777215 bytes")


def test_a_length_prefix_reserves_no_memory(guarded):
    """200 connections each announce a 16 MiB frame after SETUP and send 3 bytes of it."""
    still_serves(guarded)
    before = rss_mib(guarded)
    clients = []
    for _ in range(200):
        client = RawClient(guarded.ready["port"])
        client.send(client_setup())
        client.send_raw(b"\xff\xff\xff")
        clients.append(client)
    still_serves(guarded)  # every prefix has been read by now (one loop, in order)
    grown = rss_mib(guarded) - before
    for client in clients:
        client.close()
    assert grown < 40, f"balancer RSS grew {grown:.0f} MiB for 200 announced 16 MiB frames"
    still_serves(guarded)


def test_connections_without_setup_are_closed_at_the_deadline(guarded):
    clients = [RawClient(guarded.ready["port"]) for _ in range(10)]
    start = time.monotonic()
    for client in clients:
        expect_connection_error(client, ErrorCode.INVALID_SETUP, "no SETUP within")
    assert time.monotonic() - start < SETUP_TIMEOUT_S + 1.5
    still_serves(guarded)


@pytest.mark.slow
def test_a_thousand_idle_connections_do_not_stop_a_good_client(guarded):
    still_serves(guarded)
    before = rss_mib(guarded)
    idle = [RawClient(guarded.ready["port"]) for _ in range(1000)]
    try:
        started = time.monotonic()
        still_serves(guarded)
        assert time.monotonic() - started < 2.0
        grown = rss_mib(guarded) - before
        assert grown < 40, f"balancer RSS grew {grown:.0f} MiB for 1000 idle connections"
        # Beyond --max-pending-setup the oldest were closed with REJECTED_SETUP.
        expect_connection_error(idle[0], ErrorCode.REJECTED_SETUP, "waiting for their SETUP")
    finally:
        for client in idle:
            client.close()


def test_max_connections_refuses_beyond_the_cap(tmp_path):
    backend = start_echo("e0", tmp_path)
    with processes(backend) as kids:
        node = start_balancer([backend], tmp_path, "--max-connections", "3")
        kids.append(node)
        held = [RawClient(node.ready["port"]) for _ in range(3)]
        for client in held:
            client.send(client_setup())
        extra = RawClient(node.ready["port"])
        expect_connection_error(extra, ErrorCode.REJECTED_SETUP, "limit of 3 connections")
        held[0].send(RequestResponse(stream_id=1, data=b"{}"))
        assert isinstance(held[0].recv(), PayloadFrame)
        held.pop().close()
        time.sleep(0.2)
        still_serves(node)


def channel_frame(body: bytes, flags: int = 0) -> bytes:
    """REQUEST_CHANNEL on stream 1 (n=1, not complete), then a frame on its stream."""
    return raw_frame(1, FrameType.REQUEST_CHANNEL, 0, struct.pack(">I", 1) + b"{}") + body


MALFORMED = {
    "REQUEST_N of 0": raw_frame(1, FrameType.REQUEST_N, 0, bytes(4)),
    "REQUEST_N of 2^31": raw_frame(1, FrameType.REQUEST_N, 0, struct.pack(">I", 2**31)),
    "REQUEST_N without n": raw_frame(1, FrameType.REQUEST_N, 0, b"\x01"),
    "REQUEST_STREAM too short for n": raw_frame(1, FrameType.REQUEST_STREAM, 0, b"\x00\x01"),
    "REQUEST_STREAM n of 0": raw_frame(1, FrameType.REQUEST_STREAM, 0, bytes(4) + b"{}"),
    "REQUEST_CHANNEL n of 2^32-1": raw_frame(1, FrameType.REQUEST_CHANNEL, 0, b"\xff" * 4),
    "metadata past the frame end": raw_frame(
        1, FrameType.REQUEST_RESPONSE, 0x100, b"\x00\x10\x00abc"
    ),
    "metadata flag without a length": raw_frame(1, FrameType.REQUEST_FNF, 0x100, b"\x00"),
    "PAYLOAD with none of N/C/F": channel_frame(raw_frame(1, FrameType.PAYLOAD, 0, b"{}")),
    "ERROR without a code": channel_frame(raw_frame(1, FrameType.ERROR, 0, b"\x00")),
    "stream id with the top bit": raw_frame(2**31 + 1, FrameType.REQUEST_RESPONSE, 0, b"{}"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_frames_are_answered_at_the_balancer(guarded, case):
    """The balancer refuses the frame itself: the shared backend connection never sees it."""
    bystander = RawClient(guarded.ready["port"])
    bystander.send(client_setup(), RequestResponse(stream_id=1, data=b'{"work_bytes": 200000}'))
    client = RawClient(guarded.ready["port"])
    client.send(client_setup())
    client.send_raw(MALFORMED[case])
    expect_connection_error(client, ErrorCode.CONNECTION_ERROR)
    reply = bystander.recv()
    assert isinstance(reply, PayloadFrame) and b'"work_bytes":200000' in reply.data, reply
    bystander.close()
    assert not server_closed_a_connection(guarded)
    assert status_of(guarded)["outstanding"] == 0


def test_payload_after_a_complete_request_is_dropped(guarded):
    client = RawClient(guarded.ready["port"])
    client.send(client_setup(), RequestResponse(stream_id=1, data=b'{"work_bytes": 100000}'))
    client.send(PayloadFrame(stream_id=1, data=b"x" * 1000, follows=True))
    reply = client.recv()
    assert isinstance(reply, PayloadFrame) and reply.stream_id == 1
    client.close()
    assert not server_closed_a_connection(guarded)


@pytest.mark.slow
def test_one_bad_client_does_not_disturb_the_good_ones(guarded):
    """A malformed request every 250 ms during good traffic: every good request answered.

    Before the balancer checked forwarded frames, the server closed its one connection to
    the balancer on each malformed frame and good clients got 230 answers of 2000.
    """
    cases = list(MALFORMED.values())

    async def good(n: int, enough: asyncio.Event) -> tuple[int, int]:
        """At least ``n`` requests, and on until the bad client has sent its share."""
        sent = ok = 0
        async with rsocket_client(guarded.ready["port"]) as client:
            while sent < n or not enough.is_set():
                reply = await asyncio.wait_for(
                    client.request_response(Payload(b'{"work_bytes": 1000}')), 5
                )
                sent += 1
                ok += b'"server":"s1"' in reply.data
        return sent, ok

    async def bad(stop: asyncio.Event, enough: asyncio.Event) -> int:
        sent = 0
        while not stop.is_set():
            if sent >= 8:
                enough.set()
            reader, writer = await asyncio.open_connection("127.0.0.1", guarded.ready["port"])
            writer.write(encode_frame(client_setup()) + cases[sent % len(cases)])
            answer = await asyncio.wait_for(reader.read(4096), 2)
            assert answer, "the balancer closed without an ERROR"
            writer.close()
            sent += 1
            await asyncio.sleep(0.25)
        return sent

    async def scenario() -> tuple[list[tuple[int, int]], int]:
        stop, enough = asyncio.Event(), asyncio.Event()
        bad_task = asyncio.create_task(bad(stop, enough))
        counts = await asyncio.gather(*(good(200, enough) for _ in range(4)))
        stop.set()
        return counts, await bad_task

    counts, bad_sent = asyncio.run(scenario())
    assert all(sent >= 200 and ok == sent for sent, ok in counts), counts
    assert bad_sent >= 8
    assert not server_closed_a_connection(guarded)
    status = status_of(guarded)
    assert status["outstanding"] == 0
    assert all(row["connected"] for row in status["backends"])


def test_agent_port_judges_the_first_bytes(guarded):
    client = RawClient(guarded.ready["agent_port"])
    client.send_raw(random.Random(7).randbytes(256))
    frame = client.recv(timeout=1.0)
    assert isinstance(frame, Error) and frame.stream_id == 0, frame
    assert frame.error_code in (ErrorCode.INVALID_SETUP, ErrorCode.REJECTED_RESUME), frame
    assert client.closed(timeout=1.0)


def test_agent_port_closes_connections_without_setup_at_the_deadline(guarded):
    client = RawClient(guarded.ready["agent_port"])
    expect_connection_error(client, ErrorCode.INVALID_SETUP, "no SETUP within")


def test_agent_port_answers_a_malformed_frame_with_a_connection_error(guarded):
    client = RawClient(guarded.ready["agent_port"])
    client.send(client_setup())
    client.send_raw(raw_frame(1, FrameType.REQUEST_N, 0, bytes(4)))
    expect_connection_error(client, ErrorCode.CONNECTION_ERROR, "REQUEST_N")
    still_serves(guarded)


def test_agent_port_junk_does_not_flood_the_log(guarded):
    """1,000 malformed reports and 1,000 reports for unknown servers with 2 KB names log
    a few lines, not one each (60 MB of log in 1.7 s once), and the balancer serves."""
    log_path = guarded.logs / "balancer.log"
    before = log_path.read_text().count("\n")
    client = RawClient(guarded.ready["agent_port"])
    client.send(client_setup())
    junk = [RequestFnf(stream_id=2 * i + 1, data=b"{not json") for i in range(1000)]
    unknown = [
        RequestFnf(stream_id=2001 + 2 * i, data=b'{"server": "%04d%s", "source": "agent", '
                   b'"t": 1.0, "cpu_util": 0.5}' % (i, b"x" * 2048))
        for i in range(1000)
    ]  # fmt: skip
    client.send(*junk, *unknown)
    client.send(RequestResponse(stream_id=9999, data=b"{}"))  # refused: answered after all
    reply = client.recv(timeout=10)
    assert isinstance(reply, Error) and reply.stream_id == 9999, reply
    still_serves(guarded)
    lines = log_path.read_text().splitlines()[before:]
    assert 10 <= sum("malformed agent report" in line for line in lines) <= 11, lines[-5:]
    named = [line for line in lines if "which is not in the pool" in line]
    assert len(named) == 16 and all(len(line) < 300 for line in named), named[:2]
    client.close()


def test_a_refused_setup_with_a_request_behind_it_ends_in_a_fin_not_a_reset(balancer):
    assert_a_refusal_ends_in_a_fin(balancer.ready["port"])
