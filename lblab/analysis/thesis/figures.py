"""The figures that test the thesis's claims: one value per replication of a run.

Each figure reads a run's ``RunTables`` (``analysis.thesis.tables``). A comparison
between strategies is computed within each replication (the strategies of one
replication run back to back on the same cell), so the values are paired. Only
replications in which every cell a figure needs was measured count; a run with none
raises ``MissingCells``, and the claim is then ``n/a``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pandas as pd

from lblab.analysis.thesis.tables import (
    CLOSED,
    DYNAMIC,
    LARGE_CELL,
    LIGHT,
    SMALL_CELL,
    STATIC,
    RunTables,
)
from lblab.strategy_names import THESIS_FIVE as FIVE


class MissingCells(LookupError):
    """The run has no complete replication of the strategies x scenarios a claim needs."""


# ------------------------------------------------------------------ selecting cells


def _complete(
    frame: pd.DataFrame, units: pd.DataFrame, strategies: Sequence[str], scenarios: Sequence[str]
) -> pd.DataFrame:
    """Rows of ``frame`` for the cells, in replications where every cell was measured."""
    cells = units[units["strategy"].isin(strategies) & units["scenario"].isin(scenarios)]
    have = cells.groupby("replication")[["strategy", "scenario"]].apply(
        lambda g: len(set(zip(g["strategy"], g["scenario"], strict=True)))
    )
    reps = have.index[have == len(strategies) * len(scenarios)] if len(have) else []
    rows = frame[
        frame["strategy"].isin(strategies)
        & frame["scenario"].isin(scenarios)
        & frame["replication"].isin(list(reps))
    ]
    if rows.empty:
        raise MissingCells(f"needs {', '.join(strategies)} on {', '.join(scenarios)}")
    return rows


def _metric(t: RunTables, metric: str, strategies: Sequence[str], scenarios: Sequence[str]):
    """Per replication: ``metric`` averaged over the cells (pd.Series by replication)."""
    rows = _complete(t.units, t.units, strategies, scenarios)
    return rows.groupby("replication")[metric].mean()


def _servers(t: RunTables, strategies: Sequence[str], scenarios: Sequence[str]) -> pd.DataFrame:
    return _complete(t.servers, t.units, strategies, scenarios)


def large_share(t: RunTables, strategy: str, scenario: str) -> pd.Series:
    """Per replication: the large server's share of the requests."""
    rows = _servers(t, [strategy], [scenario])
    counts = rows.pivot_table(
        index="replication", columns="server", values="requests", aggfunc="sum", fill_value=0
    )
    total = counts.sum(axis=1)
    large = counts[t.large] if t.large in counts else pd.Series(0.0, index=counts.index)
    return large / total


def _ratio(
    t: RunTables, metric: str, top: Sequence[str], bottom: Sequence[str], scenario: str
) -> pd.Series:
    return _metric(t, metric, top, [scenario]) / _metric(t, metric, bottom, [scenario])


# ------------------------------------------------------------------ the figures


def even_split(t: RunTables) -> pd.Series:
    """Largest deviation of any server's share from an even split, r and rr (pp)."""
    worst = []
    for strategy in STATIC:
        rows = _servers(t, [strategy], CLOSED)
        counts = rows.pivot_table(
            index="replication", columns="server", values="requests", aggfunc="sum", fill_value=0
        )
        share = counts.div(counts.sum(axis=1), axis=0)
        n = len(t.small) + 1
        worst.append(100.0 * (share - 1.0 / n).abs().max(axis=1))
    return pd.concat(worst, axis=1).max(axis=1)


def large_cpu_ratio(t: RunTables) -> pd.Series:
    """Large server's CPU (% of its allowance) over the small servers' mean, under r and rr."""
    rows = _servers(t, STATIC, CLOSED)
    cpu = rows.pivot_table(index="replication", columns="server", values="cpu_mean")
    return cpu[t.large] / cpu[list(t.small)].mean(axis=1)


def large_share_everywhere(strategy: str) -> Callable[[RunTables], pd.Series]:
    def figure(t: RunTables) -> pd.Series:
        shares = pd.concat([large_share(t, strategy, s) for s in CLOSED], axis=1)
        return shares.min(axis=1)

    figure.__doc__ = f"Large server's share of {strategy}'s requests in its worst thesis cell."
    return figure


def lc_light_large_share(t: RunTables) -> pd.Series:
    return large_share(t, "lc", LIGHT)


def lc_small_share(t: RunTables) -> pd.Series:
    return 1.0 - large_share(t, "lc", SMALL_CELL)


def throughput_ratio(
    top: Sequence[str], bottom: Sequence[str], scenario: str
) -> Callable[[RunTables], pd.Series]:
    return lambda t: _ratio(t, "throughput_rps", top, bottom, scenario)


def latency_cut(
    fast: Sequence[str], slow: Sequence[str], scenario: str
) -> Callable[[RunTables], pd.Series]:
    """How much lower ``fast``'s mean latency is than ``slow``'s: 1 - fast/slow."""
    return lambda t: 1.0 - _ratio(t, "latency_mean_ms", fast, slow, scenario)


def latency_ratio(top: str, bottom: str, scenario: str) -> Callable[[RunTables], pd.Series]:
    return lambda t: _ratio(t, "latency_mean_ms", [top], [bottom], scenario)


def failure_spread(t: RunTables) -> pd.Series:
    """Max - min failure rate over the five in the small cell (pp)."""
    rows = _complete(t.units, t.units, FIVE, [SMALL_CELL])
    g = rows.groupby("replication")["failure_rate"]
    return 100.0 * (g.max() - g.min())


def dynamic_failure_excess(t: RunTables) -> pd.Series:
    """Failure rate of lc, dwrr minus that of r, rr with 1 MB of work (pp)."""
    return 100.0 * (
        _metric(t, "failure_rate", DYNAMIC, [LARGE_CELL])
        - _metric(t, "failure_rate", STATIC, [LARGE_CELL])
    )


def r_rr_gap(t: RunTables) -> pd.Series:
    """Largest |throughput r / throughput rr - 1| over the thesis cells."""
    gaps = [(throughput_ratio(["r"], ["rr"], s)(t) - 1.0).abs() for s in CLOSED]
    return pd.concat(gaps, axis=1).max(axis=1)


def weighted_cpu_spread(t: RunTables) -> pd.Series:
    """CPU spread across servers (max - min of % of allowance, pp) under wrr and dwrr."""
    return _metric(t, "cpu_spread", ("wrr", "dwrr"), CLOSED)
