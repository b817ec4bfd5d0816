"""Where each strategy wins in a sweep: the winner map, computed from ``sweep.parquet`` alone.

For a pair of axes (x, y) each cell of the map is one (x, y) setting; its colour is the
strategy best on the metric there (mean over seeds; lowest latency, failure rate or
imbalance, highest throughput), its shade the margin to the runner-up (relative to the
runner-up's mean: pale under 5 %, full at ``FULL_MARGIN`` and beyond), and it is hatched
and marked "unresolved" where the seeds do not settle it: the best strategy differs
from one seed to another, or the runner-up's range over the seeds overlaps the best's.
Axes beyond the pair give one map per combination of their values (a facet). Failed
points (an ``error``) are left out; a strategy with no point left in a cell does not
compete.

This module reads results only (no simulator, no Dask), so both the sweep's report
(``sweep/report.py``, ``DIR/report/index.html``) and the sweep notebook
(``analysis/sweep/view.py``) draw the same maps from the same rows.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from lblab.analysis.load import parquet_errors
from lblab.config import load_json_object
from lblab.errors import ConfigError
from lblab.results import SWEEP_LIVE_TABLE, SWEEP_META, SWEEP_TABLE
from lblab.validity import NA, worst

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
DPI = 110


@dataclass(frozen=True, slots=True)
class WinnerMap:
    """One map: a pair of axes at one combination of the other axes' values."""

    slug: str
    """A file name for it (``map-<x>-<y>[-<facet values>]``)."""
    title: str
    facet: Mapping[str, Any]
    """The other axes' values this map holds fixed (empty with one or two axes)."""
    cells: pd.DataFrame
    """One row per cell: x, y, best, value, runner_up, runner_up_value, margin, unresolved, why."""
    figure: Figure

    def png(self) -> bytes:
        buf = io.BytesIO()
        self.figure.savefig(buf, format="png")
        return buf.getvalue()


def metric_column(metric: str) -> tuple[str, bool]:
    """The column of ``metric`` and whether higher is better; ``ConfigError`` if unknown."""
    try:
        return METRICS[metric]
    except KeyError:
        raise ConfigError(f"--metric {metric!r}: give one of {', '.join(METRICS)}") from None


def default_axes(axes: Sequence[str]) -> tuple[str, ...]:
    """The first two axes (one when the sweep varies only one besides strategy and seed)."""
    return tuple(axes[:2])


def parse_axes(text: str) -> tuple[str, ...]:
    """``"rate,servers.1.speed"`` -> ``("rate", "servers.1.speed")``, as ``--axes`` reads."""
    return tuple(a.strip() for a in text.split(",") if a.strip())


def check_pair(pair: Sequence[str], swept: Sequence[str]) -> None:
    """Refuse a map's axes that are not one or two of the sweep's axes."""
    unknown = [a for a in pair if a not in swept]
    if unknown or not 1 <= len(pair) <= 2:
        raise ConfigError(
            f"--axes {','.join(pair)}: give one or two of the sweep's axes "
            f"({', '.join(swept) or 'none: it varies only strategy and seed'})"
        )


def axes_of(frame: pd.DataFrame) -> tuple[str, ...]:
    """The swept axes of a ``sweep.parquet`` (or ``SWEEP_LIVE_TABLE``): its columns before
    ``strategy`` (the sweep writes the axes first, in the file's order)."""
    columns = [str(c) for c in frame.columns]
    return tuple(columns[: columns.index("strategy")]) if "strategy" in columns else ()


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


def seed_winners(
    frame: pd.DataFrame, x: str, y: str | None, column: str, higher: bool
) -> pd.DataFrame:
    """Each seed's best strategy in every (y, x) cell: columns y, x, seed, best, value
    (rows with no error; a seed where no strategy has a value is left out)."""
    by = [y, x] if y else [x]
    good = frame.dropna(subset=[column])
    if good.empty:
        return pd.DataFrame(columns=[*by, "seed", "best", "value"])
    at = good.groupby([*by, "seed"], dropna=False)[column]
    index = at.idxmax() if higher else at.idxmin()
    best = good.loc[index, [*by, "seed", "strategy", column]]
    return best.rename(columns={"strategy": "best", column: "value"}).reset_index(drop=True)


