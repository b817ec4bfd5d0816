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

from lblab.analysis.metrics import HEADLINE, METRICS
from lblab.analysis.ordering import order_scenarios

TIE = "(tie)"
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
    """One row per scenario and metric: winner, runner-up and confidence.

    Confidence is "clear", "within CI", "unknown" (no interval), "only one" (a single
    strategy has a value) or "tie" (several share the best mean exactly, e.g. no failures
    at all); a tie's winner is ``TIE`` and its label lists the tied strategies.
    """
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
            tied = cand.loc[cand["mean"] == best["mean"], "strategy"].tolist()
            confidence = (
                "tie" if len(tied) > 1 else _confidence(best, second, METRICS[metric].better)
            )
            mark = {"clear": "", "within CI": "~", "unknown": "?", "tie": "="}[confidence]
            rows.append(
                (
                    scenario,
                    metric,
                    TIE if confidence == "tie" else best.strategy,
                    best["mean"],
                    second.strategy,
                    second["mean"],
                    confidence,
                    mark + "/".join(tied) if confidence == "tie" else mark + best.strategy,
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
        every = table.loc[table["metric"] == metric]
        sub = every.loc[every["winner"] != TIE]
        ties = len(every) - len(sub)
        if sub.empty:
            sentences.append(f"On {METRICS[metric].label}, all strategies tie everywhere.")
            continue
        counts = sub["winner"].value_counts()
        leader, wins = counts.index[0], int(counts.iloc[0])
        clear = int(((sub["winner"] == leader) & (sub["confidence"] == "clear")).sum())
        where = ", ".join(sub.loc[sub["winner"] == leader, "scenario"])
        text = f"On {METRICS[metric].label}, {leader} is best in {wins} of {len(every)} scenarios ({where})"
        if replications >= 2:
            text += f", clearly (non-overlapping 95 % CI) in {clear}"
        others = [f"{s} in {int(n)}" for s, n in counts.iloc[1:].items()]
        if ties:
            others.append(f"a tie in {ties}")
        if others:
            text += "; " + ", ".join(others)
        sentences.append(text + ".")
    if replications < 2:
        sentences.append(
            "Each strategy and scenario ran once, so these are single measurements without "
            "confidence intervals: run more replications before calling a winner."
        )
    return " ".join(sentences)
