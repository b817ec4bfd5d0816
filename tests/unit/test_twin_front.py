"""The twin solves each strategy's front end for the load its own simulation puts on the
servers (``simulator/twin/solve.py``, ``solve_fronts``): a fixed point, checked here."""

from __future__ import annotations

import pandas as pd
import pytest

from lblab.simulator.run import simulate
from lblab.simulator.twin.measure import slot_utilisation
from lblab.simulator.twin.measured_service import fit_service
from lblab.simulator.twin.model import FrontEnd, ScenarioModel
from lblab.simulator.twin.scale import (
    MAX_SCALE_REQUESTS,
    MIN_SCALE_REQUESTS,
    auto_scale_requests,
)
from lblab.simulator.twin.solve import configs_for, solve_fronts
from lblab.simulator.twin.testbed import Testbed as RunTestbed
from lblab.simulator.twin.testbed import TwinScenario, TwinServer


def _testbed(users: int) -> RunTestbed:
    return RunTestbed(
        servers=(TwinServer("a", 1.0, 1, None, None), TwinServer("b", 1.0, 1, None, 0.5)),
        strategies=("rr",),
        strategy_options={},
        scenarios=(TwinScenario("sp+sr", ((100, 100),), True, users=users),),
        replications=1,
        seed=3,
        deadline=10.0,
        report_period=0.25,
        warmup_fraction=0.2,
    )


def test_each_strategys_front_end_matches_the_load_it_gives_its_servers() -> None:
    testbed = _testbed(users=3)
    one_ms = fit_service(
        pd.DataFrame({"package_bytes": [100] * 50, "work_bytes": [100] * 50, "service_ms": 1.0})
    )
    services = {"a": one_ms, "b": one_ms}
    # b's quota bound: it gets no load term; a's grows as 1.5 u / (1 - u).
    model = ScenarioModel(
        front=FrontEnd(1.0, 1.5),
        think_ms=0.0,
        requests=4000,
        demand_scale={"a": 1.0, "b": 1.0},
        quota_binds={"a": False, "b": True},
    )
    models = {"sp+sr": model}
    solved = solve_fronts(testbed, services, models, {("sp+sr", "a"): 0.9})
    server_ms = solved[("sp+sr", "rr")]
    assert set(server_ms) == {"a"}
    (cfg,) = configs_for(testbed, services, models, 2, 1, None, "check", solved)
    assert cfg.servers[0].delay == pytest.approx(server_ms["a"] / 2000.0)
    assert cfg.servers[1].delay == 0.0
    u = slot_utilisation(simulate(cfg), testbed.warmup_fraction)["s1"]
    # A fixed point: the load term the solution charges is the one its load asks for.
    assert 0.1 < u < 0.95
    assert server_ms["a"] == pytest.approx(model.front.server_ms(u), rel=0.1)
    # And not merely the start: 0.9 would have asked for 13.5 ms.
    assert server_ms["a"] < 5.0


def test_without_a_slope_nothing_is_solved() -> None:
    testbed = _testbed(users=2)
    one_ms = fit_service(
        pd.DataFrame({"package_bytes": [100] * 5, "work_bytes": [100] * 5, "service_ms": 1.0})
    )
    model = ScenarioModel(
        front=FrontEnd(2.0),
        think_ms=0.0,
        requests=2000,
        demand_scale={"a": 1.0, "b": 1.0},
        quota_binds={"a": False, "b": False},
    )
    solved = solve_fronts(testbed, {"a": one_ms, "b": one_ms}, {"sp+sr": model}, {})
    assert solved == {("sp+sr", "rr"): {"a": 0.0, "b": 0.0}}


def test_an_automatic_scaled_phase_spans_ten_agent_periods() -> None:
    testbed = _testbed(users=3)  # agent period 0.25 s, a fifth of each phase warm-up
    simulated = pd.DataFrame(
        {"scenario": ["sp+sr", "sp+sr"], "strategy": ["rr", "lc"], "throughput_rps": [900, 1800.0]}
    )
    # 1800/s x 333 = 600 000/s for 2.5 s / 0.8 of window: 1.9 M requests.
    assert auto_scale_requests(testbed, simulated, 333.0) == {"sp+sr": 1_873_125}
    assert auto_scale_requests(testbed, simulated, 1000.0) == {"sp+sr": MAX_SCALE_REQUESTS}
    assert auto_scale_requests(testbed, simulated, 1.0) == {"sp+sr": MIN_SCALE_REQUESTS}
