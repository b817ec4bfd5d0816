"""lrt, least-time, dynamic*, lease, peak-ewma, rsocket-weighted: formulas and sequences."""

from __future__ import annotations

import random

import pytest

from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.strategies.base import BackendView, Outcome, RequestView
from lblab.balancer.strategies.peak_ewma import PENALTY_MS, PeakCost
from lblab.balancer.strategies.registry import make_strategy
from lblab.loadreport import LoadReport


def make(
    name: str,
    n: int = 3,
    seed: int = 1,
    weights: list[float] | None = None,
    options: dict[str, str] | None = None,
) -> Pool:
    ws = weights or [1.0] * n
    specs = [BackendSpec(chr(ord("a") + i), w) for i, w in enumerate(ws)]
    return Pool(specs, make_strategy(name, options, rng=random.Random(seed)))


class Driver:
    """Sends requests through a pool on a fake clock and keeps them until told."""

    def __init__(self, pool: Pool) -> None:
        self.pool = pool
        self.rid = 0
        self.open: dict[int, tuple[BackendView, RequestView]] = {}

    def send(self, now: float = 0.0) -> str:
        self.rid += 1
        req = RequestView(request_id=self.rid)
        view = self.pool.pick(req, now)
        if view is None:
            return "-"
        self.pool.dispatch(view, req, now)
        self.open[self.rid] = (view, req)
        return view.id

    def finish(self, rid: int, latency_ms: float, now: float = 0.0, ok: bool = True) -> None:
        view, req = self.open.pop(rid)
        outcome = Outcome(ok=ok, latency_ms=latency_ms, error_kind=None if ok else "timeout")
        self.pool.complete(view, req, outcome, now)


def response_report(pool: Pool, backend: str, now: float = 0.0, **fields: float) -> None:
    report = LoadReport(server=backend, source="response", t=now, **fields)  # type: ignore[arg-type]
    pool.report(backend, report, now)


def test_lrt_orders_by_inflight_then_mean_service_time() -> None:
    pool = make("lrt")
    d = Driver(pool)
    response_report(pool, "a", service_ms=30.0)
    response_report(pool, "a", service_ms=10.0)  # mean 20
    response_report(pool, "b", service_ms=5.0)  # mean 5; c has none: 0
    assert d.send() == "c"
    assert d.send() == "b"
    assert d.send() == "a"
    assert d.send() == "c"  # all at 1 in flight: c (0) < b (5) < a (20)
    assert pool.strategy.ties == 0  # type: ignore[attr-defined]


def test_least_time_is_rt_times_inflight_plus_one_over_weight() -> None:
    pool = make("least-time", weights=[1, 1, 2], options={"tie": "first"})
    d = Driver(pool)
    latency = {"a": 10.0, "b": 40.0, "c": 30.0}
    # unsampled backends count 1 ms: c (1/2) first, then a, b (ties at 1, first wins)
    assert [d.send() for _ in range(3)] == ["c", "a", "b"]
    for rid, (view, _) in list(d.open.items()):
        d.finish(rid, latency[view.id])
    pool.strategy.ties = 0  # type: ignore[attr-defined]
    # keys: a 10*1/1=10, b 40, c 30*1/2=15
    assert d.send() == "a"  # a: 10*2 = 20 now
    assert d.send() == "c"  # c: 15 < 20
    assert d.send() == "a"  # a 20 < c 30*2/2=30
    assert d.send() == "a"  # a 30, c 30: tie to the first (a)
    assert pool.strategy.ties == 1  # type: ignore[attr-defined]


def test_least_time_breaks_a_tie_at_random_by_default() -> None:
    firsts = set()
    for seed in range(20):
        d = Driver(make("least-time", seed=seed))  # unsampled: all three tie at 1 ms
        firsts.add(d.send())
    assert firsts == {"a", "b", "c"}


