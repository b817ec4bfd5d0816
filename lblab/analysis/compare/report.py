"""The HTML page of ``lblab compare``: one self-contained file (inline CSS, no scripts).

The answer comes first (how many differences are significant, in which direction, how
many are not comparable, and each significant one in words with both runs' checks),
then whether the runs agree, then what changed between them, then every difference per
strategy x scenario beside both runs' checks of its phases. ``analysis/compare/runs.py``
computes everything and ``analysis/compare/words.py`` words it; this module only lays it
out.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from lblab.analysis.compare.conditions import Checks
from lblab.analysis.compare.runs import Change, Comparison, Report, RunSide
from lblab.analysis.compare.words import (
    COMPARE_JSON,
    agreement_lines,
    fmt_interval,
    fmt_p,
    fmt_relative,
    fmt_value,
    headline,
    sentence,
    to_json,
    verdict_text,
    what_changed,
)
from lblab.errors import ConfigError

CONFIG_ROWS = 80
"""Config keys shown per comparison; the rest are counted (a live run against a
simulated one differs in nearly every key)."""

_CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1250px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; } h3 { margin-top: 1.5em; }
table { border-collapse: collapse; font-size: 13px; margin: 0.5em 0 1em; }
td, th { border: 1px solid #ddd; padding: 3px 7px; text-align: right; vertical-align: top; }
th { background: #f3f3f3; } td.text, th.text { text-align: left; }
tr.better td { background: #e3f4e1; } tr.worse td { background: #fbe3e3; }
tr.changed td { background: #fff6d8; } .answer { background: #f6f8ee; padding: 0.8em 1em; }
tr.not-comparable td { color: #777; } td.fail { background: #f8d7da; } td.warn { background: #fff3cd; }
td.pass { background: #e8f4e8; } tr.reversed td, td.different { background: #fbe3e3; }
.how { color: #444; font-size: 14px; } code { background: #f3f3f3; padding: 0 3px; }
"""


def _esc(value: Any) -> str:
    return html.escape(str(value))


def _runs_table(runs: list[RunSide]) -> str:
    rows = "".join(
        f"<tr><td class=text>{_esc(r.label)}{' (baseline)' if i == 0 else ''}</td>"
        f"<td class=text>{_esc(r.run_id)}</td>"
        f"<td class=text>{'simulated' if r.simulated else 'live'}</td>"
        f"<td class=text>{_esc(r.path)}</td><td class=text>{_esc(r.winners_from)}</td></tr>"
        for i, r in enumerate(runs)
    )
    return (
        "<table><tr><th class=text>run</th><th class=text>run id</th><th class=text>kind</th>"
        f"<th class=text>folder</th><th class=text>winners</th></tr>{rows}</table>"
    )


def _how_to_read(level: float) -> str:
    return (
        "<p class=how>Each row is one metric of one strategy x scenario: the baseline's and "
        "the other run's mean over their replications, the change (other minus baseline, "
        f"relative to the baseline), and the {level * 100:.0f} % interval of that difference by "
        "Welch's t-test on the replication values (unequal variances). A difference is "
        "<b>significant</b> when its interval excludes 0; it is then <b>better</b> (green) "
        "or <b>worse</b> (red) by the metric's direction (throughput higher is better; "
        "latency, failure rate and CPU imbalance lower is better). With one replication "
        "in either run there is no spread to estimate: the row says <i>no interval</i> and "
        "claims nothing. A strategy x scenario whose conditions differ between the runs "
        "(offered load: load model, users or offered rate, think time, request shapes, "
        "phase length, warm-up; capacity: the servers' CPU quotas as they ran, workers, "
        "CPUs, host, fault timeline; the strategy's options and the server weights) is "
        "<b>not comparable</b>: whatever its interval, its difference is the testbed's "
        "change, and the row says which condition differs. Beside every row stand both "
        "runs' validity checks of the cell's phases (pass, warn or fail, with the checks "
        "that did); a difference that rests on a failed phase may be the fault's. Many rows "
        "are tested at once: at 95 %, about 1 in 20 rows with no real change is flagged by "
        "chance, so a lone significant row deserves a re-run before a conclusion.</p>"
    )


