"""Run-to-run agreement: do two runs of the same experiment tell the same story?

Counted over the strategy x scenario cells both runs measured under the same
conditions (``analysis/compare/conditions.py``); a cell whose offered load or capacity
differs would measure the change of the testbed, not the runs' agreement.

- **Throughput within 10 % (15 %)**: the cells whose mean throughput in the other run
  lies within 10 % (15 %) of the baseline's, relative to the baseline as the change
  column of the comparison shows it. 15 % is the tolerance the twin's cells are held
  to (``simulator/twin/compare.py``, ``MISS``), 10 % a tighter one.
- **Reversed pairs**: pairs of strategies on a metric that both runs *resolve* (the
  95 % interval of their difference, paired within blocks with failed phases left out,
  excludes 0: ``analysis/run/decide.py``'s ``compare``, the pairs behind each run's
  winners) in opposite directions. One reversal means one of the two runs' answers is wrong
  beyond its own interval: the testbed moved between the runs, or a check missed a fault.
- **Kendall tau-b** per scenario between the runs' rankings of the strategies by mean
  throughput: 1 the same order, -1 the reverse; strategies within 1 % of each other tie,
  as in the twin's rankings (an open load gives every strategy the offered rate, and
  such differences are no order).
- **Winners**: each scenario x metric's verdict as each run's ``winners.json`` gives
  it (the file the report and the notebooks read, so the tools say the same), side by
  side: the same, different, or not settled in both.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from lblab.analysis.ordering import order_scenarios, order_strategies
from lblab.analysis.run import TIE, UNRESOLVED, WINNER, Pair, compare
from lblab.analysis.stats import kendall_tau

WITHIN = (0.10, 0.15)
RANK_TIE = 0.01
RANKED_BY = "throughput_rps"
"""The metric of the within-10 % share and of the rankings."""

PairKey = tuple[str, str, str, str]
"""(scenario, metric, a, b), ``a`` before ``b`` in the strategies' display order."""


@dataclass(frozen=True, slots=True)
class PairCall:
    """A pair both runs resolve: each run's paired difference, and whether they disagree."""

    scenario: str
    metric: str
    a: str
    b: str
    baseline: str  # Pair.describe() in each run
    other: str
    reversed: bool


@dataclass(frozen=True, slots=True)
class Ranking:
    """One scenario's strategies by mean throughput, best first, in each run."""

    scenario: str
    baseline: tuple[str, ...]
    other: tuple[str, ...]
    tau: float | None  # None: fewer than two strategies, or every one tied


@dataclass(frozen=True, slots=True)
class WinnerCall:
    """One scenario x metric of ``winners.json`` in each run."""

    scenario: str
    metric: str
    baseline: str
    other: str
    agree: str  # "same" | "different" | "not settled in both" | "not comparable"


@dataclass(frozen=True, slots=True)
class Agreement:
    """Everything the comparison says about agreement (see the module's docstring)."""

    cells: int  # cells under the same conditions with a throughput in both runs
    within: tuple[tuple[float, int], ...]  # (tolerance, cells within it)
    not_comparable: int  # cells both runs measured whose conditions differ
    resolved_by_both: tuple[PairCall, ...]
    resolved_by_one: int
    rankings: tuple[Ranking, ...]
    winners: tuple[WinnerCall, ...]

    @property
    def reversed(self) -> list[PairCall]:
        return [p for p in self.resolved_by_both if p.reversed]


def paired(
    units: pd.DataFrame,
    left_out: Iterable[tuple[str, str, int, str]],
    strategies: Mapping[str, Iterable[str]],
    metrics: Sequence[str],
    equivalence: float,
) -> dict[PairKey, Pair]:
    """Each pair of ``strategies[scenario]`` on each metric, paired within blocks as the
    run's answer pairs them: ``left_out`` (scenario, strategy, replication, why) are the
    phases that failed a check, whose blocks do not count for their strategy."""
    dropped = {(c, s, int(r)) for c, s, r, _ in left_out}
    keep = [
        (c, s, int(r)) not in dropped
        for c, s, r in zip(units["scenario"], units["strategy"], units["replication"], strict=True)
    ]
    rows = units.loc[keep]
    out = {}
    for scenario, names in strategies.items():
        sub = rows.loc[rows["scenario"] == scenario]
        ordered = order_strategies(set(names) & set(sub["strategy"]))
        for metric in metrics:
            if metric not in sub.columns:
                continue
            table = sub.pivot_table(index="replication", columns="strategy", values=metric)
            present = [s for s in ordered if s in table.columns]
            for i, a in enumerate(present):
                for b in present[i + 1 :]:
                    values = table[a].to_list(), table[b].to_list()
                    out[(scenario, metric, a, b)] = compare(metric, a, b, *values, equivalence)
    return out


