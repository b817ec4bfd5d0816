"""The HTML report of a run: ``RESULTS_DIR/report/index.html`` with every chart and table.

The page is self-contained: no external CSS or JS, images referenced by relative path
(``charts/<name>.png``, each with its ``.svg`` linked), so the folder opens from disk,
can be copied or zipped, and a browser needs no server. The experiment runner calls
``build_report(run_dir)`` at the end of every run.
"""

from __future__ import annotations

import html
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from analysis import charts
from analysis.manifest import run_facts
from analysis.metrics import HEADLINE, SERVER_METRICS, Summary, metric_info
from analysis.tables import replication_counts, summary_table
from analysis.twin_report import twin_section
from analysis.validity import validity_section
from analysis.views import open_view
from analysis.winners import verdict

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
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 13px; margin: 0.5em 0 1em; }
td, th { border: 1px solid #ddd; padding: 3px 7px; text-align: right; }
th { background: #f3f3f3; } td:first-child, th:first-child { text-align: left; }
figure { margin: 1em 0 2em; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 13px; color: #555; } .verdict { background: #f6f8ee; padding: 0.8em 1em; }
.note { color: #a33; } table.facts td { text-align: left; } pre { background: #f6f6f6; padding: 1em; overflow-x: auto; font-size: 12px; }
"""


@dataclass(frozen=True)
class Chart:
    slug: str
    title: str
    caption: str
    figure: Figure


def charts_for(summary: Summary, win: pd.DataFrame) -> Iterator[Chart]:
    """Every chart of the report, in page order (also what the overview notebook shows)."""
    yield Chart(
        "winners", "Winners", "Best strategy per scenario and metric.", charts.winner_table(win)
    )
    for metric in HEATMAP_METRICS:
        yield Chart(
            f"matrix-{metric}",
            f"Matrix: {metric}",
            "Package size (rows) x work volume (columns), one panel per strategy, as in the thesis.",
            charts.matrix_heatmaps(summary.pooled, metric),
        )
    for metric in BAR_METRICS:
        yield Chart(
            f"bars-{metric}",
            f"Comparison: {metric}",
            "Mean across replications; whiskers are 95 % t-intervals.",
            charts.comparison_bars(summary.pooled, metric),
        )
    yield Chart(
        "failure-kinds",
        "Failures by kind",
        "Failed / sent, stacked by error_kind.",
        charts.failure_kinds(summary.pooled),
    )
    yield Chart(
        "server-share",
        "Requests per server",
        "Which server took the work.",
        charts.server_share(summary.servers_pooled),
    )
    yield Chart(
        "latency-by-server",
        "Latency by server",
        "All scenarios pooled, as thesis figure 5.8.",
        charts.latency_by_server(summary.boxes),
    )
    yield Chart(
        "latency-percentiles",
        "Latency percentiles",
        "Tail latency per scenario.",
        charts.latency_percentiles(summary.curves),
    )
    for scenario in summary.scenarios or [""]:
        yield Chart(
            f"cpu-{scenario.replace('+', '_') or 'none'}",
            f"CPU over time: {scenario or '(none)'}",
            "Percent of each server's own CPU allowance, 1 s bins; one line per replication.",
            charts.cpu_over_time(summary.cpu, scenario),
        )


def build_report(run_dir: str | Path) -> Path:
    """Write ``<run_dir>/report/index.html`` (and its charts); returns the page's path."""
    view = open_view(run_dir)
    out = view.path / "report"
    chart_dir = out / "charts"
    chart_dir.mkdir(parents=True, exist_ok=True)
    for stale in [*chart_dir.glob("*.png"), *chart_dir.glob("*.svg")]:
        stale.unlink()  # a rebuilt report shows only this build's charts
    shown = []
    for chart in charts_for(view.summary, view.winners):
        chart.figure.savefig(chart_dir / f"{chart.slug}.png", dpi=_DPI)
        chart.figure.savefig(chart_dir / f"{chart.slug}.svg")
        shown.append((chart.slug, chart.title, chart.caption))  # the figure can go now
    run_id = str(view.manifest.get("run_id") or view.path.name)
    page = _page(run_id, view.manifest, view.summary, view.winners, shown, twin_section(view.path))
    tmp = out / ".index.html.tmp"
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(out / "index.html")
    log.info("report written to %s", out / "index.html")
    return out / "index.html"


def _page(
    run_id: str,
    manifest: dict[str, Any],
    summary: Summary,
    win: pd.DataFrame,
    figures: list[tuple[str, str, str]],
    twin: str | None = None,
) -> str:
    """The page; ``twin`` is the "measured vs simulated" section when the run has one."""
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>lblab report {esc(run_id)}</title><style>{_CSS}</style></head><body>",
        f"<h1>lblab report: {esc(run_id)}</h1>",
        _facts(manifest, summary),
        validity_section(manifest),
        '<h2 id="verdict">Which algorithm wins where</h2>',
        f'<p class="verdict">{esc(verdict(win, summary.replications))}</p>',
        _table(_winner_rows(win), "winners"),
        "<p>Marks: ~ within the runner-up's 95 % CI (not a clear win); ? one replication, "
        "so no interval; = several strategies tie exactly. No mark: a clear win.</p>",
    ]
    parts += [f'<p class="note">{esc(n)}</p>' for n in summary.notes]
    parts += [
        twin or "",
        '<h2 id="summary">Summary</h2>',
        "<p>Mean across replications with the 95 % t-interval in brackets (none for a single replication). "
        "Latency is over successful requests; throughput is successful responses per second.</p>",
        _table(summary_table(summary.pooled, HEADLINE), "summary"),
        "<h3>All request metrics</h3>",
        _table(
            summary_table(
                summary.pooled,
                [m for m in summary.pooled["metric"].unique() if m not in HEADLINE]
                if not summary.pooled.empty
                else [],
            ),
            "metrics",
        ),
        "<h3>Per server</h3>",
        _table(
            summary_table(
                summary.servers_pooled, list(SERVER_METRICS), by=("scenario", "strategy", "server")
            ),
            "servers",
        ),
        "<h3>Replications</h3>",
        _table(replication_counts(summary.units), "replications"),
        '<h2 id="charts">Charts</h2>',
    ]
    for slug, title, caption in figures:
        parts.append(
            f'<figure id="{esc(slug)}"><img src="charts/{esc(slug)}.png" alt="{esc(title)}">'
            f"<figcaption>{esc(title)}: {esc(caption)} "
            f'(<a href="charts/{esc(slug)}.svg">SVG</a>)</figcaption></figure>'
        )
    parts += [
        '<h2 id="manifest">Manifest</h2>',
        "<details><summary>manifest.json as written by the run</summary>",
        f"<pre>{esc(json.dumps(manifest, indent=2, sort_keys=True, default=str))}</pre></details>",
        "</body></html>",
    ]
    return "\n".join(parts)


def _facts(manifest: dict[str, Any], summary: Summary) -> str:
    """What ran, on what, and how CPU was limited, plus what the analysis saw."""
    facts = run_facts(manifest)
    facts["strategies"] = ", ".join(summary.strategies) or "none"
    facts["scenarios"] = ", ".join(summary.scenarios) or "none"
    facts["replications (max per cell)"] = str(summary.replications)
    requests = int(summary.units["requests"].sum()) if not summary.units.empty else 0
    facts["requests analysed (warm-up excluded)"] = str(requests)
    rows = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in facts.items()
    )
    return f'<table class="facts">{rows}</table>'


def _winner_rows(win: pd.DataFrame) -> pd.DataFrame:
    if win.empty:
        return win
    table = win.pivot(index="scenario", columns="metric", values="label")
    metrics = list(dict.fromkeys(win["metric"]))
    table = table.reindex(index=list(dict.fromkeys(win["scenario"])), columns=metrics)
    table.columns = [metric_info(m).label for m in metrics]
    return table


def _table(frame: pd.DataFrame, name: str) -> str:
    if frame.empty:
        return f'<p class="{name}">no data</p>'
    return frame.to_html(classes=name, border=0, na_rep="-", float_format=lambda v: f"{v:.3g}")
