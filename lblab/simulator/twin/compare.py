"""Measured vs simulated: each cell's errors, each scenario's rankings, and the summary.

Per strategy x scenario cell: both sides' ``FIGURES``, the relative errors and whether
the simulated figure lies inside the measured 95 % interval. Per scenario and ranked
metric: both orders of the strategies, Kendall tau-b between them (strategies within
``TIE`` of each other tie) and the pairs the run resolves that the twin reverses. A
scaled twin's rankings are compared with the twin's and the run's (``scale_ranks``).

Each compared cell carries the run's harness checks (generator, balancer, machine) that
warned or failed in its phases (``harness_flags``): the twin gives the generator and
the balancer no CPU, so a miss where they were short of it is the harness's; the
summary lists the misses where the harness held apart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import pandas as pd

from lblab.analysis.stats import beyond, kendall_tau
from lblab.manifest import Manifest
from lblab.simulator.twin.measure import FIGURES
from lblab.simulator.twin.testbed import Testbed
from lblab.validity import FAIL, WARN

RANKED = {"throughput": "throughput_rps", "latency_mean": "latency_mean_ms"}
MISS = 0.15
"""A cell whose throughput error is above this (relative) misses the twin's target."""
TAU_TARGET = 0.8
TIE = 0.01
"""Strategies whose figures are within 1 % of each other tie in the rankings: an open
load gives every strategy the offered rate, and such differences are no order."""
HARNESS_CHECKS = ("generator", "balancer", "machine")
"""The run's checks (``lblab/validity.py``) that say the harness, which the twin does not
model, was short of CPU: a miss in such a cell is the harness's, not the simulator's."""


def _rel_error(simulated: float, measured: float) -> float | None:
    if not (math.isfinite(simulated) and math.isfinite(measured)) or measured == 0:
        return None
    return (simulated - measured) / measured


def _number(value: Any) -> float | None:
    try:
        v = float(value)
    except (TypeError, ValueError):
        return None
    return round(v, 4) if math.isfinite(v) else None


def cell_figures(
    pooled: pd.DataFrame, strategy: str, scenario: str, suffix: str = ""
) -> dict[str, float | None]:
    """A cell's ``FIGURES`` from pooled figures (``suffix`` ``_lo`` or ``_hi``: the ends of
    their 95 % intervals), rounded; None where the cell has none."""
    row = pooled[(pooled["strategy"] == strategy) & (pooled["scenario"] == scenario)]
    return {
        f: _number(row[f + suffix].iloc[0]) if len(row) and f + suffix in row else None
        for f in FIGURES
    }


def _inside(value: float | None, lo: float | None, hi: float | None) -> bool | None:
    if value is None or lo is None or hi is None:
        return None
    return lo <= value <= hi


def _ranking(
    pooled: pd.DataFrame, scenario: str, strategies: Sequence[str], metric: str
) -> list[float]:
    return [
        cell_figures(pooled, s, scenario)[metric] or float("nan") for s in strategies
    ]  # nan: a strategy without figures ranks nowhere (tau skips it below)


def _order(strategies: Sequence[str], values: Sequence[float], higher: bool) -> list[str]:
    pairs = [(v, s) for s, v in zip(strategies, values, strict=True) if math.isfinite(v)]
    return [s for v, s in sorted(pairs, key=lambda p: -p[0] if higher else p[0])]


def _tau(a: Sequence[float], b: Sequence[float]) -> float | None:
    keep = [i for i in range(len(a)) if math.isfinite(a[i]) and math.isfinite(b[i])]
    tau = kendall_tau([a[i] for i in keep], [b[i] for i in keep], TIE)
    return None if tau is None else round(tau, 4)


