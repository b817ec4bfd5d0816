"""One point of a sweep, run where Dask puts it: simulate, then summarize to one row.

Only the row leaves the worker: a point's requests table (100,000s of rows) is reduced
to its figures here, so the driver's memory grows by a row per point, whatever the
points' sizes.
"""

from __future__ import annotations

import math
import os
import socket
import time
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lblab.analysis.stats import imbalance
from lblab.balancer.strategies.registry import install
from lblab.balancer.strategies.specs import StrategySource
from lblab.simulator.config import config_from_mapping
from lblab.simulator.run import simulate

LATENCY_QUANTILES = {"p50_ms": 50.0, "p95_ms": 95.0, "p99_ms": 99.0, "p999_ms": 99.9}
FIGURES = (
    "requests",
    "throughput_rps",
    "mean_ms",
    *LATENCY_QUANTILES,
    "failure_rate",
    "imbalance",
)
"""The figures of a point's row, in column order (after the grid values and the seed)."""


def run_point(
    settings: Mapping[str, Any], sources: Sequence[StrategySource] = ()
) -> dict[str, Any]:
    """Simulate ``settings`` and return its row: the figures, the worker, the wall
    seconds and ``error`` (None, or the failure's last line when the point failed).
    ``sources``: the sweep's strategies of the user's own, installed on the worker first
    (a worker on another host has no copy of the file).

    This is a task boundary: a point that raises is recorded with its error (and the
    traceback on the worker's log), never lost and never fatal to the sweep."""
    started = time.perf_counter()
    row: dict[str, Any] = dict.fromkeys(FIGURES, math.nan)
    error = None
    try:
        for source in sources:
            install(source)
        result = simulate(config_from_mapping(settings))
        row |= summarize(result.requests, result.servers)
    except Exception as exc:  # recorded in the row: the sweep goes on
        traceback.print_exc()
        error = f"{type(exc).__name__}: {exc}"
    return row | {
        "worker": worker_name(),
        "wall_s": time.perf_counter() - started,
        "error": error,
    }


def summarize(t: pa.Table, servers: Sequence[str]) -> dict[str, Any]:
    """The figures of a requests table (a simulation's, or a live run's: the same
    columns ``latency_ms``, ``ok``, ``t_sent``, ``server``) over ``servers``. Latency counts every request, a failed one at the time it took
    to fail (a strategy that fails fast must not look fast); throughput is successful
    requests per simulated second, from the first send to the last answer; imbalance
    is the busiest server's requests over the mean (``analysis.stats.imbalance``),
    servers that got none included."""
    latency = t.column("latency_ms").to_numpy()
    ok = t.column("ok").to_numpy(zero_copy_only=False)
    sent = t.column("t_sent").to_numpy()
    span = float((sent + latency / 1000.0).max() - sent.min()) if len(sent) else 0.0
    counts = dict.fromkeys(servers, 0)
    for pair in t.column("server").value_counts().to_pylist():
        if pair["values"] in counts:  # not None: a request no server took
            counts[pair["values"]] = pair["counts"]
    quantiles = np.percentile(latency, list(LATENCY_QUANTILES.values())) if len(latency) else []
    return {
        "requests": t.num_rows,
        "throughput_rps": float(ok.sum()) / span if span > 0 else math.nan,
        "mean_ms": float(latency.mean()) if len(latency) else math.nan,
        **{name: float(q) for name, q in zip(LATENCY_QUANTILES, quantiles, strict=False)},
        "failure_rate": 1.0 - float(ok.mean()) if len(ok) else math.nan,
        "imbalance": imbalance(list(counts.values())),
    }


def worker_name() -> str:
    """The Dask worker's name (its address when started without ``--name``), or
    host:pid outside a worker."""
    from distributed import get_worker

    try:
        return str(get_worker().name)
    except ValueError:  # not running in a worker
        return f"{socket.gethostname()}:{os.getpid()}"
