"""Which strategy wins each scenario and metric, and how sure we are.

The winner is the best mean (METRICS says whether higher or lower is better). It is
``clear`` when its 95 % interval does not overlap the runner-up's; with one replication
there is no interval and the win is ``unknown``. Overlapping intervals are a weak test
(non-overlap implies a difference, overlap does not prove there is none), which is why
the label says "within CI" rather than "tie".
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from analysis.metrics import HEADLINE, METRICS
from analysis.scenarios import order_scenarios

COLUMNS = [
    "scenario",
    "metric",
    "winner",
    "value",
    "runner_up",
    "runner_up_value",
    "confidence",
    "label",
]


def winners(pooled: pd.DataFrame, metrics: Sequence[str] = HEADLINE) -> pd.DataFrame:
    """One row per scenario and metric: winner, runner-up, confidence ("clear"|"within CI"|"unknown"|"only one")."""
    rows = []
    if pooled.empty:
        return pd.DataFrame(columns=COLUMNS)
    for metric in metrics:
        sub = pooled.loc[(pooled["metric"] == metric) & pooled["mean"].notna()]
        for scenario in order_scenarios(sub["scenario"].unique()):
            cand = sub.loc[sub["scenario"] == scenario]
            cand = cand.sort_values(
                "mean", ascending=METRICS[metric].better == "lower", kind="stable"
            )
            best = cand.iloc[0]
            if len(cand) == 1:
                rows.append(
                    (
                        scenario,
                        metric,
                        best.strategy,
                        best["mean"],
                        None,
                        math.nan,
                        "only one",
                        best.strategy,
                    )
                )
                continue
            second = cand.iloc[1]
            confidence = _confidence(best, second, METRICS[metric].better)
            mark = {"clear": "", "within CI": "~", "unknown": "?"}[confidence]
            rows.append(
                (
                    scenario,
                    metric,
                    best.strategy,
                    best["mean"],
                    second.strategy,
                    second["mean"],
                    confidence,
                    mark + best.strategy,
                )
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def _confidence(best: pd.Series, second: pd.Series, better: str) -> str:
    if any(math.isnan(float(v)) for v in (best["lo"], best["hi"], second["lo"], second["hi"])):
        return "unknown"
    if better == "higher":
        return "clear" if best["lo"] > second["hi"] else "within CI"
    return "clear" if best["hi"] < second["lo"] else "within CI"


def verdict(table: pd.DataFrame, replications: int) -> str:
    """A plain paragraph: which strategy wins where, and how firmly."""
    if table.empty:
        return "There is nothing to compare: no metric has a value for any strategy."
    sentences = []
    for metric in dict.fromkeys(table["metric"]):
        sub = table.loc[table["metric"] == metric]
        counts = sub["winner"].value_counts()
        leader, wins = counts.index[0], int(counts.iloc[0])
        clear = int(((sub["winner"] == leader) & (sub["confidence"] == "clear")).sum())
        where = ", ".join(sub.loc[sub["winner"] == leader, "scenario"])
        text = f"On {METRICS[metric].label}, {leader} is best in {wins} of {len(sub)} scenarios ({where})"
        if replications >= 2:
            text += f", clearly (non-overlapping 95 % CI) in {clear}"
        others = [f"{s} in {int(n)}" for s, n in counts.iloc[1:].items()]
        if others:
            text += "; " + ", ".join(others)
        sentences.append(text + ".")
    if replications < 2:
        sentences.append(
            "Each strategy and scenario ran once, so these are single measurements without "
            "confidence intervals: run more replications before calling a winner."
        )
    return " ".join(sentences)
