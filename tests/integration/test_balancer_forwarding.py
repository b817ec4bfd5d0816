"""The balancer forwards every interaction model between real rsocket-py peers.

Three rsocket-py echo backends (fragmenting their responses at 4 KiB) behind a live
``lblab balancer``; rsocket-py clients on the other side.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import threading
import time
from collections import Counter

import pytest
from balancer_testbed import (
    RawClient,
    admin,
    client_setup,
    processes,
    raw_frame,
    rsocket_client,
    start_balancer,
    start_echo,
    status_of,
    wait_for,
)
from rsocket.awaitable.awaitable_rsocket import AwaitableRSocket
from rsocket.payload import Payload
from rsocket.streams.stream_from_async_generator import StreamFromAsyncGenerator

from lblab.balancer.pool import COUNTER_NAMES
from lblab.procs import lblab_command, spawn
from lblab.wire.codec import encode_frame
from lblab.wire.codes import FLAG_METADATA, FLAG_RESPOND, FrameType
from lblab.wire.frames import Payload as PayloadFrame
from lblab.wire.frames import RequestResponse

FRAGMENT = 4096


@pytest.fixture(scope="module")
def testbed(tmp_path_factory):
    logs = tmp_path_factory.mktemp("forwarding")
    backends = [start_echo(f"e{i}", logs, "--fragment-size", str(FRAGMENT)) for i in range(3)]
    with processes(*backends) as kids:
        balancer = start_balancer(backends, logs, "--strategy", "rr")
        kids.append(balancer)
        yield balancer, backends


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_request_response_round_robin_over_three_backends(testbed):
    balancer, _ = testbed

    async def go():
        async with rsocket_client(balancer.ready["port"]) as client:
            answers = await asyncio.gather(
                *(client.request_response(Payload(b'{"i": %d}' % i)) for i in range(30))
            )
        return answers

    answers = run(go())
    assert [a.data for a in answers] == [b'{"i": %d}' % i for i in range(30)]
    assert Counter(bytes(a.metadata) for a in answers) == {b"e0": 10, b"e1": 10, b"e2": 10}


def test_request_stream_with_request_n(testbed):
    balancer, _ = testbed

    async def go():
        async with rsocket_client(balancer.ready["port"]) as client:
            # limit_rate=2: initial REQUEST_N of 2, then REQUEST_N(2) after every 2 items.
            return await AwaitableRSocket(client).request_stream(Payload(b"7"), limit_rate=2)

    items = [bytes(p.data) for p in run(go())]
    assert len(items) == 7
    backend = items[0].split(b":")[0]
    assert items == [backend + b":%d" % i for i in range(7)]  # one backend for the whole stream


def test_request_channel_completes_both_ways(testbed):
    balancer, _ = testbed

    async def go():
        async def outbound():
            for i in range(4):
                yield Payload(b"c%d" % i), i == 3

        async with rsocket_client(balancer.ready["port"]) as client:
            return await AwaitableRSocket(client).request_channel(
                Payload(b"first"), publisher=StreamFromAsyncGenerator(outbound), limit_rate=3
            )

    answers = run(go())
    assert [bytes(p.data) for p in answers] == [b"first", b"c0", b"c1", b"c2", b"c3", b"end"]
    assert len({bytes(p.metadata) for p in answers}) == 1


@pytest.mark.parametrize("data_mime", ["application/binary", "application/octet-stream"])
def test_a_client_declaring_opaque_bytes_is_served(testbed, data_mime):
    """rsocket-java's connector declares ``application/binary`` unless told otherwise;
    a client left at its library's defaults works through the balancer as it does
    against a server (the bytes pass through untouched either way)."""
    balancer, _ = testbed

    async def go():
        async with rsocket_client(balancer.ready["port"], data_mime=data_mime) as client:
            return await client.request_response(Payload(b'{"i": 1}'))

    assert run(go()).data == b'{"i": 1}'


def _backend_counts(backends):
    async def go():
        counts = {}
        for b in backends:
            async with rsocket_client(b.ready["port"]) as client:
                reply = await client.request_response(Payload(b"stats"))
                counts[b.ready["id"]] = json.loads(reply.data)
        return counts

    return run(go())


def test_fire_and_forget_and_metadata_push_reach_backends(testbed):
    balancer, backends = testbed
    before = _backend_counts(backends)

    async def go():
        async with rsocket_client(balancer.ready["port"]) as client:
            for i in range(6):
                await client.fire_and_forget(Payload(b'{"f": %d}' % i))
            await client.metadata_push(b"\x00")
            # A request-response after them: its answer proves the earlier frames were
            # forwarded (one connection per backend keeps order).
            await asyncio.gather(*(client.request_response(Payload(b"x")) for _ in range(3)))

    run(go())
    after = _backend_counts(backends)
    fnf = sum(after[b]["fnf"] - before[b]["fnf"] for b in after)
    pushes = [after[b]["metadata_push"] - before[b]["metadata_push"] for b in after]
    assert fnf == 6
    assert pushes == [1, 1, 1]  # METADATA_PUSH is broadcast to every backend


def test_metadata_push_without_its_flag_is_broadcast_with_it(testbed):
    """rsocket-js 0.0.27 sends METADATA_PUSH with no flags. The balancer takes it (the
    connection and its streams go on) and forwards it to every backend."""
    balancer, backends = testbed
    before = _backend_counts(backends)
    client = RawClient(balancer.ready["port"])
    client.send(client_setup())
    client.send_raw(raw_frame(0, FrameType.METADATA_PUSH, 0, b"\x00"))
    client.send(*(RequestResponse(stream_id=2 * i + 1, data=b"x") for i in range(3)))
    replies = [client.recv() for _ in range(3)]
    assert all(isinstance(r, PayloadFrame) and r.data == b"x" for r in replies), replies
    client.close()
    after = _backend_counts(backends)
    assert [after[b]["metadata_push"] - before[b]["metadata_push"] for b in after] == [1, 1, 1]


def test_a_forwarded_metadata_push_carries_the_metadata_flag(tmp_path):
    """What the balancer forwards is spec-form (the flag MUST be set) even when the
    client left it out: read off the wire by a backend that is a bare socket (it answers
    the balancer's KEEPALIVEs, which is all a backend must do to be taken up)."""
    seen: list[tuple[int, int]] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(10)
        reader = threading.Thread(target=_bare_backend, args=(listener, seen), daemon=True)
        reader.start()
        balancer = spawn(
            "balancer",
            lblab_command(
                *("balancer", "--port", "0", "--admin-port", "0"),
                *("--backend", f"raw=127.0.0.1:{listener.getsockname()[1]}"),
            ),
            log_path=tmp_path / "balancer.log",
        )
        with processes(balancer):
            wait_for(lambda: status_of(balancer)["backends"][0]["state"] == "up", 5, "up")
            client = RawClient(balancer.ready["port"])
            client.send(client_setup())
            client.send_raw(raw_frame(0, FrameType.METADATA_PUSH, 0, b"m"))
            wait_for(lambda: any(t == FrameType.METADATA_PUSH for t, _ in seen), 5, "the push")
            client.close()
    flags = next(f for t, f in seen if t == FrameType.METADATA_PUSH)
    assert flags & FLAG_METADATA, hex(flags)


def _bare_backend(listener: socket.socket, seen: list[tuple[int, int]]) -> None:
    """Accept one connection and record (frame type, flags) of each frame, walking raw
    frames, until it closes; a KEEPALIVE asking for an answer is echoed without RESPOND."""
    sock, _ = listener.accept()
    data = b""
    with sock:
        sock.settimeout(30)
        while chunk := sock.recv(65536):
            data += chunk
            while len(data) >= 3 and len(data) >= 3 + int.from_bytes(data[:3], "big"):
                end = 3 + int.from_bytes(data[:3], "big")
                frame, data = data[:end], data[end:]
                frame_type, flags = frame[7] >> 2, int.from_bytes(frame[7:9], "big") & 0x3FF
                if frame_type == FrameType.KEEPALIVE and flags & FLAG_RESPOND:
                    sock.sendall(frame[:8] + bytes([frame[8] & ~FLAG_RESPOND & 0xFF]) + frame[9:])
                seen.append((frame_type, flags))


@pytest.mark.parametrize("size", [100_000, 1_000_000])
def test_large_payloads_with_fragmentation_on_both_sides(testbed, size):
    balancer, _ = testbed
    body = bytes(range(256)) * (size // 256)

    async def go():
        # The client fragments its request at 1 KiB; the backend fragments its answer at 4 KiB.
        async with rsocket_client(balancer.ready["port"], fragment_size=1024) as client:
            return await client.request_response(Payload(body, b"meta"))

    answer = run(go())
    assert bytes(answer.data) == body


def test_one_megabyte_unfragmented_request(testbed):
    balancer, _ = testbed
    body = b"x" * 1_000_000

    async def go():
        async with rsocket_client(balancer.ready["port"]) as client:
            return await asyncio.gather(*(client.request_response(Payload(body)) for _ in range(3)))

    assert all(bytes(a.data) == body for a in run(go()))


def test_status_and_metrics_account_every_request(testbed):
    balancer, _ = testbed
    status = status_of(balancer)
    assert status["strategy"] == "rr"
    assert [b["inflight"] for b in status["backends"]] == [0, 0, 0]
    assert all(b["connected"] and b["state"] == "up" for b in status["backends"])
    assert status["outstanding"] == 0
    code, text = admin(balancer, "GET", "/metrics")
    assert code == 200
    assert 'lblab_balancer_picks_total{backend="e0"}' in text
    assert "# TYPE lblab_balancer_inflight gauge" in text
    # Every counter the pool keeps is exposed, per backend (faults was once left out).
    for name in COUNTER_NAMES:
        assert f"# TYPE lblab_balancer_{name}_total counter" in text, name
        assert f'lblab_balancer_{name}_total{{backend="e2"}} ' in text, name


def _gc_collections(balancer) -> dict[str, float]:
    code, text = admin(balancer, "GET", "/metrics")
    assert code == 200
    found = re.findall(r'^python_gc_collections_total\{generation="(\d)"\} (\S+)$', text, re.M)
    assert [g for g, _ in found] == ["0", "1", "2"], text
    return {g: float(v) for g, v in found}


def test_the_collector_stays_out_of_the_forwarding_path(testbed):
    """Ten thousand requests at 64 in flight run no collection of the cyclic GC: the
    in-flight requests' own objects once kept crossing the default threshold (a young
    collection every few hundred requests, a full one of every start-up object, 20-30 ms,
    every second or two); lblab/collector.py freezes start-up and sets the threshold."""
    balancer, _ = testbed
    before = _gc_collections(balancer)
    client = RawClient(balancer.ready["port"])
    client.send(client_setup())
    sent = answered = 0
    for _ in range(160):
        client.send(*(RequestResponse(stream_id=2 * (sent + i) + 1, data=b"x" * 100)
                      for i in range(64)))  # fmt: skip
        sent += 64
        while answered < sent:
            frame = client.recv()
            assert frame is not None and frame.stream_id % 2 == 1, frame
            answered += 1
    after = _gc_collections(balancer)
    assert after["2"] == before["2"], (before, after)
    assert after["0"] - before["0"] <= 2, (before, after)


def test_admin_rejects_bad_requests(testbed):
    balancer, _ = testbed
    code, body = admin(balancer, "PUT", "/strategy", {"name": "nope"})
    assert code == 400 and "valid strategies" in body["error"]
    code, body = admin(balancer, "GET", "/strategy")
    assert code == 405
    code, body = admin(balancer, "DELETE", "/backends/zz")
    assert code == 404 and "no backend 'zz'" in body["error"]
    code, body = admin(balancer, "GET", "/nope")
    assert code == 404


def test_a_client_that_does_not_read_is_paused_and_others_are_served(testbed):
    balancer, _ = testbed
    hog = RawClient(balancer.ready["port"], rcvbuf=4096)
    hog.send(client_setup())
    body = b"h" * 200_000
    # 200 requests (40 MB) whose echoes the hog never reads: once they fill the kernel
    # buffers and the balancer's queue toward the hog, the balancer must stop reading it.
    data = memoryview(
        b"".join(encode_frame(RequestResponse(stream_id=2 * i + 1, data=body)) for i in range(200))
    )
    hog.sock.settimeout(0.2)
    deadline = time.monotonic() + 20
    while data and time.monotonic() < deadline:
        try:
            data = data[hog.sock.send(data) :]
        except TimeoutError:
            if status_of(balancer)["paused_clients"] == 1:
                break
    wait_for(lambda: status_of(balancer)["paused_clients"] == 1, 10, "the hog paused")

    async def other():
        async with rsocket_client(balancer.ready["port"]) as client:
            return await asyncio.wait_for(client.request_response(Payload(b"fine")), 5)

    assert run(other()).data == b"fine"
    hog.close()
    wait_for(lambda: status_of(balancer)["outstanding"] == 0, 10, "the hog's requests accounted")
    assert status_of(balancer)["paused_clients"] == 0
