"""The run's answer: for each scenario and headline metric, a winner, a tie, or not yet.

Every comparison is *paired within blocks*. A block (a replication) runs each strategy
of a scenario once, in a seeded random order, minutes apart at most; a drift of the
machine between blocks (another tenant, heat, a cache) moves both phases of a pair and
cancels in their difference, where pooled means would fold it into each strategy's
interval. For strategies ``a`` and ``b`` of a scenario, over the blocks where both
phases ran and passed their validity checks:

- the difference per block of the logarithms, ``d_k = log(a_k / b_k)``, its mean and
  Student-t interval: a ratio, so a drift that scales a block's figures cancels (a
  metric that can be 0, the failure rate, takes plain differences and an absolute
  margin instead: ``ABSOLUTE_MARGINS``);
- **resolved** when the 95 % interval excludes 0 (who is better follows the metric's
  direction);
- **equivalent** when the 90 % interval lies inside +-margin (``log(1 + margin)``
  for ratios): two one-sided tests at
  5 % each (TOST), the equivalence test of clinical trials and of Lakens (2017). Two
  identical series (failure rate 0 throughout) are equivalent.

A scenario x metric *cell* is:

- ``winner``: one strategy is resolved better than every other one, each by more
  than the margin (a consistent difference inside the margin is no win);
- ``tie``: the strategies no other one beats are pairwise equivalent (every one
  outside that group is beaten);
- ``unresolved``: otherwise; ``why`` names the pairs still open and their intervals
  (one block gives no interval at all).

``answer(units, ...)`` returns the cells; ``write_answer`` writes ``winners.json``, which
the report, the notebooks and ``lblab compare`` read (none computes its own), and the
runner's adaptive replications stop on ``settled``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lblab.analysis.hard_cases import run_conditions
from lblab.analysis.load import open_results
from lblab.analysis.metrics import CPU_COLUMNS, HEADLINE, METRICS, REQUEST_COLUMNS, unit_metrics
from lblab.analysis.numbers import interval
from lblab.analysis.ordering import order_scenarios, order_strategies
from lblab.analysis.run.instrument import cell_checks, instrument_rows
from lblab.analysis.run.summary_csv import write_summary_csv
from lblab.analysis.stats import t_quantile
from lblab.analysis.validity import failed_phases
from lblab.errors import ConfigError
from lblab.files import write_bytes_atomically
from lblab.json_fields import (
    Fields,
    an_object,
    checked,
    choice,
    optional,
    read_json,
    text,
    to_plain,
    tuple_of,
)
from lblab.manifest import Manifest

WINNERS_FILE = "winners.json"
SCHEMA_VERSION = 1
LEVEL = 0.95
DEFAULT_MARGIN = 0.05
ABSOLUTE_MARGINS = {
    "failure_rate": 0.005,
    "success_rate": 0.005,
    "recovery_s": 0.5,
    "load_deviation": 0.02,
}
"""Metrics compared by an absolute margin: a failure rate of 0.1 % against 0.2 % is a
100 % relative difference and no difference a user cares about; a success rate's 99.5 %
against 99.0 % is a 0.5 % ratio that hides a doubling of the failures; a recovery is
timed in bins of a second and more (half a second is no difference), and a load
deviation of 0.01 against 0.02 is 1 % of the requests."""
MARGIN_UNITS = {
    "failure_rate": (100.0, " percentage points"),
    "success_rate": (100.0, " percentage points"),
    "recovery_s": (1.0, " s"),
    "load_deviation": (1.0, ""),
}
"""How each absolute margin's differences read: (scale, unit)."""
WINNER, TIE, UNRESOLVED = "winner", "tie", "unresolved"


