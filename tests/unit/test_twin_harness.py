"""The twin marks the cells whose phases the run's own harness checks flagged
(``simulator/twin/compare.py``): a miss there is the harness's, not the simulator's."""

from __future__ import annotations

from typing import Any

from lblab.analysis.twin import TwinCell
from lblab.manifest import Manifest, from_json
from lblab.simulator.twin.compare import harness_flags, summary
from lblab.simulator.twin.scale import too_short


def _phase(strategy: str, replication: int, *checks: tuple[str, str]) -> dict[str, Any]:
    verdicts = [{"name": n, "level": lvl, "figure": "-", "why": "-"} for n, lvl in checks]
    return {
        "key": f"r{replication}-{strategy}",
        "strategy": strategy,
        "scenario": "sp+sr",
        "replication": replication,
        "verdicts": verdicts,
    }


def test_only_the_harness_checks_that_warned_or_failed_count_once_per_cell() -> None:
    manifest = {
        "run_id": "r",
        "phases": [
            _phase("wrr", 1, ("machine", "fail"), ("generator", "pass"), ("steady state", "warn")),
            _phase("wrr", 2, ("machine", "fail"), ("balancer", "warn")),
            _phase("rr", 1, ("machine", "pass"), ("warm-up", "fail"), ("generator", "n/a")),
        ],
    }
    assert harness_flags(from_json(manifest)) == {
        ("wrr", "sp+sr"): ["balancer warn", "machine fail"],
        ("rr", "sp+sr"): [],  # steady state and warm-up are not the harness's CPU
    }
    assert harness_flags(Manifest(run_id="r")) == {}


def _cell(strategy: str, error: float, flags: tuple[str, ...]) -> TwinCell:
    return TwinCell(
        strategy=strategy,
        scenario="sp+sr",
        error={"throughput_rps": error},
        inside_measured_ci={"throughput_rps": False},
        measured_ci95={"throughput_rps": (None, None)},
        measured={"throughput_rps": 100.0},
        simulated={},
        validity=flags,
    )


def test_the_summary_lists_the_misses_where_the_harness_held_apart() -> None:
    cells = [_cell("r", -0.16, ()), _cell("lc", 0.26, ("machine warn",)), _cell("wrr", 0.05, ())]
    result = summary(cells, {})
    assert result.throughput_misses == ("r / sp+sr", "lc / sp+sr")
    assert result.throughput_misses_where_the_harness_held == ("r / sp+sr",)


def test_a_scaled_phase_too_short_for_agent_reports_is_named() -> None:
    # At 1000 servers 60 000 requests last ~0.1 simulated s: dwrr, which follows the
    # agents' CPU reports (one per 0.25 s), got none; rr needs none.
    windows = {("sp+sr", "dwrr"): 0.1, ("sp+sr", "rr"): 0.1, ("lp+lr", "dwrr"): 10.0}
    assert too_short(windows, 0.25) == {
        "sp+sr": {"window_s": 0.1, "agent_periods": 0.4, "strategies": ["dwrr"]}
    }
    assert too_short({("sp+sr", "dwrr"): 2.0}, 0.25) == {}  # 8 periods: enough
