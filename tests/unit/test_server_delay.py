"""A server's slept service time: fixed, or exponential seeded by the server's id."""

from __future__ import annotations

import statistics

from lblab.scenarios import request_body
from lblab.servers.service import WorkService

N = 20_000


def _draws(dist: str, seed: str, n: int = N) -> list[float]:
    service = WorkService(workers=1, delay_ms=10.0, duty_cycle=None, delay_dist=dist, seed=seed)
    try:
        return [service.next_delay_s() for _ in range(n)]
    finally:
        service.shutdown()


def test_a_fixed_delay_is_the_delay_every_time() -> None:
    assert set(_draws("fixed", "s1", 100)) == {0.010}


def test_an_exponential_delay_has_the_mean_and_the_spread_of_one() -> None:
    draws = _draws("exp", "s1")
    # Exp(mean 10 ms): standard deviation = mean; P(X > 3 * mean) = e^-3 = 4.98 %.
    assert abs(statistics.mean(draws) - 0.010) < 0.0005  # 3.5 standard errors
    assert abs(statistics.pstdev(draws) - 0.010) < 0.0008
    assert 0.040 < sum(d > 0.030 for d in draws) / N < 0.060


def test_the_draws_are_the_servers_own_stream() -> None:
    a, b, c = _draws("exp", "s1", 5), _draws("exp", "s1", 5), _draws("exp", "s2", 5)
    assert a == b != c


def test_the_slot_sleeps_the_draw() -> None:
    service = WorkService(workers=1, delay_ms=20.0, duty_cycle=None, delay_dist="fixed")
    try:
        result = service.submit(request_body(100, 100), 0.0).result(timeout=30)
    finally:
        service.shutdown()
    assert result.service_ms >= 20.0
