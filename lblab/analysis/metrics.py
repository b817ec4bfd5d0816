"""The metrics of docs/ALGORITHMS.md ("Metrics the analysis uses"), per unit and pooled.

A unit is one (run_id, strategy, scenario, replication). ``unit_metrics`` gives one row
per unit with every metric as a column; ``pool`` turns that into the long, tidy frame
(strategy, scenario, metric, mean, lo, hi, n) that charts and winners use, with a 95 %
t-interval across replications (none for a single replication).

Definitions (all after warm-up, see analysis/load.py):
- ``requests``: requests sent; ``ok``: successful responses.
- ``throughput_rps``: ok / window, the window running from the first send to the last
  completion of the unit.
- ``failure_rate``: failed / sent; ``failure_rate_<kind>`` the same for one error_kind
  (a missing or unknown kind counts as ``other``).
- ``latency_*_ms``: over successful requests only (a failure's latency says how fast it
  failed, not how fast the system served).
- CPU: each server's samples are percent of its own allowance. ``cpu_mean`` averages
  the servers' means; ``cpu_smoothness`` is the mean over servers of the standard
  deviation over time (lower is smoother); ``cpu_spread`` is max - min of the server
  means; ``cpu_imbalance`` = max / mean of the server means (Maglev, Cheetah) and
  ``cpu_jain`` Jain's index of them. Load is measured as CPU relative to each server's
  allowance, so a 1-CPU server and a 0.25-CPU server both at 60 % are balanced.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from lblab.analysis.hard_cases import NAMES as HARD_CASES
from lblab.analysis.hard_cases import Conditions, hard_case_metrics, run_conditions
from lblab.analysis.load import KEY, Results
from lblab.analysis.ordering import order_scenarios, order_strategies
from lblab.analysis.stats import grouped_quantiles, imbalance, jain_index, mean_ci
from lblab.analysis.validity import failed_phases
from lblab.results import ERROR_KINDS, ERROR_ORIGINS
from lblab.windows import Window

REQUEST_COLUMNS = ["t_sent", "latency_ms", "ok", "error_kind", "error_origin", "server"]
CPU_COLUMNS = ["t", "server", "cpu_percent"]
QUANTILES = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99, "p999": 0.999}
CURVE_LEVELS = (0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 99.0, 99.5, 99.9, 100.0)
FAILED_COLUMNS = ["run_id", "scenario", "strategy", "replication", "why"]


@dataclass(frozen=True, slots=True)
class Metric:
    """How to show a metric and which direction is better."""

    name: str
    label: str
    better: str  # "higher" | "lower"
    fmt: str = "{:.1f}"


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("requests", "requests sent", "higher", "{:.0f}"),
        Metric("ok", "successful responses", "higher", "{:.0f}"),
        Metric("throughput_rps", "throughput (ok/s)", "higher"),
        Metric("failure_rate", "failure rate", "lower", "{:.2%}"),
        *(
            Metric(f"failure_rate_{k}", f"failure rate: {k}", "lower", "{:.2%}")
            for k in ERROR_KINDS
        ),
        *(
            Metric(f"failure_rate_from_{o}", f"failure rate: from the {o}", "lower", "{:.2%}")
            for o in ERROR_ORIGINS
        ),
        Metric("latency_mean_ms", "mean latency (ms)", "lower"),
        *(Metric(f"latency_{q}_ms", f"{q} latency (ms)", "lower") for q in QUANTILES),
        Metric("latency_max_ms", "max latency (ms)", "lower"),
        Metric("success_rate", "success within the timeout", "higher", "{:.2%}"),
        Metric("recovery_s", "time to recover (s)", "lower"),
        Metric("load_deviation", "load off the capacity share", "lower", "{:.3f}"),
        Metric("cpu_mean", "mean CPU (% of allowance)", "higher"),
        Metric("cpu_smoothness", "CPU std over time (pp)", "lower"),
        Metric("cpu_spread", "CPU spread across servers (pp)", "lower"),
        Metric("cpu_imbalance", "CPU imbalance (max/mean)", "lower", "{:.2f}"),
        Metric("cpu_jain", "CPU Jain's fairness index", "higher", "{:.3f}"),
    )
}
"""Every metric ``unit_metrics`` produces, in display order."""

SERVER_METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric("requests", "requests", "higher", "{:.0f}"),
        Metric("share", "share of requests", "higher", "{:.1%}"),
        Metric("latency_mean_ms", "mean latency (ms)", "lower"),
        Metric("latency_p95_ms", "p95 latency (ms)", "lower"),
        Metric("cpu_mean", "mean CPU (%)", "higher"),
        Metric("cpu_std", "CPU std over time (pp)", "lower"),
    )
}
"""Per-server metrics (``server_metrics``); pooled per strategy, scenario and server."""

HEADLINE = ("throughput_rps", "latency_mean_ms", "latency_p95_ms", "failure_rate", "cpu_imbalance")
"""The metrics the winner table and the report's summary lead with."""