def test_dynamic_herds_until_a_response_report() -> None:
    pool = make("dynamic")
    d = Driver(pool)
    assert [d.send() for _ in range(4)] == ["a"] * 4  # no reports: all 0, first wins
    # the server's estimate of the work queued at it; the answered request's own wait
    # (queue_ms) is history and does not count
    response_report(pool, "a", queue_ms=500.0, service_ms=10.0, inflight=3, est_wait_ms=30.0)
    assert [d.send() for _ in range(2)] == ["b", "b"]
    response_report(pool, "b", service_ms=10.0, inflight=2)  # no est_wait_ms: 10 * 2 = 20
    assert d.send() == "c"
    response_report(pool, "c", est_wait_ms=50.0)
    assert d.send() == "b"  # b 20 < a 30 < c 50
    response_report(pool, "a", queue_ms=900.0, service_ms=10.0, inflight=0, est_wait_ms=0.0)
    assert d.send() == "a"  # drained: 0, however long its last request waited
    pushed = LoadReport(server="a", source="push", t=0, service_ms=1, inflight=9, est_wait_ms=99)
    pool.report("a", pushed, 0.0)  # plain dynamic ignores pushed estimates
    assert d.send() == "a"


def test_dynamic_immediate_and_hybrid_accept_their_sources() -> None:
    immediate = make("dynamic-immediate")
    hybrid = make("dynamic-hybrid")
    for pool in (immediate, hybrid):
        pushed = LoadReport(
            server="a", source="push", t=0, service_ms=10, inflight=1, est_wait_ms=10
        )
        pool.report("a", pushed, 0.0)
        response_report(pool, "b", queue_ms=0.0, service_ms=5.0, inflight=1, est_wait_ms=5.0)
    assert Driver(immediate).send() == "b"  # the response report was ignored: b is at 0
    assert Driver(hybrid).send() == "c"  # a 10, b 5, c 0
    response_report(hybrid, "c", est_wait_ms=20.0)
    assert Driver(hybrid).send() == "b"
    pushed = LoadReport(server="b", source="push", t=0, service_ms=5, inflight=3, est_wait_ms=15)
    hybrid.report("b", pushed, 0.0)  # latest wins, whichever path it came by
    assert Driver(hybrid).send() == "a"  # a 10 < b 15 < c 20


def test_lease_never_exceeds_the_allowance() -> None:
    pool = make("lease")
    d = Driver(pool)
    assert d.send() == "-"  # nobody granted a lease
    a, b, c = pool.views
    a.lease_remaining, a.lease_expires_at = 2, 10.0
    b.lease_remaining, b.lease_expires_at = 3, 10.0
    c.lease_remaining, c.lease_expires_at = 9, 1.0  # expires at t=1
    assert [d.send(now=1.0) for _ in range(6)] == ["b", "a", "b", "a", "b", "-"]
    assert (a.lease_remaining, b.lease_remaining) == (0, 0)
    assert pool.strategy.ties == 2  # type: ignore[attr-defined]


def test_peak_ewma_cost_jumps_to_peaks_and_decays() -> None:
    cost = PeakCost(tau=10.0, now=0.0)
    cost.observe(100.0, 0.0)
    assert cost.cost == 100.0
    cost.observe(50.0, 10.0)  # w = e^-1
    assert cost.cost == pytest.approx(100 * 0.36787944 + 50 * 0.63212056)
    before = cost.cost
    cost.observe(500.0, 10.0)
    assert cost.cost == 500.0 > before
    fresh = PeakCost(tau=10.0, now=0.0)
    assert fresh.load(inflight=3, now=1.0) == PENALTY_MS + 3
    assert fresh.load(inflight=0, now=1.0) == 0.0
    decayed = PeakCost(tau=10.0, now=0.0)
    decayed.observe(100.0, 0.0)
    assert decayed.load(inflight=0, now=10.0) == pytest.approx(100 * 0.36787944)


def test_peak_ewma_prefers_the_faster_backend() -> None:
    pool = make("peak-ewma", n=2)
    d = Driver(pool)
    first, second = d.send(), d.send()
    assert {first, second} == {"a", "b"}  # unsampled with one in flight: penalty
    d.finish(1, 100.0 if first == "a" else 5.0, now=0.1)
    d.finish(2, 5.0 if first == "a" else 100.0, now=0.1)
    assert [d.send(now=0.2) for _ in range(5)].count("b") >= 4


def test_rsocket_weighted_prefers_low_latency_and_penalises_failures() -> None:
    pool = make("rsocket-weighted", n=2)
    d = Driver(pool)
    now = 0.0
    for _ in range(40):
        now += 0.01
        backend = d.send(now)
        d.finish(d.rid, 2.0 if backend == "a" else 50.0, now + 0.001)
    seq = [d.send(now + 0.1) for _ in range(10)]
    assert seq.count("a") >= 8
    strategy = pool.strategy
    assert strategy.stats["a"].median.estimate < strategy.stats["b"].median.estimate  # type: ignore[attr-defined]
