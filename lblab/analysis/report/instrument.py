"""What the instrument adds, beside the differences the answer calls.

Every phase's manifest entry carries, in ``measured``, what the harness added to its
successful requests and what the servers spent outside their work slots, at p50 and p99
(``lblab.validity.instrument_facts``). Here they are gathered per scenario and strategy
(medians over the phases), and each resolved latency cell of the answer is held to them:

- **fail**, the harness could reverse it: the two strategies' harness times differ by at
  least the difference the answer calls (``|H_winner - H_runner_up| >= |diff|``), so the
  whole difference may be the instrument's;
- **warn**, the harness is a sizeable part of it: the harness time of either is at least
  half the difference (``max(H) >= |diff| / 2``);
- **pass** otherwise.

``H`` is the harness's p50 for the mean and the median, its p99 for the tail metrics.
"""

from __future__ import annotations

import html
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
        if a is None or b is None or not diff:
            continue
        level = FAIL if abs(a - b) >= diff else WARN if max(a, b) >= SIZEABLE * diff else PASS
        out.append({"scenario": cell["scenario"], "metric": metric, "winner": winner,
                    "runner_up": runner_up, "difference_ms": diff, "figure": key,
                    "winner_ms": a, "runner_up_ms": b, "level": level})  # fmt: skip
    return out


def instrument_section(manifest: Manifest, cells: Sequence[Mapping[str, Any]]) -> str:
    """The report's "What the instrument adds" section (HTML)."""
    esc = html.escape
    rows = instrument_rows(manifest)
    head = '<h2 id="instrument">What the instrument adds</h2>'
    if not any(r["harness_p50_ms"] is not None for r in rows):
        return head + (
            "<p>This run's phases carry no per-request server times (servers or a run from "
            "before lblab measured its own share of each latency).</p>"
        )
    checks = cell_checks(cells, rows)
    flagged = [c for c in checks if c["level"] != PASS]
    words = (
        f"{len(checks)} resolved latency cells held to the harness's own time: "
        f"{sum(c['level'] == FAIL for c in checks)} could be reversed by it, "
        f"{sum(c['level'] == WARN for c in checks)} have it as a sizeable part."
    )
    parts = [
        head,
        "<p>Each latency includes time that is not the servers': the client, Locust, the "
        "balancer and loopback (<b>harness</b>: latency minus the server's own time for the "
        "request, from its arrival to its answer), and the server's time around its work "
        "(<b>outside its slot</b>: its event loop, decoding, writing, a CPU quota's "
        "throttling). In the open model a latency counts from the intended send, so a send "
        "that left late (<b>send lag</b>) has its lag in the harness's time. A resolved "
        "latency cell <b>fails</b> "
        "here when its two strategies' harness times differ by at least the difference it "
        "calls, and <b>warns</b> when either's harness time is half that difference or more "
        "(the p50 for the mean and median, the p99 for the tails).</p>",
        f'<p class="verdict">{esc(words)}</p>',
    ]
    if flagged:
        items = "".join(
            f"<li><b>{esc(c['level'])}</b> {esc(c['scenario'])} {esc(c['metric'])}: "
            f"{esc(c['winner'])} ahead of {esc(c['runner_up'])} by {c['difference_ms']:.2f} "
            f"ms; the harness added {c['winner_ms']:.2f} and {c['runner_up_ms']:.2f} ms "
            f"({esc(c['figure'].replace('_ms', '').replace('_', ' '))})</li>"
            for c in flagged
        )
        parts.append(f"<ul>{items}</ul>")
    header = "".join(f"<th>{esc(t)} (ms)</th>" for _, t in FIGURES)
    body = "".join(
        f"<tr><td>{esc(r['scenario'])}</td><td>{esc(r['strategy'])}</td><td>{r['phases']}</td>"
        + "".join(f"<td>{_ms(r[k])}</td>" for k, _ in FIGURES)
        + "</tr>"
        for r in sorted(rows, key=lambda r: (r["scenario"], r["strategy"]))
    )
    parts.append(
        "<details><summary>Per scenario and strategy (medians over the phases)</summary>"
        f"<table><tr><th>scenario</th><th>strategy</th><th>phases</th>{header}</tr>{body}"
        "</table></details>"
    )
    return "\n".join(parts)


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"
