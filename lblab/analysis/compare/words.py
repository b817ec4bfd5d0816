"""The comparison of ``lblab compare`` in words and numbers, the same in every output.

The terminal tables (``analysis/compare/terminal.py``), the HTML page
(``analysis/compare/report.py``) and ``compare.json`` (``to_json``) say the same things
in the same words: a metric's value in its own format, a difference's interval and
verdict, one sentence per difference, one on what changed, a headline counting the
significant differences, and the runs' agreement in sentences. ``analysis/compare/runs.py``
computes the ``Report`` they word.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from lblab.analysis.compare.runs import Change, Comparison, Difference, Report, RunSide
from lblab.analysis.metrics import METRICS
from lblab.json_fields import to_plain

COMPARE_JSON = "compare.json"


# ------------------------------------------------------------------ compare.json


def to_json(report: Report) -> dict[str, Any]:
    """The report as plain data (``compare.json``): NaN as null, paths as text."""
    return to_plain(
        {
            "level": report.level,
            "baseline": report.runs[0].label,
            "metrics": report.metrics,
            "runs": [
                {
                    "label": s.label,
                    "path": s.path,
                    "run_id": s.run_id,
                    "simulated": s.simulated,
                    "facts": s.facts,
                    "winners_from": s.winners_from,
                }
                for s in report.runs
            ],
            "comparisons": [
                {
                    **{k: v for k, v in asdict(c).items() if k != "differences"},
                    "what_changed": what_changed(c),
                    "headline": headline(c),
                    "summary": {v: c.count(v) for v in VERDICT_TEXT},
                    "reversed_pairs": len(c.agreement.reversed),
                    "differences": [asdict(d) for d in c.differences],
                }
                for c in report.comparisons
            ],
        },
        finite=True,
    )


# ------------------------------------------------------------------ words and numbers


def fmt_value(metric: str, value: float, signed: bool = False) -> str:
    """A metric's value in its own format (``{:.2%}`` for rates); ``n/a`` for NaN."""
    if math.isnan(value):
        return "n/a"
    fmt = METRICS[metric].fmt
    return (fmt.replace("{:", "{:+", 1) if signed else fmt).format(value)


def fmt_interval(d: Difference) -> str:
    """``[-3.1, +0.4]``, or why there is none."""
    if d.verdict == "no data":
        return "no data"
    if math.isnan(d.lo):
        return f"no interval ({d.baseline_n} vs {d.other_n} replications)"
    return f"[{fmt_value(d.metric, d.lo, True)}, {fmt_value(d.metric, d.hi, True)}]"


def fmt_relative(d: Difference) -> str:
    return "" if math.isnan(d.relative) else f"{d.relative:+.1%}"


def fmt_p(p: float) -> str:
    if math.isnan(p):
        return ""
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


VERDICT_TEXT = {
    "better": "better (significant)",
    "worse": "worse (significant)",
    "not significant": "no significant difference",
    "no interval": "no interval: too few replications to tell",
    "not comparable": "not comparable",
    "no data": "no data",
}


def verdict_text(d: Difference) -> str:
    """The verdict in words; a cell that is not comparable says which conditions differ."""
    if d.verdict == "not comparable":
        return "not comparable: " + "; ".join(d.not_comparable)
    return VERDICT_TEXT[d.verdict]


def checks_text(d: Difference, c: Comparison) -> str:
    """``checks: A fail in 1 of 3 phases: disturbance; B pass``."""
    return f"checks: {c.baseline} {d.baseline_checks.text()}; {c.other} {d.other_checks.text()}"


def sentence(d: Difference, c: Comparison) -> str:
    """``rr x sp+sr: p95 latency (ms) 12.0 -> 18.3 (+52.5 %, [+4.1, +8.5]) in B: worse``,
    with both runs' checks of the cell."""
    direction = "higher" if d.diff > 0 else "lower"
    return (
        f"{d.strategy} x {d.scenario}: {d.label} {direction} in {c.other} than in {c.baseline} "
        f"({fmt_value(d.metric, d.baseline)} -> {fmt_value(d.metric, d.other)}, "
        f"{fmt_relative(d) or fmt_value(d.metric, d.diff, True)}; 95 % interval of the "
        f"difference {fmt_interval(d)}): {d.verdict} ({checks_text(d, c)})"
    )


def _keys(changes: Sequence[Change], most: int = 5) -> str:
    names = [ch.key for ch in changes[:most]]
    return ", ".join(names) + (", ..." if len(changes) > most else "")


