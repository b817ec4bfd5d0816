"""The live checks' pure parts (``sweep/live_check.py``): which cells can run live and
why not, which are picked, the experiment a cell becomes, and measured against simulated
(``analysis.sweep.map.live_agreement``)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd
import pytest

from lblab.analysis.sweep import map as sweep_map
from lblab.sweep import cli, live_check
from lblab.sweep.grid import Sweep, parse_sweep
from lblab.sweep.live_check import Cell, cells, experiment, live_obstacle, pick

BASE: dict[str, Any] = {
    "requests": 5000,
    "service": "exp:20ms",
    "servers": [{"count": 3}, {"count": 1, "speed": 2, "weight": 2}],
}


def settings(**changes: Any) -> dict[str, Any]:
    return {**BASE, "rate": 100, **changes}


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"rate": None, "users": 10}, "arrivals are not open"),
        ({"rate": 5000}, "rate 5000/s is over the 400/s"),
        ({"servers": 20}, "20 servers; a live check starts at most 8"),
        ({"balancers": 8}, "8 balancers; a live check starts at most 4"),
        ({"routing_keys": 10}, "routing keys are drawn by the simulator only"),
        ({"server_delay": "1ms"}, "network and report delays are simulated only"),
        ({"service": "lognormal:50ms,1.5"}, "live servers sleep fixed or exp: times"),
        ({"service": "fixed:4ms"}, "fixed:4ms at speed 1 is under 5 ms"),
        ({"servers": [{"count": 2, "delay": "2ms"}]}, "delay or CPU quota is simulated only"),
    ],
)
def test_what_the_local_testbed_cannot_run_is_named(changes: dict[str, Any], reason: str) -> None:
    given = {k: v for k, v in settings(**changes).items() if v is not None}
    found = live_obstacle(given)
    assert found is not None and reason in found


def test_a_small_open_sleeping_point_can_run_live() -> None:
    assert live_obstacle(settings()) is None
    assert live_obstacle(settings(service="fixed:10ms", balancers=2)) is None


def sweep_of(grid: str) -> Sweep:
    import tomllib

    raw = tomllib.loads(grid)
    return parse_sweep({"base": {**BASE, "rate": 100}, **raw})


def rows(sweep: Sweep, p99: dict[tuple[Any, ...], float]) -> pd.DataFrame:
    """A sweep.parquet for ``sweep``: p99 by (rate, strategy, seed)."""
    out = []
    for point in sweep.points:
        v = point.values
        out.append(
            {
                "rate": v["rate"],
                "strategy": v["strategy"],
                "seed": v["seed"],
                "p99_ms": p99[(v["rate"], v["strategy"], v["seed"])],
                "error": None,
                "key": point.key,
            }
        )
    return pd.DataFrame(out)


GRID = """
seeds = 2
[grid]
strategy = ["rr", "lc"]
rate = [50, 100, 150, 6000]
"""
# lc wins at 50 by far and at 100 narrowly; rr wins at 150 narrowly and at 6000 (too fast
# to run live). The boundary lies between 100 and 150.
P99 = {
    (50, "lc", 1): 10.0, (50, "lc", 2): 11.0, (50, "rr", 1): 30.0, (50, "rr", 2): 31.0,
    (100, "lc", 1): 20.0, (100, "lc", 2): 21.0, (100, "rr", 1): 22.0, (100, "rr", 2): 23.0,
    (150, "lc", 1): 44.0, (150, "lc", 2): 45.0, (150, "rr", 1): 40.0, (150, "rr", 2): 41.0,
    (6000, "lc", 1): 90.0, (6000, "lc", 2): 91.0, (6000, "rr", 1): 50.0, (6000, "rr", 2): 51.0,
}  # fmt: skip


def test_cells_know_their_best_runner_up_and_boundary() -> None:
    sweep = sweep_of(GRID)
    found = {c.values["rate"]: c for c in cells(rows(sweep, P99), sweep, "p99")}
    assert {r: (c.best, c.runner_up, c.boundary) for r, c in found.items()} == {
        50: ("lc", "rr", False),
        100: ("lc", "rr", True),
        150: ("rr", "lc", True),
        6000: ("rr", "lc", False),
    }
    assert found[100].margin == pytest.approx(1 - 20.5 / 22.5)
    # The first seed's point of each strategy, with the file's own values.
    assert found[100].points["lc"].values == {"strategy": "lc", "rate": 100, "seed": 1}


def test_picks_take_the_boundary_first_then_the_smallest_lead_and_say_why_not() -> None:
    sweep = sweep_of(GRID)
    found = cells(rows(sweep, P99), sweep, "p99")
    chosen, skipped = pick(found, 3)
    # 100 (lead 9 %) and 150 (lead 10 %) are on the boundary; then 50; 6000 cannot run.
    assert [c.values["rate"] for c in chosen] == [100, 150, 50]
    assert list(skipped.values()) == ["rate 6000/s is over the 400/s a live check sends"]
    assert [c.values["rate"] for c in pick(found, 1)[0]] == [100]


def test_failed_points_and_lone_strategies_make_no_cell() -> None:
    sweep = sweep_of(GRID)
    frame = rows(sweep, P99)
    frame.loc[(frame.rate == 50) & (frame.strategy == "rr"), "error"] = "RuntimeError: boom"
    assert 50 not in {c.values["rate"] for c in cells(frame, sweep, "p99")}


def test_a_cell_becomes_an_experiment_of_its_servers_and_load() -> None:
    sweep = sweep_of(GRID)
    cell = next(c for c in cells(rows(sweep, P99), sweep, "p99") if c.values["rate"] == 150)
    spec = experiment(cell, seconds=4.0)
    assert spec["run"]["strategies"] == ["rr", "lc"]
    assert spec["run"]["replications"] == spec["run"]["max_replications"] == 1
    assert spec["load"] == {"model": "open", "rate": 150.0, "arrival": "poisson"}
    assert spec["scenario_defs"]["point"] == {"cells": ["sp+sr"], "count": 600}
    assert [s["delay_ms"] for s in spec["servers"]] == [20.0, 20.0, 20.0, 10.0]
    assert {s["delay_dist"] for s in spec["servers"]} == {"exp"}
    assert spec["weights"] == {"s1": 1.0, "s2": 1.0, "s3": 1.0, "s4": 2.0}
    # Fewer requests than rate x seconds: the point's own count.
    assert experiment(cell, seconds=1000.0)["scenario_defs"]["point"]["count"] == 5000


def test_an_experiment_is_a_valid_run_config() -> None:
    from lblab.experiment import runconfig
    from lblab.experiment.presets import load_preset

    sweep = sweep_of(GRID)
    cell = cells(rows(sweep, P99), sweep, "p99")[0]
    config = runconfig.resolve(load_preset("quick"), experiment(cell, 4.0), {})
    assert [s.delay_dist for s in config.servers] == ["exp"] * 4
    argv = config.servers[0].argv()
    assert argv[argv.index("--delay-dist") + 1] == "exp"


def measured_vs_simulated(best_measured: float, other_measured: float) -> pd.DataFrame:
    rows = []
    for strategy, sim, meas, checks in (
        ("lc", 20.0, best_measured, "pass"),
        ("rr", 22.0, other_measured, "warn"),
    ):
        base = {"rate": 100, "strategy": strategy, "seed": 1, "cell": "c1"}
        rows.append(base | {"source": "measured", "p99_ms": meas, "checks": checks})
        rows.append(base | {"source": "simulated", "p99_ms": sim, "checks": None})
    return pd.DataFrame(rows)


def test_measured_against_simulated_says_whether_the_best_agrees() -> None:
    agrees = sweep_map.live_agreement(measured_vs_simulated(25.0, 30.0), "p99")
    assert agrees.iloc[0][["rate", "best", "other", "measured_best", "agrees", "checks"]].tolist() == [
        100, "lc", "rr", "lc", True, "warn",
    ]  # fmt: skip
    assert agrees.iloc[0]["best_simulated"] == 20.0 and agrees.iloc[0]["other_measured"] == 30.0
    flipped = sweep_map.live_agreement(measured_vs_simulated(35.0, 30.0), "p99")
    assert flipped.iloc[0][["measured_best", "agrees"]].tolist() == ["rr", False]
    missing = measured_vs_simulated(math.nan, 30.0)
    assert sweep_map.live_agreement(missing, "p99").empty


def test_the_commands_metric_help_names_every_metric() -> None:
    assert cli.METRIC_HELP.split(", ") == list(sweep_map.METRICS)
    assert live_check.CHECK_FOLDER == "live-check"


def test_a_cell_key_is_stable() -> None:
    cell = Cell(values={"rate": 1}, best="a", runner_up="b", margin=0.1, boundary=True, points={})
    assert cell.key == Cell({"rate": 1}, "x", "y", 0.2, False, {}).key
