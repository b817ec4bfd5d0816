"""The answer (``winners.json``, ``analysis/run/decide.py``) as a table and in plain words.

Nothing here decides anything: the cells come from ``winners.json``, so the report,
the notebooks and ``lblab compare`` say the same. Labels: ``wrr`` a winner (resolved
better than every other strategy, paired within blocks); ``=wrr/lc`` a tie (shown
equivalent within the margin); ``?wrr`` unresolved (``wrr`` has the best mean, but some
pair is neither resolved nor equivalent yet).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pandas as pd

from lblab.analysis.metrics import METRICS
from lblab.analysis.numbers import bounds, interval, number
from lblab.analysis.run.decide import ABSOLUTE_MARGINS, LEVEL, MARGIN_UNITS, TIE, UNRESOLVED, WINNER

COLUMNS = ["scenario", "metric", "verdict", "label", "winner", "runner_up", "why"]
MARK = {WINNER: "", TIE: "=", UNRESOLVED: "?"}


def label(cell: Mapping[str, Any]) -> str:
    strategies = cell.get("strategies") or []
    return MARK.get(str(cell.get("verdict")), "?") + "/".join(strategies) if strategies else "-"


def winner_frame(cells: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """One row per scenario and metric, in the answer's order."""
    rows = [
        (
            c["scenario"],
            c["metric"],
            c["verdict"],
            label(c),
            ", ".join(c.get("strategies") or []),
            c.get("runner_up"),
            c.get("why") or "",
        )
        for c in cells
    ]
    return pd.DataFrame(rows, columns=COLUMNS)


def verdict(cells: Sequence[Mapping[str, Any]]) -> str:
    """A plain paragraph: per metric, who wins where, what is tied, what is unresolved
    and why."""
    if not cells:
        return "There is nothing to compare: no metric has a value for any strategy."
    sentences = []
    blocks = max(int(c.get("blocks") or 0) for c in cells)
    for metric in dict.fromkeys(c["metric"] for c in cells):
        mine = [c for c in cells if c["metric"] == metric]
        won = [c for c in mine if c["verdict"] == WINNER]
        tied = [c for c in mine if c["verdict"] == TIE]
        open_ = [c for c in mine if c["verdict"] == UNRESOLVED]
        parts = []
        if won:
            parts.append(
                "won by "
                + ", ".join(f"{c['strategies'][0]} in {c['scenario']}{_by(c)}" for c in won)
            )
        if tied:
            parts.append(
                "tied in "
                + ", ".join(f"{c['scenario']} ({'/'.join(c['strategies'])})" for c in tied)
            )
        if open_:
            parts.append("unresolved in " + ", ".join(c["scenario"] for c in open_))
        sentences.append(f"On {METRICS[metric].label}: {'; '.join(parts)}.")
    decided = sum(c["verdict"] != UNRESOLVED for c in cells)
    sentences.append(
        f"{decided} of {len(cells)} scenario x metric cells are decided "
        f"({blocks} block{'s' if blocks != 1 else ''}, paired within blocks)."
    )
    if blocks == 0 and any(c.get("left_out") for c in cells):
        sentences.append(
            "Every phase was left out for failing its checks (see 'Can these numbers be "
            "trusted?'): there is nothing to compare; rerun when the checks pass (a quiet "
            "machine)."
        )
    elif blocks < 2:
        sentences.append(
            "With one block there is no interval: run more replications "
            "(or an adaptive run, run.max_replications) before calling a winner."
        )
    bent = [c for c in cells if (c.get("instrument") or {}).get("level") == "fail"]
    if bent:
        sentences.append(
            "The harness's own time could reverse "
            + ", ".join(
                f"{c['strategies'][0]} over {c.get('runner_up')} on "
                f"{METRICS[c['metric']].label} in {c['scenario']}"
                for c in bent
            )
            + ": the two differ in what Locust, the balancer and loopback added by as much "
            "as the difference called (see 'What the instrument adds')."
        )
    return " ".join(sentences)


def unresolved_reasons(cells: Sequence[Mapping[str, Any]]) -> list[str]:
    """Why each unresolved cell is: the pairs still open, with their intervals."""
    return [
        f"{c['scenario']}, {METRICS[c['metric']].label}: {c.get('why') or 'no interval yet'}"
        for c in cells
        if c["verdict"] == UNRESOLVED
    ]


def _by(cell: Mapping[str, Any]) -> str:
    """`` (+12 % [+5, +19] over lc)``: the margin to the runner-up."""
    d = cell.get("difference") or {}
    rel, lo, hi = d.get("relative"), d.get("relative_lo"), d.get("relative_hi")
    if rel is None or lo is None or hi is None:
        return ""
    shown = interval(100 * rel, 100 * lo, 100 * hi, "{:+.0f}", " %")
    return f" ({shown} vs {cell.get('runner_up')})"


