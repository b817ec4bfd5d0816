"""The terminal output of ``lblab compare``: the comparison as rich tables.

For each run against the baseline: what changed (facts, conditions and the first
``TERMINAL_CONFIG_ROWS`` config keys), then every difference with its change relative to
the baseline and its verdict, under each cell's row with the cell's checks in both runs,
then the headline and the runs' agreement in the words of ``analysis/compare/words.py``.
"""

from __future__ import annotations

import math
from typing import Any

from lblab.analysis.compare.conditions import Checks
from lblab.analysis.compare.runs import Comparison, Difference, Report, given_text
from lblab.analysis.compare.words import agreement_lines, fmt_value, headline, what_changed
from lblab.validity import FAIL, WARN

_VERDICT_STYLE = {"better": "bold green", "worse": "bold red", "not comparable": "dim"}
_LEVEL_STYLE = {"fail": "bold red", "warn": "yellow", "pass": "green"}
TERMINAL_CONFIG_ROWS = 20


def fmt_change(d: Difference) -> str:
    """``+13.5% ± 4.2%`` (relative to the baseline), absolute where the baseline is 0."""
    if math.isnan(d.diff):
        return "n/a"
    half = (d.hi - d.lo) / 2.0
    if not math.isnan(d.relative):
        scale = abs(d.baseline)
        return f"{d.relative:+.1%}" + ("" if math.isnan(half) else f" ± {half / scale:.1%}")
    text = fmt_value(d.metric, d.diff, True)
    return text + ("" if math.isnan(half) else f" ± {fmt_value(d.metric, half)}")


def _cell_note(d: Difference, c: Comparison) -> str:
    """The checks that failed in the cell's phases, and why the cell is not comparable
    (the page has every check that warned as well)."""
    base, other = d.baseline_checks.fail_names, d.other_checks.fail_names
    if base and base == other:
        parts = [f"failed: {', '.join(base)} (both)"]
    else:
        parts = [
            f"{run} failed: {', '.join(n)}"
            for run, n in ((c.baseline, base), (c.other, other))
            if n
        ]
    if d.not_comparable:
        parts.append("not comparable: " + "; ".join(d.not_comparable))
    return "\n".join(parts)


def _level(checks: Checks) -> str:
    """``fail 2/3`` (phases that failed of those checked) in its colour; nothing for a run
    without checks."""
    if checks.level not in _LEVEL_STYLE:
        return ""
    count = {FAIL: checks.failed, WARN: checks.warned}.get(checks.level)
    text = checks.level if count is None else f"{checks.level} {count}/{checks.phases}"
    return f"[{_LEVEL_STYLE[checks.level]}]{text}[/]"


def print_report(report: Report, console: Any) -> None:
    """The comparison as rich tables: what changed, every difference beside both runs'
    checks, then the runs' agreement."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    runs = {r.label: r for r in report.runs}
    for c in report.comparisons:
        console.rule(escape(f"{c.other} vs {c.baseline} (baseline)"))
        changed = Table("", c.baseline, c.other, title="What changed", title_justify="left")
        for ch in [*c.facts, *c.conditions, *c.config[:TERMINAL_CONFIG_ROWS]]:
            changed.add_row(*(escape(given_text(v)) for v in (ch.key, ch.baseline, ch.other)))
        if changed.row_count:
            console.print(changed)
        if len(c.config) > TERMINAL_CONFIG_ROWS:
            console.print(f"... and {len(c.config) - TERMINAL_CONFIG_ROWS} more config keys")
        console.print(escape(what_changed(c)))
        table = Table(
            title=f"{c.other} against {c.baseline}: change with its 95 % interval (Welch); "
            "on each cell's row its checks in each run (phases failed or warned of those "
            "checked) and the checks that failed",
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
        )
        table.add_column("metric", no_wrap=True)
        table.add_column(c.baseline, justify="right")
        table.add_column(c.other, justify="right")
        table.add_column("change", justify="right", no_wrap=True)
        table.add_column("verdict", min_width=len("not comparable"))
        cell = None
        for d in c.differences:
            if (d.strategy, d.scenario) != cell:
                cell = (d.strategy, d.scenario)
                table.add_row(
                    f"[bold]{escape(f'{d.strategy} x {d.scenario}')}[/]",
                    *(_level(x) for x in (d.baseline_checks, d.other_checks)),
                    "",
                    escape(_cell_note(d, c)),
                    end_section=False,
                )
            table.add_row(
                f"  {d.metric}",
                fmt_value(d.metric, d.baseline),
                fmt_value(d.metric, d.other),
                fmt_change(d),
                d.verdict,
                style=_VERDICT_STYLE.get(d.verdict),
            )
        console.print(table)
        for cells, run in ((c.only_baseline, c.baseline), (c.only_other, c.other)):
            if cells:
                console.print(escape(f"only in {run} (not compared): {', '.join(cells)}"))
        console.print(escape(headline(c)))
        console.print(f"[bold]Agreement of {escape(c.other)} with {escape(c.baseline)}[/]")
        for line in agreement_lines(c, runs):
            console.print(escape(line))
