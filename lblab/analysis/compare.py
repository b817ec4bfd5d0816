"""``lblab compare``: what changed between runs, which metric differences are real, and
whether the runs agree.

Each run after the first is compared to the first (the baseline). For every run the
manifest gives the facts ``analysis.manifest.run_facts`` shows and its config; the
comparison lists the facts and config keys that differ, and for every strategy x
scenario both runs measured, the conditions it ran under that differ
(``analysis/conditions.py``: the offered load, the capacity, the strategy's options).
The one sentence on what changed is derived from these same lists.

Each metric's difference (run minus baseline) gets a 95 % Welch interval over the
replication values (``analysis.metrics.unit_metrics``, one value per replication) when
both runs have at least two replications; with one there is no spread to estimate, and
the row says "no interval". A difference is significant when its interval excludes 0;
whether it is better or worse comes from ``METRICS[..].better``. A cell whose conditions
differ is "not comparable", whatever its interval: a throughput that rose with the
offered rate says nothing about the strategy. Beside every difference stand both runs'
validity checks of the cell's phases (``phases[].verdicts``).

Then the runs' agreement (``analysis/agreement.py``) over the cells both measured under
the same conditions: the share of cells whose throughput agrees within 10 % and 15 %,
the strategy pairs both runs resolve in opposite directions, Kendall tau-b of the
throughput rankings per scenario, and each run's winners as its ``winners.json`` gives
them.

Each run is read on its own (not pooled with ``open_results([a, b])``), so a live run and
a simulated one keep their strategy names and line up cell by cell.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lblab.analysis.agreement import RANKED_BY, Agreement, PairKey, agreement, paired
from lblab.analysis.answer import WINNERS_FILE, Pair, answer, equivalence_of, read_answer
from lblab.analysis.conditions import NOT_CHECKED, SHARED, Checks, cell_checks, conditions
from lblab.analysis.load import Results, Run, open_run
from lblab.analysis.manifest import run_facts
from lblab.analysis.metrics import CPU_COLUMNS, HEADLINE, METRICS, REQUEST_COLUMNS, unit_metrics
from lblab.analysis.ordering import order_scenarios, order_strategies
from lblab.analysis.stats import welch_diff
from lblab.analysis.validity import failed_phases
from lblab.errors import ConfigError
from lblab.verdicts import FAIL, WARN

LEVEL = 0.95
TWIN_DIR = "twin"
COMPARE_JSON = "compare.json"
IGNORED_CONFIG_KEYS = frozenset({"run_id", "run.out"})
"""Config keys that differ between any two runs by construction (names, output folders)."""


@dataclass(frozen=True)
class RunSide:
    """One run as the comparison sees it: its facts, config, checks, unit metrics and
    winners (``winners_from``: its ``winners.json``, or computed when it has none)."""

    label: str
    path: Path
    run_id: str
    simulated: bool
    facts: dict[str, str]
    config: dict[str, str]
    manifest: dict[str, Any] = field(repr=False)
    units: pd.DataFrame = field(repr=False)
    checks: dict[tuple[str, str], Checks] = field(repr=False)
    winners: list[dict[str, Any]] = field(repr=False)
    winners_from: str = WINNERS_FILE


@dataclass(frozen=True)
class Change:
    """A fact or config key whose value differs (None: the run does not give it)."""

    key: str
    baseline: str | None
    other: str | None


@dataclass(frozen=True)
class Difference:
    """One metric of one strategy x scenario: baseline vs other, ``diff = other - baseline``."""

    strategy: str
    scenario: str
    metric: str
    label: str
    better: str
    baseline: float
    baseline_n: int
    other: float
    other_n: int
    diff: float
    lo: float
    hi: float
    p: float
    relative: float
    significant: bool
    verdict: str  # better | worse | not significant | no interval | not comparable | no data
    not_comparable: tuple[str, ...] = ()
    """The cell's conditions that differ: ``offered rate 8000 vs 8400``."""
    baseline_checks: Checks = NOT_CHECKED
    other_checks: Checks = NOT_CHECKED

    @property
    def failed_check(self) -> bool:
        """A phase of the cell failed a validity check in either run."""
        return FAIL in (self.baseline_checks.level, self.other_checks.level)


@dataclass(frozen=True)
class Comparison:
    """The baseline against one other run."""

    baseline: str
    other: str
    facts: list[Change]
    config: list[Change]
    differences: list[Difference]
    only_baseline: list[str]
    only_other: list[str]
    agreement: Agreement
    conditions: list[Change] = field(default_factory=list)
    """Conditions that differ, each with the cells it differs in: ``users (sp+sr)``."""
    config_note: str = ""
    conditions_note: str = ""

    def count(self, verdict: str) -> int:
        return sum(d.verdict == verdict for d in self.differences)