def read_live(folder: Path) -> pd.DataFrame | None:
    """A sweep folder's live checks (``SWEEP_LIVE_TABLE``), or None when it has none."""
    path = folder / SWEEP_LIVE_TABLE
    if not path.is_file():
        return None
    with parquet_errors(
        path,
        "live check",
        "remove it and run the sweep with --live-check again (finished checks are kept "
        "in live-check/ and not run again)",
    ):
        return pd.read_parquet(path)


def live_agreement(live: pd.DataFrame, metric: str) -> pd.DataFrame:
    """One row per cell checked live (``SWEEP_LIVE_TABLE``): its axis values; ``best`` and
    ``other``, its two strategies in the simulation's order on ``metric``, each simulated
    and measured; the measured best, whether it ``agrees`` with the simulated one, and
    the worst verdict of the live run's own checks (``checks``: pass, warn, fail). A
    cell with a strategy missing a value on ``metric`` is left out."""
    column, higher = metric_column(metric)
    axes = axes_of(live)
    rows = []
    for cell, part in live.groupby("cell", sort=False):
        table = part.pivot_table(index="strategy", columns="source", values=column)
        if len(table) != 2 or table.isna().any().any():
            continue
        order = table["simulated"].sort_values(ascending=not higher).index
        best, other = str(order[0]), str(order[1])
        measured = table["measured"]
        measured_best = measured.idxmax() if higher else measured.idxmin()
        row = {a: part.iloc[0][a] for a in axes}
        checks = worst(part["checks"].dropna()) if "checks" in part else NA
        rows.append(
            row
            | {
                "best": best,
                "best_simulated": float(table.loc[best, "simulated"]),
                "best_measured": float(measured[best]),
                "other": other,
                "other_simulated": float(table.loc[other, "simulated"]),
                "other_measured": float(measured[other]),
                "measured_best": str(measured_best),
                "agrees": measured_best == best,
                "checks": checks,
                "cell": cell,
            }
        )
    return pd.DataFrame(rows)


def colours(strategies: Sequence[str]) -> dict[str, RGBA]:
    """One colour per strategy, the same in every map of a sweep."""
    from matplotlib import colormaps

    cmap = colormaps["tab10" if len(strategies) <= 10 else "tab20"]
    return {s: to_rgba(cmap(i % cmap.N)) for i, s in enumerate(strategies)}


def read_sweep(folder: Path) -> tuple[pd.DataFrame, tuple[str, ...], dict[str, Any]]:
    """A sweep folder's rows, its axes and its record (``sweep.json``; empty if missing,
    the axes then read from the table's columns)."""
    if not (folder / SWEEP_TABLE).is_file():
        raise ConfigError(
            f"{folder} has no {SWEEP_TABLE}: give the --out folder of a finished sweep "
            "(`lblab sweep FILE --out DIR` writes it at the end; rerun it to finish one)"
        )
    with parquet_errors(
        folder / SWEEP_TABLE,
        "sweep",
        "run `lblab sweep FILE --out DIR` into this folder again: it rebuilds "
        f"{SWEEP_TABLE} from the points/ folder and runs only the missing points",
    ):
        frame = pd.read_parquet(folder / SWEEP_TABLE)
    meta = (
        load_json_object(folder / SWEEP_META, "sweep record")
        if (folder / SWEEP_META).is_file()
        else {}
    )
    axes = tuple(str(a) for a in meta["axes"]) if "axes" in meta else axes_of(frame)
    return frame, axes, meta


