"""What the thesis's claims read from one run, and the thesis's cells they name.

``load_run`` reads a results directory (``lblab run``) into ``RunTables``: one row per
strategy, scenario and replication (``analysis.metrics.unit_metrics``), the same per
server, and per phase the balancer's CPU per request, the runner's validity checks that
failed and the share of picks whose server was idle. The large server is the one with
the largest CPU allowance (the thesis ran two small servers and one large); a run
without servers of unequal allowance cannot test the claims and is refused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from lblab.analysis.load import open_results
from lblab.analysis.metrics import CPU_COLUMNS, REQUEST_COLUMNS, server_metrics, unit_metrics
from lblab.errors import ConfigError
from lblab.manifest import Manifest
from lblab.windows import Window, cpu_per_request_us

SMALL_CELL, LARGE_CELL, VARIATION, LIGHT = "sp+sr", "sp+lr", "variation", "light"
CLOSED = (SMALL_CELL, LARGE_CELL, VARIATION)
"""The thesis's own tests (closed-loop Locust users); ``light`` is lblab's trickle."""
STATIC, DYNAMIC = ("r", "rr"), ("lc", "dwrr")


PHASE_COLUMNS = [
    "strategy",
    "scenario",
    "replication",
    "balancer_us",
    "failed_checks",
    "idle_picks",
]


@dataclass(frozen=True)
class RunTables:
    """What the claims read from one run.

    ``units``: ``analysis.metrics.unit_metrics`` (one row per strategy, scenario and
    replication). ``servers``: ``server_metrics`` (the same, per server: requests, share,
    cpu_mean). ``large`` is the server with the largest CPU allowance, ``small`` the others.
    ``phases``: one row per unit with ``balancer_us`` (balancer CPU per request),
    ``failed_checks`` (names of the runner's validity checks that failed) and
    ``idle_picks`` (share of picks whose server had nothing in flight), when known.
    """

    units: pd.DataFrame
    servers: pd.DataFrame
    large: str
    small: tuple[str, ...]
    phases: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=PHASE_COLUMNS))


def tables_from_frames(
    requests: pd.DataFrame,
    cpu: pd.DataFrame | None,
    large: str,
    small: Sequence[str],
    windows: Mapping[tuple[str, str, str, int], Window] | None = None,
    phases: pd.DataFrame | None = None,
) -> RunTables:
    """``RunTables`` from request and CPU rows in the results schema (measured rows only)."""
    units = unit_metrics(requests, cpu, windows)
    servers = server_metrics(requests, cpu)
    if phases is None:
        return RunTables(units, servers, large, tuple(small))
    return RunTables(units, servers, large, tuple(small), phases)


def _server_sizes(manifest: Manifest) -> tuple[str, tuple[str, ...]]:
    servers = manifest.config.get("servers")
    quotas = {
        str(s["id"]): float(s.get("cpu_quota") or 0.0)
        for s in servers or []
        if isinstance(s, dict) and "id" in s
    }
    if len(quotas) < 2 or len(set(quotas.values())) < 2:
        raise ConfigError(
            "the thesis claims need servers of unequal CPU allowance (the thesis: two small, "
            f"one large); this run's servers are {quotas or 'not in its manifest'}: run "
            "`lblab reproduce thesis` (preset thesis-claims) or a run of the thesis preset"
        )
    large = max(quotas, key=lambda s: quotas[s])
    return large, tuple(s for s in quotas if s != large)


def _phase_facts(manifest: Manifest, picks: pd.DataFrame) -> pd.DataFrame:
    """Per unit: balancer CPU per request and failed checks (manifest), idle picks."""
    rows = []
    for p in manifest.phases:
        if p.status != "done":
            continue
        cores = p.balancer_cores
        us = (
            cpu_per_request_us(cores, p.window.seconds, p.requests_in_window or 0)
            if p.window is not None and cores is not None
            else math.nan
        )
        failed = [v.name for v in p.checks_at("fail")]
        rows.append((p.strategy, p.scenario, p.replication, us, failed))
    facts = pd.DataFrame(
        rows, columns=["strategy", "scenario", "replication", "balancer_us", "failed_checks"]
    )
    if picks.empty:
        return facts.assign(idle_picks=math.nan)
    idle = (
        picks.assign(idle=picks["inflight_at_pick"].eq(0))
        .groupby(["strategy", "scenario", "replication"], observed=True)["idle"]
        .mean()
        .rename("idle_picks")
        .reset_index()
    )
    idle = idle.astype({"strategy": str, "scenario": str, "replication": int})
    return facts.merge(idle, on=["strategy", "scenario", "replication"], how="left")


def load_run(path: str | Path) -> RunTables:
    """The tables of a results directory (``lblab run``), measured window only."""
    results = open_results(path)
    manifest = results.runs[0].manifest
    large, small = _server_sizes(manifest)
    requests = results.table("requests", REQUEST_COLUMNS)
    cpu = results.table("cpu", CPU_COLUMNS)
    picks = results.table("picks", ["inflight_at_pick"])
    return tables_from_frames(
        requests, cpu, large, small, results.windows(), _phase_facts(manifest, picks)
    )