def margin_words(equivalence: float, metric: str | None = None) -> str:
    """The equivalence margin as the rule applies it to ``metric`` (None: to every
    metric): ``+-5 % (as a ratio of the two strategies' values, between 1/1.05 and
    1.05)``, and for a metric compared by plain differences its absolute margin."""
    if metric in ABSOLUTE_MARGINS:
        scale, unit = MARGIN_UNITS[metric]
        return f"+-{number(scale * ABSOLUTE_MARGINS[metric], '{:g}')}{unit}"
    ratio = number(1 + equivalence, "{:g}")
    words = (
        f"+-{number(100 * equivalence, '{:g}')} % (as a ratio of the two strategies' "
        f"values, between 1/{ratio} and {ratio})"
    )
    if metric is None:
        words += "".join(f"; {METRICS[m].label}: {margin_words(equivalence, m)}"
                         for m in ABSOLUTE_MARGINS)  # fmt: skip
    return words


def rule_words(equivalence: float) -> str:
    """How ``analysis/run/decide.py`` decides a cell, in words, with the run's margin."""
    level = number(100 * LEVEL, "{:g}")
    return (
        "Each pair of strategies is compared over the blocks where both phases passed "
        "their checks: the mean of the per-block differences (of logarithms, so a ratio; "
        "the failure and success rates, recovery and load deviation by plain "
        "differences) and its Student-t intervals, which need 2 "
        f"blocks or more. A pair is resolved when its {level} % interval excludes 0, and "
        f"equivalent when its 90 % interval lies inside the run's equivalence margin, "
        f"{margin_words(equivalence)} (two one-sided tests at 5 %). Green, no mark: a "
        "winner, resolved better than every other strategy and equivalent to none (a "
        f"difference whose {level} % interval excludes 0 but whose 90 % interval lies "
        "inside the margin is no win). Blue, =: a tie, the strategies no other one beats "
        "are pairwise equivalent (whether or not their intervals exclude 0). Grey, ?: "
        "unresolved, otherwise; the strategy named has the best mean."
    )


def hover(cell: Mapping[str, Any], equivalence: float) -> str:
    """A cell's hover text: its verdict, the metric, and the difference to the runner-up
    with its 95 % and 90 % intervals, the blocks and the margin; why it is open."""
    metric = METRICS[str(cell["metric"])].label
    strategies = list(cell.get("strategies") or [])
    head = {
        WINNER: f"winner {'/'.join(strategies)}",
        TIE: f"tie of {', '.join(strategies)} (equivalent)",
    }.get(str(cell["verdict"]), f"unresolved (best mean: {'/'.join(strategies) or '-'})")
    parts = [f"{cell['scenario']}, {metric}: {head}"]
    d = cell.get("difference") or {}
    runner_up = cell.get("runner_up")
    if runner_up and strategies:
        parts.append(
            f"{strategies[0]} vs the runner-up {runner_up}: {_interval(cell['metric'], d)}, "
            f"margin {margin_words(equivalence, str(cell['metric']))}"
        )
    if cell["verdict"] == UNRESOLVED and cell.get("why"):
        parts.append(f"open: {cell['why']}")
    return ". ".join(parts) + "."


def _interval(metric: str, d: Mapping[str, Any]) -> str:
    """``+2.1 % [+0.15, +4.1] (95 %), 90 %: [+0.47, +3.7], over 4 blocks``."""
    blocks = int(d.get("blocks") or 0)
    if metric in ABSOLUTE_MARGINS:
        keys, (scale, unit) = ("diff", "lo", "hi", "lo90", "hi90"), MARGIN_UNITS[metric]
    elif d.get("relative_lo") is None and d.get("lo") is not None:  # a zero among the values
        keys, scale, unit = ("diff", "lo", "hi", "lo90", "hi90"), 1.0, ""
    else:
        keys = ("relative", "relative_lo", "relative_hi", "relative_lo90", "relative_hi90")
        scale, unit = 100.0, " %"
    values: list[float | None] = [d.get(k) for k in keys]
    known = [v for v in values if v is not None]
    if blocks < 2 or len(known) < len(values):
        first = values[0]
        shown = "" if first is None else f"{number(scale * first, '{:+.3g}')}{unit}, "
        return f"{shown}{blocks} block{'s' if blocks != 1 else ''}, no interval"
    mid, lo, hi, lo90, hi90 = (scale * v for v in known)
    return (
        f"{interval(mid, lo, hi, unit=unit)} (95 %), 90 %: {bounds(lo90, hi90)}, "
        f"over {blocks} blocks"
    )
