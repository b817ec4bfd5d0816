"""r, rr, first, p2c, lc: exact pick sequences for fixed inputs and seeds, tie rules, edges."""

from __future__ import annotations

import random

import pytest

from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.strategies.base import Health, Outcome, RequestView
from lblab.balancer.strategies.registry import make_strategy, strategy_names
from lblab.errors import ConfigError

OK = Outcome(ok=True, latency_ms=1.0)


def make_pool(strategy: str, n: int = 3, seed: int = 1, **options: str) -> Pool:
    specs = [BackendSpec(chr(ord("a") + i)) for i in range(n)]
    return Pool(specs, make_strategy(strategy, options, rng=random.Random(seed)))


def picks(pool: Pool, count: int, hold: bool = False, start: int = 0) -> str:
    """Ids picked for ``count`` requests; ``hold`` keeps them in flight."""
    out = []
    for rid in range(start, start + count):
        req = RequestView(request_id=rid)
        view = pool.pick(req, 0.0)
        if view is None:
            out.append("-")
            continue
        pool.dispatch(view, req, 0.0)
        if not hold:
            pool.complete(view, req, OK, 0.0)
        out.append(view.id)
    return "".join(out)


def test_rr_cycles_in_list_order_and_skips_unavailable() -> None:
    pool = make_pool("rr", n=4)
    assert picks(pool, 6) == "abcdab"
    pool.set_state("d", Health.DOWN, 0.0)
    assert picks(pool, 4, start=10) == "cabc"
    pool.set_state("d", Health.UP, 0.0)
    assert picks(pool, 3, start=20) == "dab"  # the cursor is a list position


def test_r_is_uniform_and_seeded() -> None:
    pool = make_pool("r", n=3, seed=42)
    seq = picks(pool, 3000)
    assert seq[:12] == picks(make_pool("r", n=3, seed=42), 12)
    counts = [seq.count(c) for c in "abc"]
    assert all(900 < c < 1100 for c in counts), counts


def test_first_sticks_to_the_first_available() -> None:
    pool = make_pool("first")
    assert picks(pool, 3) == "aaa"
    pool.set_state("a", Health.DOWN, 0.0)
    assert picks(pool, 2, start=5) == "bb"


def test_lc_tie_first_leaves_the_last_server_idle_under_light_load() -> None:
    pool = make_pool("lc", tie="first")
    assert picks(pool, 5) == "aaaaa"  # each request completes before the next
    assert picks(pool, 5, hold=True, start=10) == "abcab"
    # ties: 5 idle picks, then a (3 idle), b (2 idle), a (3 at 1), b (2 at 1); c was alone
    assert pool.strategy.ties == 5 + 4  # type: ignore[attr-defined]


def test_lc_tie_rr_and_random() -> None:
    assert picks(make_pool("lc", tie="rr"), 5) == "abcab"
    seq = picks(make_pool("lc", tie="random", seed=5), 30)
    assert seq == picks(make_pool("lc", tie="random", seed=5), 30)
    assert set(seq) == {"a", "b", "c"}


def test_lc_follows_inflight() -> None:
    pool = make_pool("lc")
    held = picks(pool, 4, hold=True)
    assert held == "abca"
    # complete the request on b: b is now the least loaded
    b = pool.get("b")
    pool.complete(b, RequestView(request_id=1), OK, 0.0)
    assert picks(pool, 1, start=100) == "b"


def test_lc_weighted_divides_by_weight() -> None:
    specs = [BackendSpec("a", 1), BackendSpec("b", 1), BackendSpec("c", 3)]
    pool = Pool(specs, make_strategy("lc", {"weighted": "true", "tie": "first"}))
    assert picks(pool, 5, hold=True) == "abccc"  # 0/1 0/1 0/3 ties to a; then c until 1/3 < ...
    # make_strategy weights override the pool's
    pool2 = Pool(specs, make_strategy("lc", {"weighted": "true", "tie": "first"}, weights={"a": 4}))
    assert picks(pool2, 5, hold=True) == "abcac"  # then a=1/4 < c=1/3; a=2/4 > c=1/3


