"""The scorecard as a page: ``scorecard.html`` beside ``scorecard.json``, and the markdown
of ``docs/results/scorecard.md``.

One table: a row per strategy, a column per case; each cell the strategy's rank within
the case on the case's headline metric and its figure (the mean over blocks), live and
simulated side by side where both ran. Under it each case's verdict (``w`` a winner,
``=`` a tie of the group named, ``?`` unresolved: the best by mean named), then where
each strategy is best and worst, and what each case is.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from lblab.analysis.metrics import metric_info
from lblab.analysis.numbers import number
from lblab.analysis.scorecard.figures import FIGURES
from lblab.files import write_bytes_atomically
from lblab.pages import table

PAGE_FILE = "scorecard.html"
MARK = {"winner": "", "tie": "=", "unresolved": "?"}
SHORT = {"simulated": "sim", "local": "live"}


FIGURE_OF = {metric: figure for figure, metric in FIGURES.items()}
"""A unit metric -> the cell's figure that pools it (``success_rate``, ``p99_ms``, ...)."""


def _headline_figure(cell: Mapping[str, Any], headline: str) -> Any:
    name = FIGURE_OF.get(headline)
    return (cell.get(name) or {}).get("mean") if name is not None else None


def _index(card: Mapping[str, Any]) -> dict[tuple[str, str, str], Mapping[str, Any]]:
    return {(c["scenario"], c["strategy"], c["testbed"]): c for c in card.get("cells", [])}


def _ranked(
    cells: Mapping[tuple[str, str, str], Mapping[str, Any]],
    about: Mapping[str, Any],
    strategy: str,
    testbed: str,
) -> tuple[Any, str] | None:
    """A strategy's rank in a case and its headline figure, formatted (None: no cell)."""
    c = cells.get((about["scenario"], strategy, testbed))
    if c is None:
        return None
    return c.get("rank"), _formatted(_headline_figure(c, about["headline"]), about["headline"])


def _formatted(value: Any, headline: str) -> str:
    if not isinstance(value, int | float):
        return "-"
    return number(value, metric_info(headline).fmt)


def policy_words(card: Mapping[str, Any]) -> str:
    """The pool policy every case ran with, in words ("" for the defaults)."""
    health = card.get("health") or {}
    if not health:
        return ""
    given = ", ".join(f"{name} = {value}" for name, value in health.items())
    return f"Every case's balancers ran with [health] {given} (lblab scorecard --health)."


def row_label(card: Mapping[str, Any], strategy: str) -> str:
    """A strategy as the card's rows name it: with the options of its own it was given
    (``peak-ewma[failure_penalty_ms=5000]``), which its runs' tables do not say."""
    options = (card.get("options") or {}).get(strategy)
    if not options:
        return strategy
    return f"{strategy}[{','.join(f'{k}={v}' for k, v in options.items())}]"


def verdict_label(winner: Mapping[str, Any], card: Mapping[str, Any]) -> str:
    names = [row_label(card, n) for n in winner.get("strategies") or []]
    return MARK.get(str(winner.get("verdict")), "?") + "/".join(names) if names else "-"


def best_and_worst(card: Mapping[str, Any]) -> dict[str, tuple[list[str], list[str]]]:
    """Strategy -> (cases where it ranks first, cases where it ranks last), over the
    card's testbeds (a case is named with its testbed where the card has several)."""
    testbeds = card.get("testbeds") or []
    out: dict[str, tuple[list[str], list[str]]] = {s: ([], []) for s in card.get("strategies", [])}
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for cell in card.get("cells", []):
        groups.setdefault((cell["scenario"], cell["testbed"]), []).append(cell)
    for (scenario, testbed), cells in groups.items():
        ranks = [c["rank"] for c in cells if isinstance(c.get("rank"), int)]
        if len(ranks) < 2:
            continue
        label = scenario if len(testbeds) < 2 else f"{scenario} ({SHORT.get(testbed, testbed)})"
        for c in cells:
            if c["strategy"] not in out:
                continue
            if c.get("rank") == 1:
                out[c["strategy"]][0].append(label)
            elif c.get("rank") == max(ranks):
                out[c["strategy"]][1].append(label)
    return out


