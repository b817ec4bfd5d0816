"""Summary tables for people: pooled metrics as "mean [lo, hi]" strings, one row per cell.

The tables pool every phase, the failed ones too; the answer leaves those out. A row
that includes a phase that failed a validity check carries ``MARK`` after its strategy,
and the page or notebook showing it gives ``FOOTNOTE``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from lblab.analysis.metrics import HEADLINE, metric_info
from lblab.analysis.numbers import interval, number
from lblab.analysis.ordering import order_scenarios, order_strategies
from lblab.analysis.report.charts import FAILED, failed_keys

MARK = "\u2020"
FOOTNOTE = f"{MARK} {FAILED}."


def _cell(metric: str, mean: float, lo: float, hi: float) -> str:
    fmt = metric_info(metric).fmt
    if math.isnan(mean):
        return "-"
    if math.isnan(lo) or math.isnan(hi):
        return number(mean, fmt)
    return interval(mean, lo, hi, fmt)


def summary_table(
    pooled: pd.DataFrame,
    failed: pd.DataFrame,
    metrics: Sequence[str] = HEADLINE,
    by: Sequence[str] = ("scenario", "strategy"),
) -> pd.DataFrame:
    """Rows (scenario, strategy), one column per metric: "mean [95 % CI]" or the mean
    alone (one replication); ``failed`` (``Summary.failed``) marks the strategy of a
    row that includes a failed phase: ``rr †``."""
    by = list(by)
    rows = pooled.loc[pooled["metric"].isin(metrics)] if not pooled.empty else pooled
    if rows.empty:
        return pd.DataFrame(columns=[metric_info(m).label for m in metrics])
    text = rows.assign(
        text=[
            _cell(m, a, b, c)
            for m, a, b, c in zip(rows["metric"], rows["mean"], rows["lo"], rows["hi"], strict=True)
        ]
    )
    table = text.pivot(index=by, columns="metric", values="text").reindex(
        columns=[m for m in metrics if m in set(rows["metric"])]
    )
    order = {
        "scenario": order_scenarios(rows["scenario"].unique()),
        "strategy": order_strategies(rows["strategy"].unique()),
    }
    if "server" in by:
        order["server"] = sorted(rows["server"].unique())
    table = table.sort_index(key=lambda idx: idx.map({v: i for i, v in enumerate(order[idx.name])}))
    table.columns = [metric_info(m).label for m in table.columns]
    marked = failed_keys(failed, ("scenario", "strategy"))
    table.index = pd.MultiIndex.from_tuples(
        [_marked(dict(zip(by, key, strict=True)), marked) for key in table.index], names=by
    )
    return table.fillna("-")


def _marked(row: dict[str, str], marked: set[tuple[str, ...]]) -> tuple[str, ...]:
    """The row's key, its strategy followed by ``MARK`` when it includes a failed phase."""
    if (str(row["scenario"]), str(row["strategy"])) in marked:
        row = {**row, "strategy": f"{row['strategy']} {MARK}"}
    return tuple(row.values())


def replication_counts(units: pd.DataFrame, failed: pd.DataFrame) -> pd.DataFrame:
    """How many replications each strategy x scenario has (rows strategies, columns
    scenarios), and how many of them failed a validity check: ``3 (1 failed)``."""
    if units.empty:
        return pd.DataFrame()
    counts = (
        units.groupby(["strategy", "scenario"]).size().unstack("scenario").fillna(0).astype(int)
    )
    counts = counts.reindex(
        index=order_strategies(counts.index), columns=order_scenarios(counts.columns)
    )
    if failed.empty:
        return counts
    bad = failed.groupby(["strategy", "scenario"]).size()
    return pd.DataFrame(
        {
            scenario: [
                f"{n} ({bad[(s, scenario)]} failed)" if (s, scenario) in bad.index else str(n)
                for s, n in counts[scenario].items()
            ]
            for scenario in counts.columns
        },
        index=counts.index,
    )


def replications_per_cell(units: pd.DataFrame) -> str:
    """The replications each strategy x scenario cell has, in words: ``6 replications per
    cell``, or where they differ (an adaptive run adds blocks only for the scenarios still
    open) ``4-6 replications per cell (sp+sr 4, mp+mr 6)``."""
    if units.empty:
        return "0 replications"
    counts = units.groupby(["scenario", "strategy"]).size()
    lo, hi = int(counts.min()), int(counts.max())
    if lo == hi:
        return f"{lo} replication{'s' if lo != 1 else ''} per cell"
    by_scenario = counts.groupby(level="scenario")
    each = []
    for scenario in order_scenarios(counts.index.get_level_values("scenario").unique()):
        mine = by_scenario.get_group(scenario)
        a, b = int(mine.min()), int(mine.max())
        each.append(f"{scenario} {a}" if a == b else f"{scenario} {a}-{b}")
    return f"{lo}-{hi} replications per cell ({', '.join(each)})"