def test_p2c_picks_the_less_loaded_of_two() -> None:
    pool = make_pool("p2c", n=2)
    assert picks(pool, 4, hold=True) == "abba"  # both always drawn; a tie goes to the first drawn
    assert pool.strategy.ties == 2  # type: ignore[attr-defined]
    pool = make_pool("p2c", n=5, seed=9)
    seq = picks(pool, 50, hold=True)
    assert seq == picks(make_pool("p2c", n=5, seed=9), 50, hold=True)
    counts = sorted(seq.count(c) for c in "abcde")
    assert counts[-1] - counts[0] <= 3, counts  # in-flight kept even


def test_p2c_weighted_is_finagles_weighted_pick() -> None:
    # Weights 1, 1, 2: cumulative [1, 2, 4]; each draw is bisect(cumulative, 4 u). The
    # seed-3 stream's u: .238 .544 | .370 .604 | .626 .066 | .013 .837 | .259 .234 ...
    specs = [BackendSpec("a", 1), BackendSpec("b", 1), BackendSpec("c", 2)]
    pool = Pool(specs, make_strategy("p2c", {"weighted": "true"}, rng=random.Random(3)))
    # a vs c: 0/1 = 0/2, a tie to a; b vs c: 0 = 0, b; c 0/2 < a 1/1; a 1/1 > c 1/2;
    # b vs a, equal weights: in flight alone, 1 = 1, a tie to b.
    assert picks(pool, 5, hold=True) == "abccb"
    assert pool.strategy.ties == 3  # type: ignore[attr-defined]
    # Idle (every answer back at once), the first drawn wins: picks follow the weights.
    pool = Pool(specs, make_strategy("p2c", {"weighted": "true"}, rng=random.Random(5)))
    seq = picks(pool, 4000)
    assert {c: seq.count(c) for c in "abc"} == {"a": 978, "b": 1014, "c": 2008}
    # Unweighted p2c over the same pool ignores the weights: about a third each.
    seq = picks(Pool(specs, make_strategy("p2c", rng=random.Random(5))), 3000)
    assert all(900 <= seq.count(c) <= 1100 for c in "abc"), seq


def test_p2c_weighted_redraws_the_second_and_honours_exclusions() -> None:
    # b weighs 1e6 of a's 1: the second draw is b again five times in a row most often,
    # and then b is compared with itself and wins without a tie.
    specs = [BackendSpec("a", 1), BackendSpec("b", 1_000_000)]
    pool = Pool(specs, make_strategy("p2c", {"weighted": "true"}, rng=random.Random(1)))
    assert picks(pool, 20) == "b" * 20
    assert pool.strategy.ties == 0  # type: ignore[attr-defined]
    req = RequestView(request_id=1, exclude=frozenset({"b"}))
    assert pool.pick(req, 0.0) is pool.get("a")
    pool.set_state("a", Health.DOWN, 0.0)
    assert pool.pick(req, 0.0) is None
    # Weights within 1e-4 compare in flight alone (WeightedP2CPick.approxEqual).
    close = [BackendSpec("a", 1.0), BackendSpec("b", 1.00005)]
    pool = Pool(close, make_strategy("p2c", {"weighted": "true"}, rng=random.Random(2)))
    assert sorted(picks(pool, 2, hold=True)) == ["a", "b"]


@pytest.mark.parametrize("name", ["r", "rr", "first", "p2c", "lc"])
def test_nothing_available_gives_none_and_exclusions_are_honoured(name: str) -> None:
    pool = make_pool(name, n=3)
    req = RequestView(request_id=1, exclude=frozenset({"a", "c"}))
    for _ in range(10):
        view = pool.pick(req, 0.0)
        assert view is not None and view.id == "b"
    for backend in "abc":
        pool.set_state(backend, Health.DOWN, 0.0)
    assert pool.pick(RequestView(request_id=2), 0.0) is None


def test_unknown_names_list_the_valid_ones() -> None:
    with pytest.raises(ConfigError, match="valid strategies: r, rr"):
        make_strategy("round-robin")
    with pytest.raises(ConfigError, match="weight"):
        make_strategy("rr", weights={"a": 0})
    assert len(strategy_names()) == len(set(strategy_names()))
