"""What the notebooks call: one run opened once, and its charts and tables ready to show.

Notebooks hold no logic (docs/STYLE.md, "Smells we avoid"): every cell is a call to this module, to
``analysis.report.charts`` or to ``analysis.report.tables``. Figures are shown as PNG
images (not through pyplot's global state), so an executed notebook carries its charts
as plain outputs that any viewer renders.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
from matplotlib.figure import Figure

from lblab.analysis.load import open_results
from lblab.analysis.manifest import run_facts
from lblab.analysis.metrics import METRICS, Summary, summarize
from lblab.analysis.report import charts, tables
from lblab.analysis.run import read_answer, run_answer, verdict, winner_frame
from lblab.manifest import Manifest


@dataclass
class RunView:
    """A results directory, summarized once: every frame the charts take, and its answer."""

    path: Path
    manifest: Manifest
    summary: Summary
    cells: list[dict[str, Any]]
    """The answer's cells (``winners.json``, ``analysis/run/decide.py``)."""

    @property
    def simulated(self) -> bool:
        return self.manifest.simulated

    @property
    def winners(self) -> pd.DataFrame:
        return winner_frame(self.cells)

    def facts(self) -> pd.DataFrame:
        """The manifest's headline facts as a two-column table."""
        facts = run_facts(self.manifest)
        return pd.DataFrame({"fact": list(facts), "value": list(facts.values())}).set_index("fact")

    def verdict(self, metrics: Sequence[str] | None = None) -> Markdown:
        """Which strategy wins where, in words, for ``metrics`` (all headline metrics if None)."""
        cells = [c for c in self.cells if metrics is None or c["metric"] in metrics]
        return Markdown(verdict(cells))

    def left_out(self) -> Markdown:
        """The phases that failed a validity check: the answer leaves them out, the
        charts hatch (or dash) what includes them and the tables mark it with a dagger."""
        failed = self.summary.failed
        if failed.empty:
            return Markdown("No phase failed a validity check: every phase counts in the answer.")
        lines = [
            f"- {r.scenario} {r.strategy} rep {r.replication}: {r.why}"
            for r in failed.itertuples(index=False)
        ]
        return Markdown(
            "Left out of the answer (failed a validity check); the charts hatch or dash what "
            f"includes them, the tables mark it {tables.MARK}:\n\n" + "\n".join(lines)
        )

    def notes(self) -> Markdown:
        """What the loader had to skip (missing tables), or that nothing was."""
        if not self.summary.notes:
            return Markdown("All three tables were present.")
        return Markdown("\n".join(f"- {n}" for n in self.summary.notes))


def open_view(results_dir: str | Path) -> RunView:
    """Open and summarize one results directory (a live or a simulated run), with the
    answer its ``winners.json`` holds (computed here, not written, when it has none)."""
    results = open_results(results_dir)
    summary = summarize(results)
    run = results.runs[0]
    cells = read_answer(run.path)
    if cells is None:
        cells = [c.to_dict() for c in run_answer(run.path, summary.units).cells]
    return RunView(run.path, run.manifest, summary, cells)


def metrics_of(family: str) -> list[str]:
    """Metric names whose name starts with ``family`` (``latency``, ``failure``, ``cpu``)."""
    return [m for m in METRICS if m.startswith(family)]


class Markdown:
    """Text that Jupyter renders as Markdown and a terminal prints as is."""

    def __init__(self, text: str) -> None:
        self.text = text

    def _repr_markdown_(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text


class Png:
    """A rendered figure: Jupyter shows the PNG; the figure is closed to free memory."""

    def __init__(self, figure: Figure, dpi: int = 100) -> None:
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", dpi=dpi)
        self.data = buffer.getvalue()

    def _repr_png_(self) -> bytes:
        return self.data

    def __repr__(self) -> str:
        return f"<PNG image, {len(self.data)} bytes>"


class Gallery:
    """Several rendered figures shown one under the other (one cell, one output)."""

    def __init__(self, figures: Iterable[Figure]) -> None:
        self.images = [Png(f) for f in figures]

    def _repr_html_(self) -> str:
        return "".join(
            f'<img src="data:image/png;base64,{base64.b64encode(i.data).decode()}">'
            for i in self.images
        )

    def __repr__(self) -> str:
        return f"<{len(self.images)} PNG images>"


def show(figure: Figure) -> Png:
    """The cell's output for a chart: ``show(charts.matrix_heatmaps(...))``."""
    return Png(figure)


def cpu_over_time(view: RunView) -> Gallery:
    """CPU per server over time, one figure per scenario (thesis figures 5.5-5.9)."""
    scenarios = view.summary.scenarios
    if not scenarios:
        return Gallery([charts.no_data("CPU per server over time", "no scenario has requests")])
    return Gallery(
        charts.cpu_over_time(view.summary.cpu, s, view.summary.failed) for s in scenarios
    )