def metric_info(name: str) -> Metric:
    """Label, direction and format of a unit or per-server metric (a plain default otherwise)."""
    return METRICS.get(name) or SERVER_METRICS.get(name) or Metric(name, name, "lower", "{:.3g}")


def _groups(frame: pd.DataFrame, by: Sequence[str]) -> tuple[np.ndarray, pd.DataFrame]:
    """An integer code per row (0..k-1) and the k group keys, in code order, as plain columns.

    Every per-group aggregate below is then a bincount or one sort over int codes, instead
    of pandas re-factorizing four categorical keys per aggregate.
    """
    codes = frame.groupby(list(by), observed=True, sort=False).ngroup().to_numpy()
    _, first = np.unique(codes, return_index=True)
    keys = frame.iloc[first][list(by)].reset_index(drop=True)
    for col in by:
        keys[col] = keys[col].astype(int) if col == "replication" else keys[col].astype(str)
    return codes, keys


def _mean_by(codes: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    keep = ~np.isnan(values)
    n = np.bincount(codes[keep], minlength=groups)
    total = np.bincount(codes[keep], weights=values[keep], minlength=groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, total / np.maximum(n, 1), np.nan)


def request_metrics(
    requests: pd.DataFrame, windows: Mapping[tuple[str, str, str, int], Window] | None = None
) -> pd.DataFrame:
    """One row per unit: counts, throughput, failure rates, latency of successes.

    ``window_s`` is the unit's measured window from its manifest (``windows``, keyed by
    run_id, scenario, strategy, replication; ``lblab/windows.py``); a unit without one
    (older and simulated runs) uses the span from its first send to its last answer.
    """
    names = [m for m in METRICS if not m.startswith("cpu_") and m not in HARD_CASES]
    if requests.empty:
        return pd.DataFrame(columns=[*KEY, *names, "window_s"])
    codes, out = _groups(requests, KEY)
    k = len(out)
    ok = requests["ok"].fillna(False).to_numpy(dtype=bool)
    t_sent = requests["t_sent"].to_numpy(dtype=float)
    latency = requests["latency_ms"].to_numpy(dtype=float)
    out["requests"] = np.bincount(codes, minlength=k)
    out["ok"] = np.bincount(codes, weights=ok, minlength=k).astype(np.int64)
    t0 = pd.Series(t_sent).groupby(codes).min().to_numpy()
    t1 = pd.Series(t_sent + np.nan_to_num(latency) / 1000.0).groupby(codes).max().to_numpy()
    span = t1 - t0
    if windows:
        recorded = [
            windows.get((str(r), str(c), str(s), int(n)))
            for r, c, s, n in zip(
                out["run_id"], out["scenario"], out["strategy"], out["replication"], strict=True
            )
        ]
        span = np.array(
            [w.seconds if w is not None else x for w, x in zip(recorded, span, strict=True)]
        )
    out["window_s"] = span
    out["throughput_rps"] = out["ok"] / out["window_s"].where(out["window_s"] > 0)
    out["failure_rate"] = 1.0 - out["ok"] / out["requests"]
    kinds = requests["error_kind"]
    named = [kind for kind in ERROR_KINDS if kind != "other"]
    for kind in ERROR_KINDS:
        match = kinds == kind if kind in named else ~kinds.isin(named)  # null counts as other
        is_kind = ~ok & match.to_numpy(dtype=bool)
        out[f"failure_rate_{kind}"] = (
            np.bincount(codes, weights=is_kind, minlength=k) / out["requests"]
        )
    origins = requests["error_origin"]
    for origin in ERROR_ORIGINS:
        is_origin = ~ok & (origins == origin).to_numpy(dtype=bool)
        out[f"failure_rate_from_{origin}"] = (
            np.bincount(codes, weights=is_origin, minlength=k) / out["requests"]
        )
    lat_ok = np.where(ok, latency, np.nan)
    out["latency_mean_ms"] = _mean_by(codes, lat_ok, k)
    qs = grouped_quantiles(codes, lat_ok, [*QUANTILES.values(), 1.0], k)
    for j, name in enumerate(QUANTILES):
        out[f"latency_{name}_ms"] = qs[:, j]
    out["latency_max_ms"] = qs[:, -1]
    return out


def cpu_server_metrics(cpu: pd.DataFrame) -> pd.DataFrame:
    """One row per unit and server: mean and standard deviation over time of cpu_percent."""
    if cpu.empty:
        return pd.DataFrame(columns=[*KEY, "server", "cpu_mean", "cpu_std"])
    g = cpu.groupby([*KEY, "server"], observed=True, sort=False)["cpu_percent"]
    return g.agg(cpu_mean="mean", cpu_std="std").reset_index()


def cpu_metrics(cpu: pd.DataFrame) -> pd.DataFrame:
    """One row per unit: CPU level, smoothness, spread, imbalance and Jain's index."""
    names = ["cpu_mean", "cpu_smoothness", "cpu_spread", "cpu_imbalance", "cpu_jain"]
    per_server = cpu_server_metrics(cpu)
    if per_server.empty:
        return pd.DataFrame(columns=[*KEY, *names])
    rows = []
    for key, group in per_server.groupby(KEY, observed=True, sort=False):
        means = group["cpu_mean"].to_numpy(dtype=float)
        rows.append(
            (
                *key,
                float(np.nanmean(means)),
                float(group["cpu_std"].mean()),
                float(np.nanmax(means) - np.nanmin(means)),
                imbalance(means),
                jain_index(means),
            )
        )
    return pd.DataFrame(rows, columns=[*KEY, *names])


def unit_metrics(
    requests: pd.DataFrame,
    cpu: pd.DataFrame | None = None,
    windows: Mapping[tuple[str, str, str, int], Window] | None = None,
    conditions: Mapping[tuple[str, str, str, int], Conditions] | None = None,
) -> pd.DataFrame:
    """Every metric in METRICS, one row per unit (CPU columns NaN without CPU samples;
    the hard cases' ``recovery_s`` and ``load_deviation`` NaN without the ``conditions``
    that ``hard_cases.run_conditions`` reads from the manifests)."""
    out = request_metrics(requests, windows)
    cases = hard_case_metrics(requests, conditions or {})
    cpu_part = cpu_metrics(cpu if cpu is not None else pd.DataFrame())
    for frame in (out, cpu_part):
        for col in KEY:
            frame[col] = frame[col].astype(str) if col != "replication" else frame[col].astype(int)
    if out.empty:
        extra = [*cases.columns.difference(KEY), *cpu_part.columns.difference(KEY)]
        return _sorted(out.reindex(columns=[*out.columns, *extra]))
    merged = out.merge(cases, on=KEY, how="left").merge(cpu_part, on=KEY, how="left")
    return _sorted(merged)


def server_metrics(requests: pd.DataFrame, cpu: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per unit and server: request count and share, latency of successes, CPU."""
    by = [*KEY, "server"]
    cols = [
        *by,
        "requests",
        "share",
        "ok",
        "latency_mean_ms",
        "latency_p95_ms",
        "cpu_mean",
        "cpu_std",
    ]
    served = requests.loc[requests["server"].notna()] if not requests.empty else requests
    if served.empty:
        return pd.DataFrame(columns=cols)
    codes, out = _groups(served, by)
    k = len(out)
    ok = served["ok"].fillna(False).to_numpy(dtype=bool)
    lat_ok = np.where(ok, served["latency_ms"].to_numpy(dtype=float), np.nan)
    out["requests"] = np.bincount(codes, minlength=k)
    out["share"] = out["requests"] / out.groupby(KEY)["requests"].transform("sum")
    out["ok"] = np.bincount(codes, weights=ok, minlength=k).astype(np.int64)
    out["latency_mean_ms"] = _mean_by(codes, lat_ok, k)
    out["latency_p95_ms"] = grouped_quantiles(codes, lat_ok, [0.95], k)[:, 0]
    per_cpu = cpu_server_metrics(cpu if cpu is not None else pd.DataFrame())
    if per_cpu.empty:
        out["cpu_mean"], out["cpu_std"] = np.nan, np.nan
    else:
        for col in by:
            per_cpu[col] = (
                per_cpu[col].astype(int) if col == "replication" else per_cpu[col].astype(str)
            )
        out = out.merge(per_cpu, on=by, how="outer")
    return _sorted(out.reindex(columns=cols), extra=["server"])


def pool(
    units: pd.DataFrame,
    metrics: Sequence[str] | None = None,
    by: Sequence[str] = ("strategy", "scenario"),
    level: float = 0.95,
) -> pd.DataFrame:
    """Long frame: one row per group and metric with mean, lo, hi and n (replications).

    ``lo``/``hi`` are NaN where only one replication exists: no interval is claimed.
    """
    names = [m for m in (metrics or METRICS) if m in units.columns]
    cols = [*by, "metric", "mean", "lo", "hi", "n"]
    if units.empty or not names:
        return pd.DataFrame(columns=cols)
    long = units.melt(id_vars=list(by), value_vars=names, var_name="metric")
    long["value"] = pd.to_numeric(long["value"], errors="coerce")
    rows = []
    for key, group in long.groupby([*by, "metric"], sort=False):
        ci = mean_ci(group["value"].to_numpy(), level)
        rows.append((*key, ci.mean, ci.lo, ci.hi, ci.n))
    return pd.DataFrame(rows, columns=cols)


def latency_curves(requests: pd.DataFrame, levels: Sequence[float] = CURVE_LEVELS) -> pd.DataFrame:
    """Latency of successes at each percentile ``level``, per strategy and scenario (replications pooled)."""
    by = ["strategy", "scenario"]
    if requests.empty:
        return pd.DataFrame(columns=[*by, "percentile", "latency_ms"])
    codes, keys = _groups(requests, by)
    lat_ok = np.where(
        requests["ok"].fillna(False).to_numpy(dtype=bool),
        requests["latency_ms"].to_numpy(dtype=float),
        np.nan,
    )
    qs = grouped_quantiles(codes, lat_ok, [lv / 100.0 for lv in levels], len(keys))
    wide = pd.concat([keys, pd.DataFrame(qs, columns=list(levels))], axis=1)
    long = wide.melt(id_vars=by, var_name="percentile", value_name="latency_ms").dropna(
        subset=["latency_ms"]
    )
    long["percentile"] = long["percentile"].astype(float)
    return long.sort_values([*by, "percentile"]).reset_index(drop=True)


def latency_box_stats(
    requests: pd.DataFrame, by: Sequence[str] = ("strategy", "server")
) -> pd.DataFrame:
    """Box-plot statistics of success latency per group, computed here so plots scale.

    Whiskers are the 5th and 95th percentiles (not 1.5 IQR) and no outliers are drawn:
    with millions of requests, individual points only hide the box.
    """
    by = list(by)
    stats = ["whislo", "q1", "med", "q3", "whishi"]
    if requests.empty:
        return pd.DataFrame(columns=[*by, *stats, "mean", "n"])
    ok = requests["ok"].fillna(False).astype(bool) & requests["server"].notna()
    served = requests.loc[ok]
    if served.empty:
        return pd.DataFrame(columns=[*by, *stats, "mean", "n"])
    codes, out = _groups(served, by)
    lat = served["latency_ms"].to_numpy(dtype=float)
    qs = grouped_quantiles(codes, lat, [0.05, 0.25, 0.5, 0.75, 0.95], len(out))
    for j, name in enumerate(stats):
        out[name] = qs[:, j]
    out["mean"] = _mean_by(codes, lat, len(out))
    out["n"] = np.bincount(codes, minlength=len(out))
    return out


def cpu_timeline(cpu: pd.DataFrame, bin_s: float = 1.0) -> pd.DataFrame:
    """CPU per server over time, in ``bin_s`` bins from each unit's first sample (t_rel, s)."""
    cols = [*KEY, "server", "t_rel", "cpu_percent"]
    if cpu.empty:
        return pd.DataFrame(columns=cols)
    start = cpu.groupby(KEY, observed=True)["t"].transform("min")
    frame = pd.DataFrame({c: cpu[c] for c in [*KEY, "server", "cpu_percent"]})
    frame["t_rel"] = np.floor((cpu["t"] - start) / bin_s) * bin_s
    out = (
        frame.groupby([*KEY, "server", "t_rel"], observed=True)["cpu_percent"].mean().reset_index()
    )
    for col in ("run_id", "strategy", "scenario", "server"):
        out[col] = out[col].astype(str)
    return out[cols]


@dataclass
class Summary:
    """Everything the report and the overview notebook show, computed once."""

    units: pd.DataFrame
    pooled: pd.DataFrame
    servers: pd.DataFrame
    servers_pooled: pd.DataFrame
    curves: pd.DataFrame
    boxes: pd.DataFrame
    cpu: pd.DataFrame
    notes: list[str]
    failed: pd.DataFrame
    """The phases that failed a validity check (``failed_units``): the answer leaves them
    out, the frames above keep them, so charts and tables mark what includes them."""

    @property
    def strategies(self) -> list[str]:
        return order_strategies(self.units["strategy"].unique()) if not self.units.empty else []

    @property
    def scenarios(self) -> list[str]:
        return order_scenarios(self.units["scenario"].unique()) if not self.units.empty else []

    @property
    def replications(self) -> int:
        """Most replications any strategy x scenario has (1 means: no intervals)."""
        if self.units.empty:
            return 0
        return int(self.units.groupby(["strategy", "scenario"]).size().max())


def summarize(results: Results, cpu_bin_s: float = 1.0) -> Summary:
    """Read the needed columns once and compute every frame the report shows."""
    requests = results.table("requests", REQUEST_COLUMNS)
    cpu = results.table("cpu", CPU_COLUMNS)
    units = unit_metrics(requests, cpu, results.windows(), run_conditions(results.runs))
    servers = server_metrics(requests, cpu)
    return Summary(
        units=units,
        pooled=pool(units),
        servers=servers,
        servers_pooled=pool(servers, list(SERVER_METRICS), by=("strategy", "scenario", "server")),
        curves=latency_curves(requests),
        boxes=latency_box_stats(requests),
        cpu=cpu_timeline(cpu, cpu_bin_s),
        notes=list(results.notes),
        failed=failed_units(results),
    )


def failed_units(results: Results) -> pd.DataFrame:
    """One row per phase that failed a validity check (``validity.failed_phases`` of each
    run's manifest): run_id, scenario, strategy, replication and why."""
    rows = [(run.run_id, *phase) for run in results.runs for phase in failed_phases(run.manifest)]
    return pd.DataFrame(rows, columns=FAILED_COLUMNS)


def _sorted(frame: pd.DataFrame, extra: Sequence[str] = ()) -> pd.DataFrame:
    """Rows in display order: strategies and scenarios as the thesis lists them."""
    if frame.empty:
        return frame.reset_index(drop=True)
    s_rank = {s: i for i, s in enumerate(order_strategies(frame["strategy"].unique()))}
    c_rank = {s: i for i, s in enumerate(order_scenarios(frame["scenario"].unique()))}
    keys = frame.assign(_s=frame["strategy"].map(s_rank), _c=frame["scenario"].map(c_rank))
    by = ["_s", "_c", "run_id", "replication", *extra]
    return keys.sort_values(by, kind="stable").drop(columns=["_s", "_c"]).reset_index(drop=True)
