"""Summary tables for people: pooled metrics as "mean [lo, hi]" strings, one row per cell."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from lblab.analysis.metrics import HEADLINE, metric_info
from lblab.analysis.ordering import order_scenarios, order_strategies


def _cell(metric: str, mean: float, lo: float, hi: float) -> str:
    fmt = metric_info(metric).fmt
    if math.isnan(mean):
        return "-"
    if math.isnan(lo) or math.isnan(hi):
        return fmt.format(mean)
    return f"{fmt.format(mean)} [{fmt.format(lo)}, {fmt.format(hi)}]"


def summary_table(
    pooled: pd.DataFrame,
    metrics: Sequence[str] = HEADLINE,
    by: Sequence[str] = ("scenario", "strategy"),
) -> pd.DataFrame:
    """Rows (scenario, strategy), one column per metric: "mean [95 % CI]" or the mean alone (one replication)."""
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
    return table.fillna("-")


def replication_counts(units: pd.DataFrame) -> pd.DataFrame:
    """How many replications each strategy x scenario has (rows strategies, columns scenarios)."""
    if units.empty:
        return pd.DataFrame()
    counts = (
        units.groupby(["strategy", "scenario"]).size().unstack("scenario").fillna(0).astype(int)
    )
    return counts.reindex(
        index=order_strategies(counts.index), columns=order_scenarios(counts.columns)
    )
