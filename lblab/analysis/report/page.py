"""The HTML report of a run: ``RESULTS_DIR/report/index.html`` with every chart and table.

Read top-down as a person would: the answer (which strategy wins where) and which
phases not to trust, then the thesis matrices, the other charts (each with a caption
saying how to read it), what ran, and the long tables folded.

The page is one self-contained file: inline CSS, no JS, every chart inlined as a PNG
data URI, so it opens from disk, alone, with no network. Each chart is also written to
``charts/<name>.png`` and ``.svg`` (linked from its caption) for papers and slides.
The experiment runner calls ``build_report(run_dir)`` at the end of every run.
"""

from __future__ import annotations

import base64
import html
import io
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib import rc_context
from matplotlib.figure import Figure

from lblab.analysis.load import open_results
from lblab.analysis.manifest import run_facts
from lblab.analysis.metrics import HEADLINE, SERVER_METRICS, Summary, metric_info
from lblab.analysis.numbers import number
from lblab.analysis.ordering import order_scenarios, order_strategies
from lblab.analysis.report import charts
from lblab.analysis.report.balancers import balancer_split
from lblab.analysis.report.instrument import instrument_section
from lblab.analysis.report.tables import (
    FOOTNOTE,
    MARK,
    replication_counts,
    replications_per_cell,
    summary_table,
)
from lblab.analysis.report.views import open_view
from lblab.analysis.run import (
    build_answer,
    equivalence_of,
    hover,
    label,
    rule_words,
    unresolved_reasons,
    verdict,
)
from lblab.analysis.twin import twin_section
from lblab.analysis.validity import validity_section
from lblab.files import make_folder, write_bytes_atomically
from lblab.manifest import Manifest

log = logging.getLogger(__name__)

HEATMAP_METRICS = (
    "requests",
    "throughput_rps",
    "latency_mean_ms",
    "latency_p95_ms",
    "failure_rate",
)
BAR_METRICS = (
    "throughput_rps",
    "latency_mean_ms",
    "latency_p95_ms",
    "failure_rate",
    "cpu_imbalance",
    "cpu_jain",
)
_DPI = 110

_CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1250px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
.lede { color: #444; margin-top: 0; } nav { font-size: 14px; margin: 0.5em 0 1.5em; }
nav a { margin-right: 1em; }
table { border-collapse: collapse; font-size: 13px; margin: 0.5em 0 1em; }
td, th { border: 1px solid #ddd; padding: 3px 7px; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
table.validity-grid td { text-align: left; } table.winners td { text-align: center; }
figure { margin: 1em 0 2.5em; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 13.5px; color: #444; max-width: 60em; margin-top: 0.3em; }
figcaption b { color: #222; } .verdict { background: #f6f8ee; padding: 0.8em 1em; }
details { margin: 0.6em 0; } summary { cursor: pointer; font-weight: 600; }
.note { color: #a33; } table.facts td { text-align: left; } pre { background: #f6f6f6; padding: 1em; overflow-x: auto; font-size: 12px; }
"""

_SECTIONS = (
    ("answer", "Which algorithm wins where"),
    ("validity", "Can these numbers be trusted?"),
    ("instrument", "What the instrument adds"),
    ("matrices", "The thesis matrices"),
    ("charts", "Charts"),
    ("twin", "Measured vs simulated"),
    ("balancers", "Balancers"),
    ("run", "What ran"),
    ("tables", "Tables"),
    ("manifest", "Manifest"),
)


@dataclass(frozen=True)
class Chart:
    slug: str
    title: str
    caption: str
    figure: Figure
    section: str = "charts"
    """``matrices`` (the thesis matrices) or ``charts`` (everything else)."""


def _direction(metric: str) -> str:
    return f"{metric_info(metric).better} is better"


def charts_for(summary: Summary) -> Iterator[Chart]:
    """Every chart of the report, in page order, each with a caption saying how to read it."""
    for metric in HEATMAP_METRICS:
        label = metric_info(metric).label
        yield Chart(
            f"matrix-{metric}",
            f"Matrix: {label}",
            f"The thesis matrix of {label} ({_direction(metric)}): one panel per strategy, "
            "rows package size, columns work volume; each cell's number is the mean across "
            "replications. The colour ranks the strategies within the same cell (green: best "
            "of the strategies there, red: worst), so compare one cell across the panels, not "
            "cells within a panel. The variation scenario, outside the matrix, is under each panel.",
            charts.matrix_heatmaps(summary.pooled, metric, summary.failed),
            "matrices",
        )
    for metric in BAR_METRICS:
        label = metric_info(metric).label
        yield Chart(
            f"bars-{metric}",
            f"Comparison: {label}",
            f"{label} ({_direction(metric)}), one panel per scenario, one bar per strategy: "
            "the mean across replications; whiskers are each strategy's 95 % t-interval (none "
            "with one replication). Each panel has its own y axis, so compare the bars within "
            "a panel, not heights across panels. The answer compares strategies paired within "
            "blocks, which cancels the drift that widens these whiskers: overlapping whiskers "
            "can still be a resolved difference (the winner table says which).",
            charts.comparison_bars(summary.pooled, metric, summary.failed),
        )
    yield Chart(
        "failure-kinds",
        "Failures by kind",
        "Failed requests / requests sent, one panel per scenario (each on its own y axis), "
        "one bar per strategy, stacked by error kind (timeout, rejected, connection, "
        "application, other); lower is better. A chart saying 'no data' means no request "
        "failed.",
        charts.failure_kinds(summary.pooled, summary.failed),
    )
    yield Chart(
        "server-share",
        "Requests per server",
        "Which server took the work: each strategy's bar splits its requests by server "
        "(mean over scenarios). A strategy that follows capacity gives the fastest server "
        "the largest share; equal thirds mean it ignores capacity.",
        charts.server_share(summary.servers_pooled, summary.failed),
    )
    yield Chart(
        "latency-by-server",
        "Latency by server",
        "Latency of successful requests per server, one panel per strategy, all scenarios "
        "pooled (as thesis figure 5.8): boxes are quartiles, whiskers the 5th and 95th "
        "percentiles, the marker the mean. Lower and more even across servers is better.",
        charts.latency_by_server(summary.boxes, summary.failed),
    )
    yield Chart(
        "latency-percentiles",
        "Latency percentiles",
        "Latency (y) at each percentile (x, spread so the tail is visible: p50, p90, p99, "
        "p99.9), one panel per scenario (each on its own y axis), one line per strategy, "
        "replications pooled. A lower line is better; lines that part on the right differ in "
        "their tail; a dashed line includes a phase that failed a validity check.",
        charts.latency_percentiles(summary.curves, summary.failed),
    )
    for scenario in summary.scenarios or [""]:
        yield Chart(
            f"cpu-{scenario.replace('+', '_') or 'none'}",
            f"CPU over time: {scenario or '(none)'}",
            "Each server's CPU as a percent of its own allowance, 1 s bins, one panel per "
            "strategy and one line per server and replication. Lines close together mean the "
            "strategy loads the servers evenly for their capacity; one line near 100 % while "
            "others idle means it overloads that server. Dashed lines are phases that failed a "
            "validity check.",
            charts.cpu_over_time(summary.cpu, scenario, summary.failed),
        )


def _image(figure: Figure, fmt: str) -> bytes:
    """The figure as PNG or SVG; an SVG keeps its text as text (not paths), so a paper
    can edit it and a search (or a test) finds a legend line in it."""
    buf = io.BytesIO()
    with rc_context({"svg.fonttype": "none"}):
        figure.savefig(buf, format=fmt, dpi=_DPI)
    return buf.getvalue()


def build_report(run_dir: str | Path) -> Path:
    """Write ``<run_dir>/report/index.html`` (and its charts); returns the page's path."""
    view = open_view(run_dir)
    view.cells = build_answer(view.path, view.summary.units)  # winners.json, as of now
    out = view.path / "report"
    chart_dir = make_folder(out / "charts")
    for stale in [*chart_dir.glob("*.png"), *chart_dir.glob("*.svg")]:
        stale.unlink()  # a rebuilt report shows only this build's charts
    shown = []
    for chart in charts_for(view.summary):
        png = _image(chart.figure, "png")
        write_bytes_atomically(chart_dir / f"{chart.slug}.png", png)
        # The PNG's draw placed the axes; the SVG keeps that place instead of solving the
        # constrained layout again (a third of a report's time went to layout).
        chart.figure.set_layout_engine("none")
        write_bytes_atomically(chart_dir / f"{chart.slug}.svg", _image(chart.figure, "svg"))
        shown.append(Shown(chart.slug, chart.title, chart.caption, chart.section, png))
    run_id = view.manifest.run_id
    split = balancer_split(open_results(view.path))
    page = _page(
        run_id, view.manifest, view.summary, view.cells, shown, twin_section(view.path), split
    )
    write_bytes_atomically(out / "index.html", page.encode("utf-8"))
    log.info("report written to %s", out / "index.html")
    return out / "index.html"


@dataclass(frozen=True)
class Shown:
    """A chart as the page shows it: its PNG bytes are inlined, so the page stands alone."""

    slug: str
    title: str
    caption: str
    section: str
    png: bytes


def _figure(chart: Shown) -> str:
    esc = html.escape
    data = base64.b64encode(chart.png).decode("ascii")
    return (
        f'<figure id="{esc(chart.slug)}"><img src="data:image/png;base64,{data}" '
        f'alt="{esc(chart.title)}"><figcaption><b>{esc(chart.title)}.</b> {esc(chart.caption)} '
        f'(<a href="charts/{esc(chart.slug)}.svg">SVG</a>, beside this page)</figcaption></figure>'
    )


def _folded(title: str, frame: pd.DataFrame, name: str) -> str:
    """A table under a title that opens it; with the footnote to ``MARK`` when a row has it."""
    rows = f"{len(frame)} rows" if not frame.empty else "empty"
    marked = any(MARK in str(key) for key in frame.index)
    note = f'<p class="footnote">{html.escape(FOOTNOTE)}</p>' if marked else ""
    return (
        f"<details><summary>{html.escape(title)} ({rows})</summary>"
        f"{_table(frame, name)}{note}</details>"
    )


def _page(
    run_id: str,
    manifest: Manifest,
    summary: Summary,
    cells: list[dict[str, Any]],
    figures: list[Shown],
    twin: str | None = None,
    split: pd.DataFrame | None = None,
) -> str:
    """The page: the answer, its trust, the matrices, the charts, then tables folded.

    ``twin`` is the "measured vs simulated" section when the run has one; ``split`` the
    load of each balancer (``analysis/report/balancers.py``) when the run had several.
    """
    esc = html.escape
    equivalence = equivalence_of(manifest)
    several = split is not None and not split.empty
    shown = {"twin": bool(twin), "balancers": several}
    sections = [(s, t) for s, t in _SECTIONS if shown.get(s, True)]
    nav = " ".join(f'<a href="#{s}">{esc(t)}</a>' for s, t in sections)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>lblab report {esc(run_id)}</title><style>{_CSS}</style></head><body>",
        f"<h1>lblab report: {esc(run_id)}</h1>",
        f'<p class="lede">{esc(_lede(manifest, summary))}</p>',
        f"<nav>{nav}</nav>",
        '<h2 id="answer">Which algorithm wins where</h2>',
        f'<p class="verdict">{esc(verdict(cells))}</p>',
        _winner_table(cells, equivalence),
        "<p>Each cell answers one scenario (row) and metric (column) from the phases that "
        "passed their checks, comparing strategies paired within blocks (each block runs "
        "every strategy once, in a seeded random order; an adaptive run adds blocks only "
        "for the scenarios still open, so a scenario may have more blocks than another). "
        f"{esc(rule_words(equivalence))} The same answer is in winners.json; hover over a "
        "cell for the difference to the runner-up, its intervals and its blocks.</p>",
        _unresolved(cells),
        _left_out(summary.failed),
    ]
    parts += [f'<p class="note">{esc(n)}</p>' for n in summary.notes]
    parts += [
        validity_section(manifest),
        instrument_section(manifest, cells),
        '<h2 id="matrices">The thesis matrices</h2>',
        "<p>The thesis' question, cell by cell: package size x work volume, the strategies "
        "side by side.</p>",
        *(_figure(f) for f in figures if f.section == "matrices"),
        '<h2 id="charts">Charts</h2>',
        *(_figure(f) for f in figures if f.section != "matrices"),
        twin or "",
        _balancers(split) if several else "",
        '<h2 id="run">What ran</h2>',
        _facts(manifest, summary),
        '<h2 id="tables">Tables</h2>',
        "<p>The numbers behind the charts, folded: click a title to open it. Mean across "
        "replications with the 95 % t-interval in brackets (none for a single replication). "
        "Latency is over successful requests; throughput is successful responses per second.</p>",
        _folded(
            "Summary: the headline metrics",
            summary_table(summary.pooled, summary.failed, HEADLINE),
            "summary",
        ),
        _folded(
            "All request metrics",
            summary_table(
                summary.pooled,
                summary.failed,
                [m for m in summary.pooled["metric"].unique() if m not in HEADLINE]
                if not summary.pooled.empty
                else [],
            ),
            "metrics",
        ),
        _folded(
            "Per server",
            summary_table(
                summary.servers_pooled,
                summary.failed,
                list(SERVER_METRICS),
                by=("scenario", "strategy", "server"),
            ),
            "servers",
        ),
        _folded(
            "Replications per strategy and scenario",
            replication_counts(summary.units, summary.failed),
            "replications",
        ),
        '<h2 id="manifest">Manifest</h2>',
        "<details><summary>manifest.json as read (lblab/manifest.py)</summary>",
        f"<pre>{esc(json.dumps(manifest.to_json(), indent=2, sort_keys=True, default=str))}"
        "</pre></details>",
        "</body></html>",
    ]
    return "\n".join(parts)


def _balancers(split: pd.DataFrame) -> str:
    count = split.index.get_level_values("balancer").nunique()
    return "\n".join(
        [
            '<h2 id="balancers">Balancers</h2>',
            f"<p>The load went through {count} independent balancers, each with its own "
            "pool, strategy state and reports, each seeing only its own requests. Per "
            "scenario, strategy and balancer: the requests it carried (and their share of "
            "the cell), how they fared, and the share of them each server got. Balancers "
            "that see alike send alike; different columns for the same strategy show "
            "herding or stale information.</p>",
            _table(split, "balancers"),
        ]
    )


def _lede(manifest: Manifest, summary: Summary) -> str:
    """One line under the title: what kind of run, how large, when."""
    facts = run_facts(manifest)
    bits = [
        facts.get("kind", ""),
        f"preset {facts['preset']}" if "preset" in facts else "",
        f"{len(summary.strategies)} strategies x {len(summary.scenarios)} scenarios",
        replications_per_cell(summary.units),
        facts.get("load", ""),
        f"started {facts['started']}" if "started" in facts else "",
    ]
    return ", ".join(b for b in bits if b) + "."


def _facts(manifest: Manifest, summary: Summary) -> str:
    """What ran, on what, and how CPU was limited, plus what the analysis saw."""
    facts = run_facts(manifest)
    facts["strategies"] = ", ".join(summary.strategies) or "none"
    facts["scenarios"] = ", ".join(summary.scenarios) or "none"
    facts["replications"] = replications_per_cell(summary.units)
    requests = int(summary.units["requests"].sum()) if not summary.units.empty else 0
    facts["requests analysed (warm-up excluded)"] = str(requests)
    rows = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in facts.items()
    )
    return f'<table class="facts">{rows}</table>'


def _unresolved(cells: list[dict[str, Any]]) -> str:
    reasons = unresolved_reasons(cells)
    if not reasons:
        return ""
    items = "".join(f"<li>{html.escape(r)}</li>" for r in reasons)
    return f"<details><summary>Why {len(reasons)} cells are unresolved</summary><ul>{items}</ul></details>"


def _winner_table(cells: list[dict[str, Any]], equivalence: float) -> str:
    """The answer as a scenario x metric table, each cell its label on the colour of its
    verdict (``charts.VERDICT_COLOURS``, as the notebooks' winner chart) with, on hover,
    the difference to the runner-up and its intervals (``winners.hover``)."""
    esc = html.escape
    if not cells:
        return '<p class="winners">no data</p>'
    metrics = list(dict.fromkeys(c["metric"] for c in cells))
    found = {(c["scenario"], c["metric"]): c for c in cells}
    labels = [metric_info(m).label for m in metrics]
    head = "".join(f"<th>{esc(h)}</th>" for h in ["scenario", *labels])
    rows = []
    for scenario in dict.fromkeys(c["scenario"] for c in cells):
        tds = []
        for metric in metrics:
            cell = found.get((scenario, metric))
            if cell is None:
                tds.append("<td>-</td>")
                continue
            colour = charts.VERDICT_COLOURS.get(cell["verdict"], "#fff")
            tds.append(
                f'<td class="{esc(cell["verdict"])}" style="background:{colour}" '
                f'title="{esc(hover(cell, equivalence))}">{esc(label(cell))}</td>'
            )
        rows.append(f"<tr><th>{esc(scenario)}</th>{''.join(tds)}</tr>")
    return f'<table class="winners"><tr>{head}</tr>{"".join(rows)}</table>'


def _left_out(failed: pd.DataFrame) -> str:
    """What the answer left out, and how the charts and tables below mark it: a marked
    bar may stand taller than the winner's, and the reader must know why."""
    if failed.empty:
        return (
            "<p>No phase failed a validity check: the charts and tables below show the "
            "phases the answer used.</p>"
        )
    reps = failed.groupby(["scenario", "strategy"])["replication"].apply(sorted).to_dict()
    named = [
        f"{c} {s} (rep{'s' if len(reps[(c, s)]) > 1 else ''} {', '.join(map(str, reps[(c, s)]))})"
        for c in order_scenarios(failed["scenario"])
        for s in order_strategies(failed["strategy"])
        if (c, s) in reps
    ]
    n = len(failed)
    return (
        f'<p class="note">The answer leaves out {n} phase{"s" if n != 1 else ""} that failed a '
        f"validity check: {html.escape('; '.join(named))}. The charts and tables below still "
        f"include them, marked: hatched and faded bars, boxes and cells, dashed lines, and "
        f"{MARK} in the tables. A marked bar can stand taller than the winner's: its height "
        "includes a phase the answer rejected.</p>"
    )


def _table(frame: pd.DataFrame, name: str) -> str:
    if frame.empty:
        return f'<p class="{name}">no data</p>'
    return frame.to_html(classes=name, border=0, na_rep="-", float_format=number)