@dataclass(frozen=True)
class Report:
    """Everything ``compare.json``, the HTML page and the terminal table show."""

    runs: list[RunSide]
    metrics: list[str]
    comparisons: list[Comparison]
    level: float = LEVEL


# ------------------------------------------------------------------ reading runs


def resolve_runs(paths: Sequence[Path]) -> list[Path]:
    """The runs to compare: two or more, or one run and its twin (``RUN/twin/``)."""
    if len(paths) == 1:
        open_run(paths[0])  # a missing folder is named as missing, not as lacking a twin
        twin = paths[0] / TWIN_DIR
        if not (twin / "requests.parquet").exists():
            raise ConfigError(
                f"compare needs two or more results folders (got only {paths[0]}, which has "
                f"no twin): pass RUN_A RUN_B, or run `lblab twin {paths[0]}` first"
            )
        return [paths[0], twin]
    return list(paths)


def labels_for(paths: Sequence[Path]) -> list[str]:
    """Short names: the folder name, with its parent's where that alone is ambiguous."""
    resolved = [p.resolve() for p in paths]
    labels = []
    for p in resolved:
        inside_another = p.parent in resolved
        duplicate = sum(q.name == p.name for q in resolved) > 1
        labels.append(f"{p.parent.name}/{p.name}" if inside_another or duplicate else p.name)
    return labels


def flatten(value: Any, prefix: str = "") -> dict[str, str]:
    """``{"servers[0].cpu_quota": "0.25", ...}``: leaves of a JSON value as text."""
    if isinstance(value, Mapping):
        out: dict[str, str] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list) and value and any(isinstance(v, Mapping | list) for v in value):
        out = {}
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}[{i}]"))
        return out
    return {prefix: json.dumps(value, sort_keys=True)}


def config_keys(manifest: Mapping[str, Any]) -> dict[str, str]:
    """The config as flat keys; a simulated run's per-phase configs become one value set each.

    A live manifest holds one config; a simulated one a list, one per phase (strategy,
    scenario, replication). Each key then shows the distinct values over the phases, so
    two runs are compared setting by setting, not phase by phase.
    """
    config = manifest.get("config")
    phases = config if isinstance(config, list) else [config] if config is not None else []
    values: dict[str, set[str]] = {}
    for phase in phases:
        for key, text in flatten(phase).items():
            values.setdefault(key, set()).add(text)
    return {
        k: " | ".join(sorted(v)) for k, v in sorted(values.items()) if k not in IGNORED_CONFIG_KEYS
    }


def make_side(
    label: str,
    path: Path,
    manifest: dict[str, Any],
    units: pd.DataFrame,
    winners: list[dict[str, Any]] | None,
) -> RunSide:
    """A run from its manifest and units; ``winners`` None: the run has no
    ``winners.json``, and its answer is computed the way ``lblab report`` writes it."""
    winners_from = WINNERS_FILE
    if winners is None:
        cells = answer(units, failed_phases(manifest), equivalence=equivalence_of(manifest))
        winners = [c.to_dict() for c in cells]
        winners_from = f"computed (the run has no {WINNERS_FILE})"
    return RunSide(
        label=label,
        path=path,
        run_id=str(manifest.get("run_id") or path.name),
        simulated=bool(manifest.get("simulated", False)),
        facts=run_facts(manifest),
        config=config_keys(manifest),
        manifest=manifest,
        units=units,
        checks=cell_checks(manifest),
        winners=winners,
        winners_from=winners_from,
    )


def load_side(run: Run, label: str) -> RunSide:
    """Read one run's request and CPU columns, compute one row per replication, and read
    its ``winners.json``."""
    results = Results([run])
    units = unit_metrics(
        results.table("requests", REQUEST_COLUMNS),
        results.table("cpu", CPU_COLUMNS),
        results.windows(),
    )
    return make_side(label, run.path, run.manifest, units, read_answer(run.path))


# ------------------------------------------------------------------ comparing

Cell = tuple[str, str]
"""(strategy, scenario)."""


def changes(baseline: Mapping[str, str], other: Mapping[str, str]) -> list[Change]:
    """Keys whose values differ (or that only one side has), in the baseline's order."""
    keys = list(dict.fromkeys([*baseline, *other]))
    return [
        Change(k, baseline.get(k), other.get(k)) for k in keys if baseline.get(k) != other.get(k)
    ]