def all_maps(
    frame: pd.DataFrame,
    swept: Sequence[str],
    pairs: Sequence[tuple[str, ...]] | None,
    metric: str,
) -> list[WinnerMap]:
    """Every map of ``pairs`` (default: the first two axes) over the rows with no error;
    none when fewer than two strategies ran or nothing but strategy and seed varied."""
    metric_column(metric)
    pairs = list(pairs) if pairs else [default_axes(swept)] if swept else []
    for pair in pairs:
        check_pair(pair, swept)
    strategies = sorted(frame["strategy"].unique()) if "strategy" in frame else []
    if len(strategies) < 2 or not swept:
        return []
    good = frame[frame["error"].isna()] if "error" in frame else frame
    palette = colours(strategies)
    return [m for pair in pairs for m in winner_maps(good, swept, pair, metric, palette)]


def winner_maps(
    frame: pd.DataFrame,
    swept: Sequence[str],
    pair: tuple[str, ...],
    metric: str,
    palette: dict[str, RGBA],
) -> list[WinnerMap]:
    """The maps of ``pair`` over ``frame`` (rows with no error), one per facet."""
    column, higher = metric_column(metric)
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
        figure = draw_map(cells, x, y, metric, title, palette)
        out.append(WinnerMap(slug, title, dict(zip(rest, facet, strict=True)), cells, figure))
    return out


def draw_map(
    cells: pd.DataFrame,
    x: str,
    y: str | None,
    metric: str,
    title: str,
    palette: dict[str, RGBA],
) -> Figure:
    """The map of ``cells`` (from ``winners``): colour the best, shade the margin, hatch
    the unresolved."""
    xs = sorted(cells[x].unique())
    ys = sorted(cells[y].unique()) if y else [None]
    fig = Figure(figsize=(1.6 + 1.35 * len(xs), 1.4 + 0.8 * len(ys)), dpi=DPI)
    ax = fig.add_subplot()
    for _, c in cells.iterrows():
        i, j = xs.index(c[x]), ys.index(c[y]) if y else 0
        margin = 0.0 if math.isnan(c["margin"]) else min(c["margin"] / FULL_MARGIN, 1.0)
        rgba = (*palette[c["best"]][:3], 0.2 + 0.8 * margin)
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
        handles=[Patch(color=palette[s], label=s) for s in shown],
        loc="upper left",
        bbox_to_anchor=(1.01, 1),
        fontsize=8,
        title=f"best on {metric}",
        title_fontsize=8,
    )
    fig.tight_layout()
    return fig


def draw_margins(
    cells: pd.DataFrame, labels: Sequence[str], metric: str, palette: dict[str, RGBA]
) -> Figure:
    """The lead of each cell's best over its runner-up, one bar per cell, largest on top;
    coloured by the best, hatched where unresolved, a line at ``FULL_MARGIN``."""
    order = cells.assign(label=list(labels)).sort_values("margin", na_position="first")
    fig = Figure(figsize=(8, 1.2 + 0.28 * len(order)), dpi=DPI)
    ax = fig.add_subplot()
    ys = np.arange(len(order))
    margins = order["margin"].fillna(0.0) * 100
    for j, (m, c) in enumerate(zip(margins, order.itertuples(index=False), strict=True)):
        ax.barh(
            j, m, color=palette[str(c.best)], edgecolor="black", linewidth=0.4,
            hatch="///" if c.unresolved else None,
        )  # fmt: skip
        runner = f" over {c.runner_up}" if isinstance(c.runner_up, str) else " (alone)"
        ax.text(m, j, f" {c.best}{runner}", va="center", fontsize=7)
    ax.axvline(FULL_MARGIN * 100, color="grey", linestyle=":", linewidth=1)
    ax.set_yticks(ys, list(order["label"]), fontsize=7)
    ax.set_xlabel(f"lead over the runner-up on {metric} (% of the runner-up's mean)")
    ax.set_xlim(0, max(float(margins.max()) * 1.35, FULL_MARGIN * 100 * 1.1))
    ax.set_title("How far ahead the best is, cell by cell (hatched: unresolved)", fontsize=10)
    fig.tight_layout()
    return fig
