"""The closed forms of simulator/theory.py against published figures (issue 10, item 1)."""

from __future__ import annotations

import pytest

from lblab.errors import ConfigError
from lblab.simulator import theory

LOADS = (0.5, 0.7, 0.8, 0.9)


def _close(values: list[float], expected: tuple[float, ...]) -> None:
    assert values == pytest.approx(expected, abs=5e-5)


def test_mm1_random_routing() -> None:
    _close([theory.mm1_sojourn(r) for r in LOADS], (2.0, 3.3333, 5.0, 10.0))


def test_erlang_10_m_1_round_robin() -> None:
    _close([theory.erlang_m1_sojourn(10, r) for r in LOADS], (1.3246, 2.0198, 2.9223, 5.6603))


def test_erlang_sigma_is_a_fixed_point_in_the_open_unit_interval() -> None:
    for rho in LOADS:
        s = theory.erlang_sigma(10, rho)
        assert 0.0 < s < 1.0
        rate = 10 * rho
        assert (rate / (rate + 1.0 - s)) ** 10 == pytest.approx(s, abs=1e-12)


def test_erlang_1_is_poisson_so_round_robin_over_one_server_is_mm1() -> None:
    for rho in LOADS:
        assert theory.erlang_m1_sojourn(1, rho) == pytest.approx(theory.mm1_sojourn(rho))


def test_mmc_erlang_c_shared_queue() -> None:
    _close([theory.mmc_sojourn(10, r) for r in LOADS], (1.0072, 1.0739, 1.2046, 1.6687))


def test_mmc_with_one_server_is_mm1() -> None:
    assert theory.mmc_sojourn(1, 0.8) == pytest.approx(5.0)
    assert theory.erlang_c(1, 0.8) == pytest.approx(0.8)  # P(wait) = rho


def test_supermarket_two_and_three_choices() -> None:
    _close([theory.supermarket_sojourn(2, r) for r in LOADS], (1.2657, 1.6145, 1.9474, 2.6141))
    _close([theory.supermarket_sojourn(3, r) for r in LOADS], (1.1252, 1.3568, 1.5809, 2.0279))


def test_supermarket_tail_fractions_at_rho_0_9() -> None:
    _close(
        [theory.supermarket_tail(2, 0.9, i) for i in range(1, 7)],
        (0.9, 0.729, 0.4783, 0.2059, 0.0382, 0.0013),
    )
    assert theory.supermarket_tail(2, 0.9, 0) == 1.0


def test_ordering_of_the_policies_at_every_load() -> None:
    for rho in LOADS:
        shared = theory.mmc_sojourn(10, rho)
        d3 = theory.supermarket_sojourn(3, rho)
        d2 = theory.supermarket_sojourn(2, rho)
        rr = theory.erlang_m1_sojourn(10, rho)
        assert shared < d3 < d2 < theory.mm1_sojourn(rho)
        assert rr < theory.mm1_sojourn(rho)


@pytest.mark.parametrize(
    "call",
    [
        lambda: theory.mm1_sojourn(1.0),
        lambda: theory.erlang_m1_sojourn(10, 0.0),
        lambda: theory.erlang_m1_sojourn(0, 0.5),
        lambda: theory.mmc_sojourn(10, 1.2),
        lambda: theory.supermarket_sojourn(1, 0.5),
    ],
)
def test_unstable_or_meaningless_inputs_are_refused(call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError):
        call()


def test_relaxation_time_of_mm1_and_mmc() -> None:
    assert theory.relaxation_time(1, 0.9) == pytest.approx(1 / (1 - 0.9**0.5) ** 2)
    assert theory.relaxation_time(1, 0.9) == pytest.approx(379.74, abs=0.01)
    assert theory.relaxation_time(10, 0.9) == pytest.approx(37.974, abs=0.001)
    assert theory.relaxation_time(1, 0.5) < theory.relaxation_time(1, 0.8)