def _winner_of(card: Mapping[str, Any], scenario: str, testbed: str) -> Mapping[str, Any] | None:
    return next(
        (
            w
            for w in card.get("winners", [])
            if w["scenario"] == scenario and w["testbed"] == testbed
        ),
        None,
    )


def agreement(card: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    """(case, simulated verdict, live verdict, agree/differ) for the cases run on both."""
    rows = []
    for about in card.get("scenarios", []):
        name = about["scenario"]
        sim, live = _winner_of(card, name, "simulated"), _winner_of(card, name, "local")
        if sim is None or live is None:
            continue
        same = set(sim.get("strategies") or []) & set(live.get("strategies") or [])
        rows.append(
            (
                name,
                verdict_label(sim, card),
                verdict_label(live, card),
                "agree" if same else "differ",
            )
        )
    return rows


# ------------------------------------------------------------------ HTML

STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.5em; text-align: right; vertical-align: top; }
th { background: #f4f4f4; } td.name, th.name { text-align: left; }
.sub { color: #666; font-size: 0.8em; display: block; }
.verdict td { font-weight: bold; background: #fafafa; }
"""


def _shade(rank: Any, count: int) -> str:
    """Green for the best rank to red for the worst."""
    if not isinstance(rank, int) or count < 2:
        return ""
    x = (rank - 1) / (count - 1)
    r, g = int(120 + 120 * x), int(220 - 110 * x)
    return f' style="background: rgb({r}, {g}, 130)"'


def page(card: Mapping[str, Any]) -> str:
    """``scorecard.html``'s text."""
    esc = html.escape
    scenarios = card.get("scenarios", [])
    testbeds = card.get("testbeds") or []
    strategies = card.get("strategies", [])
    cells = _index(card)
    counts = {
        (s["scenario"], t): sum(
            1 for c in card.get("cells", [])
            if c["scenario"] == s["scenario"] and c["testbed"] == t and isinstance(c.get("rank"), int)
        )
        for s in scenarios
        for t in testbeds
    }  # fmt: skip
    head = "".join(
        f'<th colspan="{len(testbeds)}">{esc(s["title"])}<span class="sub">{esc(s["scenario"])}: '
        f"{esc(metric_info(s['headline']).label)}</span></th>"
        for s in scenarios
    )
    sub = "".join(f"<th>{esc(SHORT.get(t, t))}</th>" for _ in scenarios for t in testbeds)
    rows = []
    for strategy in strategies:
        tds = []
        for s in scenarios:
            for t in testbeds:
                shown = _ranked(cells, s, strategy, t)
                if shown is None:
                    tds.append("<td>-</td>")
                    continue
                rank, figure = shown
                tds.append(
                    f"<td{_shade(rank, counts[(s['scenario'], t)])}>"
                    f"{'#' + str(rank) if rank else ''} {esc(figure)}</td>"
                )
        rows.append(
            f'<tr><td class="name">{esc(row_label(card, strategy))}</td>{"".join(tds)}</tr>'
        )
    verdicts = "".join(
        f"<td>{esc(verdict_label(w, card) if (w := _winner_of(card, s['scenario'], t)) else '-')}</td>"
        for s in scenarios
        for t in testbeds
    )
    rows.append(f'<tr class="verdict"><td class="name">verdict</td>{verdicts}</tr>')
    extremes = best_and_worst(card)
    extreme_rows = "".join(
        f'<tr><td class="name">{esc(row_label(card, s))}</td><td class="name">{esc(", ".join(best) or "-")}</td>'
        f'<td class="name">{esc(", ".join(worst) or "-")}</td></tr>'
        for s, (best, worst) in extremes.items()
    )
    about_rows = "".join(
        f'<tr><td class="name">{esc(s["scenario"])}</td><td class="name">{esc(s["title"])}</td>'
        f'<td class="name">{esc(s["tests"])}</td><td class="name">{esc(s["source"])}</td>'
        f'<td class="name">{esc(metric_info(s["headline"]).label)}</td></tr>'
        for s in scenarios
    )
    agree = agreement(card)
    agree_html = ""
    if agree:
        agree_html = "<h2>Live and simulated</h2><table><tr><th class=name>case</th><th>simulated</th><th>live</th><th>winners</th></tr>" + "".join(
            f'<tr><td class="name">{esc(a)}</td><td>{esc(b)}</td><td>{esc(c)}</td><td>{esc(d)}</td></tr>'
            for a, b, c, d in agree
        ) + "</table>"  # fmt: skip
    state = "complete" if card.get("complete") else "partial (still running, or stopped)"
    return f"""<!doctype html>
<html><head><meta charset="utf-8"><title>lblab scorecard</title><style>{STYLE}</style></head>
<body>
<h1>Scorecard</h1>
<p>{esc(state)}: {len(scenarios)} cases x {len(strategies)} strategies on
{esc(", ".join(testbeds))}, seed {esc(str(card.get("seed")))}, {esc(str(card.get("seconds")))} s.
Each cell: the strategy's rank within the case on the case's headline metric, and its
mean over the blocks; the verdict row says who is resolved best (paired within blocks),
<b>=</b> a tie of the group named, <b>?</b> not resolved yet (the best by mean named).
The figures with their intervals are in scorecard.json; each case's run folder has its
own tables and report. {esc(policy_words(card))}</p>
<table><tr><th class="name" rowspan="2">strategy</th>{head}</tr><tr>{sub}</tr>
{"".join(rows)}</table>
<h2>Where each strategy is best and worst</h2>
<table><tr><th class="name">strategy</th><th class="name">best in</th><th class="name">worst in</th></tr>
{extreme_rows}</table>
{agree_html}
<h2>The cases</h2>
<table><tr><th class="name">case</th><th class="name">what</th><th class="name">tests</th>
<th class="name">source</th><th class="name">judged on</th></tr>{about_rows}</table>
</body></html>
"""


def write_page(out: Path, card: Mapping[str, Any]) -> Path:
    path = out / PAGE_FILE
    write_bytes_atomically(path, page(card).encode())
    return path


# ------------------------------------------------------------------ markdown


def overview_rows(
    card: Mapping[str, Any], testbed: str = "simulated"
) -> tuple[list[str], list[list[Any]]]:
    """Strategies x cases on one testbed: each cell the rank and headline figure, and a
    last row of verdicts (the columns, the rows)."""
    scenarios = _ran(card, testbed)
    cells = _index(card)
    columns = ["strategy", *(s["scenario"] for s in scenarios)]
    rows: list[list[Any]] = []
    for strategy in card.get("strategies", []):
        row: list[Any] = [row_label(card, strategy)]
        for s in scenarios:
            shown = _ranked(cells, s, strategy, testbed)
            if shown is None:
                row.append("-")
                continue
            rank, figure = shown
            row.append(f"#{rank} {figure}" if rank else figure)
        rows.append(row)
    rows.append(
        ["**verdict**", *(
            verdict_label(w, card) if (w := _winner_of(card, s["scenario"], testbed)) else "-"
            for s in scenarios
        )]
    )  # fmt: skip
    return columns, rows


def overview(card: Mapping[str, Any], testbed: str = "simulated") -> list[str]:
    """The lines of the scorecard's tables for one testbed: ``overview_rows``, what each
    case is judged on, where each strategy is best and worst."""
    scenarios = _ran(card, testbed)
    lines = table(*overview_rows(card, testbed))
    lines += ["", "Judged on:", ""]
    lines += [f"- `{s['scenario']}`: {metric_info(s['headline']).label}" for s in scenarios]
    mine = [c for c in card.get("cells", []) if c["testbed"] == testbed]
    extremes = best_and_worst({**card, "testbeds": [testbed], "cells": mine})
    lines += ["", *table(
        ["strategy", "best in", "worst in"],
        [
            (row_label(card, s), ", ".join(b) or "-", ", ".join(w) or "-")
            for s, (b, w) in extremes.items()
        ],
    )]  # fmt: skip
    return lines


def _ran(card: Mapping[str, Any], testbed: str) -> list[Mapping[str, Any]]:
    """The card's cases that ran on ``testbed``, in its order."""
    ran = {c["scenario"] for c in card.get("cells", []) if c["testbed"] == testbed}
    return [s for s in card.get("scenarios", []) if s["scenario"] in ran]


SECTION_COLUMNS = (
    "rank", "strategy", "headline [95 %]", "success", "p50 ms", "p99 ms", "p99.9 ms",
    "ok/s", "recovery s", "deviation", "blocks",
)  # fmt: skip


def case_section(card: Mapping[str, Any], scenario: str, testbed: str) -> list[str]:
    """One case's figures on one testbed, a row per strategy in rank order: the lines a
    committed scorecard is diffed on (``tests/e2e/test_scorecard.py``)."""
    about = next(s for s in card.get("scenarios", []) if s["scenario"] == scenario)
    headline = about["headline"]
    mine = [
        c for c in card.get("cells", []) if c["scenario"] == scenario and c["testbed"] == testbed
    ]
    mine.sort(key=lambda c: (c.get("rank") is None, c.get("rank") or 0, c["strategy"]))
    name = FIGURE_OF.get(headline)

    def fig(c: Mapping[str, Any], key: str, metric: str) -> str:
        return _formatted((c.get(key) or {}).get("mean"), metric)

    rows = []
    for c in mine:
        h = c.get(name) or {} if name else {}
        lo, hi = h.get("lo"), h.get("hi")
        band = (
            f" [{_formatted(lo, headline)}, {_formatted(hi, headline)}]"
            if isinstance(lo, int | float) and isinstance(hi, int | float)
            else ""
        )
        rows.append(
            (
                c.get("rank") or "-", row_label(card, c["strategy"]),
                _formatted(h.get("mean"), headline) + band,
                fig(c, "success_rate", "success_rate"), fig(c, "p50_ms", "latency_p50_ms"),
                fig(c, "p99_ms", "latency_p99_ms"), fig(c, "p999_ms", "latency_p999_ms"),
                fig(c, "throughput", "throughput_rps"), fig(c, "recovery_s", "recovery_s"),
                fig(c, "load_deviation", "load_deviation"), c.get("blocks"),
            )
        )  # fmt: skip
    w = _winner_of(card, scenario, testbed)
    lines = [
        f"### {scenario} ({SHORT.get(testbed, testbed)}): {about['title']}",
        "",
        f"{about['tests'][0].upper()}{about['tests'][1:]}. Source: {about['source']}. "
        f"Judged on {metric_info(headline).label}: "
        f"**{verdict_label(w, card) if w else '-'}**" + (f" ({w['verdict']})" if w else "") + ".",
        "",
        *table(SECTION_COLUMNS, rows),
    ]
    return lines


def markdown_page(card: Mapping[str, Any], opening: str) -> str:
    """``docs/results/scorecard.md``: ``opening`` (the stamp), then for each testbed the
    overview and every case's section."""
    policy = policy_words(card)
    if policy:
        out = [
            "# Scorecard of a pool policy",
            "",
            "The library's cases and strategies as on [the scorecard](scorecard.md), every "
            "case's balancers with one pool policy ([A pool policy's card]"
            "(../guides/scorecard.md#a-pool-policys-card)). Written by `scripts/results-pages "
            "scorecard-policy` from the command below: do not edit; rerun it.",
            "",
            opening,
            "",
            policy,
            "",
        ]
    else:
        out = [
            "# Scorecard",
            "",
            "What it runs and how to read it: [The scorecard of hard cases]"
            "(../guides/scorecard.md). Written by `scripts/results-pages scorecard` from the "
            "command below: do not edit; rerun it. Each case's section is what "
            "`tests/e2e/test_scorecard.py` diffs.",
            "",
            opening,
            "",
        ]
    for testbed in card.get("testbeds") or []:
        out += [f"## Every strategy x every case ({SHORT.get(testbed, testbed)})", ""]
        out += overview(card, testbed)
        out += ["", f"## Each case ({SHORT.get(testbed, testbed)})", ""]
        for s in _ran(card, testbed):
            out += [*case_section(card, s["scenario"], testbed), ""]
    agree = agreement(card)
    if agree:
        out += ["## Live and simulated", ""]
        out += table(["case", "simulated", "live", "winners"], agree)
    return "\n".join(out).rstrip() + "\n"
