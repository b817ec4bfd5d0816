"""``lblab compare``: what changed between runs, and which metric differences are real.

Each run after the first is compared to the first (the baseline). For every run the
manifest gives the facts ``analysis.manifest.run_facts`` shows and its config; the
comparison lists the facts and config keys that differ. For every strategy x scenario
both runs measured, each metric's difference (run minus baseline) gets a 95 % Welch
interval over the replication values (``analysis.metrics.unit_metrics``, one value per
replication) when both runs have at least two replications; with one there is no spread
to estimate, and the row says "no interval". A difference is significant when its
interval excludes 0; whether it is better or worse comes from ``METRICS[..].better``.

Each run is read on its own (not pooled with ``open_results([a, b])``), so a live run and
a simulated one keep their strategy names and line up cell by cell.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from lblab.analysis.load import Results, Run, open_run
from lblab.analysis.manifest import run_facts
from lblab.analysis.metrics import CPU_COLUMNS, HEADLINE, METRICS, REQUEST_COLUMNS, unit_metrics
from lblab.analysis.ordering import order_scenarios, order_strategies
from lblab.analysis.stats import welch_diff
from lblab.errors import ConfigError

LEVEL = 0.95
TWIN_DIR = "twin"
COMPARE_JSON = "compare.json"
IGNORED_CONFIG_KEYS = frozenset({"run_id", "run.out"})
"""Config keys that differ between any two runs by construction (names, output folders)."""


@dataclass(frozen=True)
class RunSide:
    """One run as the comparison sees it: its facts, its config and its unit metrics."""

    label: str
    path: Path
    run_id: str
    simulated: bool
    facts: dict[str, str]
    config: dict[str, str]
    units: pd.DataFrame = field(repr=False)


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
    verdict: str  # "better" | "worse" | "not significant" | "no interval" | "no data"


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
    config_note: str = ""

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


def load_side(run: Run, label: str) -> RunSide:
    """Read one run's request and CPU columns and compute one row per replication."""
    results = Results([run])
    units = unit_metrics(
        results.table("requests", REQUEST_COLUMNS),
        results.table("cpu", CPU_COLUMNS),
        results.windows(),
    )
    return RunSide(
        label=label,
        path=run.path,
        run_id=run.run_id,
        simulated=run.simulated,
        facts=run_facts(run.manifest),
        config=config_keys(run.manifest),
        units=units,
    )


# ------------------------------------------------------------------ comparing


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
    )


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


def _values(units: pd.DataFrame) -> dict[tuple[str, str], pd.DataFrame]:
    if units.empty:
        return {}
    return {
        (str(s), str(c)): g for (s, c), g in units.groupby(["strategy", "scenario"], sort=False)
    }


def differences(
    baseline: pd.DataFrame, other: pd.DataFrame, metrics: Sequence[str], level: float = LEVEL
) -> tuple[list[Difference], list[str], list[str]]:
    """Per shared strategy x scenario and metric, the difference; and the unshared cells."""
    a, b = _values(baseline), _values(other)
    shared = set(a) & set(b)
    rows = []
    for strategy in order_strategies({s for s, _ in shared}):
        for scenario in order_scenarios({c for s, c in shared if s == strategy}):
            ga, gb = a[(strategy, scenario)], b[(strategy, scenario)]
            for metric in metrics:
                xa = pd.to_numeric(ga[metric], errors="coerce").dropna().to_numpy(dtype=float)
                xb = pd.to_numeric(gb[metric], errors="coerce").dropna().to_numpy(dtype=float)
                d = welch_diff(xa, xb, level)
                mean_a = float(xa.mean()) if xa.size else math.nan
                rows.append(
                    Difference(
                        strategy=strategy,
                        scenario=scenario,
                        metric=metric,
                        label=METRICS[metric].label,
                        better=METRICS[metric].better,
                        baseline=mean_a,
                        baseline_n=int(xa.size),
                        other=float(xb.mean()) if xb.size else math.nan,
                        other_n=int(xb.size),
                        diff=d.diff,
                        lo=d.lo,
                        hi=d.hi,
                        p=d.p,
                        relative=d.diff / abs(mean_a) if mean_a else math.nan,
                        significant=d.significant,
                        verdict=verdict_of(metric, d.significant, d.has_ci, d.diff),
                    )
                )

    def names(cells: set[tuple[str, str]]) -> list[str]:
        return [f"{s} x {c}" for s, c in sorted(cells)]

    return rows, names(set(a) - shared), names(set(b) - shared)


