"""``gmsr`` to its exact behaviour: the per-level rate estimate, the concave marginal, and
the picks through the real pool (fake clock, seeded rng)."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.strategies.base import Health, Outcome, RequestView
from lblab.balancer.strategies.gmsr import Gmsr, GmsrConfig, LevelRates
from lblab.balancer.strategies.registry import make_strategy
from lblab.errors import ConfigError

FOREVER = 1e12
"""A decay time constant no test outlives: the sums are plain sums."""


def serve(rates: LevelRates, level: int, mu: float, n: int, now: float) -> float:
    """``n`` completions at ``level``, each after ``1 / mu`` s there; the time after."""
    for _ in range(n):
        now += 1.0 / mu
        rates.advance(level, now, FOREVER, ended=True, ok=True)
    return now


def curve(*mus: float | None, levels: int = 8) -> LevelRates:
    """Levels 1, 2, ... served at ``mus`` (None: not visited), 4 completions each; read
    at ``since`` (no interval under way)."""
    rates, now = LevelRates(levels, 0.0), 0.0
    for level, mu in enumerate(mus, start=1):
        if mu is not None:
            now = serve(rates, level, mu, 4, now)
    return rates


def test_a_level_rate_is_its_completions_over_its_time_all_decayed() -> None:
    rates = LevelRates(4, 0.0)
    rates.advance(0, 1.0, 10.0, ended=False, ok=False)  # idle: nothing timed at level 0
    assert rates.time == [0.0] * 5 and rates.since == 1.0
    rates.advance(1, 1.1, 10.0, ended=True, ok=True)  # 0.1 s at level 1, then a response
    rates.advance(1, 1.3, 10.0, ended=True, ok=False)  # 0.2 s more, then a failure
    rates.advance(1, 1.3, 10.0, ended=False, ok=False)  # a dispatch at once: no time
    w = math.exp(-0.2 / 10.0)
    assert rates.count[1] == pytest.approx(w)
    assert rates.ends[1] == pytest.approx(w + 1.0)
    assert rates.time[1] == pytest.approx(0.1 * w + 0.2)
    assert rates.known(1, 1.3, 10.0, 1.5) == [(1, pytest.approx(w / (0.1 * w + 0.2)))]
    assert rates.known(1, 1.3, 10.0, 2.0) == []  # 1.98 decayed outcomes
    # 0.2 s later, still at level 1 with no answer: the open interval counts at level 1
    # (and only there: read at level 0, it does not)
    v = math.exp(-0.2 / 10.0)
    assert rates.known(1, 1.5, 10.0, 1.5) == [
        (1, pytest.approx(w * v / ((0.1 * w + 0.2) * v + 0.2)))
    ]
    assert rates.known(0, 1.5, 10.0, 1.5) == [(1, pytest.approx(w / (0.1 * w + 0.2)))]
    # read later, the outcomes have decayed below the bar: the level is unknown again
    assert rates.known(0, 11.3, 10.0, 1.5) == []
    assert rates.high == 1


def test_levels_above_max_level_count_in_the_top_one() -> None:
    rates = LevelRates(2, 0.0)
    rates.advance(5, 0.5, FOREVER, ended=True, ok=True)
    assert rates.count == [0.0, 0.0, 1.0] and rates.time == [0.0, 0.0, 0.5]
    assert rates.high == 2


def test_the_marginal_is_the_least_slope_of_the_curve_up_to_n_plus_1() -> None:
    concave = curve(100.0, 150.0, 160.0)
    gains = [concave.marginal(n, concave.since, FOREVER, 3.5) for n in range(5)]
    assert gains == pytest.approx([100.0, 50.0, 10.0, 0.0, 0.0])  # flat above level 3
    # a rise after a flat stretch is noise to a concave rate: the lower slope holds
    noisy = curve(100.0, 120.0, 170.0)
    assert [noisy.marginal(n, noisy.since, FOREVER, 3.5) for n in range(4)] == pytest.approx(
        [100.0, 20.0, 20.0, 0.0]
    )
    # an unvisited level in between: the line from level 1 to level 3
    gap = curve(100.0, None, 160.0)
    assert [gap.marginal(n, gap.since, FOREVER, 3.5) for n in range(4)] == pytest.approx(
        [100.0, 30.0, 30.0, 0.0]
    )
    assert gap.rate(2, 0, gap.since, FOREVER, 3.5) == pytest.approx(130.0)
    assert gap.rate(9, 0, gap.since, FOREVER, 3.5) == pytest.approx(160.0)  # flat above
    # only level 2 known: mu(1) is read on the line from 0 to it
    late = curve(None, 150.0)
    assert late.rate(1, 0, late.since, FOREVER, 3.5) == pytest.approx(75.0)
    assert [late.marginal(n, late.since, FOREVER, 3.5) for n in range(3)] == pytest.approx(
        [75.0, 75.0, 0.0]
    )


def test_no_level_known_is_inf_when_idle_and_minus_inf_when_busy() -> None:
    rates = curve(100.0)
    assert rates.marginal(0, 1.0, FOREVER, 5.0) == math.inf  # 4 completions < 5
    assert rates.marginal(1, 1.0, FOREVER, 5.0) == -math.inf
    assert rates.rate(1, 0, 1.0, FOREVER, 5.0) == 0.0


def pool(n: int = 3, seed: int = 1, **options: str) -> Pool:
    specs = [BackendSpec(chr(ord("a") + i)) for i in range(n)]
    return Pool(specs, make_strategy("gmsr", options, rng=random.Random(seed)))


def send(p: Pool, rid: int, now: float) -> tuple[str, RequestView]:
    req = RequestView(request_id=rid)
    view = p.pick(req, now)
    assert view is not None
    p.dispatch(view, req, now)
    return view.id, req


def answer(p: Pool, held: dict[int, tuple[str, RequestView]], rid: int, now: float) -> None:
    backend, req = held.pop(rid)
    p.complete(p.get(backend), req, Outcome(ok=True, latency_ms=1.0), now)


def test_exact_picks_learn_each_backend_and_fill_the_greatest_marginal() -> None:
    p = pool(tie="first", min_samples="0.5", window_s="1e12")
    held: dict[int, tuple[str, RequestView]] = {}

    def sends(first: int, count: int, now: float) -> str:
        out = ""
        for rid in range(first, first + count):
            backend, req = send(p, rid, now)
            held[rid] = (backend, req)
            out += backend
        return out

    # nothing known: each idle backend is tried (+inf), one request each (-inf while busy);
    # the first two picks were ties (3 and 2 at +inf), the third was c alone
    assert sends(0, 3, 0.0) == "abc"
    assert p.strategy.ties == 2
    for rid, t in ((0, 0.010), (1, 0.020), (2, 0.030)):  # mu(1): a 100, b 50, c 33.3 /s
        answer(p, held, rid, t)
    strategy = p.strategy
    assert isinstance(strategy, Gmsr)
    assert [strategy.marginal(v, 0.030) for v in p.views] == pytest.approx([100.0, 50.0, 100 / 3])
    # a, then b, then c (each flat above its one known level; c's 33.3 is not within
    # tolerance 0.1 * 100 of b's 50); then all 0, tied: the soonest done by Little's law,
    # (n + 1) / mu(n + 1): a 2 / 100 s, b 2 / 50, c 2 / 33.3
    assert sends(3, 4, 0.030) == "abca"
    assert strategy.ties == 3
    # a measured at level 2 (0.005 s, one response): mu_a(2) = 200, a linear rate so far
    answer(p, held, 3, 0.035)
    answer(p, held, 6, 0.045)  # a at level 1 for 0.010 s more: mu_a(1) still 100
    assert [strategy.marginal(v, 0.045) for v in p.views] == pytest.approx([100.0, 0.0, 0.0])
    # b and c have held a request since 0.030 with no answer: that open 0.015 s counts
    assert strategy.rate(p.get("b"), 1, 0.045) == pytest.approx(1 / 0.035)
    assert strategy.rate(p.get("c"), 1, 0.045) == pytest.approx(1 / 0.045)
    # a takes two (g 100 at n = 0 and 1); then every g is 0, tied: a with two in flight is
    # still the soonest done, 3 / 200 s against b's 2 / 28.6 and c's 2 / 22.2
    assert sends(7, 3, 0.045) == "aaa"
    assert strategy.wait(p.get("a"), 0.045) == pytest.approx(4 / 200)
    assert strategy.ties == 4


def test_a_backend_that_fails_fast_earns_a_rate_of_0_not_an_unknown_one() -> None:
    p = pool(2, tie="first", min_samples="0.5", window_s="1e12")
    strategy = p.strategy
    assert isinstance(strategy, Gmsr)
    a, ra = send(p, 0, 0.0)
    b, rb = send(p, 1, 0.0)
    assert (a, b) == ("a", "b")
    p.complete(p.get("a"), ra, Outcome(ok=True, latency_ms=10.0), 0.010)
    p.complete(p.get("b"), rb, Outcome(ok=False, latency_ms=1.0, error_kind="application"), 0.001)
    # a: 1 response in 10 ms at level 1 (mu 100); b: an outcome and no response (mu 0)
    assert strategy.levels["b"].known(0, 0.02, 1e12, 0.5) == [(1, 0.0)]
    assert [strategy.marginal(v, 0.02) for v in p.views] == pytest.approx([100.0, 0.0])
    assert send(p, 2, 0.02)[0] == "a"
    # a at 1: g 0 (flat above); tied with b at 0, a is sooner done: 2 / 100 s, b never
    assert strategy.wait(p.get("b"), 0.02) == math.inf
    assert send(p, 3, 0.02)[0] == "a"


def test_a_backend_that_goes_down_is_learned_again_when_back() -> None:
    p = pool(2, tie="first", min_samples="0.5", window_s="1e12")
    strategy = p.strategy
    assert isinstance(strategy, Gmsr)
    for rid in range(2):
        backend, req = send(p, rid, 0.0)
        p.complete(p.get(backend), req, Outcome(ok=True, latency_ms=5.0), 0.005 * (rid + 1))
    assert sorted(strategy.levels) == ["a", "b"]
    p.set_state("a", Health.DOWN, 0.02)
    assert sorted(strategy.levels) == ["b"]
    assert send(p, 9, 0.02)[0] == "b"
    p.set_state("a", Health.UP, 0.03)
    # b is busy and known (g 0 above its one level); a is new and idle: +inf
    assert send(p, 10, 0.03)[0] == "a"


def test_ties_spread_over_equal_idle_backends_and_are_counted() -> None:
    p = pool(4, seed=3)
    counts: Counter[str] = Counter()
    now = 0.0
    for rid in range(400):
        backend, req = send(p, rid, now)
        counts[backend] += 1
        now += 0.010
        p.complete(p.get(backend), req, Outcome(ok=True, latency_ms=10.0), now)
        now += 0.040
    assert sum(counts.values()) == 400 and all(70 <= c <= 130 for c in counts.values()), counts
    assert p.strategy.ties > 300


def test_random_ties_are_drawn_from_the_strategys_rng() -> None:
    for seed in range(5):
        p = pool(3, seed=seed)
        rng = random.Random(seed)
        expected = "abc"[rng.randrange(3)]  # all +inf and idle: uniform among the three
        assert send(p, 0, 0.0)[0] == expected
        rest = [c for c in "abc" if c != expected]
        assert send(p, 1, 0.0)[0] == rest[rng.randrange(2)]


def test_tie_first_is_declared_and_random_is_not() -> None:
    assert make_strategy("gmsr", {"tie": "first"}).takes_first_on_ties()
    assert not make_strategy("gmsr").takes_first_on_ties()


def test_options_defaults_and_bad_values_name_the_field() -> None:
    assert GmsrConfig() == GmsrConfig(
        window_s=10.0, min_samples=8.0, max_level=64, tolerance=0.1, tie="random"
    )
    for option, value in (
        ("window_s", "0"),
        ("window_s", "inf"),
        ("min_samples", "0"),
        ("max_level", "0"),
        ("max_level", "5000"),
        ("tolerance", "-0.1"),
        ("tolerance", "2"),
    ):
        with pytest.raises(ConfigError, match=option):
            make_strategy("gmsr", {option: value})
    with pytest.raises(ConfigError, match="random, first"):
        make_strategy("gmsr", {"tie": "last"})
