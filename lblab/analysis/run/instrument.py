"""What the instrument adds, beside the differences the answer calls: the answer's own
check (each cell of ``winners.json`` carries its ``instrument`` level), the report's
section (``analysis/report/instrument.py``) says it in words.

Every phase's manifest entry carries, in ``measured``, what the harness added to its
successful requests and what the servers spent outside their work slots, at p50 and p99
(``lblab.validity.instrument_facts``). Here they are gathered per scenario and strategy
(medians over the phases), and each resolved latency cell of the answer is held to them:

- **fail**, the harness could reverse it: the two strategies' harness times differ by at
  least the difference the answer calls (``|H_winner - H_runner_up| >= |diff|``, ``diff``
  the difference of the two strategies' means, in ms), so the whole difference may be the
  instrument's;
- **warn**, the harness is a sizeable part of it: the harness time of either is at least
  half the difference (``max(H) >= |diff| / 2``);
- **pass** otherwise.

``H`` is the harness's p50 for the mean and the median, its p99 for the tail metrics.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from lblab.manifest import Manifest
from lblab.validity import FAIL, PASS, WARN

FIGURES = (
    ("harness_p50_ms", "harness p50"),
    ("harness_p99_ms", "harness p99"),
    ("outside_slot_p50_ms", "server outside its slot p50"),
    ("outside_slot_p99_ms", "server outside its slot p99"),
    ("send_lag_p99_ms", "send lag p99"),
)
MEDIAN_METRICS = frozenset({"latency_mean_ms", "latency_p50_ms"})
"""Held to the harness's p50; every other latency metric to its p99."""
SIZEABLE = 0.5
"""A harness time at least this share of a called difference warns."""


def instrument_rows(manifest: Manifest) -> list[dict[str, Any]]:
    """One row per (scenario, strategy): each of ``FIGURES``, the median over its phases
    that measured it (None where none did), and how many phases there were."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for phase in manifest.phases:
        if phase.measured:
            groups.setdefault((phase.scenario, phase.strategy), []).append(phase.measured)
    rows = []
    for (scenario, strategy), measured in groups.items():
        row: dict[str, Any] = {"scenario": scenario, "strategy": strategy, "phases": len(measured)}
        for key, _ in FIGURES:
            values = [m[key] for m in measured if m.get(key) is not None]
            row[key] = statistics.median(values) if values else None
        rows.append(row)
    return rows


def cell_checks(
    cells: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """Each resolved latency cell against what the instrument added to its two strategies
    (the module's rule); cells without a harness figure for both are left out."""
    figure = {(r["scenario"], r["strategy"]): r for r in rows}
    out = []
    for cell in cells:
        metric, difference = cell.get("metric", ""), cell.get("difference") or {}
        if cell.get("verdict") != "winner" or not str(metric).startswith("latency_"):
            continue
        key = "harness_p50_ms" if metric in MEDIAN_METRICS else "harness_p99_ms"
        winner, runner_up = cell["strategies"][0], cell.get("runner_up")
        a = figure.get((cell["scenario"], winner), {}).get(key)
        b = figure.get((cell["scenario"], runner_up), {}).get(key)
        diff = abs(float(difference.get("diff", 0.0)))
        means = cell.get("means") or {}
        if winner in means and runner_up in means:  # a log-ratio cell has no diff in ms
            diff = abs(float(means[winner]) - float(means[runner_up]))
        if a is None or b is None or not diff:
            continue
        level = FAIL if abs(a - b) >= diff else WARN if max(a, b) >= SIZEABLE * diff else PASS
        out.append({"scenario": cell["scenario"], "metric": metric, "winner": winner,
                    "runner_up": runner_up, "difference_ms": diff, "figure": key,
                    "winner_ms": a, "runner_up_ms": b, "level": level})  # fmt: skip
    return out
