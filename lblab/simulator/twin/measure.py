"""The figures the twin is built from and judged on, measured as the report measures them.

The run and the twin's simulated run (written as a run) are both read from their
results folder through ``analysis.metrics``, so measured and simulated figures share
one definition: per unit the analysis's metrics plus ``front_ms`` (each request's time
outside its server's slot: ``latency - queue_ms - service_ms``), pooled ``FIGURES``
with their 95 % intervals, the successful requests (to fit service times on) and, per
unit and server, the answers per second, slot time, front end and CPU share (to fit
the front end and the quota model on). While the twin solves its front end it measures
a simulated phase in memory instead (``slot_utilisation``), in the window the live
runner would cut (``sim_window``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from lblab.errors import ConfigError
from lblab.simulator.config import EPOCH
from lblab.windows import Window

FIGURES = ("throughput_rps", "latency_mean_ms", "latency_p95_ms")


@dataclass(frozen=True)
class Measured:
    units: pd.DataFrame
    """One row per unit: the analysis's unit metrics plus ``front_ms``."""
    pooled: pd.DataFrame
    """strategy, scenario, the mean of each of FIGURES over replications and its 95 %
    interval (``<figure>_lo``, ``_hi``; NaN with one replication)."""
    rows: pd.DataFrame
    """Successful requests with the service columns (for fitting)."""
    servers: pd.DataFrame
    """One row per unit and server inside the window: ``ok_per_s``, ``slot_ms`` (mean
    service time), ``front_ms`` and ``cpu_percent`` (mean share of its CPU allowance)."""


def measure(run_dir: Path) -> Measured:
    """The run's figures by the report's own definitions (analysis.metrics)."""
    from lblab.analysis.load import KEY, open_results
    from lblab.analysis.metrics import REQUEST_COLUMNS, pool, unit_metrics

    results = open_results(run_dir)
    windows = results.windows()
    columns = list(
        dict.fromkeys([*REQUEST_COLUMNS, "package_bytes", "work_bytes", "service_ms", "queue_ms"])
    )
    requests = results.table("requests", columns)
    if requests.empty:
        raise ConfigError(f"{run_dir} has no measured requests; give a finished run")
    if "service_ms" not in requests.columns or requests["service_ms"].notna().sum() == 0:
        raise ConfigError(
            f"{run_dir}: the requests table has no service_ms (servers' own service times, "
            "recorded by lblab runs since the twin exists); re-run the experiment with this "
            "lblab to build its twin"
        )
    units = unit_metrics(requests, None, windows)
    ok = requests[requests["ok"].fillna(False).astype(bool) & requests["service_ms"].notna()]
    ok = ok.assign(front_ms=ok["latency_ms"] - ok["queue_ms"].fillna(0.0) - ok["service_ms"])
    front = ok.groupby(KEY, observed=True)["front_ms"].mean().reset_index()
    front["replication"] = front["replication"].astype(int)
    for col in ("run_id", "strategy", "scenario"):
        front[col] = front[col].astype(str)
    units = units.merge(front, on=KEY, how="left")
    servers = _per_server(results, ok, windows)
    long = pool(units, list(FIGURES))
    pooled = long.pivot_table(
        index=["strategy", "scenario"],
        columns="metric",
        values=["mean", "lo", "hi"],
        observed=True,
        dropna=False,
    )
    pooled.columns = [m if v == "mean" else f"{m}_{v}" for v, m in pooled.columns]
    return Measured(units=units, pooled=pooled.reset_index(), rows=ok, servers=servers)


def measure_simulated(run_dir: Path) -> pd.DataFrame:
    """Pooled FIGURES of a twin's simulated run, by the same definitions."""
    return measure(run_dir).pooled


def _per_server(results: Any, ok: pd.DataFrame, windows: Mapping[Any, Window]) -> pd.DataFrame:
    """Per unit and server: answers per second, slot time, front end and CPU share."""
    from lblab.analysis.load import KEY

    inside = ok[ok["window"].astype(str) == "inside"] if "window" in ok.columns else ok
    frame = (
        inside.groupby([*KEY, "server"], observed=True)
        .agg(
            ok=("service_ms", "size"), slot_ms=("service_ms", "mean"), front_ms=("front_ms", "mean")
        )
        .reset_index()
    )
    frame = frame[frame["ok"] > 0]
    seconds = [
        windows[(str(r.run_id), str(r.scenario), str(r.strategy), int(r.replication))].seconds
        if (str(r.run_id), str(r.scenario), str(r.strategy), int(r.replication)) in windows
        else math.nan
        for r in frame.itertuples()
    ]
    frame = frame.assign(ok_per_s=frame["ok"] / np.asarray(seconds, dtype=float))
    cpu = results.table("cpu", ["server", "cpu_percent"])
    if cpu.empty:
        return frame.assign(cpu_percent=math.nan)
    if "window" in cpu.columns:
        cpu = cpu[cpu["window"].astype(str) == "inside"]
    share = cpu.groupby([*KEY, "server"], observed=True)["cpu_percent"].mean().reset_index()
    for col in (*KEY, "server"):
        frame[col] = frame[col].astype(str)
        share[col] = share[col].astype(str)
    return frame.merge(share, on=[*KEY, "server"], how="left")


def utilisation(rows: pd.DataFrame) -> pd.Series:
    """Share of the window a server's slot was busy: answers per second x mean slot time."""
    return rows["ok_per_s"] * rows["slot_ms"] / 1000.0


def sim_window(result: Any, warmup_fraction: float) -> Window:
    """A simulated phase's measured window, as the live runner cuts it
    (``lblab/windows.py``): the first ``warmup_fraction`` of the sends is warm-up, the
    window ends at the last send."""
    last_send = pc.max(result.requests["t_sent"]).as_py()
    return Window(EPOCH + warmup_fraction * (last_send - EPOCH), last_send)


def slot_utilisation(result: Any, warmup_fraction: float) -> dict[str, float]:
    """Per server of a simulated phase: the share of the measured window its slot was
    busy (``utilisation``, over the answers sent in the window)."""
    window = sim_window(result, warmup_fraction)
    q = result.requests.select(["t_sent", "ok", "server", "service_ms"]).to_pandas()
    inside = q[(q["t_sent"] >= window.start) & q["ok"]]
    seconds = max(window.seconds, 1e-9)
    return {
        str(server): float(group["service_ms"].sum()) / 1000.0 / seconds
        for server, group in inside.groupby("server", observed=True)
    }