def _changes_table(changes: list[Change], c: Comparison, limit: int | None = None) -> str:
    shown = changes if limit is None else changes[:limit]
    rows = "".join(
        f"<tr class=changed><td class=text>{_esc(ch.key)}</td>"
        f"<td class=text>{_esc(ch.baseline if ch.baseline is not None else '(not given)')}</td>"
        f"<td class=text>{_esc(ch.other if ch.other is not None else '(not given)')}</td></tr>"
        for ch in shown
    )
    more = (
        f"<p>... and {len(changes) - len(shown)} more keys (all in compare.json).</p>"
        if len(changes) > len(shown)
        else ""
    )
    return (
        f"<table><tr><th class=text></th><th class=text>{_esc(c.baseline)}</th>"
        f"<th class=text>{_esc(c.other)}</th></tr>{rows}</table>{more}"
    )


def _what_changed(c: Comparison, runs: dict[str, RunSide]) -> str:
    base, other = runs[c.baseline], runs[c.other]
    same = [k for k in base.facts if k != "run" and base.facts[k] == other.facts.get(k)]
    parts = ["<h3>What changed</h3>", f"<p>{_esc(what_changed(c))}</p>"]
    if c.facts or c.conditions:
        parts.append(_changes_table([*c.facts, *c.conditions], c))
    if same:
        parts.append(f"<p>Facts both runs give alike: {_esc(', '.join(same))}.</p>")
    if c.config:
        parts.append(f"<p>Config keys that differ ({len(c.config)}):</p>")
        parts.append(_changes_table(c.config, c, CONFIG_ROWS))
    return "".join(parts)


def _checks_cell(checks: Checks) -> str:
    return f"<td class='text {_esc(checks.level)}'>{_esc(checks.text())}</td>"


def _differences_table(c: Comparison) -> str:
    head = (
        "<tr><th class=text>strategy</th><th class=text>scenario</th><th class=text>metric</th>"
        f"<th>{_esc(c.baseline)}</th><th>{_esc(c.other)}</th><th>change</th>"
        "<th>difference</th><th>95 % interval</th><th>p</th><th class=text>verdict</th>"
        f"<th class=text>checks in {_esc(c.baseline)}</th>"
        f"<th class=text>checks in {_esc(c.other)}</th></tr>"
    )
    classes = {"better": "better", "worse": "worse", "not comparable": "not-comparable"}
    rows = []
    for d in c.differences:
        cls = f" class={classes[d.verdict]}" if d.verdict in classes else ""
        rows.append(
            f"<tr{cls}><td class=text>{_esc(d.strategy)}</td><td class=text>{_esc(d.scenario)}</td>"
            f"<td class=text>{_esc(d.label)}</td>"
            f"<td>{_esc(fmt_value(d.metric, d.baseline))} (n={d.baseline_n})</td>"
            f"<td>{_esc(fmt_value(d.metric, d.other))} (n={d.other_n})</td>"
            f"<td>{_esc(fmt_relative(d))}</td><td>{_esc(fmt_value(d.metric, d.diff, True))}</td>"
            f"<td>{_esc(fmt_interval(d))}</td><td>{_esc(fmt_p(d.p))}</td>"
            f"<td class=text>{_esc(verdict_text(d))}</td>"
            f"{_checks_cell(d.baseline_checks)}{_checks_cell(d.other_checks)}</tr>"
        )
    return f"<table>{head}{''.join(rows)}</table>"


