"""Ingram's dynamic pickers as his JavaScript ran them: exact sequences."""

from __future__ import annotations

import itertools

from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.strategies.base import RequestView
from lblab.loadreport import LoadReport
from lblab.simulator.reproduce.ingram_model import (
    AsCodedDynamic,
    AsCodedHybrid,
    AsCodedImmediate,
    js_greater,
)

DELAYS = (250, 500, 100)
_ids = itertools.count(1)


def pool_of(strategy: AsCodedDynamic) -> Pool:
    return Pool([BackendSpec(x, 1.0) for x in "abc"], strategy)


def pick(pool: Pool, now: float = 0.0) -> str:
    req = RequestView(request_id=next(_ids))
    view = pool.pick(req, now)
    assert view is not None
    pool.dispatch(view, req, now)
    return view.id


def report(pool: Pool, backend: str, source: str, inflight: int, now: float = 0.0) -> None:
    pool.report(backend, LoadReport(server=backend, source=source, t=now, inflight=inflight), now)  # type: ignore[arg-type]


def test_js_greater_compares_two_strings_as_text_and_mixed_values_as_numbers() -> None:
    assert not js_greater("10000", "250")  # "1" < "2"
    assert js_greater("250", "10000")
    assert js_greater("2250", 0)  # string against number: numeric
    assert not js_greater(500, "1000")
    assert not js_greater("0", 0)


def test_dynamic_picks_by_header_strings_so_the_busiest_can_win() -> None:
    pool = pool_of(AsCodedDynamic(DELAYS))
    assert [pick(pool) for _ in range(3)] == ["a"] * 3  # all 0: the first
    report(pool, "a", "response", inflight=40)  # "10000"
    assert pick(pool) == "b"  # "10000" > 0 as numbers
    report(pool, "b", "response", inflight=1)  # "500"
    report(pool, "c", "response", inflight=2)  # "200"
    # numerically c (200) is least; as text "10000" < "200" < "500": a, 40 queued
    assert [pick(pool) for _ in range(2)] == ["a", "a"]
    report(pool, "a", "push", inflight=1)  # plain dynamic ignores POSTs
    assert pick(pool) == "a"


def test_immediate_counts_the_queue_without_the_request_in_service() -> None:
    pool = pool_of(AsCodedImmediate(DELAYS))
    report(pool, "a", "push", inflight=1)  # idle server: queue of 1 -> 250
    report(pool, "b", "push", inflight=2)  # one in service, one queued -> 500
    report(pool, "c", "push", inflight=4)  # 3 queued -> 300
    assert pick(pool) == "a"
    report(pool, "a", "push", inflight=3)  # 2 queued -> 500
    assert pick(pool) == "c"  # 300 < 500 = 500
    report(pool, "c", "response", inflight=0)  # immediate ignores headers
    assert pick(pool) == "c"


def test_hybrid_mixes_posted_numbers_and_header_strings_latest_wins() -> None:
    pool = pool_of(AsCodedHybrid(DELAYS))
    report(pool, "a", "push", inflight=5)  # 1000 (number)
    report(pool, "b", "push", inflight=3)  # 1000 (number)
    report(pool, "c", "push", inflight=11)  # 1000 (number)
    assert pick(pool) == "a"  # all equal: the first
    report(pool, "a", "response", inflight=4)  # "1000"
    report(pool, "c", "response", inflight=9)  # "900"
    # a "1000" vs b 1000: numeric, not greater; a "1000" vs c "900": text, "1" < "9"
    assert pick(pool) == "a"
    report(pool, "a", "push", inflight=6)  # 1250, a number again: now c (900) wins
    assert pick(pool) == "c"


def test_a_late_post_takes_effect_only_when_it_arrives() -> None:
    pool = pool_of(AsCodedImmediate(DELAYS, post_delay_s=0.030))
    report(pool, "a", "push", inflight=1, now=0.0)
    assert pick(pool, now=0.010) == "a"  # 250 not here yet: all 0, the first
    assert pick(pool, now=0.030) == "b"  # a at 250 now


def test_a_late_post_is_ordered_before_a_later_header() -> None:
    pool = pool_of(AsCodedHybrid(DELAYS, post_delay_s=0.010))
    report(pool, "b", "push", inflight=1, now=0.0)  # 500, lands at 0.010
    report(pool, "a", "push", inflight=3, now=0.0)  # 500, lands at 0.010
    report(pool, "a", "response", inflight=0, now=0.020)  # "0" after the POST
    strategy = pool.strategy
    assert isinstance(strategy, AsCodedHybrid)
    assert strategy.loads[:2] == ["0", 500]
    assert pick(pool, now=0.030) == "a"