def _direction(p: Pair) -> int:
    """+1: ``a`` above ``b`` beyond the interval; -1: below; 0: not resolved."""
    return 0 if not p.resolved else 1 if p.lo > 0 else -1


def _winner_text(cell: Mapping[str, Any]) -> str:
    names = [str(s) for s in cell.get("strategies") or []]
    verdict = cell.get("verdict")
    if verdict == WINNER:
        return f"{names[0]} wins"
    if verdict == TIE:
        return f"tie: {', '.join(names)}"
    return f"unresolved (best by mean: {names[0]})" if names else "unresolved"


def _winners(
    baseline: Sequence[Mapping[str, Any]],
    other: Sequence[Mapping[str, Any]],
    comparable: set[str],
) -> list[WinnerCall]:
    theirs = {(c.get("scenario"), c.get("metric")): c for c in other}
    out = []
    for a in baseline:
        b = theirs.get((a.get("scenario"), a.get("metric")))
        if b is None:
            continue
        settled = a.get("verdict") != UNRESOLVED and b.get("verdict") != UNRESOLVED
        same = a.get("verdict") == b.get("verdict") and (
            set(a.get("strategies") or ()) == set(b.get("strategies") or ())
            if a.get("verdict") == TIE  # a tie's order is by mean, no part of the verdict
            else a.get("strategies") == b.get("strategies")
        )
        agree = (
            "not comparable"
            if a.get("scenario") not in comparable
            else "not settled in both"
            if not settled
            else "same"
            if same
            else "different"
        )
        out.append(
            WinnerCall(
                str(a.get("scenario")),
                str(a.get("metric")),
                _winner_text(a),
                _winner_text(b),
                agree,
            )
        )
    return out


def agreement(
    means: Mapping[tuple[str, str], tuple[float, float]],
    not_comparable: int,
    pairs: tuple[Mapping[PairKey, Pair], Mapping[PairKey, Pair]],
    winners: tuple[Sequence[Mapping[str, Any]], Sequence[Mapping[str, Any]]],
    comparable_scenarios: set[str],
) -> Agreement:
    """The agreement of two runs.

    ``means``: (strategy, scenario) -> (baseline, other) mean throughput of the cells
    both measured under the same conditions; ``pairs``: each run's ``paired`` over those
    cells; ``winners``: each run's ``winners.json`` cells; ``comparable_scenarios``: the
    scenarios whose every cell ran under the same conditions in both runs, with the same
    strategies (only their winners can be set side by side)."""
    finite = {k: v for k, v in means.items() if all(math.isfinite(x) for x in v)}
    within = tuple((t, sum(abs(o - b) <= t * abs(b) for b, o in finite.values())) for t in WITHIN)
    base, other = pairs
    both, one = [], 0
    for key in base.keys() & other.keys():
        da, db = _direction(base[key]), _direction(other[key])
        if da and db:
            both.append(PairCall(*key, base[key].describe(), other[key].describe(), da != db))
        elif da or db:
            one += 1
    both.sort(key=lambda p: (not p.reversed, p.scenario, p.metric, p.a, p.b))
    rankings = []
    for scenario in order_scenarios({c for _, c in finite}):
        names = order_strategies({s for s, c in finite if c == scenario})
        if len(names) < 2:
            continue
        x = [finite[(s, scenario)][0] for s in names]
        y = [finite[(s, scenario)][1] for s in names]
        rankings.append(
            Ranking(
                scenario,
                tuple(sorted(names, key=lambda s: -finite[(s, scenario)][0])),
                tuple(sorted(names, key=lambda s: -finite[(s, scenario)][1])),
                kendall_tau(x, y, RANK_TIE),
            )
        )
    return Agreement(
        cells=len(finite),
        within=within,
        not_comparable=not_comparable,
        resolved_by_both=tuple(both),
        resolved_by_one=one,
        rankings=tuple(rankings),
        winners=tuple(_winners(*winners, comparable_scenarios)),
    )