def config_changes(base: RunSide, other: RunSide) -> tuple[list[Change], str]:
    """Config keys that differ; between a live and a simulated run only keys both have.

    The two kinds of run are configured differently (``lblab run`` vs ``lblab simulate``
    settings), so keys only one has are counted, not listed.
    """
    found = changes(base.config, other.config)
    if base.simulated == other.simulated:
        return found, ""
    both = [c for c in found if c.baseline is not None and c.other is not None]
    one = len(found) - len(both)
    return both, (
        f"{one} config keys only one of the two has are not listed: a live run and a "
        "simulated one are configured differently; the facts above say what each ran"
        if one
        else ""
    )


def _given(value: str | None) -> str:
    return "(not given)" if value is None else value


def reason(change: Change) -> str:
    """``offered rate 8000 vs 8400``."""
    return f"{change.key} {_given(change.baseline)} vs {_given(change.other)}"


def condition_changes(
    base: RunSide, other: RunSide, cells: Iterable[Cell]
) -> tuple[dict[Cell, list[Change]], str]:
    """Per cell, the conditions that differ between the runs; and a note when a live run
    meets a simulated one, whose load and capacity are compared only where both describe
    them alike (``conditions.SHARED``: a quota and a service model are no common scale)."""
    mixed = base.simulated != other.simulated
    out = {}
    for strategy, scenario in cells:
        a = conditions(base.manifest, strategy, scenario)
        b = conditions(other.manifest, strategy, scenario)
        if mixed:
            a = {k: a[k] for k in SHARED if k in a and k in b}
            b = {k: b[k] for k in a}
        out[(strategy, scenario)] = changes(a, b)
    note = (
        "a live run and a simulated one give their capacity in different terms (CPU quotas "
        f"vs service models): of their conditions only {', '.join(SHARED)} are compared"
        if mixed
        else ""
    )
    return out, note


def _scope(cells: Sequence[Cell], shared: set[Cell]) -> str:
    """``every cell``, one scenario, one strategy, or the cells by name."""
    if set(cells) == shared:
        return "every cell"
    for index in (1, 0):  # a scenario's every cell, or a strategy's
        names = {cell[index] for cell in cells}
        if len(names) == 1 and set(cells) == {c for c in shared if c[index] in names}:
            return names.pop()
    return ", ".join(f"{s} x {c}" for s, c in cells)


def scoped(per_cell: Mapping[Cell, list[Change]]) -> list[Change]:
    """The conditions that differ, one row per (condition, values), keyed with the cells
    it differs in: ``offered rate (every cell)``."""
    groups: dict[tuple[str, str | None, str | None], list[Cell]] = {}
    for cell, found in per_cell.items():
        for ch in found:
            groups.setdefault((ch.key, ch.baseline, ch.other), []).append(cell)
    shared = set(per_cell)
    return [
        Change(f"{key} ({_scope(cells, shared)})", a, b) for (key, a, b), cells in groups.items()
    ]


def verdict_of(metric: str, significant: bool, has_ci: bool, diff: float) -> str:
    """Better or worse (by the metric's direction) when significant; otherwise why not."""
    if math.isnan(diff):
        return "no data"
    if not has_ci:
        return "no interval"
    if not significant:
        return "not significant"
    higher_is_better = METRICS[metric].better == "higher"
    return "better" if (diff > 0) == higher_is_better else "worse"


def _values(units: pd.DataFrame) -> dict[Cell, pd.DataFrame]:
    if units.empty:
        return {}
    return {
        (str(s), str(c)): g for (s, c), g in units.groupby(["strategy", "scenario"], sort=False)
    }


def _column(group: pd.DataFrame, metric: str) -> np.ndarray:
    """A cell's replication values of ``metric`` (missing ones dropped)."""
    return pd.to_numeric(group[metric], errors="coerce").dropna().to_numpy(dtype=float)


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if values.size else math.nan


