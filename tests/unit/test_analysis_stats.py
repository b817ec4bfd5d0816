"""analysis.stats against values computable by hand or from published tables."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lblab.analysis.stats import grouped_quantiles, imbalance, jain_index, mean_ci, t_quantile

# Student t, two-sided 95 % (the 0.975 quantile), from any printed table.
T_TABLE = [(1, 12.706), (2, 4.303), (4, 2.776), (9, 2.262), (29, 2.045), (1000, 1.962)]


@pytest.mark.parametrize(("df", "expected"), T_TABLE)
def test_t_quantile_matches_the_printed_table(df: int, expected: float) -> None:
    assert t_quantile(0.975, df) == pytest.approx(expected, abs=1e-3)
    assert t_quantile(0.025, df) == pytest.approx(-expected, abs=1e-3)


def test_t_quantile_rejects_impossible_arguments() -> None:
    with pytest.raises(ValueError, match="0 < p < 1"):
        t_quantile(1.0, 3)


def test_mean_ci_of_three_replications() -> None:
    # mean 2, sample sd 1, half width t(0.975, 2) * 1 / sqrt(3) = 4.303 / 1.732 = 2.484
    ci = mean_ci([1.0, 2.0, 3.0])
    assert ci.n == 3 and ci.has_ci
    assert ci.mean == pytest.approx(2.0)
    assert ci.hi - ci.mean == pytest.approx(2.484, abs=1e-3)
    assert ci.mean - ci.lo == pytest.approx(2.484, abs=1e-3)


def test_one_replication_gives_the_value_and_no_interval() -> None:
    ci = mean_ci([5.0])
    assert ci.mean == 5.0 and ci.n == 1
    assert not ci.has_ci and math.isnan(ci.lo) and math.isnan(ci.hi)


def test_mean_ci_ignores_nan_and_handles_nothing() -> None:
    assert mean_ci([4.0, math.nan, 6.0]).mean == 5.0
    empty = mean_ci([])
    assert empty.n == 0 and math.isnan(empty.mean)


def test_jain_index_by_hand() -> None:
    assert jain_index([1, 1, 1]) == pytest.approx(1.0)
    assert jain_index([1, 0, 0]) == pytest.approx(1 / 3)  # one server takes all: 1/n
    assert jain_index([1, 2, 3]) == pytest.approx(36 / 42)  # (6^2) / (3 * 14)
    assert math.isnan(jain_index([0, 0])) and math.isnan(jain_index([]))


def test_imbalance_is_max_over_mean() -> None:
    assert imbalance([1, 2, 3]) == pytest.approx(1.5)
    assert imbalance([4, 4]) == pytest.approx(1.0)
    assert math.isnan(imbalance([0, 0]))


def test_grouped_quantiles_equal_numpy_per_group() -> None:
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 4, size=1000)
    values = rng.exponential(10.0, size=1000)
    values[::17] = np.nan  # ignored
    qs = [0.0, 0.5, 0.95, 1.0]
    out = grouped_quantiles(codes, values, qs, groups=5)  # group 4 has no rows
    for g in range(4):
        v = values[(codes == g) & ~np.isnan(values)]
        assert out[g] == pytest.approx(np.quantile(v, qs))
    assert np.isnan(out[4]).all()
