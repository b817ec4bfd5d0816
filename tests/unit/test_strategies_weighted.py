"""wrr, wrr-block, dwrr, dwrr-latency, awrr: exact sequences and weight formulas."""

from __future__ import annotations

import random

import pytest

from lblab.balancer.health import HealthConfig
from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.strategies.awrr import bucket_count
from lblab.balancer.strategies.base import Health, Outcome, RequestView
from lblab.balancer.strategies.registry import make_strategy
from lblab.errors import ConfigError
from lblab.loadreport import LoadReport

OK = Outcome(ok=True, latency_ms=1.0)


def weighted_pool(name: str, weights: list[float], seed: int = 1, **options: str) -> Pool:
    specs = [BackendSpec(chr(ord("a") + i), w) for i, w in enumerate(weights)]
    return Pool(specs, make_strategy(name, options, rng=random.Random(seed)))


def run(pool: Pool, count: int, now: float = 0.0, start: int = 0, step: float = 0.0) -> str:
    out = []
    for k in range(count):
        req = RequestView(request_id=start + k)
        t = now + k * step
        view = pool.pick(req, t)
        if view is None:
            out.append("-")
            continue
        pool.dispatch(view, req, t)
        pool.complete(view, req, OK, t)
        out.append(view.id)
    return "".join(out)


def test_wrr_is_smooth_nginx() -> None:
    assert run(weighted_pool("wrr", [5, 1, 1]), 14) == "aabacaa" * 2
    assert run(weighted_pool("wrr", [1, 1, 1]), 6) == "abcabc"
    seq = run(weighted_pool("wrr", [3, 2, 1]), 600)
    assert [seq.count(c) for c in "abc"] == [300, 200, 100]


def test_wrr_skips_unavailable_and_eases_in_with_slow_start() -> None:
    pool = weighted_pool("wrr", [1, 1])
    pool.set_state("b", Health.DOWN, 0.0)
    assert run(pool, 3) == "aaa"
    health = HealthConfig(  # Envoy's defaults (10 %, linear), no early end
        slow_start_window_s=10.0,
        slow_start_aggression=1.0,
        slow_start_min_weight=0.1,
        slow_start_fast_after=0,
    )
    pool = Pool([BackendSpec("a"), BackendSpec("b")], make_strategy("wrr"), health=health)
    pool.set_state("b", Health.DOWN, 0.0)
    pool.set_state("b", Health.UP, 0.0)  # b at 0.1 of its weight
    early = run(pool, 110, now=0.0)
    assert 8 <= early.count("b") <= 12, early.count("b")
    late = run(pool, 100, now=20.0, start=1000)
    assert late.count("b") == 50


def test_wrr_block_gives_runs() -> None:
    assert run(weighted_pool("wrr-block", [5, 1, 1]), 14) == "aaaaabc" * 2
    pool = weighted_pool("wrr-block", [2, 2, 2])
    assert run(pool, 3) == "aab"
    pool.set_state("b", Health.DOWN, 0.0)  # b is in the middle of its block
    assert run(pool, 4, start=10) == "ccaa"


def agent(pool: Pool, backend: str, util: float, qps: float | None, now: float) -> None:
    report = LoadReport(server=backend, source="agent", t=now, cpu_util=util, qps=qps)
    pool.report(backend, report, now)


def test_dwrr_weights_follow_capability_per_cpu() -> None:
    pool = weighted_pool("dwrr", [1, 1, 1], alpha="1")
    strategy = pool.strategy
    assert run(pool, 3) == "abc"  # no reports: equal weights
    agent(pool, "a", 0.5, 10.0, 0.1)  # 20 per unit CPU
    agent(pool, "b", 0.0, 1.0, 0.1)  # util 0 -> eps 0.01: 100 per unit CPU
    # c has no report: it gets the mean weight
    run(pool, 1, now=0.6, start=10)
    assert strategy.dynamic_weights == {"a": 20, "b": 100}  # type: ignore[attr-defined]
    seq = run(pool, 180, now=0.7, start=100)
    assert [seq.count(c) for c in "abc"] == [20, 100, 60]


def test_dwrr_smooths_and_uses_observed_rate_without_qps() -> None:
    pool = weighted_pool("dwrr", [1, 1], alpha="0.5", interval="1")
    strategy = pool.strategy
    agent(pool, "a", 0.5, None, 0.0)
    agent(pool, "b", 0.5, None, 0.0)
    run(pool, 1, now=0.0)  # first recomputation: no elapsed time yet, no scores
    run(pool, 40, now=0.1, step=0.01, start=10)  # a and b each serve 20 in ~1 s
    run(pool, 1, now=1.0, start=100)
    scores = strategy.scores  # type: ignore[attr-defined]
    assert scores["a"] == pytest.approx(scores["b"], rel=0.1)
    agent(pool, "b", 1.0, 10.0, 1.5)  # b's raw score drops to 10
    run(pool, 1, now=2.0, start=200)
    assert scores["b"] == pytest.approx(0.5 * 10 + 0.5 * 40, rel=0.1)


