"""A paper's claims judged over seeds: holds, does not hold, inconclusive or n/a.

Every simulated reproduction (``lblab reproduce ingram|cheetah|martins|linkerd|prequal``)
states its paper's findings as ``PaperClaim``s: the quantity, one figure per seed (a
ratio of two strategies' figures is paired within the seed), the bound the paper
implies, and why that bound. ``judge`` takes the mean of the figure over the seeds with
a 95 % Student-t interval (``analysis.stats.mean_ci``) and places the interval against
the bound (``verdict_of``, which the thesis's claims use too, in their own words):
**holds** when the whole interval is on the claim's side, **does not hold** when the
whole interval is on the other side, **inconclusive** when it straddles the bound or
there is no interval (one seed). A run without the figures a claim needs (a strategy or
a point left out with ``--algorithms`` and the like) gives **n/a**, saying what is
missing.

Bounds follow the thesis's rule (``analysis.thesis.claims``): where the paper gives a
size, the claim holds when at least half of that effect is measured (``halfway``: a
published ratio of 0.6 gives the bound 0.8, a factor of 10 the bound 5.5); where it
gives only a direction, the bound is 1 (or 0) and says so.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from lblab.analysis.stats import MeanCI, mean_ci
from lblab.pages import table

HOLDS, DOES_NOT_HOLD, INCONCLUSIVE, NA = "holds", "does not hold", "inconclusive", "n/a"
VERDICT_STYLE = {HOLDS: "green", DOES_NOT_HOLD: "red", INCONCLUSIVE: "yellow"}
LEVEL = 0.95
COLUMNS = ("claim", "source", "figure", "95 % interval", "seeds", "holds if", "verdict", "why")


def rounded(x: float) -> float | None:
    """A figure for JSON: six decimals, None for NaN."""
    return None if math.isnan(x) else round(x, 6)


def figure_fields(ci: MeanCI) -> dict[str, float | None]:
    """A judged claim's mean and interval, as both JSON shapes hold them (the
    reproductions' ``Verdict`` and the thesis's ``Judgement``)."""
    return {"figure": rounded(ci.mean), "lo": rounded(ci.lo), "hi": rounded(ci.hi)}


def interval_text(fmt: Callable[[float], str], ci: MeanCI) -> str:
    """The table's "95 % interval" cell."""
    return f"{fmt(ci.lo)} .. {fmt(ci.hi)}" if ci.has_ci else "no interval"


def verdict_of(ci: MeanCI, op: str, threshold: float) -> str:
    """Holds / does not hold when the interval lies wholly on one side of the threshold."""
    if ci.n == 0 or math.isnan(ci.mean):
        return NA
    if not ci.has_ci:
        return INCONCLUSIVE
    if op == ">=":
        return HOLDS if ci.lo >= threshold else DOES_NOT_HOLD if ci.hi < threshold else INCONCLUSIVE
    return HOLDS if ci.hi <= threshold else DOES_NOT_HOLD if ci.lo > threshold else INCONCLUSIVE


def halfway(published: float) -> float:
    """The bound for half a published effect: a ratio or factor ``published`` against 1."""
    return (1.0 + published) / 2.0


class Missing(Exception):
    """A claim's figure needs runs this reproduction was not asked for; the message names them."""


@dataclass(frozen=True, slots=True)
class PaperClaim:
    """One finding of a paper, the figure that tests it (one value per seed) and its bound."""

    id: str
    text: str
    """The claim in a line (the table's wording)."""
    source: str
    """Where the paper makes it: figure or section, with its figure or words."""
    figure_label: str
    """What the figure is, per seed."""
    op: Literal[">=", "<="]
    threshold: float
    basis: str
    """Why this threshold."""
    fmt: str = "{:.2f}"

    def format(self, value: float) -> str:
        return "-" if math.isnan(value) else self.fmt.format(value)

    @property
    def holds_if(self) -> str:
        return f"{self.op} {self.format(self.threshold)}"


@dataclass(frozen=True, slots=True)
class Verdict:
    claim: PaperClaim
    values: tuple[float, ...]
    """The figure at each seed."""
    ci: MeanCI
    verdict: str
    why: str
    """Empty when the claim holds; else what the interval or the run lacked."""

    def as_dict(self) -> dict[str, Any]:
        c = self.claim
        return {
            "id": c.id,
            "claim": c.text,
            "source": c.source,
            "figure_label": c.figure_label,
            **figure_fields(self.ci),
            "level": LEVEL,
            "seeds": self.ci.n,
            "values": [rounded(v) for v in self.values],
            "op": c.op,
            "threshold": c.threshold,
            "holds_if": c.holds_if,
            "threshold_basis": c.basis,
            "verdict": self.verdict,
            "why": self.why,
        }

    def table_row(self) -> dict[str, str]:
        c, ci = self.claim, self.ci
        interval = interval_text(c.format, ci)
        return {
            "claim": c.text,
            "source": c.source,
            "figure": c.format(ci.mean),
            "95 % interval": interval,
            "seeds": str(ci.n),
            "holds if": c.holds_if,
            "verdict": self.verdict,
            "why": self.why,
        }


def judge(claim: PaperClaim, figure: Callable[[], Sequence[float]]) -> Verdict:
    """``claim`` judged on ``figure()``, its value per seed (non-finite values left out);
    a ``figure`` that raises ``Missing`` gives n/a."""
    try:
        raw = np.asarray(figure(), dtype=float)
    except Missing as missing:
        return Verdict(claim, (), mean_ci([]), NA, f"not run: {missing}")
    values = raw[np.isfinite(raw)]
    ci = mean_ci(values, LEVEL)
    verdict = verdict_of(ci, claim.op, claim.threshold)
    if verdict == HOLDS:
        why = ""
    elif verdict == NA:
        why = "no finite figure in any seed"
    elif not ci.has_ci:
        why = "one seed: no interval; run at least 3 (--seeds)"
    else:
        each = ", ".join(claim.format(v) for v in values)
        side = "straddles" if verdict == INCONCLUSIVE else "lies wholly on the other side of"
        why = f"the interval {side} {claim.format(claim.threshold)} (seeds: {each})"
    return Verdict(claim, tuple(values.tolist()), ci, verdict, why)


def judge_all(figures: Sequence[tuple[PaperClaim, Callable[[], Sequence[float]]]]) -> list[Verdict]:
    return [judge(claim, figure) for claim, figure in figures]


def document(
    reproduction: str, title: str, seeds: Sequence[int], verdicts: Sequence[Verdict]
) -> dict[str, Any]:
    """The claims as JSON: the same keys for every reproduction."""
    return {
        "reproduction": reproduction,
        "title": title,
        "seeds": list(seeds),
        "interval": f"{LEVEL * 100:g} % Student-t over the seeds",
        "claims": [v.as_dict() for v in verdicts],
    }


def markdown(verdicts: Sequence[Verdict], title: str, level: int = 2) -> str:
    """The claims table under a heading of ``level``, each figure and bound listed under it."""
    lines = ["#" * level + f" {title}", "", *table(COLUMNS, [v.table_row() for v in verdicts])]
    lines += ["", "What each figure is, and why its bound:", ""]
    for v in verdicts:
        c = v.claim
        lines.append(
            f"- **{c.text}** ({c.source}): {c.figure_label}; holds if {c.holds_if} ({c.basis})."
        )
    return "\n".join(lines) + "\n"