def differences(
    base: RunSide,
    other: RunSide,
    metrics: Sequence[str],
    reasons: Mapping[Cell, tuple[str, ...]],
    level: float = LEVEL,
) -> tuple[list[Difference], list[str], list[str]]:
    """Per shared strategy x scenario and metric, the difference; and the unshared cells.

    ``reasons``: per cell, the conditions that differ; such a cell's differences are
    "not comparable" and none is significant."""
    a, b = _values(base.units), _values(other.units)
    shared = set(a) & set(b)
    rows = []
    for strategy in order_strategies({s for s, _ in shared}):
        for scenario in order_scenarios({c for s, c in shared if s == strategy}):
            cell = (strategy, scenario)
            why = tuple(reasons.get(cell, ()))
            for metric in metrics:
                xa, xb = _column(a[cell], metric), _column(b[cell], metric)
                d = welch_diff(xa, xb, level)
                verdict = verdict_of(metric, d.significant, d.has_ci, d.diff)
                mean_a = _mean(xa)
                rows.append(
                    Difference(
                        strategy=strategy,
                        scenario=scenario,
                        metric=metric,
                        label=METRICS[metric].label,
                        better=METRICS[metric].better,
                        baseline=mean_a,
                        baseline_n=int(xa.size),
                        other=_mean(xb),
                        other_n=int(xb.size),
                        diff=d.diff,
                        lo=d.lo,
                        hi=d.hi,
                        p=d.p,
                        relative=d.diff / abs(mean_a) if mean_a else math.nan,
                        significant=d.significant and not why,
                        verdict="not comparable" if why and verdict != "no data" else verdict,
                        not_comparable=why,
                        baseline_checks=base.checks.get(cell, NOT_CHECKED),
                        other_checks=other.checks.get(cell, NOT_CHECKED),
                    )
                )

    def names(cells: set[Cell]) -> list[str]:
        return [f"{s} x {c}" for s, c in sorted(cells)]

    return rows, names(set(a) - shared), names(set(b) - shared)


def run_agreement(
    base: RunSide, other: RunSide, reasons: Mapping[Cell, tuple[str, ...]]
) -> Agreement:
    """The runs' agreement over the cells both measured under the same conditions
    (``reasons``: per shared cell, the conditions that differ)."""
    a, b = _values(base.units), _values(other.units)
    same = [cell for cell, why in reasons.items() if not why]
    means = {
        cell: (_mean(_column(a[cell], RANKED_BY)), _mean(_column(b[cell], RANKED_BY)))
        for cell in same
    }
    strategies: dict[str, list[str]] = {}
    for s, c in same:
        strategies.setdefault(c, []).append(s)

    def pairs(side: RunSide) -> dict[PairKey, Pair]:
        left_out = failed_phases(side.manifest)
        return paired(side.units, left_out, strategies, HEADLINE, equivalence_of(side.manifest))

    scenarios = {c for _, c in [*a, *b]}
    comparable = {
        c
        for c in scenarios
        if {x for x in a if x[1] == c} == {x for x in b if x[1] == c}
        and all(not reasons.get(x) for x in a if x[1] == c)
    }
    return agreement(
        means,
        sum(bool(why) for why in reasons.values()),
        (pairs(base), pairs(other)),
        (base.winners, other.winners),
        comparable,
    )


def check_metrics(names: Sequence[str]) -> list[str]:
    """The metrics asked for (HEADLINE when none), each one ``METRICS`` knows."""
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise ConfigError(f"unknown metric {', '.join(unknown)}; metrics are: {', '.join(METRICS)}")
    return list(dict.fromkeys(names)) or list(HEADLINE)


def compare_sides(sides: Sequence[RunSide], metrics: Sequence[str] = ()) -> Report:
    """Compare every run after the first to the first."""
    names = check_metrics(metrics)
    base = sides[0]
    comparisons = []
    for side in sides[1:]:
        shared = sorted(set(_values(base.units)) & set(_values(side.units)))
        per_cell, conditions_note = condition_changes(base, side, shared)
        reasons = {cell: tuple(reason(ch) for ch in found) for cell, found in per_cell.items()}
        rows, only_a, only_b = differences(base, side, names, reasons)
        config, note = config_changes(base, side)
        comparisons.append(
            Comparison(
                baseline=base.label,
                other=side.label,
                facts=[f for f in changes(base.facts, side.facts) if f.key != "run"],
                config=config,
                differences=rows,
                only_baseline=only_a,
                only_other=only_b,
                agreement=run_agreement(base, side, reasons),
                conditions=scoped(per_cell),
                config_note=note,
                conditions_note=conditions_note,
            )
        )
    return Report(runs=list(sides), metrics=names, comparisons=comparisons)


def compare(paths: Sequence[Path], metrics: Sequence[str] = ()) -> Report:
    """Compare every run after the first to the first. Raises ``ConfigError`` on bad input."""
    check_metrics(metrics)
    paths = resolve_runs(paths)
    runs = [open_run(p) for p in paths]  # every folder checked before any is read
    sides = [load_side(r, label) for r, label in zip(runs, labels_for(paths), strict=True)]
    return compare_sides(sides, metrics)


