"""The answer (``winners.json``, ``analysis/answer.py``) as a table and in plain words.

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

from lblab.analysis.answer import TIE, UNRESOLVED, WINNER
from lblab.analysis.metrics import METRICS

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
    return f" ({100 * rel:+.0f} % [{100 * lo:+.0f}, {100 * hi:+.0f}] vs {cell.get('runner_up')})"
