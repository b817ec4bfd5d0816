"""What the sweep notebook calls: one sweep folder opened once, its maps and tables ready.

The sweep notebook (``analysis/notebooks/sweep.py``) holds no logic (docs/STYLE.md): every
cell calls this module. The maps are the ones of the sweep's report
(``analysis/sweep/map.py``), drawn from the same ``sweep.parquet``; here a notebook can
also ask for another pair of axes or another metric, see each cell's lead over the
runner-up as bars, and read which seed chose what where the seeds disagree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from lblab.analysis.report import Gallery, Markdown, Png
from lblab.analysis.sweep import map as sweep_map
from lblab.analysis.sweep.map import WinnerMap

Axes = str | Sequence[str] | None
"""A pair of axes as ``--axes`` takes it (``"rate,servers.1.speed"``) or a tuple; None:
the first two axes."""


@dataclass
class SweepView:
    """A sweep's ``--out`` folder: every row of ``sweep.parquet`` and its axes."""

    path: Path
    frame: pd.DataFrame
    axes: tuple[str, ...]
    """The swept settings, in the file's order (``strategy`` and ``seed`` apart)."""
    meta: dict[str, Any]
    _maps: dict[tuple[tuple[str, ...] | None, str], list[WinnerMap]] = field(
        default_factory=dict, repr=False
    )
    """Maps drawn once per (pair, metric): the notebook's calls share them."""

    @property
    def good(self) -> pd.DataFrame:
        """The rows with no error (the ones the maps use)."""
        return self.frame[self.frame["error"].isna()] if "error" in self.frame else self.frame

    def facts(self) -> pd.DataFrame:
        """Points, strategies, seeds, failures and the file it was swept from."""
        f = self.frame
        failed = int(f["error"].notna().sum()) if "error" in f else 0
        facts = {
            "swept from": self.meta.get("file", "?"),
            "points": len(f),
            "failed points": failed,
            "strategies": ", ".join(sorted(map(str, f["strategy"].unique()))),
            "seeds": ", ".join(str(s) for s in sorted(f["seed"].unique())),
            "axes": ", ".join(self.axes) or "none (only strategy and seed vary)",
            "requests per point": _values(f["requests"].dropna()) if "requests" in f else "?",
            "wall time on the workers": f"{f['wall_s'].sum():.1f} s" if "wall_s" in f else "?",
        }
        return pd.DataFrame({"fact": list(facts), "value": list(facts.values())}).set_index("fact")

    def swept(self) -> pd.DataFrame:
        """One row per axis (and strategy, seed): its values and how many."""
        rows = [
            {"axis": a, "values": _values(self.frame[a]), "count": self.frame[a].nunique()}
            for a in (*self.axes, "strategy", "seed")
            if a in self.frame
        ]
        return pd.DataFrame(rows).set_index("axis")

    def failed(self) -> pd.DataFrame | Markdown:
        """The points whose row holds an error, with the error (left out of the maps)."""
        if "error" not in self.frame or self.frame["error"].isna().all():
            return Markdown("No point failed: every row counts in the maps.")
        columns = [*self.axes, "strategy", "seed", "worker", "error"]
        rows = self.frame[self.frame["error"].notna()]
        return rows[[c for c in columns if c in rows]].reset_index(drop=True)

    def maps(self, axes: Axes = None, metric: str = "p99") -> list[WinnerMap]:
        """The winner maps of one pair of axes on ``metric`` (one per facet)."""
        pair = None if axes is None else _pair(axes)
        if (pair, metric) not in self._maps:
            pairs = None if pair is None else [pair]
            self._maps[pair, metric] = sweep_map.all_maps(self.frame, self.axes, pairs, metric)
        return self._maps[pair, metric]

    def winner_map(self, axes: Axes = None, metric: str = "p99") -> Png | Gallery | Markdown:
        """The maps, as the report draws them: ``view.winner_map("rate", metric="p99.9")``."""
        maps = self.maps(axes, metric)
        if not maps:
            return Markdown(_no_map(self.frame, self.axes))
        if len(maps) == 1:
            return Png(maps[0].figure)
        return Gallery(m.figure for m in maps)

    def cells(self, axes: Axes = None, metric: str = "p99") -> pd.DataFrame:
        """Every map's cells in one table (facet values first): best, value, runner-up,
        value, margin, unresolved and why."""
        maps = self.maps(axes, metric)
        if not maps:
            return pd.DataFrame()
        return pd.concat([m.cells.assign(**m.facet) for m in maps], ignore_index=True)[_order(maps)]

    def margins(self, axes: Axes = None, metric: str = "p99") -> Png | Markdown:
        """Each cell's lead over the runner-up, as bars sorted by size."""
        maps = self.maps(axes, metric)
        if not maps:
            return Markdown(_no_map(self.frame, self.axes))
        cells = self.cells(axes, metric)
        pair = [c for c in _order(maps)[: _order(maps).index("best")]]
        labels = [", ".join(f"{a}={r[a]}" for a in pair) for _, r in cells.iterrows()]
        palette = sweep_map.colours(sorted(self.frame["strategy"].unique()))
        return Png(sweep_map.draw_margins(cells, labels, metric, palette))

    def disagreements(self, axes: Axes = None, metric: str = "p99") -> pd.DataFrame | Markdown:
        """The unresolved cells, each seed's best there and the two leaders' seed ranges."""
        maps = self.maps(axes, metric)
        if not maps:
            return Markdown(_no_map(self.frame, self.axes))
        column, higher = sweep_map.metric_column(metric)
        rows = []
        for m in maps:
            part = self.good
            for name, value in m.facet.items():
                part = part[part[name] == value]
            where = [c for c in m.cells.columns if c in self.axes]
            x, y = where[-1], (where[0] if len(where) > 1 else None)
            per_seed = sweep_map.seed_winners(part, x, y, column, higher)
            for _, cell in m.cells[m.cells["unresolved"]].iterrows():
                at = {a: cell[a] for a in where}
                here = part
                for a, v in at.items():
                    here = here[here[a] == v]
                seeds = per_seed
                for a, v in at.items():
                    seeds = seeds[seeds[a] == v]
                rows.append(
                    {
                        **m.facet,
                        **at,
                        "best": cell["best"],
                        "runner_up": cell["runner_up"],
                        "why": cell["why"],
                        "best by seed": ", ".join(
                            f"{s}: {b}" for s, b in zip(seeds["seed"], seeds["best"], strict=True)
                        ),
                        "best's range": _range(here, cell["best"], column),
                        "runner-up's range": _range(here, cell["runner_up"], column),
                    }
                )
        if not rows:
            return Markdown(f"Every cell is resolved on {metric}: all seeds agree on the best.")
        return pd.DataFrame(rows)

    def live(self, metric: str = "p99") -> pd.DataFrame | Markdown:
        """The cells checked live (``lblab sweep --live-check``), measured against
        simulated on ``metric``: whether the measured best is the simulated one."""
        live = sweep_map.read_live(self.path)
        if live is None:
            return Markdown(
                "No live check: `lblab sweep FILE --out DIR --live-check N` runs N cells "
                "near the winner boundaries on this machine's testbed."
            )
        return sweep_map.live_agreement(live, metric).drop(columns=["cell"], errors="ignore")

    def table(self) -> pd.DataFrame:
        """Every point of ``sweep.parquet`` (its key left out)."""
        return self.frame.drop(columns=["key"], errors="ignore")


