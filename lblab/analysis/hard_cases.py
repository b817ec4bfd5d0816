"""What the hard cases are judged on (docs/ALGORITHMS.md, "Metrics the analysis uses"):
success within the client's timeout, the time to recover from a fault, and the load's
deviation from each server's share of the pool's capacity. One row per unit, as
``metrics.request_metrics`` makes them; ``unit_metrics`` joins them in.

- ``success_rate``: requests answered successfully within ``run.request_timeout``, over
  requests sent (an open-loop request's latency counts from its intended send time, so a
  late success is no success).
- ``recovery_s``: the phase's faults (its timeline's logged events) disturb it from the
  first event to the last one's end (a ``cold`` or ``spike`` ends ``duration`` after it;
  every other action, undos included, when it took effect). The baseline is the p99 of
  the time to a successful answer over the measured requests sent before the first event,
  a failed request counting as never answered (so a bin with more than 1 % failures has
  an infinite p99). From the last end, the requests are cut into bins of
  ``max(1 s, 100 requests)``; the unit has recovered at the start of the first bin whose
  p99, and the next bin's, are within 10 % of the baseline. A phase that never recovers
  gets the time from the end to its last send: a lower bound. NaN without a fault, or
  with fewer than ``MIN_BASELINE`` requests (or more than 1 % failures) before it.
- ``load_deviation``: with ``share_i`` each server's share of the requests that reached a
  server and ``fair_i`` its share of the pool's capacity (the manifest's ``capacity``,
  ``simulator/capacity.py``), ``sum_i |share_i - fair_i| / 2``: the fraction of the
  requests that would have to move for the load to follow capacity (0: it does; Finagle's
  balancer simulations judge their balancers on the same deviation). NaN without
  capacities.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from lblab.analysis.load import KEY, Run
from lblab.config import parse_duration
from lblab.errors import ConfigError
from lblab.manifest import Manifest

NAMES = ("success_rate", "recovery_s", "load_deviation")
RECOVERED_WITHIN = 0.10
"""The p99 is back when within this share of its level before the fault."""
MIN_BASELINE = 20
"""Requests before a fault needed for its baseline p99."""
BIN_REQUESTS = 100
BIN_S = 1.0
ENDS_LATER = ("cold", "spike")
"""Actions whose effect lasts ``duration`` after they fire (the others end when they take
effect: a timed ``slow`` or ``fail`` logs its own undo)."""


@dataclass(frozen=True, slots=True)
class Conditions:
    """What a unit ran under, from its run's manifest."""

    timeline: Sequence[Mapping[str, Any]] = ()
    """The phase's logged timeline events (``experiment/timeline.py``)."""
    capacity: Mapping[str, float] = field(default_factory=dict)
    """Server id -> requests/s it can serve (``simulator/capacity.py``)."""
    timeout_s: float | None = None


def manifest_conditions(manifest: Manifest) -> dict[tuple[str, str, int], Conditions]:
    """(scenario, strategy, replication) -> its conditions, for every phase of ``manifest``."""
    run = manifest.config.get("run")
    timeout = run.get("request_timeout") if isinstance(run, Mapping) else None
    try:
        timeout_s = parse_duration(timeout, "run.request_timeout") if timeout else None
    except ConfigError:
        timeout_s = None
    found = manifest.extra.get("capacity")
    capacity = found if isinstance(found, Mapping) else {}
    out = {}
    for phase in manifest.phases:
        servers = capacity.get(phase.scenario, {})
        servers = servers.get("servers") if isinstance(servers, Mapping) else None
        logged = phase.extra.get("timeline")
        out[phase.cell] = Conditions(
            timeline=tuple(logged) if isinstance(logged, list) else (),
            capacity=dict(servers) if isinstance(servers, Mapping) else {},
            timeout_s=timeout_s,
        )
    return out


def run_conditions(runs: Iterable[Run]) -> dict[tuple[str, str, str, int], Conditions]:
    """(run_id, scenario, strategy, replication) -> conditions, over ``runs``."""
    return {
        (run.run_id, *key): found
        for run in runs
        for key, found in manifest_conditions(run.manifest).items()
    }