def check_metrics(names: Sequence[str]) -> list[str]:
    """The metrics asked for (HEADLINE when none), each one ``METRICS`` knows."""
    unknown = [n for n in names if n not in METRICS]
    if unknown:
        raise ConfigError(f"unknown metric {', '.join(unknown)}; metrics are: {', '.join(METRICS)}")
    return list(dict.fromkeys(names)) or list(HEADLINE)


def compare(paths: Sequence[Path], metrics: Sequence[str] = ()) -> Report:
    """Compare every run after the first to the first. Raises ``ConfigError`` on bad input."""
    names = check_metrics(metrics)
    paths = resolve_runs(paths)
    runs = [open_run(p) for p in paths]  # every folder checked before any is read
    sides = [load_side(r, label) for r, label in zip(runs, labels_for(paths), strict=True)]
    base = sides[0]
    comparisons = []
    for side in sides[1:]:
        rows, only_a, only_b = differences(base.units, side.units, names)
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
                config_note=note,
            )
        )
    return Report(runs=sides, metrics=names, comparisons=comparisons)


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
                }
                for s in report.runs
            ],
            "comparisons": [
                {
                    **{k: v for k, v in asdict(c).items() if k != "differences"},
                    "summary": {
                        v: c.count(v)
                        for v in ("better", "worse", "not significant", "no interval", "no data")
                    },
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
    "no data": "no data",
}


def sentence(d: Difference, c: Comparison) -> str:
    """``rr x sp+sr: p95 latency (ms) 12.0 -> 18.3 (+52.5 %, [+4.1, +8.5]) in B: worse``."""
    direction = "higher" if d.diff > 0 else "lower"
    return (
        f"{d.strategy} x {d.scenario}: {d.label} {direction} in {c.other} than in {c.baseline} "
        f"({fmt_value(d.metric, d.baseline)} -> {fmt_value(d.metric, d.other)}, "
        f"{fmt_relative(d) or fmt_value(d.metric, d.diff, True)}; 95 % interval of the "
        f"difference {fmt_interval(d)}): {d.verdict}"
    )


def headline(c: Comparison) -> str:
    """One line: how many differences are significant, in which direction."""
    tested = len(c.differences) - c.count("no interval") - c.count("no data")
    untested = c.count("no interval")
    if not tested:
        return (
            f"{c.other} vs {c.baseline}: no difference has an interval (a run has one "
            "replication), so none can be called significant; the changes are single "
            "measurements"
        )
    text = (
        f"{c.other} vs {c.baseline}: {c.count('better')} significantly better, "
        f"{c.count('worse')} significantly worse, {c.count('not significant')} not "
        f"significant, of {tested} differences with a 95 % interval"
    )
    return text + (f"; {untested} without one (one replication)" if untested else "")


# ------------------------------------------------------------------ terminal


_VERDICT_STYLE = {"better": "bold green", "worse": "bold red"}
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


def print_report(report: Report, console: Any) -> None:
    """The comparison as rich tables: what changed, then every difference."""
    from rich import box
    from rich.table import Table

    for c in report.comparisons:
        console.rule(f"{c.other} vs {c.baseline} (baseline)")
        changed = Table("", c.baseline, c.other, title="What changed", title_justify="left")
        for ch in [*c.facts, *c.config[:TERMINAL_CONFIG_ROWS]]:
            changed.add_row(ch.key, ch.baseline or "(not given)", ch.other or "(not given)")
        if changed.row_count:
            console.print(changed)
        else:
            console.print("What changed: nothing in the facts or the config.")
        if len(c.config) > TERMINAL_CONFIG_ROWS:
            console.print(f"... and {len(c.config) - TERMINAL_CONFIG_ROWS} more config keys")
        if c.config_note:
            console.print(c.config_note)
        table = Table(
            title=f"{c.other} against {c.baseline}: change with its 95 % interval (Welch)",
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
        )
        table.add_column("metric", no_wrap=True)
        table.add_column(c.baseline, justify="right")
        table.add_column(c.other, justify="right")
        table.add_column("change", justify="right", no_wrap=True)
        table.add_column("verdict")
        cell = None
        for d in c.differences:
            if (d.strategy, d.scenario) != cell:
                cell = (d.strategy, d.scenario)
                table.add_row(f"[bold]{d.strategy} x {d.scenario}[/]", end_section=False)
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
                console.print(f"only in {run} (not compared): {', '.join(cells)}")
        console.print(headline(c))
