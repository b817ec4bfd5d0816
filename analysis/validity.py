"""The run's validity checks (``lblab/verdicts.py``) as the report and notebooks show them.

The runner writes each phase's checks to the manifest (``phases[].verdicts``); this
module reads them into a phase x check table, names the phases that failed a check
(their units are left out when winners are picked), and renders the report's first
section: which phases' numbers should not be trusted, and why.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import pandas as pd

from lblab.verdicts import FAIL, WARN, summary_lines

UnitKey = tuple[str, str, str, int]

_COLOURS = {"pass": "#e8f4e8", "warn": "#fff3cd", "fail": "#f8d7da", "n/a": "#f3f3f3"}


def _phases(manifest: Mapping[str, Any]) -> list[dict[str, Any]]:
    phases = manifest.get("phases")
    if not isinstance(phases, list):
        return []
    return [p for p in phases if isinstance(p, dict) and p.get("verdicts")]


def verdict_table(manifest: Mapping[str, Any]) -> pd.DataFrame:
    """One row per checked phase, one column per check: ``level: figure``."""
    rows = []
    for p in _phases(manifest):
        row: dict[str, Any] = {
            "phase": f"{p.get('scenario')} {p.get('strategy')} rep {p.get('replication')}",
            "verdict": p.get("verdict", "n/a"),
        }
        for check in p["verdicts"]:
            row[check["name"]] = f"{check['level']}: {check['figure']}"
        rows.append(row)
    return pd.DataFrame(rows).set_index("phase") if rows else pd.DataFrame()


def failed_units(manifest: Mapping[str, Any], run_id: str) -> set[UnitKey]:
    """(run_id, scenario, strategy, replication) of every phase that failed a check."""
    return {
        (run_id, str(p.get("scenario")), str(p.get("strategy")), int(p.get("replication") or 0))
        for p in _phases(manifest)
        if p.get("verdict") == FAIL
    }


def validity_section(manifest: Mapping[str, Any]) -> str:
    """The report's "Can these numbers be trusted?" section (HTML)."""
    esc = html.escape
    phases = _phases(manifest)
    head = '<h2 id="validity">Can these numbers be trusted?</h2>'
    if not phases:
        return (
            head + "<p>This run carries no validity checks (a simulated run, or one written "
            "before lblab checked its runs).</p>"
        )
    levels = [p.get("verdict") for p in phases]
    n_fail, n_warn = levels.count(FAIL), levels.count(WARN)
    words = (
        f"{len(phases)} phases checked: {len(phases) - n_fail - n_warn} pass, {n_warn} warn, "
        f"{n_fail} fail. "
        + (
            "Phases that fail a check are left out when winners are picked. "
            if n_fail
            else "No phase failed a check. "
        )
        + "What each check means and what to do when it warns: README, 'Every run checks itself'."
    )
    table = verdict_table(manifest)
    cells = []
    for phase, row in table.iterrows():
        tds = "".join(
            f'<td style="background:{_COLOURS.get(str(v).split(":")[0], "#fff")}">{esc(str(v))}</td>'
            for v in row.to_numpy()
        )
        cells.append(f"<tr><th>{esc(str(phase))}</th>{tds}</tr>")
    header = "".join(f"<th>{esc(str(c))}</th>" for c in ["phase", *table.columns])
    lines = summary_lines(phases)
    reasons = (
        "<ul>" + "".join(f"<li>{esc(line)}</li>" for line in lines) + "</ul>"
        if lines
        else "<p>Every check passed or could not be measured.</p>"
    )
    return (
        f'{head}<p class="verdict">{esc(words)}</p>{reasons}'
        f'<details><summary>Every check of every phase</summary><table class="validity">'
        f"<tr>{header}</tr>{''.join(cells)}</table></details>"
    )
