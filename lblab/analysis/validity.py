"""The run's validity checks (``lblab/validity.py``) as the report and notebooks show them.

The runner writes each phase's checks to the manifest (``phases[].verdicts``); this
module reads them into a phase x check table, names the phases that failed a check
(their units are left out when winners are picked), and renders the report's section
beside the answer: which phases' numbers should not be trusted, and why.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pandas as pd

from lblab.analysis.ordering import order_scenarios, order_strategies
from lblab.manifest import Manifest, PhaseEntry
from lblab.validity import FAIL, WARN, summary_lines

_COLOURS = {"pass": "#e8f4e8", "warn": "#fff3cd", "fail": "#f8d7da", "n/a": "#f3f3f3"}
CHECKS_GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "read-a-run.md"
"""The guide to the checks in this lblab's checkout (``docs/`` beside ``lblab/``)."""
CHECKS_ANCHOR = "the-checks"


def verdict_table(manifest: Manifest) -> pd.DataFrame:
    """One row per checked phase, one column per check: ``level: figure``."""
    rows = []
    for p in manifest.checked_phases():
        row: dict[str, Any] = {"phase": p.label, "verdict": _verdict(p)}
        for check in p.verdicts:
            row[check.name] = f"{check.level}: {check.figure}"
        rows.append(row)
    return pd.DataFrame(rows).set_index("phase") if rows else pd.DataFrame()


def failed_phases(manifest: Manifest) -> list[tuple[str, str, int, str]]:
    """(scenario, strategy, replication, why) of every phase that failed a check; the
    answer (``analysis/run/decide.py``) leaves them out of its pairs."""
    return [
        (
            *p.cell,
            "; ".join(f"{c.name} fail: {c.figure}" for c in p.checks_at(FAIL)),
        )
        for p in manifest.checked_phases()
        if p.verdict == FAIL
    ]


def _verdict(p: PhaseEntry) -> str:
    return p.verdict or "n/a"


def _worst(levels: list[str]) -> str:
    for level in (FAIL, WARN, "pass"):
        if level in levels:
            return level
    return "n/a"


def _flagged(p: PhaseEntry, level: str) -> list[str]:
    return [c.name for c in p.checks_at(level)]


def _grid(phases: list[PhaseEntry]) -> str:
    """Scenario rows x strategy columns; each cell the verdict of its replications.

    A cell names the checks that failed or warned, so the reader sees at a glance which
    numbers of the winner table and the charts to distrust.
    """
    esc = html.escape
    scenarios = order_scenarios({p.scenario for p in phases})
    strategies = order_strategies({p.strategy for p in phases})
    cells: dict[tuple[str, str], list[PhaseEntry]] = {}
    for p in phases:
        cells.setdefault((p.scenario, p.strategy), []).append(p)
    rows = []
    for scenario in scenarios:
        tds = []
        for strategy in strategies:
            reps = cells.get((scenario, strategy), [])
            level = _worst([_verdict(p) for p in reps])
            words = []
            for p in reps:
                flagged = _flagged(p, FAIL) or _flagged(p, WARN)
                text = _verdict(p) + (f": {', '.join(flagged)}" if flagged else "")
                words.append(f"rep {p.replication} {text}" if len(reps) > 1 else text)
            tds.append(
                f'<td class="{esc(level)}" style="background:{_COLOURS.get(level, "#fff")}">'
                f"{'<br>'.join(esc(w) for w in words) or '-'}</td>"
            )
        rows.append(f"<tr><th>{esc(scenario)}</th>{''.join(tds)}</tr>")
    head = "".join(f"<th>{esc(s)}</th>" for s in ["scenario", *strategies])
    return f'<table class="validity-grid"><tr>{head}</tr>{"".join(rows)}</table>'


def validity_section(manifest: Manifest) -> str:
    """The report's "Can these numbers be trusted?" section (HTML).

    First the phases not to trust (failed a check) and those to read with care (a check
    warned), then a scenario x strategy grid of verdicts; the reasons and every check of
    every phase are folded below.
    """
    esc = html.escape
    phases = manifest.checked_phases()
    head = '<h2 id="validity">Can these numbers be trusted?</h2>'
    if not phases:
        return (
            head + "<p>This run carries no validity checks (a simulated run, or one written "
            "before lblab checked its runs).</p>"
        )
    levels = [p.verdict for p in phases]
    n_fail, n_warn = levels.count(FAIL), levels.count(WARN)
    words = (
        f"{len(phases)} phases checked: {len(phases) - n_fail - n_warn} pass, {n_warn} warn, "
        f"{n_fail} fail."
    )
    failed = [f"{p.label} ({', '.join(_flagged(p, FAIL))})" for p in phases if p.verdict == FAIL]
    warned = [f"{p.label} ({', '.join(_flagged(p, WARN))})" for p in phases if p.verdict == WARN]
    answer = [f'<p class="verdict">{esc(words)} ']
    if failed:
        answer.append(
            f"<b>Do not trust</b> {esc('; '.join(failed))}: these failed a check and are left "
            "out when winners are picked (the charts and tables still show them). "
        )
    else:
        answer.append("No phase failed a check. ")
    if warned:
        answer.append(f"<b>Read with care</b> (a check warned): {esc('; '.join(warned))}.")
    answer.append("</p>")
    table = verdict_table(manifest)
    cells = []
    for phase, row in table.iterrows():
        tds = "".join(
            f'<td style="background:{_COLOURS.get(str(v).split(":")[0], "#fff")}">{esc(str(v))}</td>'
            for v in row.to_numpy()
        )
        cells.append(f"<tr><th>{esc(str(phase))}</th>{tds}</tr>")
    header = "".join(f"<th>{esc(str(c))}</th>" for c in ["phase", *table.columns])
    lines = summary_lines((p.label, p.verdicts) for p in phases)
    reasons = (
        f"<details><summary>Why each check warned or failed ({len(lines)})</summary><ul>"
        + "".join(f"<li>{esc(line)}</li>" for line in lines)
        + "</ul></details>"
        if lines
        else "<p>Every check passed or could not be measured.</p>"
    )
    return (
        f"{head}{''.join(answer)}{_grid(phases)}"
        f"<p>What each check means and what to do when it warns: {_guide_link()}.</p>"
        f"{reasons}<details><summary>Every check of every phase</summary>"
        f'<table class="validity"><tr>{header}</tr>{"".join(cells)}</table></details>'
    )


def _guide_link() -> str:
    """The checks' guide, linked where this lblab has its docs (a file URL: the report
    opens from disk), named in plain text where it has none (an installed package)."""
    name = "docs/guides/read-a-run.md, 'The checks'"
    if not CHECKS_GUIDE.is_file():
        return html.escape(name)
    href = f"{CHECKS_GUIDE.as_uri()}#{CHECKS_ANCHOR}"
    return f'<a href="{html.escape(href)}">{html.escape(name)}</a>'
