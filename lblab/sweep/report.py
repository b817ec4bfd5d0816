"""The winner map of a sweep as a page: ``DIR/report/index.html``.

The maps themselves (which strategy wins each cell, by how much, and whether the seeds
settle it) are computed and drawn by ``analysis/sweep/map.py``, which the sweep
notebook uses too. Like the run report (``analysis/report/page.py``) the page is one file:
inline CSS, the maps inlined as PNG, so it opens from disk with no network; each map is
also written beside it as ``<slug>.png``.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from lblab.analysis.sweep import (
    FULL_MARGIN,
    WinnerMap,
    all_maps,
    live_agreement,
    metric_column,
    read_live,
    read_sweep,
)
from lblab.files import make_folder, write_bytes_atomically
from lblab.results import SWEEP_LIVE_TABLE, SWEEP_TABLE

_CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1250px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
.lede { color: #444; } table { border-collapse: collapse; font-size: 13px; margin: 0.5em 0 1em; }
td, th { border: 1px solid #ddd; padding: 3px 7px; text-align: right; } th { background: #f3f3f3; }
figure { margin: 1em 0 2em; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 13.5px; color: #444; max-width: 60em; } details { margin: 0.6em 0; }
summary { cursor: pointer; font-weight: 600; }
"""


def build_report(
    out: Path, axes: Sequence[tuple[str, ...]] | None = None, metric: str = "p99"
) -> Path:
    """Write ``out/report/index.html`` (maps for each pair of ``axes``); returns its path."""
    _, higher = metric_column(metric)
    frame, swept, _ = read_sweep(out)
    maps = all_maps(frame, swept, axes, metric)
    strategies = frame["strategy"].nunique() if "strategy" in frame else 0
    folder = make_folder(out / "report")
    images = [(m, m.png()) for m in maps]
    for m, png in images:
        write_bytes_atomically(folder / f"{m.slug}.png", png)
    live = read_live(out)
    checked = "" if live is None else _live_section(live, metric)
    page = _page(out, frame, images, metric, higher, strategies, checked)
    write_bytes_atomically(folder / "index.html", page.encode("utf-8"))
    return folder / "index.html"


def _html(frame: pd.DataFrame) -> str:
    """A table of the page: no index, 4 significant digits, "-" where there is no value."""
    return frame.to_html(index=False, border=0, na_rep="-", float_format=lambda v: f"{v:.4g}")


def _live_section(live: pd.DataFrame, metric: str) -> str:
    """Measured against simulated, for the cells the sweep checked live."""
    esc = html.escape
    agreement = live_agreement(live, metric)
    agree = int(agreement["agrees"].sum()) if len(agreement) else 0
    shown = agreement.drop(columns=["cell"], errors="ignore")
    return "\n".join(
        [
            "<h2>Measured against simulated (live checks)</h2>",
            f'<p class="lede">{len(agreement)} cells near the winner boundaries were run '
            "live on the local testbed, the simulated best against its runner-up, with the "
            f"same servers, load, seed and request count. On {esc(metric)} the measured best "
            f"is the simulated one in <b>{agree} of {len(agreement)}</b>. The rows: "
            f"{esc(SWEEP_LIVE_TABLE)} beside this folder; each run: live-check/&lt;cell&gt;/run.</p>",
            _html(shown),
            "<details><summary>Every figure, measured and simulated</summary>",
            _html(live.drop(columns=["cell"], errors="ignore")),
            "</details>",
        ]
    )


def _page(
    out: Path,
    frame: pd.DataFrame,
    maps: Sequence[tuple[WinnerMap, bytes]],
    metric: str,
    higher: bool,
    n: int,
    checked: str,
) -> str:
    """The page; ``checked`` is the live checks' section (empty: none)."""
    esc = html.escape
    failed = int(frame["error"].notna().sum()) if "error" in frame else 0
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>lblab sweep {esc(out.name)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Where each strategy wins: {esc(out.name)}</h1>",
        f'<p class="lede">{len(frame)} points, {n} strategies, {failed} failed. Each map\'s '
        f"colour is the strategy best on {esc(metric)} ({'higher' if higher else 'lower'} is "
        "better, mean over seeds), its shade the margin to the runner-up (pale: a few per "
        f"cent, full: {FULL_MARGIN:.0%} or more); hatched cells are unresolved: the best "
        "differs across seeds, or the runner-up's range over the seeds overlaps the best's. "
        f"The data: {esc(SWEEP_TABLE)} beside this folder.</p>",
    ]
    if not maps:
        parts.append("<p>No map: it needs two strategies or more and an axis besides them.</p>")
    for m, png in maps:
        data = base64.b64encode(png).decode("ascii")
        table = _html(m.cells)
        parts += [
            f"<h2>{esc(m.title)}</h2>",
            f'<figure><img src="data:image/png;base64,{data}" alt="{esc(m.title)}">'
            f'<figcaption>{esc(m.title)} (<a href="{esc(m.slug)}.png">PNG</a>)</figcaption>'
            "</figure>",
            f"<details open><summary>The cells ({len(m.cells)})</summary>{table}</details>",
        ]
    shown = frame.drop(columns=["key"], errors="ignore")
    parts += [
        checked,
        f"<h2>All points</h2><details><summary>{esc(SWEEP_TABLE)} ({len(frame)} rows)</summary>",
        _html(shown),
        "</details></body></html>",
    ]
    return "\n".join(parts)