@dataclass(frozen=True, slots=True)
class Pair:
    """``a`` against ``b`` on one metric of one scenario, paired within blocks.

    ``log``: the differences are of logarithms (``log(a_k / b_k)``), so a drift that
    scales both strategies' figures in a block cancels whatever its size; ``diff``,
    ``lo`` and ``hi`` then read as ratios through ``exp``. Otherwise (a metric compared
    by an absolute margin, or a zero among the values) plain differences."""

    a: str
    b: str
    blocks: int
    diff: float  # mean of the paired differences
    lo: float  # its 95 % interval
    hi: float
    lo90: float  # its 90 % interval (the equivalence test's)
    hi90: float
    reference: float  # b's mean over the paired blocks
    margin: float  # the equivalence margin, in the differences' scale
    log: bool

    @property
    def resolved(self) -> bool:
        return self.blocks >= 2 and (self.lo > 0 or self.hi < 0)

    @property
    def equivalent(self) -> bool:
        return self.blocks >= 2 and -self.margin <= self.lo90 and self.hi90 <= self.margin

    @property
    def settled(self) -> bool:
        return self.resolved or self.equivalent

    def relative(self, value: float) -> float:
        """A difference of this pair as a share of ``b`` (``+0.08``: 8 % more)."""
        if self.log:
            return math.expm1(value)
        return value / abs(self.reference) if self.reference else math.nan

    def describe(self) -> str:
        """``wrr vs lc: +8.1 % [+2.0, +14.3] over 3 blocks``."""
        if self.blocks < 2:
            return f"{self.a} vs {self.b}: {self.blocks} block(s), no interval yet"
        if self.log or self.reference:
            mid, lo, hi = (100 * self.relative(v) for v in (self.diff, self.lo, self.hi))
            shown = interval(mid, lo, hi, unit=" %")
        else:
            shown = interval(self.diff, self.lo, self.hi)
        return f"{self.a} vs {self.b}: {shown} over {self.blocks} blocks"


@dataclass(frozen=True, slots=True)
class Cell:
    """The answer for one scenario and metric (one entry of ``winners.json``)."""

    scenario: str
    metric: str
    better: str
    verdict: str
    strategies: tuple[str, ...]
    """The winner, or the tied group; unresolved: those with the best mean."""
    means: Mapping[str, float]
    blocks: int
    runner_up: str | None = None
    difference: Mapping[str, float] | None = None
    """Winner (or best) vs runner-up: ``diff``, ``lo``, ``hi`` and ``relative`` (the
    same three divided by the runner-up's mean), over ``blocks``."""
    why: str = ""
    left_out: tuple[Mapping[str, Any], ...] = ()
    open_pairs: int = 0
    """Pairs of this scenario and metric neither resolved nor equivalent."""
    pairs: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["strategies"], out["left_out"] = list(self.strategies), list(self.left_out)
        out["pairs"] = list(self.pairs)
        return out


def compare(
    metric: str, a: str, b: str, a_values: Sequence[float], b_values: Sequence[float],
    equivalence: float,
) -> Pair:  # fmt: skip
    """``a`` against ``b`` from their values in the same blocks (NaN pairs dropped)."""
    x, y = np.asarray(a_values, float), np.asarray(b_values, float)
    keep = ~(np.isnan(x) | np.isnan(y))
    x, y = x[keep], y[keep]
    n = len(x)
    reference = float(y.mean()) if n else math.nan
    log = metric not in ABSOLUTE_MARGINS and n > 0 and bool((x > 0).all() and (y > 0).all())
    if log:
        d, margin = np.log(x) - np.log(y), math.log1p(equivalence)
    else:
        d = x - y
        margin = ABSOLUTE_MARGINS.get(metric, equivalence * abs(reference) if n else 0.0)
    if n < 2:
        mean = float(d.mean()) if n else math.nan
        return Pair(a, b, n, mean, *(math.nan,) * 4, reference, margin, log)
    mean = float(d.mean())
    se = float(d.std(ddof=1)) / math.sqrt(n)
    t95, t90 = t_quantile(0.5 + LEVEL / 2, n - 1), t_quantile(0.95, n - 1)
    return Pair(
        a, b, n, mean, mean - t95 * se, mean + t95 * se, mean - t90 * se, mean + t90 * se,
        reference, margin, log,
    )  # fmt: skip


