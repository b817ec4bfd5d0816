"""Judging the thesis's claims on a run: supported, contradicted, inconclusive or n/a.

``judge`` takes the mean of a claim's figure over the replications with a 95 %
Student-t interval (``analysis.stats.mean_ci``) and compares the interval with the
claim's threshold by ``analysis.paper_claims.verdict_of``, the rule of every
reproduction, in the thesis's words: **supported** when the whole interval is on the claim's side,
**contradicted** when the whole interval is on the other side, **inconclusive** when it
straddles the threshold or there is no interval (one replication). A run without the
cells a claim needs gives ``n/a``.

Where a claim is not supported, ``Judgement.why`` is one sentence built from the run's
own evidence (``analysis.thesis.explanations``) saying whether lblab's harness or the
thesis's explains it; ``failed_checks`` names the runner's validity checks that failed in
the replications behind the figure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from lblab.analysis import paper_claims
from lblab.analysis.stats import MeanCI, mean_ci
from lblab.analysis.thesis.claims import CLAIMS, Claim
from lblab.analysis.thesis.figures import MissingCells
from lblab.analysis.thesis.tables import RunTables
from lblab.pages import table

SUPPORTED, CONTRADICTED = "supported", "contradicted"
INCONCLUSIVE, NA = paper_claims.INCONCLUSIVE, paper_claims.NA
_THESIS_WORDS = {paper_claims.HOLDS: SUPPORTED, paper_claims.DOES_NOT_HOLD: CONTRADICTED}


@dataclass(frozen=True)
class Judgement:
    claim: Claim
    values: list[float]
    ci: MeanCI
    verdict: str
    why: str
    failed_checks: list[str]

    def as_dict(self) -> dict[str, Any]:
        c = self.claim
        return {
            "id": c.id,
            "section": c.section,
            "claim": c.text,
            "thesis": c.thesis,
            "figure_label": c.figure_label,
            **paper_claims.figure_fields(self.ci),
            "replications": self.ci.n,
            "values": [paper_claims.rounded(v) for v in self.values],
            "holds_if": c.holds_if,
            "threshold_basis": c.basis,
            "verdict": self.verdict,
            "why": self.why,
            "failed_checks": self.failed_checks,
        }

    def table_row(self) -> dict[str, str]:
        c, ci = self.claim, self.ci
        interval = paper_claims.interval_text(c.format, ci)
        return {
            "claim": f"{c.text} (§{c.section})",
            "figure": c.format(ci.mean),
            "95 % interval": interval,
            "n": str(ci.n),
            "holds if": c.holds_if,
            "verdict": self.verdict,
            "why": self.why,
        }


def verdict_of(ci: MeanCI, op: str, threshold: float) -> str:
    """``paper_claims.verdict_of`` (the one rule for every reproduction) in the thesis
    page's words: supported / contradicted when the interval lies wholly on one side."""
    verdict = paper_claims.verdict_of(ci, op, threshold)
    return _THESIS_WORDS.get(verdict, verdict)


def _failed_checks(t: RunTables, values: pd.Series) -> list[str]:
    """Validity checks that failed in any phase of the replications behind the figure."""
    rows = t.phases[t.phases["replication"].isin(list(values.index))]
    return sorted({name for names in rows["failed_checks"] for name in names})


def judge(claim: Claim, tables: RunTables) -> Judgement:
    try:
        values = claim.figure(tables).astype(float).replace([np.inf, -np.inf], np.nan).dropna()
    except MissingCells as missing:
        return Judgement(claim, [], mean_ci([]), NA, f"this run lacks the cells: {missing}", [])
    ci = mean_ci(values.to_numpy())
    verdict = verdict_of(ci, claim.op, claim.threshold)
    if verdict == SUPPORTED:
        why = ""
    elif verdict == INCONCLUSIVE and not ci.has_ci:
        why = "one replication: no interval; run at least 3"
    else:
        why = claim.why(tables)
        if verdict == INCONCLUSIVE:
            each = ", ".join(claim.format(v) for v in values)
            why = f"the interval straddles {claim.format(claim.threshold)} (replications: {each}); {why}"
    return Judgement(claim, values.tolist(), ci, verdict, why, _failed_checks(tables, values))


def judge_all(tables: RunTables, claims: Sequence[Claim] = CLAIMS) -> list[Judgement]:
    return [judge(c, tables) for c in claims]


def markdown(judgements: Sequence[Judgement], title: str, level: int = 2) -> str:
    """The claims table as markdown under a heading of ``level``, the thesis's words
    listed under it."""
    head = ["claim", "figure", "95 % interval", "n", "holds if", "verdict", "why"]
    lines = ["#" * level + f" {title}", "", *table(head, [j.table_row() for j in judgements])]
    lines += ["", "What each figure is, and the thesis's words:", ""]
    for j in judgements:
        c = j.claim
        lines.append(
            f"- **{c.text}** (§{c.section}): {c.figure_label}; holds if {c.holds_if} "
            f'({c.basis}). Thesis: "{c.thesis}".'
        )
    return "\n".join(lines) + "\n"
