"""The scorecard's figures (``scorecard.json``): every strategy on every hard case, from
the run folders ``lblab scorecard`` wrote, one per case and testbed.

A case's run judges its strategies on the case's headline metric (``run.metrics``), paired
within blocks as every run is (``analysis/run/decide.py``), and the phases that failed a
check are left out of its figures as out of its answer. ``scorecard.json``:

- ``cells``: one per case, strategy and testbed: ``success_rate``, ``p50_ms``,
  ``p99_ms``, ``p999_ms``, ``throughput``, ``recovery_s``, ``load_deviation`` and
  ``failures`` (``failure_rate_<kind>`` by kind), each ``{mean, lo, hi, n}`` over the
  blocks (a 95 % t-interval; none from one block), with ``blocks``, ``left_out`` (phases
  that failed a check) and ``rank`` (1: best on the headline metric's mean);
- ``winners``: one per case, testbed and headline metric: ``verdict`` (``winner``,
  ``tie`` or ``unresolved``), ``strategies`` (the winner, the tied group, or the best
  by mean), ``runner_up``, ``difference`` and ``why``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lblab.analysis.metrics import METRICS, pool
from lblab.analysis.ordering import order_strategies
from lblab.analysis.run import run_answer
from lblab.analysis.validity import failed_phases
from lblab.errors import ConfigError
from lblab.files import write_bytes_atomically
from lblab.json_fields import (
    an_object,
    checked,
    map_of,
    optional,
    read_json,
    text,
    to_plain,
    tuple_of,
    whole,
)
from lblab.results import ERROR_KINDS

SCORECARD_FILE = "scorecard.json"
SCHEMA_VERSION = 1
FIGURES = {
    "success_rate": "success_rate",
    "p50_ms": "latency_p50_ms",
    "p99_ms": "latency_p99_ms",
    "p999_ms": "latency_p999_ms",
    "throughput": "throughput_rps",
    "recovery_s": "recovery_s",
    "load_deviation": "load_deviation",
}
"""A cell's figure -> the unit metric it pools (``analysis/metrics.py``)."""
TESTBEDS = ("simulated", "local")


@dataclass(frozen=True, slots=True)
class Case:
    """One case of the library as it ran: its run folder and what it is judged on."""

    name: str
    title: str
    source: str
    tests: str
    headline: str
    testbed: str
    run_dir: Path

    def about(self) -> dict[str, str]:
        return {
            "scenario": self.name, "title": self.title, "source": self.source,
            "tests": self.tests, "headline": self.headline,
        }  # fmt: skip


def _figure(row: Mapping[str, Any] | None) -> dict[str, Any]:
    if row is None:
        return {"mean": None, "lo": None, "hi": None, "n": 0}
    return {k: row[k] for k in ("mean", "lo", "hi", "n")}


def case_figures(case: Case) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The cells and winners of one case's run folder."""
    found = run_answer(case.run_dir)
    units = found.units
    left = {(c, s, int(r)) for c, s, r, _ in failed_phases(found.manifest)}
    if not units.empty:
        kept = [
            (c, s, int(r)) not in left
            for c, s, r in zip(
                units["scenario"], units["strategy"], units["replication"], strict=True
            )
        ]
        trusted = units.loc[kept]
    else:
        trusted = units
    wanted = [*FIGURES.values(), *(f"failure_rate_{k}" for k in ERROR_KINDS)]
    pooled = pool(trusted, wanted, by=("strategy",))
    by = {(r["strategy"], r["metric"]): r for r in pooled.to_dict("records")}
    strategies = order_strategies(units["strategy"].unique()) if not units.empty else []
    better = METRICS[case.headline].better
    headline = {s: by.get((s, case.headline), {}).get("mean") for s in strategies}
    ranked = sorted(
        (s for s in strategies if _number(headline[s])),
        key=lambda s: headline[s] if better == "lower" else -headline[s],
    )
    cells = []
    for s in strategies:
        cell: dict[str, Any] = {"scenario": case.name, "strategy": s, "testbed": case.testbed}
        cell.update({name: _figure(by.get((s, metric))) for name, metric in FIGURES.items()})
        cell["failures"] = {k: _figure(by.get((s, f"failure_rate_{k}"))) for k in ERROR_KINDS}
        cell["blocks"] = int((units["strategy"] == s).sum()) if not units.empty else 0
        cell["left_out"] = sum(1 for _, st, _ in left if st == s)
        cell["rank"] = ranked.index(s) + 1 if s in ranked else None
        cells.append(cell)
    winners = []
    for c in found.cells:
        if c.metric != case.headline:
            continue
        winners.append(
            {
                "scenario": case.name, "testbed": case.testbed, "metric": c.metric,
                "verdict": c.verdict, "strategies": list(c.strategies),
                "runner_up": c.runner_up, "difference": c.difference, "why": c.why,
                "blocks": c.blocks,
            }
        )  # fmt: skip
    return cells, winners


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def build_scorecard(cases: Sequence[Case], meta: Mapping[str, Any]) -> dict[str, Any]:
    """``scorecard.json``'s content for ``cases`` (each a finished run folder)."""
    cells: list[dict[str, Any]] = []
    winners: list[dict[str, Any]] = []
    scenarios: dict[str, dict[str, str]] = {}
    for case in cases:
        more_cells, more_winners = case_figures(case)
        cells += more_cells
        winners += more_winners
        scenarios.setdefault(case.name, case.about())
    return to_plain(
        {
            "schema_version": SCHEMA_VERSION,
            **meta,
            "scenarios": list(scenarios.values()),
            "runs": [
                {"scenario": c.name, "testbed": c.testbed, "run_dir": str(c.run_dir)} for c in cases
            ],
            "cells": cells,
            "winners": winners,
        },
        finite=True,
    )


def write_scorecard(out: Path, card: Mapping[str, Any]) -> Path:
    path = out / SCORECARD_FILE
    write_bytes_atomically(path, json.dumps(card, indent=2).encode())
    return path


def read_scorecard(path: Path) -> dict[str, Any]:
    """A ``scorecard.json`` (a file, or the folder holding it), as it is once the fields
    the page and the tables take are of their type."""
    if path.is_dir():
        path = path / SCORECARD_FILE
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"{path}: not a readable scorecard ({exc}); make one with lblab scorecard"
        ) from exc
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        raise ConfigError(
            f"{path}: schema_version {data.get('schema_version') if isinstance(data, dict) else None!r}; "
            f"this lblab reads {SCHEMA_VERSION}"
        )
    return read_json(data, _scorecard, source=str(path), remedy="make one with lblab scorecard")


_texts = tuple_of(text)
_scorecard = checked(
    {},
    {
        "testbeds": optional(_texts),
        "health": optional(an_object),
        "options": optional(map_of(an_object)),
        "scenarios": tuple_of(
            checked(dict.fromkeys(("scenario", "title", "source", "tests", "headline"), text))
        ),
        "cells": tuple_of(
            checked(
                dict.fromkeys(("scenario", "strategy", "testbed"), text), {"rank": optional(whole)}
            )
        ),
        "winners": tuple_of(
            checked(
                dict.fromkeys(("scenario", "testbed", "metric", "verdict"), text),
                {"strategies": optional(_texts)},
            )
        ),
    },
)