def _agreement(c: Comparison, runs: dict[str, RunSide]) -> str:
    """The agreement in words (the terminal's sentences), then its tables."""
    g = c.agreement
    parts = [
        f"<h3>Do {_esc(c.baseline)} and {_esc(c.other)} agree?</h3>",
        "<ul>" + "".join(f"<li>{_esc(line.strip())}</li>" for line in agreement_lines(c, runs)),
        "</ul>",
    ]
    if g.rankings:
        rows = "".join(
            f"<tr><td class=text>{_esc(r.scenario)}</td>"
            f"<td class=text>{_esc(' > '.join(r.baseline))}</td>"
            f"<td class=text>{_esc(' > '.join(r.other))}</td>"
            f"<td>{'undefined' if r.tau is None else f'{r.tau:+.2f}'}</td></tr>"
            for r in g.rankings
        )
        parts.append(
            "<table><tr><th class=text>scenario</th>"
            f"<th class=text>{_esc(c.baseline)}: by throughput</th>"
            f"<th class=text>{_esc(c.other)}: by throughput</th><th>Kendall tau-b</th></tr>"
            f"{rows}</table>"
        )
    if g.resolved_by_both:
        rows = "".join(
            f"<tr{' class=reversed' if p.reversed else ''}><td class=text>{_esc(p.scenario)}</td>"
            f"<td class=text>{_esc(p.metric)}</td><td class=text>{_esc(p.baseline)}</td>"
            f"<td class=text>{_esc(p.other)}</td>"
            f"<td class=text>{'reversed' if p.reversed else 'same direction'}</td></tr>"
            for p in g.resolved_by_both
        )
        parts.append(
            "<p>Strategy pairs both runs resolve (reversed ones first):</p><table><tr>"
            "<th class=text>scenario</th><th class=text>metric</th>"
            f"<th class=text>{_esc(c.baseline)}</th><th class=text>{_esc(c.other)}</th>"
            f"<th class=text></th></tr>{rows}</table>"
        )
    if g.winners:
        rows = "".join(
            f"<tr><td class=text>{_esc(w.scenario)}</td><td class=text>{_esc(w.metric)}</td>"
            f"<td class=text>{_esc(w.baseline)}</td><td class=text>{_esc(w.other)}</td>"
            f"<td class='text {'different' if w.agree == 'different' else ''}'>"
            f"{_esc(w.agree)}</td></tr>"
            for w in g.winners
        )
        parts.append(
            "<p>Winners, as each run's winners.json gives them (computed alike where a run "
            "has none):</p><table><tr>"
            "<th class=text>scenario</th><th class=text>metric</th>"
            f"<th class=text>{_esc(c.baseline)}</th><th class=text>{_esc(c.other)}</th>"
            f"<th class=text></th></tr>{rows}</table>"
        )
    return "".join(parts)


def _comparison(c: Comparison, runs: dict[str, RunSide]) -> str:
    significant = [d for d in c.differences if d.verdict in ("better", "worse")]
    items = "".join(f"<li>{_esc(sentence(d, c))}</li>" for d in significant)
    answer = (
        f"<div class=answer><p><b>{_esc(headline(c))}.</b></p>"
        + (f"<ul>{items}</ul>" if items else "")
        + "</div>"
    )
    unshared = "".join(
        f"<p>Only in {_esc(run)} (not compared): {_esc(', '.join(cells))}.</p>"
        for cells, run in ((c.only_baseline, c.baseline), (c.only_other, c.other))
        if cells
    )
    return (
        f"<h2>{_esc(c.other)} vs {_esc(c.baseline)}</h2>{answer}{_agreement(c, runs)}"
        f"{_what_changed(c, runs)}<h3>Differences per strategy x scenario</h3>"
        f"{_differences_table(c)}{unshared}"
    )


def render_html(report: Report) -> str:
    """The whole page."""
    runs = {r.label: r for r in report.runs}
    title = " vs ".join(r.label for r in report.runs)
    return "".join(
        [
            "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
            f"<title>lblab compare: {_esc(title)}</title><style>{_CSS}</style></head><body>",
            f"<h1>lblab compare: {_esc(title)}</h1>",
            _runs_table(report.runs),
            _how_to_read(report.level),
            *(_comparison(c, runs) for c in report.comparisons),
            "</body></html>\n",
        ]
    )


def write_report(report: Report, out: Path) -> Path:
    """Write ``out/compare.json`` and ``out/index.html``; returns the page."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; pass a folder (it is created if missing)")
    out.mkdir(parents=True, exist_ok=True)
    (out / COMPARE_JSON).write_text(json.dumps(to_json(report), indent=2) + "\n")
    page = out / "index.html"
    page.write_text(render_html(report))
    return page
