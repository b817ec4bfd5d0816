"""`lblab validate`'s parts: verdicts, bound cases, one run's statistics, the JSQ(d) policy."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.strategies.base import RequestView
from lblab.errors import ConfigError
from lblab.simulator import theory
from lblab.simulator.shortest_of_d import ShortestOfD
from lblab.simulator.validate import POLICY, TAIL_TOLERANCE, TOLERANCE, _case, run_seed, verdict


def test_verdicts_pass_within_tolerance_then_within_the_interval_then_fail() -> None:
    assert verdict(0.029, 0.10, TOLERANCE) == "pass"
    assert verdict(-0.05, 0.03, TOLERANCE) == "within CI"
    assert verdict(0.07, 0.03, TOLERANCE) == "FAIL"


def test_a_mean_case_is_judged_relative_to_the_closed_form() -> None:
    c = _case(POLICY["r"], 0.5, "T", [2.2, 2.2, 2.2, 2.2], theory.mm1_sojourn(0.5))
    assert c.error == pytest.approx(0.10)
    assert c.half_width == pytest.approx(0.0)
    assert c.verdict == "FAIL"


def test_a_bound_case_fails_only_outside_its_bounds() -> None:
    low = theory.mmc_sojourn(10, 0.9)
    inside = _case(POLICY["lc"], 0.9, "T", [2.0, 2.1, 1.9], None)
    assert (inside.low, inside.error, inside.verdict) == (pytest.approx(low), 0.0, "pass")
    beats_one_queue = _case(POLICY["lc"], 0.9, "T", [1.5, 1.5, 1.5], None)
    assert beats_one_queue.error == pytest.approx(1.5 / low - 1)
    assert beats_one_queue.verdict == "FAIL"


def test_a_tail_case_is_judged_in_absolute_fractions() -> None:
    c = _case(POLICY["p2c"], 0.9, "s_6", [0.0013 + TAIL_TOLERANCE / 2] * 3, 0.0013)
    assert c.error == pytest.approx(TAIL_TOLERANCE / 2)
    assert c.verdict == "pass"


def test_one_run_measures_steady_state_fractions_and_time_in_system() -> None:
    # JSQ(2) over 20 servers at rho 0.5: the busy fraction s_1 is the load exactly.
    small = replace(POLICY["p2c"], servers=20)
    result = run_seed(small, 0.5, 8_000, seed=0, tails=3)
    assert result.tails[0] == pytest.approx(0.5, abs=0.02)
    assert result.tails[0] > result.tails[1] > result.tails[2] > 0
    assert result.sojourn == pytest.approx(theory.supermarket_sojourn(2, 0.5), rel=0.05)


def _pool(d: int, n: int, seed: int = 1) -> Pool:
    specs = [BackendSpec(f"s{i}") for i in range(n)]
    return Pool(specs, ShortestOfD(d, rng=random.Random(seed)))


def test_shortest_of_d_with_d_of_all_is_join_the_shortest_queue() -> None:
    pool = _pool(4, 4)
    loads = {"s0": 3, "s1": 1, "s2": 0, "s3": 2}
    for view in pool.views:
        view.inflight = loads[view.id]
    for rid in range(20):
        picked = pool.pick(RequestView(request_id=rid), 0.0)
        assert picked is not None and picked.id == "s2"


def test_shortest_of_d_draws_distinct_backends_and_honours_exclusions() -> None:
    pool = _pool(2, 2)
    pool.views[0].inflight = 5
    picks = {pool.pick(RequestView(request_id=i), 0.0).id for i in range(50)}  # type: ignore[union-attr]
    assert picks == {"s1"}  # two distinct of two: always both, the shorter wins
    excluded = pool.pick(RequestView(request_id=99, exclude=frozenset({"s1"})), 0.0)
    assert excluded is not None and excluded.id == "s0"
    with pytest.raises(ConfigError):
        ShortestOfD(0)


def test_a_run_too_short_to_warm_up_is_refused() -> None:
    with pytest.raises(ConfigError, match="warmed up"):
        run_seed(POLICY["r"], 0.9, 1_000, seed=0)  # 111 time units; M/M/1 needs 380
