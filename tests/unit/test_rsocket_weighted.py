"""rsocket-weighted against rsocket-java's formulas, with hand-computed figures.

Java (``BaseWeightedStats``, ``WeightedLoadbalanceStrategy``) keeps every time in
microseconds (``Clock.now() = nanoTime / 1000``); the numbers below follow its code.
"""

from __future__ import annotations

import itertools
import math
import random

import pytest

from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.strategies.base import BackendView, Outcome, RequestView
from lblab.balancer.strategies.registry import make_strategy
from lblab.balancer.strategies.rsocket_weighted import US, WeightedStats

_ids = itertools.count(1)


def stats_after(rtt_us: int, sent_us: int = US) -> WeightedStats:
    """Stats made at 0 (the connection), one request sent at 1 s, answered in ``rtt_us``."""
    s = WeightedStats(0, random.Random(1))
    s.start(sent_us, 0)
    s.stop(sent_us + rtt_us, sent_us, 1)
    s.record(rtt_us)
    return s


def test_weight_is_java_formula_in_microseconds() -> None:
    s = stats_after(10_000)  # median = p50 = p80 = 10000 us after one sample
    # idle, not yet inactive (threshold 500 x 1 s): L = 10000, inside [lo, hi]
    assert s.weight(2 * US, 0) == pytest.approx(1 / (1 + 10_000))
    # one request in flight for 30 ms: L = instant / pending = 30000 > hi = 10010,
    # bw = max(10010 - 10000, 1) = 10: L *= (1 + 19990 / 10)^4 = 2000^4
    s.start(3 * US, 0)
    latency = 30_000 * 2000.0**4
    assert s.weight(3 * US + 30_000, 1) == pytest.approx(1 / (1 + latency * 2))


def test_an_idle_median_decays_by_microsecond_steps() -> None:
    s = stats_after(40_000)
    # inter-arrival EWMA: its first sample (1 s after the connection) replaces the
    # initial 1 s, so a backend idle past 500 s gets a 0 inserted per weight reading;
    # Java's Median steps down by 1, 2, 3 ... units: microseconds.
    for expected in (39_999, 39_997, 39_994, 39_990):
        s.weight(600 * US, 0)
        assert s.median.estimate == expected


class Driver:
    """Requests through a Pool on a fake clock; latency = completion - dispatch."""

    def __init__(self, *names: str) -> None:
        strategy = make_strategy("rsocket-weighted", rng=random.Random(1))
        self.pool = Pool([BackendSpec(n, 1.0) for n in names], strategy, now=0.0)
        self.stats: dict[str, WeightedStats] = strategy.stats  # type: ignore[attr-defined]
        self.open: list[tuple[BackendView, RequestView, float]] = []

    def send(self, now: float) -> str:
        req = RequestView(request_id=next(_ids))
        view = self.pool.pick(req, now)
        assert view is not None
        self.pool.dispatch(view, req, now)
        self.open.append((view, req, now))
        return view.id

    def finish(self, backend: str, now: float, kind: str | None = None) -> None:
        entry = next(o for o in self.open if o[0].id == backend)
        self.open.remove(entry)
        view, req, sent = entry
        outcome = Outcome(ok=kind is None, latency_ms=(now - sent) * 1000.0, error_kind=kind)
        self.pool.complete(view, req, outcome, now)


def test_only_successes_feed_the_median_and_a_timeout_is_a_cancel() -> None:
    d = Driver("a")
    stats = d.stats["a"]
    d.send(1.0)
    d.finish("a", 1.005)  # 5 ms
    d.send(2.0)
    d.finish("a", 2.9, kind="timeout")  # Java: onCancel, nothing recorded
    assert (stats.median.estimate, stats.availability.value) == (5_000, 1.0)
    d.send(3.0)
    d.finish("a", 3.001, kind="rejected")  # an error: availability 0 in, no round trip
    assert stats.median.estimate == 5_000
    # EWMA with tau 7 s: w = exp(-(3.001 - 1.005) / 7) of the old 1.0 stays
    assert stats.availability.value == pytest.approx(math.exp(-1.996 / 7))


def test_a_slow_backend_back_from_idle_is_not_flooded() -> None:
    """The live run's 522 vs 199: after a pause the idle backends' medians decay, and a
    slow one must not look free. Two backends: Java compares both, in list order."""
    d = Driver("slow", "fast")
    assert [d.send(1.0), d.send(1.0)] == ["slow", "fast"]  # 0 vs the startup penalty
    d.finish("slow", 1.040)  # 40 ms
    d.finish("fast", 1.010)  # 10 ms
    # 599 s later both are past 500 x their 1 s inter-arrival: each reading inserts a 0.
    # pick 1: slow 39999 / (1 + 1/40)^4 = 36236 vs fast 9999 / 1.1^4 = 6829: fast
    # pick 2: slow 39997 / (1 + 3/40)^4 = 29949 vs fast (1 in flight) 6829 x 2: fast
    # pick 3: slow 39994 / (1 + 6/40)^4 = 22866 vs fast 6829 x 3 = 20488: fast
    # pick 4: slow 39990 / (1 + 10/40)^4 = 16380 vs fast 6829 x 4 = 27318: slow
    picks = [d.send(600.0) for _ in range(10)]
    assert picks[:4] == ["fast", "fast", "fast", "slow"]
    assert picks.count("slow") <= 3  # in milliseconds (the old units) it took 8 of 10


def _simulated(strategy: str) -> tuple[float, list[int]]:
    """Two servers exp 10 ms and one four times faster, 8 closed-loop users."""
    from lblab.simulator.config import ServerGroup, SimConfig
    from lblab.simulator.run import simulate
    from lblab.simulator.service import Exponential
    from lblab.simulator.workload import ClosedUsers

    service = Exponential(0.010)
    config = SimConfig(
        strategy=strategy,
        servers=(ServerGroup(count=2, service=service), ServerGroup(service=service, speed=4)),
        requests=4000,
        arrivals=ClosedUsers(users=8, think=0.0),
        deadline=None,
        picks_every=0,
        cells=((100, 10_000),),
    )
    table = simulate(config).requests
    servers = table.column("server").to_pylist()
    counts = [servers.count(f"s{i}") for i in (1, 2, 3)]
    return float(table.column("latency_ms").to_numpy().mean()), counts


def test_in_simulation_it_sits_near_p2c_and_splits_twins_evenly() -> None:
    # The case: 25.1 ms, near rr (28.5), with the old millisecond units.
    weighted, counts = _simulated("rsocket-weighted")
    p2c, _ = _simulated("p2c")
    rr, _ = _simulated("rr")
    assert weighted < 1.3 * p2c and weighted < 0.75 * rr
    assert abs(counts[0] - counts[1]) < 0.15 * counts[0]  # the twins
    assert counts[2] > counts[0] + counts[1]  # the fast server takes most
