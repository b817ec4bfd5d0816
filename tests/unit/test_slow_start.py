"""Slow start (Envoy's ``slow_start_config``, gRPC's gRFC A100): the factor to the formula,
its options as flags and as a run's ``[health]`` table, and what it does in the simulator
for the scorecard's cold new node (``benchmarks/slow_start.py`` has the table, live too).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

from lblab.balancer.health import HealthConfig, slow_start_factor
from lblab.balancer.health_options import DEFAULTS, health_config
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


def _cold_node(health: dict[str, object], **testbed: str) -> object:
    case = tomllib.loads(COLD_NODE.read_text())
    case.pop("preset")
    over = {"run": {"strategies": ["wrr"], "duration": "10s", "replications": 1,
                    "max_replications": 1},
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


def _after_the_join(health: dict[str, object]) -> tuple[float, float, list[float]]:
    """The steady p99 (ms, the 2.5 s before s5 joins at 3.5 s), the p99 of the 3 s it is
    cold, and s5's share of the requests sent in each second after it joined."""
    config = _cold_node(health)
    phase = plan(config)[0]  # type: ignore[arg-type]
    requests = simulate(phase_config(config, phase, "t")).requests.to_pandas()  # type: ignore[arg-type]
    t = requests.t_sent - requests.t_sent.min()
    steady = requests[(t >= 1.0) & (t < 3.5)].latency_ms
    cold = requests[(t >= 3.5) & (t < 6.5)].latency_ms
    shares = [
        float((requests[(t >= 3.5 + s) & (t < 4.5 + s)].server == "s5").mean()) for s in range(6)
    ]
    return float(np.quantile(steady, 0.99)), float(np.quantile(cold, 0.99)), shares


def test_slow_start_spares_a_cold_node_and_gives_it_its_share_within_the_window() -> None:
    _, off_p99, off_shares = _after_the_join({"slow_start_window": "0s"})
    steady, cold_p99, shares = _after_the_join(
        {"slow_start_window": "3s", "slow_start_aggression": 0.5, "slow_start_min_weight": 1}
    )
    # Off: weighted round robin gives the node ten times slower its fifth at once, and its
    # queue takes every request sent to it for seconds (1.6 s at p99, seed 1).
    assert off_shares[0] > 0.15 and off_p99 > 10 * steady
    # On: 1 % at first, (t / 3 s)^2 after; the cold seconds' p99 stays within 1.6x the
    # steady one (measured 1.41x) and the node has its even share once the window is over.
    assert shares[0] < 0.03 and cold_p99 < 1.6 * steady, (shares, cold_p99, steady)
    assert all(share > 0.9 / 5 for share in shares[3:]), shares