# ------------------------------------------------------------------ writing


def default_out(report: Report) -> Path:
    """``compare-<a>-vs-<b>`` next to the baseline run."""
    name = "compare-" + "-vs-".join(s.label.replace("/", "-") for s in report.runs)
    return report.runs[0].path.resolve().parent / name


def _plain(value: Any) -> Any:
    """JSON-ready: NaN becomes null, paths text."""
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def to_json(report: Report) -> dict[str, Any]:
    """The report as plain data (``compare.json``)."""
    return _plain(
        {
            "level": report.level,
            "baseline": report.runs[0].label,
            "metrics": report.metrics,
            "runs": [
                {
                    "label": s.label,
                    "path": s.path,
                    "run_id": s.run_id,
                    "simulated": s.simulated,
                    "facts": s.facts,
                    "winners_from": s.winners_from,
                }
                for s in report.runs
            ],
            "comparisons": [
                {
                    **{k: v for k, v in asdict(c).items() if k != "differences"},
                    "what_changed": what_changed(c),
                    "headline": headline(c),
                    "summary": {v: c.count(v) for v in VERDICT_TEXT},
                    "reversed_pairs": len(c.agreement.reversed),
                    "differences": [asdict(d) for d in c.differences],
                }
                for c in report.comparisons
            ],
        }
    )


# ------------------------------------------------------------------ words and numbers


def fmt_value(metric: str, value: float, signed: bool = False) -> str:
    """A metric's value in its own format (``{:.2%}`` for rates); ``n/a`` for NaN."""
    if math.isnan(value):
        return "n/a"
    fmt = METRICS[metric].fmt
    return (fmt.replace("{:", "{:+", 1) if signed else fmt).format(value)


def fmt_interval(d: Difference) -> str:
    """``[-3.1, +0.4]``, or why there is none."""
    if d.verdict == "no data":
        return "no data"
    if math.isnan(d.lo):
        return f"no interval ({d.baseline_n} vs {d.other_n} replications)"
    return f"[{fmt_value(d.metric, d.lo, True)}, {fmt_value(d.metric, d.hi, True)}]"


def fmt_relative(d: Difference) -> str:
    return "" if math.isnan(d.relative) else f"{d.relative:+.1%}"


def fmt_p(p: float) -> str:
    if math.isnan(p):
        return ""
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


VERDICT_TEXT = {
    "better": "better (significant)",
    "worse": "worse (significant)",
    "not significant": "no significant difference",
    "no interval": "no interval: too few replications to tell",
    "not comparable": "not comparable",
    "no data": "no data",
}


def verdict_text(d: Difference) -> str:
    """The verdict in words; a cell that is not comparable says which conditions differ."""
    if d.verdict == "not comparable":
        return "not comparable: " + "; ".join(d.not_comparable)
    return VERDICT_TEXT[d.verdict]


def checks_text(d: Difference, c: Comparison) -> str:
    """``checks: A fail in 1 of 3 phases: disturbance; B pass``."""
    return f"checks: {c.baseline} {d.baseline_checks.text()}; {c.other} {d.other_checks.text()}"


def sentence(d: Difference, c: Comparison) -> str:
    """``rr x sp+sr: p95 latency (ms) 12.0 -> 18.3 (+52.5 %, [+4.1, +8.5]) in B: worse``,
    with both runs' checks of the cell."""
    direction = "higher" if d.diff > 0 else "lower"
    return (
        f"{d.strategy} x {d.scenario}: {d.label} {direction} in {c.other} than in {c.baseline} "
        f"({fmt_value(d.metric, d.baseline)} -> {fmt_value(d.metric, d.other)}, "
        f"{fmt_relative(d) or fmt_value(d.metric, d.diff, True)}; 95 % interval of the "
        f"difference {fmt_interval(d)}): {d.verdict} ({checks_text(d, c)})"
    )


def _keys(changes: Sequence[Change], most: int = 5) -> str:
    names = [ch.key for ch in changes[:most]]
    return ", ".join(names) + (", ..." if len(changes) > most else "")