def answer(
    units: pd.DataFrame,
    left_out: Iterable[tuple[str, str, int, str]] = (),
    metrics: Sequence[str] = HEADLINE,
    equivalence: float = DEFAULT_MARGIN,
) -> list[Cell]:
    """The cells for every scenario and metric of ``units`` (one row per scenario x
    strategy x replication, as ``metrics.unit_metrics`` makes them, of one run).

    ``left_out``: (scenario, strategy, replication, why) of phases that failed a check;
    their blocks do not count for that strategy's pairs."""
    if units.empty:
        return []
    dropped: dict[tuple[str, str, int], str] = {(c, s, int(r)): w for c, s, r, w in left_out}
    frame = units.assign(replication=units["replication"].astype(int))
    cells = []
    for scenario in order_scenarios(frame["scenario"].unique()):
        sub = frame.loc[frame["scenario"] == scenario]
        out = [
            {"strategy": s, "replication": int(r), "why": dropped[(scenario, s, int(r))]}
            for s, r in zip(sub["strategy"], sub["replication"], strict=True)
            if (scenario, s, int(r)) in dropped
        ]
        keep = [
            (scenario, s, int(r)) not in dropped
            for s, r in zip(sub["strategy"], sub["replication"], strict=True)
        ]
        for metric in metrics:
            if metric in sub.columns:
                cells.append(_cell(scenario, metric, sub.loc[keep], tuple(out), equivalence))
    return cells


def _cell(
    scenario: str, metric: str, rows: pd.DataFrame, left_out: tuple[Mapping[str, Any], ...],
    equivalence: float,
) -> Cell:  # fmt: skip
    better = METRICS[metric].better
    table = rows.pivot_table(index="replication", columns="strategy", values=metric)
    table = table.reindex(columns=order_strategies(table.columns))
    means = {str(s): float(v) for s, v in table.mean().items() if not math.isnan(v)}
    blocks = int(table.notna().any(axis=1).sum())
    if not means:
        return Cell(scenario, metric, better, UNRESOLVED, (), {}, 0, why="no values",
                    left_out=left_out)  # fmt: skip
    ranked = sorted(means, key=lambda s: means[s], reverse=better == "higher")
    pairs = {
        (a, b): compare(metric, a, b, table[a].to_list(), table[b].to_list(), equivalence)
        for i, a in enumerate(ranked)
        for b in ranked[i + 1 :]
    }

    def pair(a: str, b: str) -> Pair:
        return pairs[(a, b)] if (a, b) in pairs else pairs[(b, a)]

    def beats(a: str, b: str) -> bool:
        """``a`` resolved better than ``b`` by more than the margin."""
        p = pair(a, b)
        if not p.resolved or p.equivalent:
            return False
        a_higher = p.lo > 0 if p.a == a else p.hi < 0
        return a_higher == (better == "higher")

    # Who no other strategy beats; the best of them by mean leads the cell.
    unbeaten = [s for s in ranked if not any(beats(o, s) for o in ranked if o != s)]
    best = unbeaten[0] if unbeaten else ranked[0]
    rest = [s for s in ranked if s != best]
    runner_up = rest[0] if rest else None
    base: dict[str, Any] = {
        "scenario": scenario, "metric": metric, "better": better, "means": means,
        "blocks": blocks, "runner_up": runner_up, "left_out": left_out,
        "open_pairs": sum(not p.settled for p in pairs.values()),
        "pairs": tuple(p.describe() for p in pairs.values()),
        "difference": _difference(pair(best, runner_up), best) if runner_up else None,
    }  # fmt: skip
    if not rest:
        return Cell(verdict=UNRESOLVED, strategies=(best,), why="only one strategy", **base)
    if len(unbeaten) == 1 and all(beats(best, o) for o in rest):
        return Cell(verdict=WINNER, strategies=(best,), **base)
    within = [pair(a, b) for i, a in enumerate(unbeaten) for b in unbeaten[i + 1 :]]
    if len(unbeaten) > 1 and all(p.equivalent for p in within):
        return Cell(verdict=TIE, strategies=tuple(unbeaten), **base)
    still_open = [p.describe() for p in pairs.values() if not p.settled]
    why = "; ".join(still_open) or "the results do not order (a beats b, b beats c, c beats a)"
    # The strategies that share the best mean (all of them when every mean is 0).
    leading = tuple(s for s in unbeaten or ranked if means[s] == means[best])
    return Cell(verdict=UNRESOLVED, strategies=leading, why=why, **base)