def test_dwrr_latency_thesis_formula_per_cycle() -> None:
    pool = weighted_pool("dwrr-latency", [1, 1, 1])
    assert run(pool, 3) == "abc"  # first cycle: no reports, weights 1
    for backend, ms in (("a", 10.0), ("b", 25.0), ("c", 41.0)):
        for _ in range(3):
            report = LoadReport(server=backend, source="response", t=0, service_ms=ms)
            pool.report(backend, report, 0.0)
    # inv = ceil(lat / 10) = 1, 3, 5; w = 5 // inv = 5, 1, 1
    assert run(pool, 14, start=10) == "aaaaabc" * 2


def test_dwrr_latency_counts_only_the_last_three_samples() -> None:
    pool = weighted_pool("dwrr-latency", [1, 1])
    for ms in (100.0, 100.0, 10.0, 10.0, 10.0):
        pool.report("a", LoadReport(server="a", source="response", t=0, service_ms=ms), 0.0)
    pool.report("b", LoadReport(server="b", source="response", t=0, service_ms=20.0), 0.0)
    # the cycle under way ends first; then lat 10 and 20 give inv 1, 2: weights 2, 1
    assert run(pool, 6) == "ab" + "aab" + "a"


def test_awrr_bucket_formula_is_the_papers() -> None:
    # Cheetah Sect. IV-B: N_i = round(10 L_avg / ((1 - a) L_i + a L_avg)), a = 0.5.
    assert bucket_count(0.5, 0.5, 0.5) == 10  # balanced
    assert bucket_count(0.2, 0.4, 0.5) == 13  # 13.33
    assert bucket_count(0.6, 0.4, 0.5) == 8  # 8.0
    assert bucket_count(1.0, 0.6, 0.5) == 8  # 7.5 rounds half up, as C's round (trunc: 7)
    # Subnormal loads (hypothesis found 5e-324): equal loads are balanced, a load that
    # cannot register beside the average gets the most buckets; never a division by 0.
    assert bucket_count(5e-324, 5e-324, 0.5) == 10
    assert bucket_count(5e-324, 1.0, 0.0) == 30
    assert bucket_count(0.9, 0.5, 0.5) == 7  # 7.14
    assert bucket_count(0.6, 0.4, 0.0) == 7  # 6.67 rounds up (trunc: 6)
    assert bucket_count(1.0, 0.5, 1.0) == 10  # a = 1: all equal


def test_awrr_bucket_formula_edges() -> None:
    assert bucket_count(0.0, 0.5, 0.5) == 30  # idle gets the most
    assert bucket_count(1.0, 0.05, 0.0) == 2  # 0.5: clamped below
    assert bucket_count(0.01, 0.5, 0.0) == 30  # 500: clamped above ("limited to 3N")
    assert bucket_count(0.3, 0.0, 0.5) == 30


def test_awrr_default_a_is_the_papers() -> None:
    assert make_strategy("awrr").config.a == 0.5  # type: ignore[attr-defined]


def test_awrr_shares_follow_buckets_exactly() -> None:
    def reported(**options: str) -> Pool:
        pool = weighted_pool("awrr", [1, 1, 1], seed=3, **options)
        for backend, util in (("a", 0.2), ("b", 0.4), ("c", 0.6)):
            agent(pool, backend, util, None, 0.0)
        return pool

    pool = reported()
    seq = run(pool, 31)  # one full walk of the shuffled 13 + 10 + 8 array
    assert pool.strategy.buckets == {"a": 13, "b": 10, "c": 8}  # type: ignore[attr-defined]
    assert seq == "acbacaaabbbacbcacacacacbbbaabba"  # the rng's shuffle, pinned
    assert [seq.count(c) for c in "abc"] == [13, 10, 8]
    assert run(pool, 31, start=31) == seq  # the same array until the next interval

    pool = reported(a="0")  # a = 0: 20, 10, round(6.67) = 7
    seq = run(pool, 37)
    assert pool.strategy.buckets == {"a": 20, "b": 10, "c": 7}  # type: ignore[attr-defined]
    assert [seq.count(c) for c in "abc"] == [20, 10, 7]


def test_awrr_rebuilds_only_after_the_interval() -> None:
    pool = weighted_pool("awrr", [1, 1], seed=1)
    agent(pool, "a", 0.9, None, 0.0)
    agent(pool, "b", 0.1, None, 0.0)
    run(pool, 1)  # builds at t = 0: round(10 * 0.5 / 0.7) = 7, round(10 * 0.5 / 0.3) = 17
    assert pool.strategy.buckets == {"a": 7, "b": 17}  # type: ignore[attr-defined]
    agent(pool, "a", 0.1, None, 0.05)
    agent(pool, "b", 0.9, None, 0.05)
    run(pool, 1, now=0.05, start=1)
    assert pool.strategy.buckets == {"a": 7, "b": 17}  # type: ignore[attr-defined]
    run(pool, 1, now=0.1, start=2)
    assert pool.strategy.buckets == {"a": 17, "b": 7}  # type: ignore[attr-defined]


def test_bad_options_name_the_field() -> None:
    with pytest.raises(ConfigError, match="interval"):
        make_strategy("dwrr", {"interval": "0"})
    with pytest.raises(ConfigError, match=r"a=1\.5"):
        make_strategy("awrr", {"a": "1.5"})
    with pytest.raises(ConfigError, match="must be a number > 0"):
        make_strategy("wrr", weights={"a": -1})
