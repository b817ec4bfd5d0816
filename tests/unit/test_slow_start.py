"""Slow start (Envoy's ``slow_start_config``, gRPC's gRFC A100): the factor to the formula,
lblab's early end for a backend measured as fast as its peers, the options as flags and
as a run's ``[health]`` table, and what the default does in the simulator for the
scorecard's cold new node (``benchmarks/slow_start.py`` has the table, live too).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

from lblab.balancer.health import HealthConfig, slow_start_factor, slow_start_fast
from lblab.balancer.health_options import DEFAULTS, health_config
from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.strategies.base import Health, Outcome, RequestView
from lblab.balancer.strategies.registry import make_strategy
from lblab.errors import ConfigError
from lblab.experiment.plan import plan
from lblab.experiment.presets import load_preset
from lblab.experiment.runconfig import resolve
from lblab.simulator.run import simulate
from lblab.simulator.simulated_testbed import phase_config

COLD_NODE = Path(__file__).resolve().parents[2] / "lblab/scorecard/scenarios/cold-node.toml"


@pytest.mark.parametrize(
    ("window", "aggression", "least", "elapsed", "factor"),
    [
        (10.0, 1.0, 0.1, 0.0, 0.1),  # the least share at first
        (10.0, 1.0, 0.1, 5.0, 0.5),  # linear
        (10.0, 1.0, 0.1, 10.0, 1.0),  # the window is over
        (10.0, 2.0, 0.1, 2.5, 0.5),  # (2.5 / 10) ** (1 / 2): faster at first
        (10.0, 0.5, 0.01, 5.0, 0.25),  # (5 / 10) ** 2: slower at first
        (10.0, 1.0, 0.0, 0.0, 1e-4),  # Envoy's 1 ms floor: never 0, even with no least share
        (0.0, 1.0, 0.1, 0.0, 1.0),  # a window of 0 is off
    ],
)
def test_the_factor_is_envoys_and_a100s(
    window: float, aggression: float, least: float, elapsed: float, factor: float
) -> None:
    config = HealthConfig(
        slow_start_window_s=window, slow_start_aggression=aggression, slow_start_min_weight=least
    )
    assert slow_start_factor(config, elapsed) == pytest.approx(factor, rel=1e-12)


def test_lblabs_defaults_are_a_square_ramp_from_1_percent_over_10_s() -> None:
    # Envoy's and A100's defaults are aggression 1 and 10 %; lblab's differ, measured
    # (docs/FIELD-NOTES.md, "Slow start"): 1 % for the first second, then (t / 10 s)^2.
    config = HealthConfig()
    assert (config.slow_start_window_s, config.slow_start_fast_after) == (10.0, 5)
    assert [slow_start_factor(config, t) for t in (0.0, 1.0, 3.0, 5.0)] == pytest.approx(
        [0.01, 0.01, 0.09, 0.25]
    )


@pytest.mark.parametrize(
    ("after", "ratio", "answers", "mean", "peers", "fast"),
    [
        (5, 1.0, 5, 20.0, [10.0, 20.0, 100.0], True),  # at the median: as fast
        (5, 1.0, 5, 20.1, [10.0, 20.0, 100.0], False),
        (5, 1.0, 4, 1.0, [10.0, 20.0, 100.0], False),  # too few answers yet
        (5, 1.0, 9, 25.0, [30.0, 10.0, 100.0, 20.0], True),  # even: (20 + 30) / 2
        (5, 1.0, 9, 25.1, [30.0, 10.0, 100.0, 20.0], False),
        (5, 1.5, 5, 30.0, [20.0], True),  # within the ratio
        (5, 1.0, 5, 1.0, [], False),  # no peers: nothing to be as fast as
        (0, 1.0, 99, 1.0, [20.0], False),  # off
    ],
)
def test_as_fast_as_the_peers_is_the_mean_against_their_median(
    after: int, ratio: float, answers: int, mean: float, peers: list[float], fast: bool
) -> None:
    config = HealthConfig(slow_start_fast_after=after, slow_start_fast_ratio=ratio)
    assert slow_start_fast(config, answers, mean, peers) is fast


def _answer(pool: Pool, backend: str, rid: int, latency_ms: float, now: float) -> None:
    view, request = pool.get(backend), RequestView(request_id=rid)
    pool.dispatch(view, request, now)
    pool.complete(view, request, Outcome(ok=True, latency_ms=latency_ms), now)


def _picks(pool: Pool, count: int, start: int, now: float) -> str:
    out = []
    for k in range(count):
        request = RequestView(request_id=start + k)
        view = pool.pick(request, now)
        assert view is not None
        out.append(view.id)
    return "".join(out)


def _recovering(**health: float) -> Pool:
    """a and b under wrr; a has answered in 20 ms, b has just come back (at 0 s)."""
    config = HealthConfig(**{"slow_start_fast_after": 3, **health})  # type: ignore[arg-type]
    pool = Pool([BackendSpec("a"), BackendSpec("b")], make_strategy("wrr"), health=config)
    _answer(pool, "a", 0, 20.0, 0.0)
    pool.set_state("b", Health.DOWN, 0.0)
    pool.set_state("b", Health.UP, 0.0)
    return pool


def test_a_backend_as_fast_as_its_peers_ends_slow_start_at_that_answer() -> None:
    pool = _recovering()
    b = pool.get("b")
    assert b.slow_start == 0.01
    _answer(pool, "b", 1, 10.0, 0.1)
    _answer(pool, "b", 2, 30.0, 0.2)
    assert b.slow_start == 0.01  # two answers: too few to judge
    _answer(pool, "b", 3, 20.0, 0.3)  # mean 20 ms, a's EWMA 20 ms: as fast
    assert b.slow_start == 1.0
    assert _picks(pool, 6, 10, 0.3) == "ababab"  # the strategy has its full weight
    pool.tick(5.0)
    assert b.slow_start == 1.0  # the time ramp does not take it back


def test_a_slower_backend_keeps_the_time_ramp_and_a_return_starts_the_count_again() -> None:
    pool = _recovering()
    b = pool.get("b")
    for rid in range(1, 6):
        _answer(pool, "b", rid, 21.0, 0.1 * rid)  # slower than a's 20 ms
    assert b.slow_start == 0.01
    pool.tick(5.0)
    assert b.slow_start == pytest.approx(0.25)  # (5 / 10) ** 2
    loose = _recovering(slow_start_fast_ratio=1.1)
    for rid in range(1, 4):
        _answer(loose, "b", rid, 21.0, 0.1 * rid)
    assert loose.get("b").slow_start == 1.0  # 21 <= 1.1 * 20
    loose.set_state("b", Health.DOWN, 1.0)
    loose.set_state("b", Health.UP, 1.0)
    _answer(loose, "b", 9, 1.0, 1.1)
    _answer(loose, "b", 10, 1.0, 1.2)
    assert loose.get("b").slow_start == 0.01  # back again: its earlier answers do not count


def test_with_no_peer_measured_only_the_time_ramp_ends_slow_start() -> None:
    config = HealthConfig(slow_start_fast_after=1)
    pool = Pool([BackendSpec("a"), BackendSpec("b")], make_strategy("wrr"), health=config)
    pool.set_state("b", Health.DOWN, 0.0)
    pool.set_state("b", Health.UP, 0.0)
    _answer(pool, "b", 1, 1.0, 0.1)  # a has no latency sample yet
    assert pool.get("b").slow_start == 0.01
    off = _recovering(slow_start_fast_after=0)
    for rid in range(1, 6):
        _answer(off, "b", rid, 1.0, 0.1 * rid)
    assert off.get("b").slow_start == 0.01


def test_options_are_written_as_flags_and_the_health_table_alike() -> None:
    config = health_config(
        {"slow_start_window": "3s", "slow_start_aggression": 0.5, "slow_start_min_weight": 1}
    )
    assert (config.slow_start_window_s, config.slow_start_aggression) == (3.0, 0.5)
    assert config.slow_start_min_weight == pytest.approx(0.01)
    assert health_config({}) == HealthConfig()  # the written defaults are the pool's
    assert health_config(DEFAULTS, flags=True) == HealthConfig()
    with pytest.raises(
        ConfigError, match=re.escape("--slow-start-min-weight: 101.0 must be at most 100")
    ):
        health_config({"slow_start_min_weight": 101}, flags=True)
    with pytest.raises(
        ConfigError, match=re.escape("health.eject_max=0.5; must be >= health.eject_base")
    ):
        health_config({"eject_max": "0.5s"})
    with pytest.raises(ConfigError, match="slow_start_windw is not a health option"):
        health_config({"slow_start_windw": "1s"})


def _cold_node(
    health: dict[str, object], replications: int = 1, control: bool = False, **testbed: str
) -> object:
    """The scorecard's cold-node case as a run; the control without its timeline (s5
    never joins)."""
    case = tomllib.loads(COLD_NODE.read_text())
    case.pop("preset")
    if control:
        case.pop("timeline")
    over = {"run": {"strategies": ["wrr"], "duration": "14s", "replications": replications,
                    "max_replications": replications},
            "testbed": testbed or {"kind": "simulated"}, "health": health}  # fmt: skip
    return resolve(load_preset("scorecard"), {**case, **over}, {})


def test_a_run_gives_its_balancers_only_the_health_flags_it_changes() -> None:
    assert _cold_node({}).health_flags() == []  # type: ignore[attr-defined]
    config = _cold_node({"slow_start_window": "3s", "eject_after": 5}, kind="local")
    assert config.health_flags() == ["--slow-start-window", "3s"]  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="external testbed's balancer has its own"):
        _cold_node(
            {"slow_start_window": "3s"},
            kind="external",
            balancer="127.0.0.1:9",
            admin="127.0.0.1:9",
        )


SEEDS = 6


def _after_the_join(health: dict[str, object], control: bool = False) -> tuple[float, list[float]]:
    """Over ``SEEDS`` replications put together: the p99 (ms) of the requests sent in the
    3 s after s5 joins at 3.5 s (the 3 s it is cold), and s5's share of those sent in each
    second after it joined (benchmarks/slow_start.py's measure)."""
    config = _cold_node(health, SEEDS, control)
    window, shares = [], np.zeros(6)
    for phase in plan(config):  # type: ignore[arg-type]
        requests = simulate(phase_config(config, phase, "t")).requests.to_pandas()  # type: ignore[arg-type]
        t = requests.t_sent - requests.t_sent.min()
        window.append(requests[(t >= 3.5) & (t < 6.5)].latency_ms.to_numpy())
        shares += [
            float((requests[(t >= 3.5 + s) & (t < 4.5 + s)].server == "s5").mean())
            for s in range(6)
        ]
    return float(np.quantile(np.concatenate(window), 0.99)), list(shares / SEEDS)


def test_slow_start_spares_a_cold_node_and_gives_it_its_share_within_the_window() -> None:
    # The steady p99: the same 3 s of the same seeds with no node joining (four servers).
    steady, _ = _after_the_join({}, control=True)
    off_p99, off_shares = _after_the_join({"slow_start_window": "0s"})
    cold_p99, shares = _after_the_join({})  # lblab's defaults
    # Off: weighted round robin gives the node ten times slower its fifth at once, and its
    # queue takes every request sent to it for seconds (p99 1.8 s, 20x the steady).
    assert off_shares[0] > 0.15 and off_p99 > 10 * steady
    # The defaults: 1 % of its weight at first, (t / 10 s)^2 after, and the full weight at
    # its fifth answer as fast as its peers'. No spike: the cold seconds' p99 within 1.1x
    # the steady one (measured 0.99x; over 20 seeds 1.01x), and nearly its even share
    # (1/5) five seconds after it came (measured 19 %), half the window.
    assert shares[0] < 0.01 and cold_p99 < 1.1 * steady, (shares, cold_p99, steady)
    assert shares[5] > 0.15, shares
