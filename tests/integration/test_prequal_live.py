"""``prequal`` through the live balancer: probes really sent to real servers, answered from
their counters, counted per backend, and a slow server gets fewer requests.

One balancer over three real ``lblab server`` processes, s1 slowed by 30 ms a request
(the testbed of ``test_balancer_strategies.py``, built with the same helpers).
"""

from __future__ import annotations

import asyncio
import json

import pytest
from balancer_testbed import (
    WORK,
    admin,
    processes,
    rsocket_client,
    served_counts,
    start_balancer,
    status_of,
    three_servers,
    wait_for,
)
from rsocket.payload import Payload

from lblab.loadreport import ProbeAnswer
from lblab.wire.metadata import PROBE_METADATA

REQUESTS = 240


@pytest.fixture(scope="module")
def testbed(tmp_path_factory):
    logs = tmp_path_factory.mktemp("prequal")
    servers = three_servers(logs)
    with processes(*servers) as kids:
        balancer = start_balancer(servers, logs, "--strategy", "prequal", "--seed", "7")
        kids.append(balancer)
        yield balancer, servers


def test_probes_are_sent_answered_counted_and_the_slow_server_gets_fewer(testbed):
    balancer, _ = testbed
    counts = asyncio.run(served_counts(balancer.ready["port"], REQUESTS, 6))
    assert sum(counts.values()) == REQUESTS
    assert counts["s1"] < 0.15 * REQUESTS, counts  # rr would give it a third

    def settled():
        rows = status_of(balancer)["backends"]
        ended = all(
            r["probes_answered"] + r["probes_timed_out"] + r["probes_failed"] == r["probes_sent"]
            for r in rows
        )
        return ended and rows

    rows = wait_for(settled, 5, "every probe answered or given up")
    sent = sum(r["probes_sent"] for r in rows)
    picks = sum(r["picks"] for r in rows)
    assert sent == 3 * picks  # r_probe 3 over 3 backends: each pick probes all three
    assert all(r["probes_answered"] > 0.9 * r["probes_sent"] > 0 for r in rows), rows
    code, metrics = admin(balancer, "GET", "/metrics")
    assert code == 200
    assert 'lblab_balancer_probes_answered_total{backend="s1"}' in metrics
    # Its own decisions are counted too: the first picks, before two probes are in, go
    # at random (the fallback), and /status and /metrics say how many.
    fallbacks = status_of(balancer)["decisions"]["fallbacks"]
    assert 1 <= fallbacks < REQUESTS, fallbacks
    assert (
        f'lblab_balancer_strategy_decisions_total{{strategy="prequal",decision="fallbacks"}} {fallbacks}'
        in metrics
    )


def test_a_server_answers_a_probe_at_once_even_while_its_worker_is_busy(testbed):
    _, servers = testbed
    s1 = servers[0]  # one worker, 30 ms a request: six take 180 ms

    async def go() -> tuple[ProbeAnswer, list[str]]:
        async with rsocket_client(s1.ready["port"]) as client:
            work = [asyncio.ensure_future(client.request_response(Payload(WORK))) for _ in range(6)]
            await asyncio.sleep(0)  # a yield: the requests are sent first
            probe = await asyncio.wait_for(
                client.request_response(Payload(b"", PROBE_METADATA)), 0.1
            )
            done = await asyncio.wait_for(asyncio.gather(*work), 10)
            return ProbeAnswer.from_json(probe.data), [json.loads(r.data)["server"] for r in done]

    answer, served_by = asyncio.run(go())
    assert served_by == ["s1"] * 6
    assert 1 <= answer.rif <= 6  # the requests in flight (some may have ended)
    assert answer.latency_ms >= 0