def compare(
    testbed: Testbed, measured: pd.DataFrame, simulated: pd.DataFrame
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Per cell: both figures and the relative errors; per scenario: rankings and tau."""
    cells = []
    for scenario in testbed.scenarios:
        for strategy in testbed.strategies:
            m = cell_figures(measured, strategy, scenario.name)
            lo = cell_figures(measured, strategy, scenario.name, "_lo")
            hi = cell_figures(measured, strategy, scenario.name, "_hi")
            s = cell_figures(simulated, strategy, scenario.name)
            cells.append(
                {
                    "strategy": strategy,
                    "scenario": scenario.name,
                    "measured": m,
                    "measured_ci95": {f: [lo[f], hi[f]] for f in FIGURES},
                    "simulated": s,
                    "error": {
                        f: _number(_rel_error(s[f] or math.nan, m[f] or math.nan)) for f in FIGURES
                    },
                    "inside_measured_ci": {f: _inside(s[f], lo[f], hi[f]) for f in FIGURES},
                }
            )
    ranks: dict[str, Any] = {}
    for scenario in testbed.scenarios:
        ranks[scenario.name] = {}
        for name, metric in RANKED.items():
            higher = metric == "throughput_rps"
            mv = _ranking(measured, scenario.name, testbed.strategies, metric)
            sv = _ranking(simulated, scenario.name, testbed.strategies, metric)
            resolved, contradicted = _resolved_pairs(
                measured, scenario.name, testbed.strategies, metric, sv
            )
            ranks[scenario.name][name] = {
                "measured": _order(testbed.strategies, mv, higher),
                "simulated": _order(testbed.strategies, sv, higher),
                "tau": _tau(mv, sv),
                "resolved_pairs": resolved,
                "contradicted_pairs": contradicted,
            }
    return cells, ranks


def _resolved_pairs(
    measured: pd.DataFrame,
    scenario: str,
    strategies: Sequence[str],
    metric: str,
    simulated: Sequence[float],
) -> tuple[int | None, list[str]]:
    """The pairs of strategies the run tells apart (their measured 95 % intervals do not
    overlap), and those of them the twin orders the other way round, as "a > b" in the
    measured order (a simulated tie within ``TIE`` is no contradiction). None without
    intervals (one replication). Tau counts every pair alike, a near-tie the run cannot
    resolve as much as a clear gap; this says whether the twin contradicts a measured
    difference."""
    figures = [cell_figures(measured, st, scenario) for st in strategies]
    lows = [cell_figures(measured, st, scenario, "_lo")[metric] for st in strategies]
    highs = [cell_figures(measured, st, scenario, "_hi")[metric] for st in strategies]
    if any(v is None for v in lows + highs):
        return None, []
    lo, hi = cast(list[float], lows), cast(list[float], highs)
    resolved, contradicted = 0, []
    for i in range(len(strategies)):
        for j in range(len(strategies)):
            if figures[i][metric] is None or figures[j][metric] is None or not lo[i] > hi[j]:
                continue
            resolved += 1  # i measured above j, intervals apart
            if beyond(simulated[i], simulated[j], TIE) < 0:
                contradicted.append(f"{strategies[i]} > {strategies[j]}")
    return resolved, contradicted


def scale_ranks(
    testbed: Testbed, base: pd.DataFrame, measured: pd.DataFrame, scaled: pd.DataFrame
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for scenario in testbed.scenarios:
        out[scenario.name] = {}
        for name, metric in RANKED.items():
            higher = metric == "throughput_rps"
            sv = _ranking(scaled, scenario.name, testbed.strategies, metric)
            out[scenario.name][name] = {
                "simulated": _order(testbed.strategies, sv, higher),
                "tau_vs_twin": _tau(_ranking(base, scenario.name, testbed.strategies, metric), sv),
                "tau_vs_measured": _tau(
                    _ranking(measured, scenario.name, testbed.strategies, metric), sv
                ),
            }
    return out


def _median_halfwidth(cells: list[dict[str, Any]]) -> float | None:
    """Median over cells of the measured throughput's 95 % half-width, relative: how
    finely the run itself can tell two figures apart."""
    widths = [
        (hi - lo) / 2 / c["measured"]["throughput_rps"]
        for c in cells
        for lo, hi in [c["measured_ci95"]["throughput_rps"]]
        if lo is not None and hi is not None and c["measured"]["throughput_rps"]
    ]
    return round(float(np.median(widths)), 4) if widths else None


def harness_flags(manifest: Manifest) -> dict[tuple[str, str], list[str]]:
    """Per (strategy, scenario): the harness checks that warned or failed in any of its
    phases, as "machine fail" (sorted, each once); empty where the harness held."""
    flags: dict[tuple[str, str], set[str]] = {}
    for phase in manifest.phases:
        found = flags.setdefault((phase.strategy, phase.scenario), set())
        for check in phase.verdicts:
            if check.name in HARNESS_CHECKS and check.level in (WARN, FAIL):
                found.add(f"{check.name} {check.level}")
    return {key: sorted(found) for key, found in flags.items()}


def _misses(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The cells whose throughput error is unknown or above ``MISS``."""
    return [
        c
        for c in cells
        if c["error"]["throughput_rps"] is None or abs(c["error"]["throughput_rps"]) > MISS
    ]


def _names(cells: list[dict[str, Any]]) -> list[str]:
    return [f"{c['strategy']} / {c['scenario']}" for c in cells]


def summary(cells: list[dict[str, Any]], ranks: dict[str, Any]) -> dict[str, Any]:
    errors = [c["error"]["throughput_rps"] for c in cells]
    finite = [abs(e) for e in errors if e is not None]
    misses = _misses(cells)
    return {
        "max_abs_throughput_error": max(finite) if finite else None,
        "throughput_misses": _names(misses),
        "throughput_misses_outside_ci": _names(
            [c for c in misses if c["inside_measured_ci"]["throughput_rps"] is False]
        ),
        "throughput_misses_where_the_harness_held": _names(
            [c for c in misses if not c.get("validity")]
        ),
        "median_measured_ci_halfwidth": _median_halfwidth(cells),
        "tau_below_target": [
            name
            for name, r in ranks.items()
            if r["throughput"]["tau"] is not None and r["throughput"]["tau"] < TAU_TARGET
        ],
        "tau_undefined": [name for name, r in ranks.items() if r["throughput"]["tau"] is None],
        "resolved_pairs_contradicted": {
            name: r["throughput"]["contradicted_pairs"]
            for name, r in ranks.items()
            if r["throughput"]["contradicted_pairs"]
        },
        "miss_threshold": MISS,
        "tau_target": TAU_TARGET,
    }