def _difference(p: Pair, best: str) -> dict[str, float]:
    """``best`` vs the runner-up: the mean difference and its interval, as shares of the
    runner-up (``relative*``) and, for absolute pairs, in the metric's unit."""
    if p.a != best:  # the pair was made the other way round
        p = replace(p, a=p.b, b=p.a, diff=-p.diff, lo=-p.hi, hi=-p.lo, lo90=-p.hi90,
                    hi90=-p.lo90)  # fmt: skip
        if not p.log:  # the reference is now the other strategy's mean
            return {"blocks": p.blocks, "log": False, "diff": p.diff, "lo": p.lo, "hi": p.hi,
                    "lo90": p.lo90, "hi90": p.hi90}  # fmt: skip
    return {
        "blocks": p.blocks, "log": p.log,
        "relative": p.relative(p.diff), "relative_lo": p.relative(p.lo),
        "relative_hi": p.relative(p.hi), "relative_lo90": p.relative(p.lo90),
        "relative_hi90": p.relative(p.hi90),
        **({} if p.log else {"diff": p.diff, "lo": p.lo, "hi": p.hi, "lo90": p.lo90,
                             "hi90": p.hi90}),
    }  # fmt: skip


def settled(cells: Iterable[Cell]) -> bool:
    """Every cell is decided and every pair in it resolved or equivalent: more blocks
    would not add. A cell of one strategy has nothing to decide; a cell whose phases
    all failed their checks has no value at all, and is not settled; nor is one where a
    strategy's every phase failed (its pairs have no block yet)."""
    return all(c.open_pairs == 0 and not _undecided(c) for c in cells)


def untrusted(cell: Cell) -> bool:
    """A strategy of the cell has no value any check trusts: each of its phases failed
    one (or the cell has no value at all). Another block may give it one."""
    return not cell.means or any(o["strategy"] not in cell.means for o in cell.left_out)


def _undecided(cell: Cell) -> bool:
    """Unresolved with more than one strategy, or ``untrusted``."""
    return untrusted(cell) or (cell.verdict == UNRESOLVED and len(cell.means) != 1)


def scenarios_to_settle(cells: Iterable[Cell]) -> list[str]:
    """The scenarios another block should run, in the run's order: those with a cell
    still undecided (or with no value, or a strategy with none: every phase of it failed
    its checks); once every cell is decided, those with a pair still open. A scenario
    whose answer is in costs no more phases while another's is not. Empty exactly when
    ``settled``."""
    cells = list(cells)
    undecided = [c.scenario for c in cells if _undecided(c)]
    chosen = set(undecided) or {c.scenario for c in cells if c.open_pairs}
    return list(dict.fromkeys(c.scenario for c in cells if c.scenario in chosen))


def equivalence_of(manifest: Manifest) -> float:
    """The run's equivalence margin (``run.equivalence``; the default for older runs and
    simulated ones)."""
    run = manifest.config.get("run")
    value = run.get("equivalence") if isinstance(run, Mapping) else None
    return float(value) if isinstance(value, int | float) and value > 0 else DEFAULT_MARGIN


def metrics_of(manifest: Manifest) -> tuple[str, ...]:
    """The metrics a run's answer judges (``run.metrics``; the headline ones when it
    names none, and for older and simulated runs)."""
    run = manifest.config.get("run")
    named = run.get("metrics") if isinstance(run, Mapping) else None
    chosen = tuple(str(m) for m in named or () if str(m) in METRICS)
    return chosen or HEADLINE


@dataclass(frozen=True, slots=True)
class RunAnswer:
    """A run's answer and what it rests on."""

    cells: list[Cell]
    units: pd.DataFrame
    manifest: Manifest
    equivalence: float


