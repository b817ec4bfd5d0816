"""``lblab compare``: what changed between runs, which metric differences are real, and
whether the runs agree.

Each run after the first is compared to the first (the baseline). For every run the
manifest gives the facts ``analysis.manifest.run_facts`` shows and its config; the
comparison lists the facts and config keys that differ, and for every strategy x
scenario both runs measured, the conditions it ran under that differ
(``analysis/compare/conditions.py``: the offered load, the capacity, the strategy's
options). The one sentence on what changed is derived from these same lists.

Each metric's difference (run minus baseline) gets a 95 % Welch interval over the
replication values (``analysis.metrics.unit_metrics``, one value per replication) when
both runs have at least two replications; with one there is no spread to estimate, and
the row says "no interval". A difference is significant when its interval excludes 0;
whether it is better or worse comes from ``METRICS[..].better``. A cell whose conditions
differ is "not comparable", whatever its interval: a throughput that rose with the
offered rate says nothing about the strategy. Beside every difference stand both runs'
validity checks of the cell's phases (``phases[].verdicts``).

Then the runs' agreement (``analysis/compare/agreement.py``) over the cells both
measured under the same conditions: the share of cells whose throughput agrees within
10 % and 15 %, the strategy pairs both runs resolve in opposite directions, Kendall
tau-b of the throughput rankings per scenario, and each run's winners as its
``winners.json`` gives them.

Each run is read on its own (not pooled with ``open_results([a, b])``), so a live run and
a simulated one keep their strategy names and line up cell by cell.

The ``Report`` is put in words by ``analysis/compare/words.py`` (also ``compare.json``),
shown as terminal tables by ``analysis/compare/terminal.py`` and as a page by
``analysis/compare/report.py``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lblab.analysis.compare.agreement import RANKED_BY, Agreement, PairKey, agreement, paired
from lblab.analysis.compare.conditions import NOT_CHECKED, SHARED, Checks, cell_checks, conditions
from lblab.analysis.hard_cases import run_conditions
from lblab.analysis.load import Results, Run, open_run
from lblab.analysis.manifest import run_facts
from lblab.analysis.metrics import CPU_COLUMNS, HEADLINE, METRICS, REQUEST_COLUMNS, unit_metrics
from lblab.analysis.ordering import order_scenarios, order_strategies
from lblab.analysis.run import WINNERS_FILE, Pair, answer, equivalence_of, read_answer
from lblab.analysis.stats import welch_diff
from lblab.analysis.twin import TWIN_JSON
from lblab.analysis.validity import failed_phases
from lblab.errors import ConfigError
from lblab.manifest import Manifest
from lblab.validity import FAIL

LEVEL = 0.95
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
    manifest: Manifest = field(repr=False)
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
        twin = paths[0] / TWIN_JSON.parent
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


def config_keys(manifest: Manifest) -> dict[str, str]:
    """The config as flat keys; a simulated run's per-phase configs become one value set each.

    A live run has one config; a simulated one one per phase (``phase_configs``: strategy,
    scenario, replication). Each key then shows the distinct values over the phases, so
    two runs are compared setting by setting, not phase by phase.
    """
    phases = manifest.phase_configs or [manifest.config]
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
    manifest: Manifest,
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
        run_id=manifest.run_id,
        simulated=manifest.simulated,
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
        run_conditions(results.runs),
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


def given_text(value: str | None) -> str:
    """A value as the tables show it: ``(not given)`` where the run does not give it."""
    return "(not given)" if value is None else value


def reason(change: Change) -> str:
    """``offered rate 8000 vs 8400``."""
    return f"{change.key} {given_text(change.baseline)} vs {given_text(change.other)}"


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


def default_out(report: Report) -> Path:
    """``compare-<a>-vs-<b>`` next to the baseline run."""
    name = "compare-" + "-vs-".join(s.label.replace("/", "-") for s in report.runs)
    return report.runs[0].path.resolve().parent / name
