"""Per-client budgets live (``balancer/budgets.py``): a client that holds unfinished
fragmented requests cannot cost another client its large requests.

Real ``lblab server`` processes (each holds at most 64 MiB of unfinished requests per
connection, and the balancer's connection to it is shared by every client) behind a real
``lblab balancer``. The hog is a raw socket that opens fragmented requests of 1 MiB and
never finishes them; the well-behaved client is rsocket-py sending 1 MB requests
fragmented at 64 KiB.
"""

from __future__ import annotations

import asyncio
import json
import time

import numpy as np
import pytest
from balancer_testbed import (
    RawClient,
    client_setup,
    metric,
    processes,
    rsocket_client,
    start_balancer,
    start_server,
    wait_for,
)
from rsocket.payload import Payload

from lblab.wire.codes import ErrorCode
from lblab.wire.frames import Error, RequestResponse

BIG = b'{"work_bytes": 100, "pad": "' + b"x" * 1_000_000 + b'"}'
FRAGMENT = 64 * 1024
MIB = b"y" * (1 << 20)


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    return tmp_path_factory.mktemp("budgets")


@pytest.fixture(scope="module")
def three(logs):
    """The balancer with its default budgets over three servers."""
    servers = [start_server(f"s{i}", logs) for i in (1, 2, 3)]
    with processes(*servers) as kids:
        kids.append(start_balancer(servers, logs, "--strategy", "rr"))
        yield kids[-1]


async def _big_requests(port: int, n: int) -> list[float]:
    """``n`` 1 MB requests, one after another; each one's latency in ms."""
    latencies = []
    async with rsocket_client(port, fragment_size=FRAGMENT) as client:
        for _ in range(n):
            start = time.perf_counter()
            reply = await asyncio.wait_for(client.request_response(Payload(BIG)), 10)
            latencies.append((time.perf_counter() - start) * 1000)
            assert "server" in json.loads(reply.data)
    return latencies


def big_requests(port: int, n: int) -> list[float]:
    return asyncio.run(asyncio.wait_for(_big_requests(port, n), 60))


def hog_until_refused(port: int, most: int = 64) -> tuple[RawClient, int, Error]:
    """A client that opens 1 MiB fragmented requests and never finishes one, until the
    balancer refuses one: the client, how many were taken, the refusal."""
    hog = RawClient(port)
    hog.send(client_setup())
    for k in range(most):
        hog.send(RequestResponse(stream_id=2 * k + 1, data=MIB, follows=True))
        try:
            frame = hog.recv(timeout=0.2)
        except (AssertionError, TimeoutError):
            continue  # nothing came back: the fragment was taken
        assert isinstance(frame, Error), frame
        return hog, k, frame
    raise AssertionError(f"{most} MiB of unfinished requests and no refusal")


@pytest.mark.quiet  # the p99 beside the hog against the p99 alone is a timing
def test_a_hog_at_its_budget_costs_another_client_nothing(three):
    port = int(three.ready["port"])
    alone = big_requests(port, 150)
    hog, taken, refused = hog_until_refused(port)
    try:
        assert taken == 15  # 16 MiB (--client-max-held-bytes) held, the 16th refused
        assert refused.error_code == ErrorCode.REJECTED
        assert "--client-max-held-bytes" in refused.message, refused.message
        beside = big_requests(port, 150)  # all succeed (big_requests asserts each)
    finally:
        hog.close()
    p99_alone, p99_beside = np.percentile(alone, 99), np.percentile(beside, 99)
    assert p99_beside <= 1.5 * p99_alone, (p99_alone, p99_beside)
    assert metric(three, "refused_client_held_bytes_total") >= 1


def test_a_full_backend_connection_is_shared_fairly(logs):
    """One server, and a backend budget of 7.5 MiB: the hog fills it alone (7 of its
    1 MiB requests; less than 1 MB is left), then every 1 MB request of another client
    succeeds, made room for by ending the hog's requests."""
    server = start_server("f1", logs)
    with processes(server) as kids:
        balancer = start_balancer(
            [server], logs, "--backend-max-held-bytes", str(15 << 19), name="fair"
        )
        kids.append(balancer)
        port = int(balancer.ready["port"])
        hog, taken, refused = hog_until_refused(port)
        try:
            held = wait_for(
                lambda: metric(balancer, "held_bytes", 'backend="f1"') or None,
                5,
                "the held bytes in /metrics",
            )
            assert 7 * len(MIB) < held <= 15 << 19, held  # 7 frames of 1 MiB and their headers
            assert taken == 7 and "fair share" in refused.message, (taken, refused.message)
            assert len(big_requests(port, 5)) == 5
            evicted = []
            while len(evicted) < taken:
                try:
                    frame = hog.recv(timeout=2)
                except (AssertionError, TimeoutError):  # no more frames
                    break
                assert isinstance(frame, Error), frame
                evicted.append(frame)
            assert evicted and all(e.error_code == ErrorCode.REJECTED for e in evicted)
            assert all("fair share" in e.message for e in evicted)
        finally:
            hog.close()
        wait_for(
            lambda: metric(balancer, "evicted_fair_share_total") >= len(evicted),
            5,
            "the evictions counted in /metrics",
        )
