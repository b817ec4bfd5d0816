"""Kendall's tau-b (analysis/stats.py), the twin's measured service model and its resolved pairs
(simulator/twin/measured_service.py, compare.py)."""

from __future__ import annotations

import math
import random

import pandas as pd
import pytest

from lblab.analysis.stats import kendall_tau
from lblab.simulator.twin.compare import _resolved_pairs
from lblab.simulator.twin.measured_service import fit_service


def test_tau_is_one_for_the_same_order_and_minus_one_for_the_reverse() -> None:
    assert kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert kendall_tau([1, 2, 3, 4], [40, 30, 20, 10]) == -1.0


def test_tau_b_counts_ties_on_one_side() -> None:
    # 5 concordant pairs, one pair tied in y only: 5 / sqrt(5 * 6).
    assert kendall_tau([1, 2, 3, 4], [1, 2, 2, 3]) == pytest.approx(5 / math.sqrt(30))
    # A pair tied on both sides counts in neither denominator.
    assert kendall_tau([1, 1, 2], [5, 5, 6]) == 1.0


def test_tau_swapping_one_adjacent_pair_of_five() -> None:
    # 10 pairs, one discordant: (9 - 1) / 10.
    assert kendall_tau([1, 2, 3, 4, 5], [1, 3, 2, 4, 5]) == pytest.approx(0.8)


def test_tau_is_undefined_without_order() -> None:
    assert kendall_tau([1, 1, 1], [1, 2, 3]) is None
    assert kendall_tau([1], [1]) is None
    assert kendall_tau([], []) is None


def test_tau_ties_values_within_the_tolerance() -> None:
    # 100 and 100.5 tie at 1 %: only the pairs with 50 order, and they agree.
    assert kendall_tau([100, 100.5, 50], [3, 2, 1], 0.01) == pytest.approx(2 / math.sqrt(6))
    assert kendall_tau([100, 100.5], [1, 2], 0.01) is None
    assert kendall_tau([100, 100.5], [1, 2]) == 1.0


def test_tau_needs_pairs() -> None:
    with pytest.raises(ValueError, match="3 values against 2"):
        kendall_tau([1, 2, 3], [1, 2])


def test_measured_service_resamples_measured_shapes_and_prices_others_by_the_fit() -> None:
    rng = random.Random(3)
    rows = []
    for work in (10_000, 100_000):
        for _ in range(200):
            # service = 1 ms + 20 ns per work byte, with +-10 % noise
            rows.append((100, work, (1.0 + 2e-5 * work) * rng.uniform(0.9, 1.1)))
    frame = pd.DataFrame(rows, columns=["package_bytes", "work_bytes", "service_ms"])
    model = fit_service(frame)
    measured = set(frame.loc[frame["work_bytes"] == 10_000, "service_ms"] / 1000.0)
    draws = [model.sample(rng, 10_000, 100) for _ in range(50)]
    assert all(d in measured for d in draws)
    # A shape never served: the fit (1 ms + 20 ms) times a measured ratio near 1.
    unseen = [model.sample(rng, 1_000_000, 100) for _ in range(200)]
    assert 0.018 < sum(unseen) / len(unseen) < 0.024
    assert model.describe()["samples"] == 400
    assert model.r2 > 0.9


def _pooled(rows: list[tuple[str, float, float, float]]) -> pd.DataFrame:
    """(strategy, throughput, 95 % low, high) of one scenario."""
    frame = pd.DataFrame(rows, columns=["strategy", "throughput_rps", "lo", "hi"])
    return frame.rename(columns={"lo": "throughput_rps_lo", "hi": "throughput_rps_hi"}).assign(
        scenario="lp+lr", latency_mean_ms=1.0, latency_p95_ms=1.0
    )


def test_resolved_pairs_are_those_whose_intervals_are_apart() -> None:
    # wrr and dwrr overlap (a near-tie); both are apart from r.
    measured = _pooled([("r", 12, 11, 13), ("wrr", 27.4, 25, 30), ("dwrr", 27.2, 24, 29)])
    strategies = ("r", "wrr", "dwrr")
    # The twin swaps the near-tie only: tau drops, no resolved pair is contradicted.
    assert _resolved_pairs(measured, "lp+lr", strategies, "throughput_rps", [12, 26, 27]) == (2, [])
    # Putting r above dwrr reverses a difference the run resolves.
    assert _resolved_pairs(measured, "lp+lr", strategies, "throughput_rps", [28, 29, 27]) == (
        2,
        ["dwrr > r"],
    )
    # A simulated tie (within 1 %) reverses nothing.
    assert _resolved_pairs(measured, "lp+lr", strategies, "throughput_rps", [27, 29, 27.1]) == (
        2,
        [],
    )
    # One replication has no intervals.
    one = measured.assign(throughput_rps_lo=math.nan, throughput_rps_hi=math.nan)
    assert _resolved_pairs(one, "lp+lr", strategies, "throughput_rps", [1, 2, 3]) == (None, [])
