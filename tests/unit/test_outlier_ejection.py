"""Envoy's statistical success-rate ejection in the pool (``success_rate_stdev_factor``).

At the end of each interval (``success_rate_window_s``), over the backends with at least
``success_rate_min_requests`` outcomes in it, if there are ``success_rate_minimum_hosts``
of them: a backend whose success rate is below mean - factor x stdev (population) of
their rates is ejected, with the pool's own ejection (its backoff and panic).
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from lblab.balancer.health import HealthConfig
from lblab.balancer.health_options import health_config
from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.strategies.base import Health, Outcome, RequestView
from lblab.balancer.strategies.registry import make_strategy
from lblab.errors import ConfigError
from lblab.servers.behaviour import Failing
from lblab.servers.slowdown import Control
from lblab.simulator.config import ServerEvent, config_from_mapping
from lblab.simulator.run import Simulation

OK = Outcome(ok=True, latency_ms=1.0)
FAULT = Outcome(ok=False, latency_ms=1.0, error_kind="application", server_fault=True)
NOT_ITS_FAULT = Outcome(ok=False, latency_ms=1.0, error_kind="application")
IDS = ("a", "b", "c", "d", "e", "f")


def outlier_pool(ids: tuple[str, ...] = IDS, **health: float) -> Pool:
    given = {
        "eject_after": 0,
        "slow_start_window_s": 0.0,
        "panic_threshold": 0.0,
        "success_rate_stdev_factor": 1.9,
        "success_rate_window_s": 10.0,
        "success_rate_min_requests": 10,
    }
    config = HealthConfig(**{**given, **health})  # type: ignore[arg-type]
    return Pool([BackendSpec(i) for i in ids], make_strategy("rr"), health=config)


class Feed:
    def __init__(self, pool: Pool) -> None:
        self.pool, self.rid = pool, 0

    def outcomes(self, backend: str, outcomes: list[Outcome], now: float) -> None:
        for outcome in outcomes:
            self.rid += 1
            request, view = RequestView(request_id=self.rid), self.pool.get(backend)
            self.pool.dispatch(view, request, now)
            self.pool.complete(view, request, outcome, now)


def _interval(feed: Feed, rates: dict[str, int], now: float = 1.0) -> None:
    """Each backend ``successes of 20`` (its FAULTs last), all inside one interval."""
    for backend, successes in rates.items():
        feed.outcomes(backend, [OK] * successes + [FAULT] * (20 - successes), now)


def states(pool: Pool) -> dict[str, Health]:
    return {v.id: v.state for v in pool.views}


def test_the_backend_far_below_the_others_is_ejected_when_the_interval_ends() -> None:
    pool = outlier_pool()
    feed = Feed(pool)
    _interval(feed, {"a": 20, "b": 20, "c": 19, "d": 20, "e": 20, "f": 10})
    assert all(s is Health.UP for s in states(pool).values())  # judged at the end only
    # rates 1, 1, .95, 1, 1, .5: mean .908, stdev .183, floor .908 - 1.9 x .183 = .560
    feed.outcomes("a", [OK], 10.0)
    assert states(pool) == {**dict.fromkeys("abcde", Health.UP), "f": Health.EJECTED}
    counters = pool.counters["f"]
    assert (counters.ejections, counters.outlier_ejections) == (1, 1)
    assert pool.counters["c"].outlier_ejections == 0


def test_the_floor_is_the_mean_less_the_factor_times_the_population_stdev() -> None:
    rates = {"a": 20, "b": 20, "c": 20, "d": 20, "e": 16, "f": 13}  # 1 1 1 1 .8 .65
    values = [r / 20 for r in rates.values()]
    mean = sum(values) / 6
    stdev = math.sqrt(sum((v - mean) ** 2 for v in values) / 6)
    assert mean - 1.9 * stdev == pytest.approx(0.6486, abs=1e-4)  # .65 is just above it
    pool = outlier_pool()
    feed = Feed(pool)
    _interval(feed, rates)
    feed.outcomes("a", [OK], 10.0)
    assert all(s is Health.UP for s in states(pool).values())
    pool = outlier_pool(success_rate_stdev_factor=1.5)  # floor .7033: f (.65) is out
    feed = Feed(pool)
    _interval(feed, rates)
    feed.outcomes("a", [OK], 10.0)
    assert [b for b, s in states(pool).items() if s is Health.EJECTED] == ["f"]


def test_too_few_backends_with_the_volume_judge_nothing() -> None:
    pool = outlier_pool()
    feed = Feed(pool)
    # f is far below, but e has 5 outcomes, under the 10 of the volume: 4 judged < 5
    _interval(feed, {"a": 20, "b": 20, "c": 20, "f": 2})
    feed.outcomes("e", [OK] * 5, 1.0)
    feed.outcomes("a", [OK], 10.0)
    assert all(s is Health.UP for s in states(pool).values())
    # Four judged: one backend among n is at most sqrt(n - 1) population deviations from
    # their mean (1.73 here), so the default 1.9 could never eject it; at 1.5 it does.
    for factor, after in ((1.9, Health.UP), (1.5, Health.EJECTED)):
        pool = outlier_pool(success_rate_minimum_hosts=4, success_rate_stdev_factor=factor)
        feed = Feed(pool)
        _interval(feed, {"a": 20, "b": 20, "c": 20, "f": 2})
        feed.outcomes("a", [OK], 10.0)
        assert pool.get("f").state is after, factor


def test_each_interval_starts_afresh() -> None:
    pool = outlier_pool()
    feed = Feed(pool)
    _interval(feed, {"a": 20, "b": 20, "c": 20, "d": 20, "e": 20, "f": 20})
    feed.outcomes("a", [OK], 10.0)  # first interval ends: nobody out
    _interval(feed, {"a": 20, "b": 20, "c": 20, "d": 20, "e": 20, "f": 4}, now=12.0)
    feed.outcomes("a", [OK], 19.0)  # 9 s into the second: not yet judged
    assert pool.get("f").state is Health.UP
    feed.outcomes("a", [OK], 20.0)
    assert pool.get("f").state is Health.EJECTED


def test_equal_rates_eject_nobody_and_errors_not_its_fault_count_as_successes() -> None:
    pool = outlier_pool()
    feed = Feed(pool)
    for backend in IDS:  # every backend 15 of 20: stdev 0, nobody below the mean
        feed.outcomes(backend, [OK] * 15 + [FAULT] * 5, 1.0)
    feed.outcomes("f", [NOT_ITS_FAULT] * 30, 2.0)  # f's rate rises, a client's errors
    feed.outcomes("a", [OK], 10.0)
    assert all(s is Health.UP for s in states(pool).values())


def test_off_by_default_and_a_bad_setting_is_named() -> None:
    assert HealthConfig().success_rate_stdev_factor == 0.0
    pool = Pool([BackendSpec(i) for i in IDS], make_strategy("rr"), HealthConfig(eject_after=0))
    feed = Feed(pool)
    _interval(feed, {"a": 20, "b": 20, "c": 20, "d": 20, "e": 20, "f": 0})
    feed.outcomes("a", [OK], 30.0)
    assert pool.get("f").state is Health.UP and not pool._tallies
    with pytest.raises(ConfigError, match="success_rate_stdev_factor"):
        HealthConfig(success_rate_stdev_factor=-1.0)
    with pytest.raises(ConfigError, match="success_rate_minimum_hosts"):
        HealthConfig(success_rate_minimum_hosts=0)
    with pytest.raises(ConfigError, match=r"health\.success_rate_stdev_factor"):
        health_config({"success_rate_stdev_factor": "lots"})
    assert health_config({"success_rate_stdev_factor": 1.9}).success_rate_stdev_factor == 1.9
    assert health_config({"success_rate_stdev_factor": 0}).success_rate_stdev_factor == 0.0


def test_the_simulator_ejects_a_server_that_fails_a_third_of_its_requests() -> None:
    # Six servers, s1 failing a third of its requests (fast: 1 ms) from the start: with
    # the statistical ejection on, the simulator's pool ejects it, and round robin sends
    # it less than its sixth; with it off, s1 takes its sixth and nothing is ejected.
    def run(factor: float) -> tuple[int, float]:
        cfg = config_from_mapping(
            {"strategy": "rr", "servers": 6, "service": "fixed:1ms", "rate": 600,
             "duration": "12s", "picks_every": 0,
             "health": {"eject_after": 0, "success_rate_stdev_factor": factor,
                        "success_rate_window": "2s", "success_rate_min_requests": 50}}
        )  # fmt: skip
        failing = Control(fail=Failing(1 / 3, delay_ms=1.0))
        sim = Simulation(replace(cfg, timeline=(ServerEvent(0.0, "fail", "s1", control=failing),)))
        result = sim.run()
        servers = result.requests.column("server").to_pylist()
        return result.counters["s1"]["outlier_ejections"], servers.count("s1") / len(servers)

    ejections, share = run(1.9)
    assert ejections >= 2 and share < 0.12, (ejections, share)
    assert run(0.0) == (0, pytest.approx(1 / 6, abs=0.01))
