"""The winner map of a sweep: ``DIR/report/index.html``.

For a pair of axes (x, y) each cell of the map is one (x, y) setting; its colour is the
strategy best on the metric there (mean over seeds; lowest latency, failure rate or
imbalance, highest throughput), its shade the margin to the runner-up (relative to the
runner-up's mean: pale under 5 %, full at ``FULL_MARGIN`` and beyond), and it is hatched
and marked "unresolved" where the seeds do not settle it: the best strategy differs
from one seed to another, or the runner-up's range over the seeds overlaps the best's.
Axes beyond the pair give one map per combination of their values. Failed points
(an ``error``) are left out; a strategy with no point left in a cell does not compete.

Like the run report (``analysis/report.py``) the page is one file: inline CSS, the
maps inlined as PNG, so it opens from disk with no network; each map is also written
beside it as ``<slug>.png``.
"""

from __future__ import annotations

import base64
import html
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from lblab.config import load_json_object
from lblab.errors import ConfigError
from lblab.files import make_folder, write_bytes_atomically
from lblab.sweep.run import META, TABLE

METRICS: dict[str, tuple[str, bool]] = {
    "throughput": ("throughput_rps", True),
    "mean": ("mean_ms", False),
    "p50": ("p50_ms", False),
    "p95": ("p95_ms", False),
    "p99": ("p99_ms", False),
    "p99.9": ("p999_ms", False),
    "failure_rate": ("failure_rate", False),
    "imbalance": ("imbalance", False),
}
"""``--metric`` name -> (column, higher is better)."""
RGBA = tuple[float, float, float, float]
FULL_MARGIN = 0.5
"""A lead of 50 % over the runner-up is drawn in full colour; less, paler."""
_DPI = 110
_CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1250px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
.lede { color: #444; } table { border-collapse: collapse; font-size: 13px; margin: 0.5em 0 1em; }
td, th { border: 1px solid #ddd; padding: 3px 7px; text-align: right; } th { background: #f3f3f3; }
figure { margin: 1em 0 2em; } figure img { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 13.5px; color: #444; max-width: 60em; } details { margin: 0.6em 0; }
summary { cursor: pointer; font-weight: 600; }
"""


@dataclass(frozen=True, slots=True)
class WinnerMap:
    slug: str
    title: str
    cells: pd.DataFrame
    """One row per cell: x, y, best, value, runner_up, runner_up_value, margin, unresolved, why."""
    png: bytes


def metric_column(metric: str) -> tuple[str, bool]:
    try:
        return METRICS[metric]
    except KeyError:
        raise ConfigError(f"--metric {metric!r}: give one of {', '.join(METRICS)}") from None


def default_axes(axes: Sequence[str]) -> tuple[str, ...]:
    """The first two axes (one when the sweep varies only one besides strategy and seed)."""
    return tuple(axes[:2])


def winners(frame: pd.DataFrame, x: str, y: str | None, column: str, higher: bool) -> pd.DataFrame:
    """The best strategy of every (y, x) cell of ``frame`` (rows with no error)."""
    rows = []
    by = [y, x] if y else [x]
    for cell, points in frame.groupby(by, sort=True, dropna=False):
        at = dict(zip(by, cell if isinstance(cell, tuple) else (cell,), strict=True))
        per_seed = points.pivot_table(index="seed", columns="strategy", values=column)
        per_seed = per_seed.dropna(axis=1, how="all")
        if per_seed.empty:
            continue
        sign = -1.0 if higher else 1.0
        order = (sign * per_seed.mean()).sort_values()
        best = str(order.index[0])
        row: dict[str, Any] = {
            **at,
            "best": best,
            "value": float(per_seed[best].mean()),
            "runner_up": None,
            "runner_up_value": math.nan,
            "margin": math.nan,
            "unresolved": False,
            "why": "",
        }
        if len(order) > 1:
            second = str(order.index[1])
            rv = float(per_seed[second].mean())
            row |= {
                "runner_up": second,
                "runner_up_value": rv,
                "margin": abs(row["value"] - rv) / abs(rv) if rv else math.nan,
            }
            seed_best = (sign * per_seed).idxmin(axis=1).dropna().unique()
            if len(seed_best) > 1:
                row |= {"unresolved": True, "why": "seeds disagree on the best"}
            elif _overlap(per_seed[best], per_seed[second]):
                row |= {"unresolved": True, "why": "runner-up's seed range overlaps"}
        rows.append(row)
    return pd.DataFrame(rows)


def _overlap(a: pd.Series, b: pd.Series) -> bool:
    a, b = a.dropna(), b.dropna()
    return bool(a.min() <= b.max() and b.min() <= a.max())


def build_report(
    out: Path, axes: Sequence[tuple[str, ...]] | None = None, metric: str = "p99"
) -> Path:
    """Write ``out/report/index.html`` (maps for each pair of ``axes``); returns its path."""
    column, higher = metric_column(metric)
    meta = load_json_object(out / META, "sweep record")
    swept = [str(a) for a in meta.get("axes", [])]
    frame = pd.read_parquet(out / TABLE)
    pairs = list(axes) if axes else [default_axes(swept)] if swept else []
    for pair in pairs:
        unknown = [a for a in pair if a not in swept]
        if unknown or not 1 <= len(pair) <= 2:
            raise ConfigError(
                f"--axes {','.join(pair)}: give one or two of the sweep's axes "
                f"({', '.join(swept) or 'none: it varies only strategy and seed'})"
            )
    strategies = sorted(frame["strategy"].unique()) if "strategy" in frame else []
    good = frame[frame["error"].isna()] if "error" in frame else frame
    maps = []
    if len(strategies) >= 2 and swept:
        colours = _colours(strategies)
        for pair in pairs:
            maps += list(_maps(good, swept, pair, column, higher, metric, colours))
    folder = make_folder(out / "report")
    for m in maps:
        write_bytes_atomically(folder / f"{m.slug}.png", m.png)
    page = _page(out, frame, maps, metric, higher, len(strategies))
    write_bytes_atomically(folder / "index.html", page.encode("utf-8"))
    return folder / "index.html"


def _colours(strategies: Sequence[str]) -> dict[str, RGBA]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if len(strategies) <= 10 else "tab20"]
    return {s: to_rgba(cmap(i % cmap.N)) for i, s in enumerate(strategies)}


def _maps(
    frame: pd.DataFrame,
    swept: Sequence[str],
    pair: tuple[str, ...],
    column: str,
    higher: bool,
    metric: str,
    colours: dict[str, RGBA],
) -> list[WinnerMap]:
    x, y = pair[0], (pair[1] if len(pair) > 1 else None)
    rest = [a for a in swept if a not in pair]
    facets = [()] if not rest else [tuple(c) for c in frame[rest].drop_duplicates().to_numpy()]
    out = []
    for facet in facets:
        part = frame
        for name, value in zip(rest, facet, strict=True):
            part = part[part[name] == value]
        cells = winners(part.dropna(subset=list(pair)), x, y, column, higher)
        if cells.empty:
            continue
        where = ", ".join(f"{n}={v}" for n, v in zip(rest, facet, strict=True))
        title = f"best {metric} ({'higher' if higher else 'lower'} is better): {y or ''}"
        title = f"{title} x {x}" if y else f"{title}{x}"
        title += f" ({where})" if where else ""
        slug = "map-" + "-".join(pair) + "".join(f"-{v}" for v in facet)
        slug = "".join(c if c.isalnum() or c in "-._" else "_" for c in slug)
        png = _draw(cells, x, y, metric, title, colours)
        out.append(WinnerMap(slug, title, cells, png))
    return out


def _draw(
    cells: pd.DataFrame,
    x: str,
    y: str | None,
    metric: str,
    title: str,
    colours: dict[str, RGBA],
) -> bytes:
    xs = sorted(cells[x].unique())
    ys = sorted(cells[y].unique()) if y else [None]
    fig = Figure(figsize=(1.6 + 1.35 * len(xs), 1.4 + 0.8 * len(ys)), dpi=_DPI)
    ax = fig.add_subplot()
    for _, c in cells.iterrows():
        i, j = xs.index(c[x]), ys.index(c[y]) if y else 0
        margin = 0.0 if math.isnan(c["margin"]) else min(c["margin"] / FULL_MARGIN, 1.0)
        rgba = (*colours[c["best"]][:3], 0.2 + 0.8 * margin)
        ax.add_patch(
            Rectangle(
                (i, j), 1, 1, facecolor=rgba, edgecolor="white",
                hatch="///" if c["unresolved"] else None, linewidth=1.5,
            )
        )  # fmt: skip
        lead = "" if math.isnan(c["margin"]) else f"\n+{c['margin']:.0%}"
        text = f"{c['best']}{lead}" + ("\nunresolved" if c["unresolved"] else "")
        ax.text(i + 0.5, j + 0.5, text, ha="center", va="center", fontsize=8)
    ax.set_xlim(0, len(xs))
    ax.set_ylim(0, len(ys))
    ax.set_xticks(np.arange(len(xs)) + 0.5, [str(v) for v in xs])
    ax.set_yticks(np.arange(len(ys)) + 0.5, ["" if v is None else str(v) for v in ys])
    ax.set_xlabel(x)
    ax.set_ylabel(y or "")
    ax.set_title(title, fontsize=10)
    shown = sorted(set(cells["best"]))
    ax.legend(
        handles=[Patch(color=colours[s], label=s) for s in shown],
        loc="upper left",
        bbox_to_anchor=(1.01, 1),
        fontsize=8,
        title=f"best on {metric}",
        title_fontsize=8,
    )
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def _page(
    out: Path, frame: pd.DataFrame, maps: Sequence[WinnerMap], metric: str, higher: bool, n: int
) -> str:
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
        f"The data: {esc(TABLE)} beside this folder.</p>",
    ]
    if not maps:
        parts.append("<p>No map: it needs two strategies or more and an axis besides them.</p>")
    for m in maps:
        data = base64.b64encode(m.png).decode("ascii")
        table = m.cells.to_html(
            index=False, border=0, na_rep="-", float_format=lambda v: f"{v:.4g}"
        )
        parts += [
            f"<h2>{esc(m.title)}</h2>",
            f'<figure><img src="data:image/png;base64,{data}" alt="{esc(m.title)}">'
            f'<figcaption>{esc(m.title)} (<a href="{esc(m.slug)}.png">PNG</a>)</figcaption>'
            "</figure>",
            f"<details open><summary>The cells ({len(m.cells)})</summary>{table}</details>",
        ]
    shown = frame.drop(columns=["key"], errors="ignore")
    parts += [
        f"<h2>All points</h2><details><summary>{esc(TABLE)} ({len(frame)} rows)</summary>",
        shown.to_html(index=False, border=0, na_rep="-", float_format=lambda v: f"{v:.4g}"),
        "</details></body></html>",
    ]
    return "\n".join(parts)