def disturbance(timeline: Sequence[Mapping[str, Any]]) -> tuple[float, float] | None:
    """When the faults of a phase began and ended (epoch seconds), or None."""
    fired = [e for e in timeline if e.get("ok", True) and isinstance(e.get("t"), int | float)]
    if not fired:
        return None
    start = min(float(e["t"]) for e in fired)

    def end(e: Mapping[str, Any]) -> float:
        done = float(e.get("t_done") or e["t"])
        lasts = e.get("duration") if e.get("action") in ENDS_LATER else None
        return float(e["t"]) + float(lasts) if isinstance(lasts, int | float) else done

    return start, max(end(e) for e in fired)


def _p99(answer_s: np.ndarray) -> float:
    """The 99th percentile of the times to an answer, the sample at or above it (inf:
    more than 1 % unanswered)."""
    return float(np.quantile(answer_s, 0.99, method="higher")) if len(answer_s) else math.nan


def recovery_s(
    t_sent: np.ndarray, answer_s: np.ndarray, timeline: Sequence[Mapping[str, Any]]
) -> float:
    """Seconds from the faults' end until the p99 is back (module docstring)."""
    span = disturbance(timeline)
    if span is None or not len(t_sent):
        return math.nan
    start, end = span
    before = answer_s[t_sent < start]
    base = _p99(before)
    if len(before) < MIN_BASELINE or not math.isfinite(base):
        return math.nan
    after = t_sent >= end
    if not after.any():
        return math.nan
    rate = len(t_sent) / max(float(t_sent.max() - t_sent.min()), 1e-9)
    width = max(BIN_S, BIN_REQUESTS / rate)
    bins = ((t_sent[after] - end) // width).astype(np.int64)
    order = np.argsort(bins, kind="stable")
    bins, values = bins[order], answer_s[after][order]
    count = int(bins[-1]) + 1
    within = np.zeros(count, dtype=bool)
    seen = np.zeros(count, dtype=bool)
    present, starts = np.unique(bins, return_index=True)
    for k, chunk in zip(present, np.split(values, starts[1:]), strict=True):
        within[k] = _p99(chunk) <= base * (1 + RECOVERED_WITHIN)
        seen[k] = True
    for k in range(count):
        if seen[k] and within[k] and (k + 1 >= count or within[k + 1] or not seen[k + 1]):
            return k * width
    return float(t_sent.max()) - end


def load_deviation(servers: pd.Series, capacity: Mapping[str, float]) -> float:
    """Half the summed gap between each server's share and its capacity's (docstring)."""
    caps = {k: float(v) for k, v in capacity.items() if v is not None}
    total = sum(caps.values())
    if not caps or not math.isfinite(total) or total <= 0:
        return math.nan
    counts = servers.dropna().astype(str).value_counts()
    served = int(counts.sum())
    if not served:
        return math.nan
    names = set(caps) | set(counts.index)
    return 0.5 * sum(abs(int(counts.get(s, 0)) / served - caps.get(s, 0.0) / total) for s in names)


def hard_case_metrics(
    requests: pd.DataFrame, conditions: Mapping[tuple[str, str, str, int], Conditions]
) -> pd.DataFrame:
    """One row per unit of ``requests``: ``NAMES`` (NaN where a unit's conditions lack
    what a metric needs)."""
    if requests.empty:
        return pd.DataFrame(columns=[*KEY, *NAMES])
    rows = []
    for key, unit in requests.groupby(KEY, observed=True, sort=False):
        run_id, strategy, scenario, replication = key
        found = conditions.get((str(run_id), str(scenario), str(strategy), int(replication)))
        found = found or Conditions()
        ok = unit["ok"].fillna(False).to_numpy(dtype=bool)
        latency_s = unit["latency_ms"].to_numpy(dtype=float) / 1000.0
        answer_s = np.where(ok, latency_s, np.inf)
        in_time = answer_s <= (found.timeout_s if found.timeout_s else np.inf)
        t_sent = unit["t_sent"].to_numpy(dtype=float)
        rows.append(
            (
                *key,
                float(in_time.mean()),
                recovery_s(t_sent, answer_s, found.timeline),
                load_deviation(unit["server"], found.capacity),
            )
        )
    out = pd.DataFrame(rows, columns=[*KEY, *NAMES])
    out["replication"] = out["replication"].astype(int)
    for col in ("run_id", "strategy", "scenario"):
        out[col] = out[col].astype(str)
    return out