def run_answer(run_dir: Path, units: pd.DataFrame | None = None) -> RunAnswer:
    """The answer from a run's tables (or from ``units`` already computed) and its
    checks: what the runner decides on, the report writes and a view shows."""
    results = open_results(run_dir)
    manifest = results.runs[0].manifest
    if units is None:
        requests = results.table("requests", REQUEST_COLUMNS)
        units = unit_metrics(
            requests,
            results.table("cpu", CPU_COLUMNS),
            results.windows(),
            run_conditions(results.runs),
        )
    equivalence = equivalence_of(manifest)
    cells = answer(units, failed_phases(manifest), metrics_of(manifest), equivalence)
    return RunAnswer(cells, units, manifest, equivalence)


INSTRUMENT_FIELDS = ("level", "figure", "winner_ms", "runner_up_ms")
"""What a cell of ``winners.json`` says of its instrument check."""


def build_answer(run_dir: Path, units: pd.DataFrame | None = None) -> list[dict[str, Any]]:
    """``run_answer``, written: ``winners.json`` and ``summary.csv`` (the units it rests
    on); returns the answer's cells as written."""
    found = run_answer(run_dir, units)
    write_summary_csv(run_dir, found.units, found.manifest)
    return write_answer(run_dir, found.cells, found.equivalence, instrument_rows(found.manifest))


def write_answer(
    run_dir: Path,
    cells: Sequence[Cell],
    equivalence: float,
    instrument: Sequence[Mapping[str, Any]] = (),
) -> list[dict[str, Any]]:
    """Write ``winners.json`` (atomically); returns its cells as written. A resolved
    latency cell whose two strategies have harness figures (``instrument``: the run's
    ``instrument_rows``) carries its ``instrument`` check (``analysis/run/instrument.py``):
    ``fail`` when the harness could reverse it."""
    written: list[dict[str, Any]] = [to_plain(c, finite=True) for c in cells]
    checks = {(c["scenario"], c["metric"]): c for c in cell_checks(written, instrument)}
    for cell in written:
        check = checks.get((cell["scenario"], cell["metric"]))
        if check is not None:
            cell["instrument"] = {k: check[k] for k in INSTRUMENT_FIELDS}
    data = {
        "schema_version": SCHEMA_VERSION,
        "method": {
            "pairing": "within blocks (replications); phases that failed a check left out",
            "level": LEVEL,
            "resolved": "the 95 % interval of the paired difference excludes 0",
            "equivalent": (
                f"two one-sided tests: the 90 % interval inside +-{equivalence:g} of the "
                "runner-up's mean (failure and success rates: +-0.5 percentage points; "
                "recovery: +-0.5 s; load deviation: +-0.02)"
            ),
            "equivalence": equivalence,
            "instrument": (
                "a resolved latency cell fails when its two strategies' harness times "
                "differ by at least the difference it calls (the harness could reverse it), "
                "warns when either's is half that difference or more; the harness's p50 "
                "for the mean and median, its p99 for the tails"
            ),
        },
        "cells": written,
    }
    write_bytes_atomically(run_dir / WINNERS_FILE, json.dumps(data, indent=2).encode())
    return written


def read_answer(run_dir: Path) -> list[dict[str, Any]] | None:
    """The cells of ``winners.json``, or None when the run has none yet; a file that is
    not JSON, of another version or with a cell its readers cannot take is a
    ``ConfigError`` naming it (and the field)."""
    path = run_dir / WINNERS_FILE
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} is not readable JSON ({exc}); rebuild it: lblab report") from exc
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        raise ConfigError(
            f"{path} has schema_version {data.get('schema_version') if isinstance(data, dict) else None!r}, "
            f"this lblab reads {SCHEMA_VERSION}; rebuild it: lblab report {run_dir}"
        )
    return read_json(data, _winners, source=str(path), remedy=f"rebuild it: lblab report {run_dir}")


def _winners(value: Any, where: str) -> list[dict[str, Any]]:
    cells = Fields(value, where, null_is_missing=True)("cells", tuple_of(_written_cell), ())
    return list(cells)


_written_cell = checked(
    {
        "scenario": text,
        "metric": text,
        "verdict": choice((WINNER, TIE, UNRESOLVED)),
        "strategies": tuple_of(text),
    },
    {
        "runner_up": optional(text),
        "difference": optional(an_object),
        "instrument": optional(an_object),
    },
)
"""A cell as ``write_answer`` wrote it, once the fields its readers take are of their type."""