def what_changed(c: Comparison) -> str:
    """The "What changed" table in one sentence, from the same lists it shows (facts,
    conditions, config keys): "the same" only when none of them lists anything and no
    key was left uncompared."""
    found = [
        f"{len(items)} {noun}{'' if len(items) == 1 else 's'} ({_keys(items)})"
        for noun, items in (
            ("fact", c.facts),
            ("condition", c.conditions),
            ("config key", c.config),
        )
        if items
    ]
    notes = [n for n in (c.conditions_note, c.config_note) if n]
    if not found and not notes:
        return "Nothing the comparison reads differs: the facts, the conditions and the config are the same."
    text = (
        "Differ: " + "; ".join(found)
        if found
        else "No listed fact, condition or config key differs"
    )
    return text + "".join(f"; {n}" for n in notes) + "."


def _reasons_text(c: Comparison, most: int = 3) -> str:
    """The distinct conditions that make cells not comparable: ``offered rate 8000 vs 8400``."""
    texts = list(dict.fromkeys(r for d in c.differences for r in d.not_comparable))
    return "; ".join(texts[:most]) + (
        f"; and {len(texts) - most} more" if len(texts) > most else ""
    )


def headline(c: Comparison) -> str:
    """One line: how many differences are significant, in which direction, and how many
    are not comparable (their conditions differ) or rest on a phase that failed a check."""
    who = f"{c.other} vs {c.baseline}"
    blocked = c.count("not comparable")
    untested = c.count("no interval")
    tested = len(c.differences) - untested - blocked - c.count("no data")
    if blocked and not tested and not untested:
        return (
            f"{who}: not comparable: {_reasons_text(c)}; so no difference is called "
            "significant, better or worse"
        )
    if tested:
        text = (
            f"{who}: {c.count('better')} significantly better, {c.count('worse')} "
            f"significantly worse, {c.count('not significant')} not significant, of {tested} "
            "differences with a 95 % interval"
        )
        flagged = sum(d.significant and d.failed_check for d in c.differences)
        if flagged:
            text += f" ({flagged} of the significant ones rest on phases that failed a check)"
        if untested:
            text += f"; {untested} without one (one replication)"
    else:
        text = (
            f"{who}: no difference has an interval (a run has one replication), so none "
            "can be called significant; the changes are single measurements"
        )
    if blocked:
        text += f"; {blocked} not comparable ({_reasons_text(c)})"
    return text


def _tau(value: float | None) -> str:
    return "undefined (all tied)" if value is None else f"{value:+.2f}"


def agreement_lines(c: Comparison, runs: Mapping[str, RunSide]) -> list[str]:
    """The runs' agreement in sentences, for the terminal and the page alike."""
    g = c.agreement
    lines = []
    if g.not_comparable:
        lines.append(
            f"{g.not_comparable} cells both runs measured differ in their conditions and are "
            "left out of the agreement below."
        )
    if not g.cells:
        lines.append("No cell ran under equal conditions in both runs: nothing to agree on.")
    else:
        within = ", ".join(f"within {t * 100:.0f} %: {n} ({n / g.cells:.0%})" for t, n in g.within)
        lines.append(f"Throughput of {g.cells} cells agrees {within}.")
        lines.append(
            f"Strategy pairs both runs resolve (headline metrics, 95 % interval paired within "
            f"blocks): {len(g.resolved_by_both)}, of them reversed: {len(g.reversed)}; "
            f"resolved in one run only: {g.resolved_by_one}."
        )
        lines += [
            f"  reversed: {p.scenario} {p.metric}: {c.baseline} {p.baseline}; {c.other} {p.other}"
            for p in g.reversed
        ]
        if g.rankings:
            taus = ", ".join(
                f"{r.scenario} {_tau(r.tau)} ({len(r.baseline)} strategies)" for r in g.rankings
            )
            lines.append(f"Kendall tau-b of the throughput rankings: {taus}.")
    if g.winners:
        counts = {a: sum(w.agree == a for w in g.winners) for a in WINNER_AGREEMENT}
        sources = "; ".join(
            f"{label}: {runs[label].winners_from}" for label in (c.baseline, c.other)
        )
        lines.append(
            f"Winners ({sources}), of {len(g.winners)} scenario x metric cells: "
            + ", ".join(f"{n} {a}" for a, n in counts.items() if n)
            + "."
        )
        lines += [
            f"  different: {w.scenario} {w.metric}: {c.baseline} {w.baseline}; {c.other} {w.other}"
            for w in g.winners
            if w.agree == "different"
        ]
    return lines


WINNER_AGREEMENT = ("same", "different", "not settled in both", "not comparable")


# ------------------------------------------------------------------ terminal


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
            changed.add_row(*(escape(_given(v)) for v in (ch.key, ch.baseline, ch.other)))
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
