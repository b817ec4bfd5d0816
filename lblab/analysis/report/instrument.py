"""The report's "What the instrument adds" section: the rule and its figures are the
answer's (``analysis/run/instrument.py``)."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from lblab.analysis.run.instrument import FIGURES, cell_checks, instrument_rows
from lblab.manifest import Manifest
from lblab.validity import FAIL, PASS, WARN


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
