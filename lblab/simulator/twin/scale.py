"""How long the phases of a scaled twin run, and which were too short for the agents.

A scaled twin (``--scale N``) gives N servers the same capacity mix (each measured
server repeated N / n times), and users or rate times N / n; the front end (with each
strategy's solved load terms) and think time stay per request (a balancer and
generator scaled out with the servers). ``solve.configs_for`` builds those configs;
this module sizes their phases: a fixed request count lasts ever less simulated time
as servers are added, so by default a phase is long enough for the agents' reports to
matter (``auto_scale_requests``) unless ``--scale-requests`` caps it, and a phase that
still held too few agent periods for a strategy that follows them is named
(``too_short``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from lblab.simulator.twin.testbed import Testbed

MAX_SCALE = 100_000
"""The largest server count ``--scale`` takes."""
SCALE_AGENT_PERIODS = 10
"""An automatic scaled phase is long enough for its window to hold this many agent
periods at the 3-server twin's fastest throughput times the scale."""
MIN_SCALE_REQUESTS = 20_000
MAX_SCALE_REQUESTS = 2_000_000
"""Bounds of an automatic scaled phase (``--scale-requests`` sets one cap instead)."""


def auto_scale_requests(testbed: Testbed, simulated: pd.DataFrame, factor: float) -> dict[str, int]:
    """Per scenario: requests for a scaled phase whose window spans
    ``SCALE_AGENT_PERIODS`` agent periods, so that strategies following the agents'
    CPU reports get them (a fixed count lasts ever less simulated time as servers are
    added: 60 000 sp+sr requests are 0.15 s at 1000 servers). Within
    ``MIN_SCALE_REQUESTS``..``MAX_SCALE_REQUESTS``; never longer than the live phase
    (``solve.configs_for`` caps at the run's own length times the scale)."""
    out = {}
    seconds = SCALE_AGENT_PERIODS * testbed.report_period / max(1.0 - testbed.warmup_fraction, 0.05)
    for scenario in testbed.scenarios:
        rates = simulated.loc[simulated["scenario"] == scenario.name, "throughput_rps"]
        rate = float(pd.to_numeric(rates, errors="coerce").max()) if len(rates) else math.nan
        need = rate * factor * seconds if math.isfinite(rate) else MAX_SCALE_REQUESTS
        out[scenario.name] = int(min(max(math.ceil(need), MIN_SCALE_REQUESTS), MAX_SCALE_REQUESTS))
    return out


MIN_AGENT_REPORTS = 8
"""A scaled phase whose window holds fewer agent periods than this gives a strategy that
follows the agents' CPU reports (``uses_agent_reports``: dwrr and kin) too few to follow:
at 1000 servers the window of a phase of 60 000 sp+sr requests lasts 0.15 simulated s."""


def too_short(
    windows: Mapping[tuple[str, str], float], report_period: float
) -> dict[str, dict[str, Any]]:
    """Per scenario: the strategies that follow agent reports and had fewer than
    ``MIN_AGENT_REPORTS`` agent periods in their window, with the window's length."""
    from lblab.balancer.strategies.registry import strategy_class

    out: dict[str, dict[str, Any]] = {}
    for (scenario, strategy), seconds in windows.items():
        periods = seconds / report_period if report_period > 0 else math.inf
        if periods < MIN_AGENT_REPORTS and strategy_class(strategy).uses_agent_reports:
            entry = out.setdefault(scenario, {"window_s": seconds, "strategies": []})
            entry["window_s"] = round(min(entry["window_s"], seconds), 4)
            entry["agent_periods"] = round(entry["window_s"] / report_period, 2)
            entry["strategies"].append(strategy)
    return out