def what_changed(c: Comparison) -> str:
    """The "What changed" table in one sentence, from the same lists it shows (facts,
    conditions, config keys): "the same" only when none of them lists anything and no
    key was left uncompared."""
    found = [
        f"{len(items)} {noun}{'' if len(items) == 1 else 's'} ({_keys(items)})"
        for noun, items in (
            ("fact", c.facts),
            ("condition", c.conditions),
            ("config key", c.config),
        )
        if items
    ]
    notes = [n for n in (c.conditions_note, c.config_note) if n]
    if not found and not notes:
        return "Nothing the comparison reads differs: the facts, the conditions and the config are the same."
    text = (
        "Differ: " + "; ".join(found)
        if found
        else "No listed fact, condition or config key differs"
    )
    return text + "".join(f"; {n}" for n in notes) + "."


def _reasons_text(c: Comparison, most: int = 3) -> str:
    """The distinct conditions that make cells not comparable: ``offered rate 8000 vs 8400``."""
    texts = list(dict.fromkeys(r for d in c.differences for r in d.not_comparable))
    return "; ".join(texts[:most]) + (
        f"; and {len(texts) - most} more" if len(texts) > most else ""
    )


def headline(c: Comparison) -> str:
    """One line: how many differences are significant, in which direction, and how many
    are not comparable (their conditions differ) or rest on a phase that failed a check."""
    who = f"{c.other} vs {c.baseline}"
    blocked = c.count("not comparable")
    untested = c.count("no interval")
    tested = len(c.differences) - untested - blocked - c.count("no data")
    if blocked and not tested and not untested:
        return (
            f"{who}: not comparable: {_reasons_text(c)}; so no difference is called "
            "significant, better or worse"
        )
    if tested:
        text = (
            f"{who}: {c.count('better')} significantly better, {c.count('worse')} "
            f"significantly worse, {c.count('not significant')} not significant, of {tested} "
            "differences with a 95 % interval"
        )
        flagged = sum(d.significant and d.failed_check for d in c.differences)
        if flagged:
            text += f" ({flagged} of the significant ones rest on phases that failed a check)"
        if untested:
            text += f"; {untested} without one (one replication)"
    else:
        text = (
            f"{who}: no difference has an interval (a run has one replication), so none "
            "can be called significant; the changes are single measurements"
        )
    if blocked:
        text += f"; {blocked} not comparable ({_reasons_text(c)})"
    return text


def _tau(value: float | None) -> str:
    return "undefined (all tied)" if value is None else f"{value:+.2f}"


def agreement_lines(c: Comparison, runs: Mapping[str, RunSide]) -> list[str]:
    """The runs' agreement in sentences, for the terminal and the page alike."""
    g = c.agreement
    lines = []
    if g.not_comparable:
        lines.append(
            f"{g.not_comparable} cells both runs measured differ in their conditions and are "
            "left out of the agreement below."
        )
    if not g.cells:
        lines.append("No cell ran under equal conditions in both runs: nothing to agree on.")
    else:
        within = ", ".join(f"within {t * 100:.0f} %: {n} ({n / g.cells:.0%})" for t, n in g.within)
        lines.append(f"Throughput of {g.cells} cells agrees {within}.")
        lines.append(
            f"Strategy pairs both runs resolve (headline metrics, 95 % interval paired within "
            f"blocks): {len(g.resolved_by_both)}, of them reversed: {len(g.reversed)}; "
            f"resolved in one run only: {g.resolved_by_one}."
        )
        lines += [
            f"  reversed: {p.scenario} {p.metric}: {c.baseline} {p.baseline}; {c.other} {p.other}"
            for p in g.reversed
        ]
        if g.rankings:
            taus = ", ".join(
                f"{r.scenario} {_tau(r.tau)} ({len(r.baseline)} strategies)" for r in g.rankings
            )
            lines.append(f"Kendall tau-b of the throughput rankings: {taus}.")
    if g.winners:
        counts = {a: sum(w.agree == a for w in g.winners) for a in WINNER_AGREEMENT}
        sources = "; ".join(
            f"{label}: {runs[label].winners_from}" for label in (c.baseline, c.other)
        )
        lines.append(
            f"Winners ({sources}), of {len(g.winners)} scenario x metric cells: "
            + ", ".join(f"{n} {a}" for a, n in counts.items() if n)
            + "."
        )
        lines += [
            f"  different: {w.scenario} {w.metric}: {c.baseline} {w.baseline}; {c.other} {w.other}"
            for w in g.winners
            if w.agree == "different"
        ]
    return lines


WINNER_AGREEMENT = ("same", "different", "not settled in both", "not comparable")