def open_sweep(folder: str | Path) -> SweepView:
    """Open a sweep's ``--out`` folder (it holds ``sweep.parquet``)."""
    path = Path(folder)
    frame, axes, meta = sweep_map.read_sweep(path)
    return SweepView(path, frame, axes, meta)


def _pair(axes: str | Sequence[str]) -> tuple[str, ...]:
    return sweep_map.parse_axes(axes) if isinstance(axes, str) else tuple(axes)


def _order(maps: Sequence[WinnerMap]) -> list[str]:
    """Facet axes, then the pair (y before x, as ``winners`` gives it), then the rest."""
    first = maps[0]
    facet = list(first.facet)
    return facet + [c for c in first.cells.columns if c not in facet]


def _values(column: pd.Series) -> str:
    values = sorted(column.dropna().unique(), key=lambda v: (str(type(v)), v))
    return ", ".join(str(v) for v in values)


def _range(rows: pd.DataFrame, strategy: Any, column: str) -> str:
    if not isinstance(strategy, str):
        return "-"
    values = rows.loc[rows["strategy"] == strategy, column].dropna()
    return f"{values.min():.4g} to {values.max():.4g}" if len(values) else "-"


def _no_map(frame: pd.DataFrame, axes: Sequence[str]) -> str:
    strategies = frame["strategy"].nunique() if "strategy" in frame else 0
    if strategies < 2:
        return f"No map: it needs two strategies or more; this sweep ran {strategies}."
    if not axes:
        return "No map: the sweep varies only strategy and seed; the table below has it all."
    return "No map: no point of these axes ran without error (see the failed points)."
