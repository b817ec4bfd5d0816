"""Each strategy's observable distribution through the live balancer, and runtime changes.

One balancer over three real ``lblab server`` processes (s1 slowed by 30 ms a request);
strategies are swapped at runtime with ``PUT /strategy`` as the experiment runner does.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter

import pytest
from balancer_testbed import (
    WORK,
    admin,
    processes,
    rsocket_client,
    served_counts,
    start_balancer,
    start_server,
    status_of,
    three_servers,
    wait_for,
)
from rsocket.payload import Payload

from lblab.balancer.strategies.registry import strategy_names
from lblab.loadreport import LoadReport
from lblab.strategy_names import STRATEGY_NAMES
from lblab.wire.metadata import request_metadata


@pytest.fixture(scope="module")
def testbed(tmp_path_factory):
    logs = tmp_path_factory.mktemp("strategies")
    servers = three_servers(logs)
    picks = logs / "picks.jsonl"
    with processes(*servers) as kids:
        balancer = start_balancer(
            servers, logs, "--weights", "s1=1,s2=1,s3=7", "--picks", str(picks), "--seed", "7"
        )
        kids.append(balancer)
        yield balancer, picks, logs, kids


def served_by(balancer, strategy: str, n: int, concurrency: int, options=None) -> Counter:
    code, body = admin(balancer, "PUT", "/strategy", {"name": strategy, "options": options or {}})
    assert code == 200, body
    return asyncio.run(served_counts(balancer.ready["port"], n, concurrency))


@pytest.mark.parametrize("strategy", [s for s in STRATEGY_NAMES if s != "lease"])
def test_every_strategy_serves_through_the_live_balancer(testbed, strategy):
    """Every registered strategy, swapped in at runtime, answers 30 requests (6 at a
    time) through the real balancer, and only from the testbed's servers. ``lease`` waits
    for its LEASE frames first (``test_leases_are_tracked_for_the_lease_strategy``)."""
    counts = served_by(testbed[0], strategy, 30, 6)
    assert sum(counts.values()) == 30 and set(counts) <= {"s1", "s2", "s3"}, counts


def test_the_registry_is_the_list_of_names():
    """A strategy dropped from the registry fails here and in the test above, not a skip."""
    assert strategy_names() == list(STRATEGY_NAMES)


def test_rr_spreads_evenly_in_list_order(testbed):
    balancer = testbed[0]
    assert served_by(balancer, "rr", 90, 1) == {"s1": 30, "s2": 30, "s3": 30}


def test_r_spreads_roughly_evenly(testbed):
    balancer = testbed[0]
    counts = served_by(balancer, "r", 300, 4)
    assert sum(counts.values()) == 300
    assert all(60 <= counts[s] <= 140 for s in ("s1", "s2", "s3")), counts  # ~4.9 sigma


def test_wrr_1_1_7_sends_seven_ninths_to_the_third(testbed):
    balancer = testbed[0]
    assert served_by(balancer, "wrr", 90, 1) == {"s1": 10, "s2": 10, "s3": 70}


def test_p2c_weighted_follows_the_weights_through_the_live_balancer(testbed):
    """Finagle's weighted pick (aperture's, over its window's weights): one request at a
    time, both drawn are idle and the first drawn wins, so s3 (weight 7 of 9) takes
    about 7/9 of 180 (mean 140, sd 5.6); plain p2c ignores the weights."""
    balancer = testbed[0]
    counts = served_by(balancer, "p2c", 180, 1, {"weighted": "true"})
    assert sum(counts.values()) == 180 and counts["s3"] >= 115, counts
    assert status_of(balancer)["options"] == {"weighted": "true"}
    plain = served_by(balancer, "p2c", 180, 1)
    assert plain["s3"] <= 95, plain  # a third is 60


def test_lc_sends_less_to_the_slow_backend(testbed):
    balancer = testbed[0]
    counts = served_by(balancer, "lc", 240, 6)
    assert counts["s1"] < 0.15 * 240, counts  # rr would give it a third


def test_gmsr_learns_the_slow_backend_and_sends_it_less(testbed):
    """gmsr through the live balancer: each backend is learned one request at a time
    (an unknown one is tried only while it has nothing in flight), and s1, 30 ms slower
    a request, has the lowest completion rate once measured (2-3 of 240 in three runs)."""
    balancer = testbed[0]
    counts = served_by(balancer, "gmsr", 240, 6, {"min_samples": "4"})
    assert sum(counts.values()) == 240
    assert counts["s1"] < 0.2 * 240, counts  # rr would give it a third
    assert status_of(balancer)["options"] == {"min_samples": "4"}


def test_least_request_full_scan_sends_less_to_the_slow_backend(tmp_path):
    """Envoy's FULL_SCAN through the live balancer (equal weights, so its scan decides):
    s1, 30 ms slower, always has the most in flight and gets the least."""
    servers = three_servers(tmp_path)
    with processes(*servers) as kids:
        balancer = start_balancer(servers, tmp_path, "--seed", "7")
        kids.append(balancer)
        counts = served_by(balancer, "least-request", 240, 6, {"selection_method": "full_scan"})
        assert sum(counts.values()) == 240
        assert counts["s1"] < 0.15 * 240, counts  # rr would give it a third
        assert status_of(balancer)["options"] == {"selection_method": "full_scan"}


def test_picks_log_has_one_line_per_pick(testbed):
    balancer, picks = testbed[0], testbed[1]

    def firsts() -> list[dict]:
        if not picks.exists():
            return []
        rows = [json.loads(line) for line in picks.read_text().splitlines()]
        return [r for r in rows if r["strategy"] == "first"]

    before = len(firsts())  # another test of the module may have run `first`
    served_by(balancer, "first", 5, 1)
    rows = wait_for(
        lambda: (r := firsts()) and len(r) == before + 5 and r[before:], 3, "5 picks of 'first'"
    )
    assert {r["server"] for r in rows} == {"s1"}
    assert set(rows[0]) == {"t", "server", "inflight_at_pick", "strategy"}
    assert abs(rows[0]["t"] - time.time()) < 30


def test_backends_added_and_removed_at_runtime(testbed):
    balancer, _, logs, kids = testbed
    s4 = start_server("s4", logs)
    kids.append(s4)
    code, body = admin(
        balancer,
        "POST",
        "/backends",
        {"id": "s4", "address": f"127.0.0.1:{s4.ready['port']}", "weight": 1},
    )
    assert code == 200, body
    wait_for(
        lambda: any(
            b["id"] == "s4" and b["state"] == "up" for b in status_of(balancer)["backends"]
        ),
        5,
        "s4 up",
    )
    assert served_by(balancer, "rr", 40, 1)["s4"] >= 5
    code, body = admin(balancer, "DELETE", "/backends/s4")
    assert code == 200, body
    assert [b["id"] for b in body["backends"]] == ["s1", "s2", "s3"]
    assert "s4" not in served_by(balancer, "rr", 30, 2)
    code, body = admin(balancer, "POST", "/backends", {"id": "s1", "address": "127.0.0.1:1"})
    assert code == 400 and "already in the pool" in body["error"]


def _report_sources(balancer) -> dict[str, str | None]:
    return {
        b["id"]: (b["last_report"] or {}).get("source") for b in status_of(balancer)["backends"]
    }


@pytest.mark.parametrize(
    ("strategy", "source"), [("dynamic", "response"), ("dynamic-immediate", "push")]
)
def test_load_reports_reach_the_pool(testbed, strategy, source):
    """A strategy that uses server reports gets backend connections that ask for them."""
    balancer = testbed[0]
    before = {b["id"]: b["picks"] for b in status_of(balancer)["backends"]}
    served_by(balancer, strategy, 1, 1)  # the swap re-SETUPs the backend connections

    def reported():
        # Staggered, so some requests are picked after an answer has told the balancer
        # that the slow s1 is busy. `dynamic` is updated only by answers and herds onto
        # the fast backend it tie-breaks to, so the check is: every backend the strategy
        # used reports, and it used more than one.
        served_by_current(balancer, 12, gap_s=0.01)
        used = [b for b in status_of(balancer)["backends"] if b["picks"] > before[b["id"]]]
        sources = _report_sources(balancer)
        return len(used) >= 2 and all(sources[b["id"]] == source for b in used)

    wait_for(reported, 5, f"{source} reports from every backend the strategy used")


def served_by_current(balancer, n: int, gap_s: float = 0.0) -> None:
    async def one(client, k: int):
        await asyncio.sleep(k * gap_s)
        await client.request_response(Payload(WORK))

    async def go():
        async with rsocket_client(balancer.ready["port"]) as client:
            await asyncio.gather(*(one(client, k) for k in range(n)))

    asyncio.run(asyncio.wait_for(go(), 10))


def test_leases_are_tracked_for_the_lease_strategy(testbed):
    balancer = testbed[0]
    code, body = admin(balancer, "PUT", "/strategy", {"name": "lease"})
    assert code == 200, body
    # The switch re-SETUPs the backends with the lease flag; until their LEASE frames
    # arrive the strategy refuses every request (never send beyond a lease), so wait.

    def live_leases() -> list[int] | None:
        backends = status_of(balancer)["backends"]
        return (
            [b["lease_remaining"] for b in backends]
            if all(b["lease_remaining"] for b in backends)
            else None
        )

    leases = wait_for(live_leases, 5, "LEASE frames from all three backends")
    assert len(leases) == 3
    counts = served_by(balancer, "lease", 30, 3)
    assert sum(counts.values()) == 30


def test_agent_reports_reach_the_pool(testbed):
    balancer = testbed[0]
    report = LoadReport(server="s2", source="agent", t=time.time(), cpu_util=0.5, qps=10.0)

    async def go():
        async with rsocket_client(balancer.ready["agent_port"]) as client:
            await client.fire_and_forget(Payload(report.to_json()))

    asyncio.run(asyncio.wait_for(go(), 5))
    wait_for(lambda: _report_sources(balancer)["s2"] == "agent", 5, "the agent report")


def test_ring_hash_keeps_a_routing_key_on_one_backend(testbed):
    balancer = testbed[0]
    admin(balancer, "PUT", "/strategy", {"name": "ring-hash"})

    async def go():
        seen: dict[str, set[str]] = {}
        async with rsocket_client(balancer.ready["port"]) as client:
            for i in range(60):
                key = f"user-{i % 12}"
                reply = await client.request_response(
                    Payload(WORK, request_metadata(routing_key=key))
                )
                seen.setdefault(key, set()).add(json.loads(reply.data)["server"])
        return seen

    seen = asyncio.run(asyncio.wait_for(go(), 20))
    assert all(len(servers) == 1 for servers in seen.values()), seen
    assert len(set().union(*seen.values())) >= 2  # 12 keys do not all hash to one backend
