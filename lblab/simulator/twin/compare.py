"""Measured vs simulated: each cell's errors, each scenario's rankings, and the summary.

Per strategy x scenario cell (``TwinCell``): both sides' ``FIGURES``, the relative
errors and whether the simulated figure lies inside the measured 95 % interval. Per
scenario and ranked metric (``TwinRank``): both orders of the strategies, Kendall tau-b
between them (strategies within ``TIE`` of each other tie) and the pairs the run
resolves that the twin reverses. A scaled twin's rankings are compared with the twin's
and the run's (``scale_ranks``). The types are twin.json's own
(``analysis/twin/file.py``), which ``build`` writes as they are.

Each compared cell carries the run's harness checks (generator, balancer, machine) that
warned or failed in its phases (``harness_flags``): the twin gives the generator and
the balancer no CPU, so a miss where they were short of it is the harness's; the
summary lists the misses where the harness held apart.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, cast

import numpy as np
import pandas as pd

from lblab.analysis.stats import beyond, kendall_tau
from lblab.analysis.twin import Ranked, ScaledRank, TwinCell, TwinRank, TwinSummary
from lblab.manifest import Manifest
from lblab.simulator.twin.measure import FIGURES
from lblab.simulator.twin.testbed import Testbed
from lblab.validity import FAIL, WARN

RANKED = {"throughput": "throughput_rps", "latency_mean": "latency_mean_ms"}
"""Each ranking (``Ranked``'s fields) and the figure it ranks by."""
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


R = TypeVar("R", TwinRank, ScaledRank)


def _ranked(scenario: str, rank: Callable[[str, str], R]) -> Ranked[R]:
    """Both rankings of ``scenario``: ``rank(scenario, figure)`` by each ``RANKED`` figure."""
    return Ranked(
        throughput=rank(scenario, RANKED["throughput"]),
        latency_mean=rank(scenario, RANKED["latency_mean"]),
    )


def compare(
    testbed: Testbed,
    measured: pd.DataFrame,
    simulated: pd.DataFrame,
    flags: Mapping[tuple[str, str], Sequence[str]],
) -> tuple[tuple[TwinCell, ...], dict[str, Ranked[TwinRank]]]:
    """Per cell: both figures, the relative errors and the harness checks that flagged it
    (``flags``, per (strategy, scenario): ``harness_flags``); per scenario: rankings
    and tau."""
    cells = []
    for scenario in testbed.scenarios:
        for strategy in testbed.strategies:
            m = cell_figures(measured, strategy, scenario.name)
            lo = cell_figures(measured, strategy, scenario.name, "_lo")
            hi = cell_figures(measured, strategy, scenario.name, "_hi")
            s = cell_figures(simulated, strategy, scenario.name)
            cells.append(
                TwinCell(
                    strategy=strategy,
                    scenario=scenario.name,
                    measured=m,
                    measured_ci95={f: (lo[f], hi[f]) for f in FIGURES},
                    simulated=s,
                    error={
                        f: _number(_rel_error(s[f] or math.nan, m[f] or math.nan)) for f in FIGURES
                    },
                    inside_measured_ci={f: _inside(s[f], lo[f], hi[f]) for f in FIGURES},
                    validity=tuple(flags.get((strategy, scenario.name), ())),
                )
            )

    def rank(scenario: str, metric: str) -> TwinRank:
        higher = metric == "throughput_rps"
        mv = _ranking(measured, scenario, testbed.strategies, metric)
        sv = _ranking(simulated, scenario, testbed.strategies, metric)
        resolved, contradicted = _resolved_pairs(measured, scenario, testbed.strategies, metric, sv)
        return TwinRank(
            measured=tuple(_order(testbed.strategies, mv, higher)),
            simulated=tuple(_order(testbed.strategies, sv, higher)),
            tau=_tau(mv, sv),
            resolved_pairs=resolved,
            contradicted_pairs=tuple(contradicted),
        )

    return tuple(cells), {sc.name: _ranked(sc.name, rank) for sc in testbed.scenarios}


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
) -> dict[str, Ranked[ScaledRank]]:
    """Per scenario: a scaled twin's rankings, with tau against the twin's (``base``)
    and the measured ones."""

    def rank(scenario: str, metric: str) -> ScaledRank:
        sv = _ranking(scaled, scenario, testbed.strategies, metric)
        return ScaledRank(
            simulated=tuple(_order(testbed.strategies, sv, metric == "throughput_rps")),
            tau_vs_twin=_tau(_ranking(base, scenario, testbed.strategies, metric), sv),
            tau_vs_measured=_tau(_ranking(measured, scenario, testbed.strategies, metric), sv),
        )

    return {sc.name: _ranked(sc.name, rank) for sc in testbed.scenarios}


def _median_halfwidth(cells: Sequence[TwinCell]) -> float | None:
    """Median over cells of the measured throughput's 95 % half-width, relative: how
    finely the run itself can tell two figures apart."""
    widths = [
        (hi - lo) / 2 / mean
        for c in cells
        for lo, hi in [c.measured_ci95.get("throughput_rps", (None, None))]
        if lo is not None and hi is not None and (mean := c.measured.get("throughput_rps"))
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


def _misses(cells: Sequence[TwinCell]) -> list[TwinCell]:
    """The cells whose throughput error is unknown or above ``MISS``."""
    return [
        c for c in cells if (error := c.error.get("throughput_rps")) is None or abs(error) > MISS
    ]


def _names(cells: Sequence[TwinCell]) -> tuple[str, ...]:
    return tuple(c.name for c in cells)


def summary(cells: Sequence[TwinCell], ranks: Mapping[str, Ranked[TwinRank]]) -> TwinSummary:
    """What the cells and rankings add up to (``TwinSummary``)."""
    errors = [c.error.get("throughput_rps") for c in cells]
    finite = [abs(e) for e in errors if e is not None]
    misses = _misses(cells)
    return TwinSummary(
        max_abs_throughput_error=max(finite) if finite else None,
        throughput_misses=_names(misses),
        throughput_misses_outside_ci=_names(
            [c for c in misses if c.inside_measured_ci.get("throughput_rps") is False]
        ),
        throughput_misses_where_the_harness_held=_names([c for c in misses if not c.validity]),
        median_measured_ci_halfwidth=_median_halfwidth(cells),
        tau_below_target=tuple(
            name
            for name, r in ranks.items()
            if r.throughput.tau is not None and r.throughput.tau < TAU_TARGET
        ),
        tau_undefined=tuple(name for name, r in ranks.items() if r.throughput.tau is None),
        resolved_pairs_contradicted={
            name: r.throughput.contradicted_pairs
            for name, r in ranks.items()
            if r.throughput.contradicted_pairs
        },
        miss_threshold=MISS,
        tau_target=TAU_TARGET,
    )
