"""The thesis's conclusions as checkable claims (papers/002, sections 5.2-5.8 and 6).

Each ``Claim`` carries the thesis's words, the section, and a function that computes one
figure per replication from a run's tables (``RunTables``). ``judge`` takes the mean of
those values with a 95 % Student-t interval (``analysis.stats.mean_ci``) and compares the
interval with the claim's threshold: **supported** when the whole interval is on the
claim's side, **contradicted** when the whole interval is on the other side,
**inconclusive** when it straddles the threshold or there is no interval (one
replication). A comparison between strategies is computed within each replication (the
strategies of one replication run back to back on the same cell), so the interval is over
paired values. A run without the cells a claim needs gives ``n/a``.

Thresholds: where the thesis gives a size ("about 20 %", "16-21 %", "50 %", "more than
twice"), the claim counts as supported when at least half of that effect is measured;
where it says only "evenly", "idle", "most", the bound is stated with the claim.

Where a claim is not supported, ``Judgement.why`` is one sentence built from the run's
own evidence (CPU per server, shares, failure kinds, the balancer's CPU per request, the
runner's validity checks) saying whether lblab's harness or the thesis's explains it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from lblab.analysis.load import open_results
from lblab.analysis.metrics import CPU_COLUMNS, REQUEST_COLUMNS, server_metrics, unit_metrics
from lblab.analysis.stats import MeanCI, mean_ci
from lblab.errors import ConfigError
from lblab.strategy_names import THESIS_FIVE as FIVE
from lblab.windows import Window

SMALL_CELL, LARGE_CELL, VARIATION, LIGHT = "sp+sr", "sp+lr", "variation", "light"
CLOSED = (SMALL_CELL, LARGE_CELL, VARIATION)
"""The thesis's own tests (closed-loop Locust users); ``light`` is lblab's trickle."""
STATIC, DYNAMIC = ("r", "rr"), ("lc", "dwrr")
SUPPORTED, CONTRADICTED, INCONCLUSIVE, NA = "supported", "contradicted", "inconclusive", "n/a"


PHASE_COLUMNS = [
    "strategy",
    "scenario",
    "replication",
    "balancer_us",
    "failed_checks",
    "idle_picks",
]


class MissingCells(LookupError):
    """The run has no complete replication of the strategies x scenarios a claim needs."""


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


def _server_sizes(manifest: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    config = manifest.get("config") if isinstance(manifest.get("config"), dict) else {}
    servers = config.get("servers") if isinstance(config, dict) else None
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


def _phase_facts(manifest: Mapping[str, Any], picks: pd.DataFrame) -> pd.DataFrame:
    """Per unit: balancer CPU per request and failed checks (manifest), idle picks."""
    rows = []
    for p in manifest.get("phases") or []:
        if not isinstance(p, dict) or p.get("status") != "done":
            continue
        window = Window.from_dict(p.get("window"))
        balancer = (p.get("harness_cpu") or {}).get("balancer") or []
        n = p.get("requests_in_window") or 0
        us = (
            float(sum(balancer)) * window.seconds / n * 1e6
            if window is not None and balancer and n
            else math.nan
        )
        failed = [v["name"] for v in p.get("verdicts") or [] if v.get("level") == "fail"]
        rows.append((p["strategy"], p["scenario"], int(p["replication"]), us, failed))
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


def _large_share(t: RunTables, strategy: str, scenario: str) -> pd.Series:
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
        shares = pd.concat([_large_share(t, strategy, s) for s in CLOSED], axis=1)
        return shares.min(axis=1)

    figure.__doc__ = f"Large server's share of {strategy}'s requests in its worst thesis cell."
    return figure


def lc_light_large_share(t: RunTables) -> pd.Series:
    return _large_share(t, "lc", LIGHT)


def lc_small_share(t: RunTables) -> pd.Series:
    return 1.0 - _large_share(t, "lc", SMALL_CELL)


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


# ------------------------------------------------------------------ evidence for "why"
# Each sentence names which harness explains a claim that did not hold, from this run's
# own figures (means over its replications); the thesis's harness is known from the
# thesis and the field notes: a new connection per request, request handlers that block
# the server's event loop, in-flight counts that could leak, and its own WRR and DWRR.


def _avg(
    t: RunTables,
    column: str,
    strategies: Sequence[str],
    scenarios: Sequence[str],
    servers: Sequence[str] | None = None,
) -> float:
    """Mean of ``column`` over the cells (and ``servers``, from the per-server table)."""
    frame = t.units if servers is None else t.servers
    rows = frame[frame["strategy"].isin(strategies) & frame["scenario"].isin(scenarios)]
    if servers is not None:
        rows = rows[rows["server"].isin(list(servers))]
    values = pd.to_numeric(rows[column], errors="coerce").dropna()
    return float(values.mean()) if len(values) else math.nan


def _cpu(t: RunTables, strategies: Sequence[str], scenario: str) -> str:
    """``s1, s2 at 95 %, s3 at 25 %`` (CPU as % of each server's allowance)."""
    small = _avg(t, "cpu_mean", strategies, [scenario], t.small)
    large = _avg(t, "cpu_mean", strategies, [scenario], [t.large])
    return f"{', '.join(t.small)} at {small:.0f} % and {t.large} at {large:.0f} % CPU"


def _rate(t: RunTables, strategies: Sequence[str], scenario: str) -> str:
    return f"{_avg(t, 'throughput_rps', strategies, [scenario]):.0f} req/s"


def _lat(t: RunTables, strategies: Sequence[str], scenario: str) -> str:
    return f"{_avg(t, 'latency_mean_ms', strategies, [scenario]):.0f} ms"


def _avg_us(t: RunTables, strategies: Sequence[str], scenario: str) -> float:
    """The balancer's CPU per request (us) over the cells' phases."""
    rows = t.phases[t.phases["strategy"].isin(strategies) & (t.phases["scenario"] == scenario)]
    values = pd.to_numeric(rows["balancer_us"], errors="coerce").dropna()
    return float(values.mean()) if len(values) else math.nan


def _pick_us(t: RunTables, strategies: Sequence[str], scenario: str) -> str:
    return f"{_avg_us(t, strategies, scenario):.0f} us"


def _idle(t: RunTables, strategy: str, scenario: str) -> str:
    """How often the picked server had nothing in flight: counts that return to 0."""
    rows = t.phases[(t.phases["strategy"] == strategy) & (t.phases["scenario"] == scenario)]
    values = pd.to_numeric(rows.get("idle_picks", pd.Series(dtype=float)), errors="coerce")
    values = values.dropna()
    return f"{values.mean():.0%}" if len(values) else "an unknown share"


def _share(t: RunTables, strategies: Sequence[str], scenario: str) -> str:
    """The large server's share of the requests (0 where it had none)."""
    try:
        shares = pd.concat([_large_share(t, s, scenario) for s in strategies])
    except MissingCells:
        return "unknown"
    return f"{shares.mean():.0%}"


def _why_even(t: RunTables) -> str:
    requests = _avg(t, "requests", ["r"], [LARGE_CELL])
    return (
        "neither harness: r picks at random, and in a phase of the large cell it sends only "
        f"{requests:.0f} requests, so one server's share strays by sqrt(2/9 / n) = "
        f"{100 * math.sqrt(2 / 9 / max(requests, 1)):.0f} points by chance; longer phases "
        "(the thesis: 20 minutes) close the gap"
    )


def _why_large_cpu(t: RunTables) -> str:
    cells = "; ".join(f"{c}: {_cpu(t, STATIC, c)}" for c in CLOSED)
    return (
        f"lblab's harness: under r, rr {cells}; each server gets a third of the requests, so "
        f"{t.large} stays low only while the small servers are the ones that run out of CPU"
    )


def _why_large_share(strategy: str) -> Callable[[RunTables], str]:
    def why(t: RunTables) -> str:
        cells = ", ".join(
            f"{c} {_share(t, [strategy], c)} at {_rate(t, [strategy], c)}" for c in CLOSED
        )
        if strategy == "wrr":
            return (
                f"lblab's configuration: wrr's static weights set the large server's share "
                f"({cells}); check the run's [weights] (the thesis preset: 1, 1, 4)"
            )
        return (
            f"lblab's harness: its dwrr weighs servers by requests served per unit of CPU, "
            f"re-estimated every 0.5 s (the thesis's DWRR weighed by response time: lblab's "
            f"`dwrr-latency`); the large server's share ({cells}) is a majority where a 0.5 s "
            "interval holds many requests and falls where it holds a few heavy ones"
        )

    return why


def _why_even_cpu(t: RunTables) -> str:
    return (
        f"lblab's harness: in {VARIATION} under wrr, dwrr {_cpu(t, ('wrr', 'dwrr'), VARIATION)}; "
        "1 MB packages load the balancer and Locust on the same 2 cores, so the servers' CPU "
        "follows the shared machine, not only the weights"
    )


def _why_lc_light(t: RunTables) -> str:
    return (
        f"lblab's load: at {_rate(t, ['lc'], LIGHT)} the light test kept "
        f"{_cpu(t, ['lc'], LIGHT)} and {t.large} took {_share(t, ['lc'], LIGHT)} of lc's "
        "requests: the first servers were busy often enough for LC to move on (with "
        "tie=first a request reaches the last server only when every other one has more in "
        "flight)"
    )


def _why_lc_first_two(t: RunTables) -> str:
    return (
        f"lblab's load: under lc in {SMALL_CELL} {_cpu(t, ['lc'], SMALL_CELL)}; with "
        "closed-loop users and no think time the small servers are rarely idle, so how much "
        f"reaches {t.large} depends on how often they hold more in flight than it (in the "
        f"light test, where they are idle, {t.large} took {_share(t, ['lc'], LIGHT)})"
    )


def _large_wait(t: RunTables, strategies: Sequence[str], scenario: str) -> str:
    """``s3 answered in 371 ms at 29 % of its CPU``: how the large server fared."""
    latency = _avg(t, "latency_mean_ms", strategies, [scenario], [t.large])
    cpu = _avg(t, "cpu_mean", strategies, [scenario], [t.large])
    return f"{t.large} answered in {latency:.0f} ms on average at {cpu:.0f} % of its CPU"


def _why_dynamic_large(t: RunTables) -> str:
    return (
        f"lblab's harness: in {LARGE_CELL} r, rr ran {_rate(t, STATIC, LARGE_CELL)} with "
        f"{_cpu(t, STATIC, LARGE_CELL)}, lc, dwrr {_rate(t, DYNAMIC, LARGE_CELL)}, where "
        f"{_large_wait(t, DYNAMIC, LARGE_CELL)}: it waits for the shared cores, not its "
        "quota, so the spare capacity dynamic algorithms would use is not there on a busy "
        "2-core machine"
    )


def _why_static_small(t: RunTables) -> str:
    extra = _avg_us(t, DYNAMIC, SMALL_CELL) - _avg_us(t, STATIC, SMALL_CELL)
    rate = _avg(t, "throughput_rps", DYNAMIC, [SMALL_CELL])
    return (
        f"lblab's harness: under r, rr {_cpu(t, STATIC, SMALL_CELL)} in {SMALL_CELL}, so the "
        "even split is capped by the small servers; lc and dwrr cost the balancer "
        f"{extra:.0f} us more a request ({_pick_us(t, STATIC, SMALL_CELL)} vs "
        f"{_pick_us(t, DYNAMIC, SMALL_CELL)}), {extra * rate / 1e4:.1f} % of a core at "
        f"{rate:.0f} req/s: the slower selection the thesis blamed costs no throughput here"
    )


def _why_wrr_small(t: RunTables) -> str:
    return (
        f"lblab's harness: under wrr in {SMALL_CELL} {_cpu(t, ['wrr'], SMALL_CELL)} at "
        f"{_rate(t, ['wrr'], SMALL_CELL)} (lc, dwrr: {_rate(t, DYNAMIC, SMALL_CELL)}): no "
        "server was saturated, so the shared 2 cores (Locust, balancer, others' work), not "
        "the algorithm, set the pace; the thesis's servers had machines of their own"
    )


def _why_static_latency(t: RunTables) -> str:
    return (
        f"lblab's harness: with closed-loop users mean latency is users / throughput: in "
        f"{VARIATION} r, rr {_lat(t, STATIC, VARIATION)} at {_rate(t, STATIC, VARIATION)}, "
        f"lc, dwrr {_lat(t, DYNAMIC, VARIATION)} at {_rate(t, DYNAMIC, VARIATION)}; the "
        f"balancer's CPU per request ({_pick_us(t, STATIC, VARIATION)} vs "
        f"{_pick_us(t, DYNAMIC, VARIATION)}) cannot add the thesis's 20 %"
    )


def _why_dwrr_vs_lc(t: RunTables) -> str:
    return (
        f"lblab's harness: in {VARIATION} lc {_lat(t, ['lc'], VARIATION)} with "
        f"{_cpu(t, ['lc'], VARIATION)}, dwrr {_lat(t, ['dwrr'], VARIATION)} with "
        f"{_cpu(t, ['dwrr'], VARIATION)}; LC's in-flight counts are exact (its picks in the "
        f"light test found the server idle {_idle(t, 'lc', LIGHT)} of the time), so it does "
        "not pile large requests on the small servers as the thesis's LC did, and dwrr's "
        "0.5 s weights lag the mix of 10 KB to 1 MB work"
    )


def _why_wrr_vs_dwrr_large(t: RunTables) -> str:
    large = _avg(t, "latency_mean_ms", ["wrr"], [LARGE_CELL], [t.large])
    small = _avg(t, "latency_mean_ms", ["wrr"], [LARGE_CELL], t.small)
    return (
        f"lblab's harness: wrr sends 2/3 of the 1 MB work to {t.large}, whose answers took "
        f"{large:.0f} ms against {small:.0f} ms on the small servers ({_cpu(t, ['wrr'], LARGE_CELL)}): "
        f"on a busy 2-core machine {t.large} does not get the 4x capacity its weight assumes"
    )


def _why_wrr_variation(t: RunTables) -> str:
    return (
        "the thesis's harness: its WRR sent w requests in a row to one server (lblab's "
        "`wrr-block`, not in this preset), lblab's wrr interleaves them (smooth WRR); here "
        f"wrr {_lat(t, ['wrr'], VARIATION)} vs dwrr {_lat(t, ['dwrr'], VARIATION)}: run "
        "wrr-block to see whether the bunching makes the thesis's slow variation test"
    )


def _why_r_rr(t: RunTables) -> str:
    cells = ", ".join(
        f"{s} {_avg(t, 'throughput_rps', ['r'], [s]):.0f} vs "
        f"{_avg(t, 'throughput_rps', ['rr'], [s]):.0f}"
        for s in CLOSED
    )
    return (
        f"neither harness: throughput r vs rr (req/s) {cells}; rr's rotation keeps the small "
        "servers' queues level where r's random picks do not, and the thesis's own "
        "request counts differ by 25-34 % between R and RR in single cells (section 5.1)"
    )


def _why_failures_identical(t: RunTables) -> str:
    return f"lblab's harness: failure rates in {SMALL_CELL}: " + ", ".join(
        f"{s} {_avg(t, 'failure_rate', [s], [SMALL_CELL]):.2%}" for s in FIVE
    )


def _why_failures_1mb(t: RunTables) -> str:
    cells = t.units[t.units["strategy"].isin(FIVE) & (t.units["scenario"] == LARGE_CELL)]
    slowest = float(cells["latency_max_ms"].max()) if len(cells) else math.nan
    return (
        "the thesis's harness: with 1 MB of work the failure rate is "
        f"{_avg(t, 'failure_rate', DYNAMIC, [LARGE_CELL]):.2%} under lc, dwrr and "
        f"{_avg(t, 'failure_rate', STATIC, [LARGE_CELL]):.2%} under r, rr, the slowest "
        f"answer {slowest / 1000:.1f} s: lblab keeps one connection per "
        "client and backend (the thesis opened one per request), servers that never block "
        "their event loop, and in-flight counts that return to 0 (lc's picks in the light "
        f"test found the server idle {_idle(t, 'lc', LIGHT)} of the time)"
    )


# ------------------------------------------------------------------ the claims


@dataclass(frozen=True)
class Claim:
    """One conclusion of the thesis, the figure that tests it and the bound it must meet."""

    id: str
    section: str
    text: str
    """The claim in a line (the table's wording)."""
    thesis: str
    """The thesis's own words."""
    figure_label: str
    fmt: str
    op: str  # ">=" or "<="
    threshold: float
    basis: str
    """Why this threshold."""
    figure: Callable[[RunTables], pd.Series]
    why: Callable[[RunTables], str]
    """One sentence, from the run's evidence, on why the claim did not hold here."""

    def format(self, value: float) -> str:
        return "-" if value is None or math.isnan(value) else self.fmt.format(value)

    @property
    def holds_if(self) -> str:
        return f"{'>=' if self.op == '>=' else '<='} {self.format(self.threshold)}"


CLAIMS: tuple[Claim, ...] = (
    Claim(
        id="r-rr-even",
        section="6.1",
        text="R and RR split requests evenly",
        thesis="over time, there is an equal average number of requests handled by each node in "
        "both RR and R",
        figure_label="largest deviation of a server's share from 1/3, r and rr (pp)",
        fmt="{:.1f} pp",
        op="<=",
        threshold=5.0,
        basis="within 5 percentage points of an even split",
        figure=even_split,
        why=_why_even,
    ),
    Claim(
        id="r-rr-large-cpu-low",
        section="5.5, 5.6",
        text="R and RR leave the large server's CPU low",
        thesis="CPU usage in RR and R test proved these algorithms to be incapable of utilizing the "
        "available capacity of the system properly",
        figure_label="large server's CPU / small servers' CPU (each % of its allowance), r and rr",
        fmt="{:.2f}",
        op="<=",
        threshold=0.5,
        basis="the large server at most half as busy as the small ones",
        figure=large_cpu_ratio,
        why=_why_large_cpu,
    ),
    Claim(
        id="wrr-large-most",
        section="5.6",
        text="WRR gives the large server most requests",
        thesis="in both WRR and DWRR strategies, the node with the highest capacity handled the "
        "majority of requests across all tests",
        figure_label="large server's share of wrr's requests, worst cell",
        fmt="{:.1%}",
        op=">=",
        threshold=0.5,
        basis="a majority in every cell",
        figure=large_share_everywhere("wrr"),
        why=_why_large_share("wrr"),
    ),
    Claim(
        id="dwrr-large-most",
        section="5.6",
        text="DWRR gives the large server most requests",
        thesis="in both WRR and DWRR strategies, the node with the highest capacity handled the "
        "majority of requests across all tests",
        figure_label="large server's share of dwrr's requests, worst cell",
        fmt="{:.1%}",
        op=">=",
        threshold=0.5,
        basis="a majority in every cell",
        figure=large_share_everywhere("dwrr"),
        why=_why_large_share("dwrr"),
    ),
    Claim(
        id="weighted-even-cpu",
        section="5.5",
        text="WRR and DWRR load every server's CPU evenly",
        thesis="both WRR and DWRR consistently distributed the workload evenly across all nodes, "
        "regardless of the package size or operational complexity",
        figure_label="CPU spread across servers (max - min, % of allowance), wrr and dwrr",
        fmt="{:.1f} pp",
        op="<=",
        threshold=25.0,
        basis="servers within 25 points of each other",
        figure=weighted_cpu_spread,
        why=_why_even_cpu,
    ),
    Claim(
        id="lc-light-idle",
        section="5.5, 6.2",
        text="LC leaves the large server idle at light load (ties to the first)",
        thesis="LC did not load the node with higher capacity when the traffic could be handled by "
        "the first two servers",
        figure_label="large server's share of lc's requests, light test",
        fmt="{:.1%}",
        op="<=",
        threshold=0.05,
        basis="at most 5 % of the requests",
        figure=lc_light_large_share,
        why=_why_lc_light,
    ),
    Claim(
        id="lc-first-two",
        section="5.6",
        text="LC's first two servers take most requests (small cell)",
        thesis="6 out of 9 tests involved traffic that did not require the utilization of the third "
        "server. As a result, the majority of requests in all of these tests were handled by "
        "the first two servers in the LC strategy",
        figure_label=f"small servers' share of lc's requests, {SMALL_CELL}",
        fmt="{:.1%}",
        op=">=",
        threshold=0.5,
        basis="a majority",
        figure=lc_small_share,
        why=_why_lc_first_two,
    ),
    Claim(
        id="dynamic-more-large",
        section="5.1, 5.2",
        text="Dynamic algorithms process more requests in the large cells",
        thesis="in large load tests, dynamic strategies significantly outperform them",
        figure_label=f"throughput lc, dwrr / r, rr, {LARGE_CELL}",
        fmt="{:.2f}",
        op=">=",
        threshold=1.10,
        basis="'significantly': at least 10 % more",
        figure=throughput_ratio(DYNAMIC, STATIC, LARGE_CELL),
        why=_why_dynamic_large,
    ),
    Claim(
        id="static-more-small",
        section="5.1, 5.2",
        text="R and RR process more requests in small cells",
        thesis="static algorithms demonstrate superior performance in small and medium loads",
        figure_label=f"throughput r, rr / lc, dwrr, {SMALL_CELL}",
        fmt="{:.2f}",
        op=">=",
        threshold=1.0,
        basis="more, by any margin",
        figure=throughput_ratio(STATIC, DYNAMIC, SMALL_CELL),
        why=_why_static_small,
    ),
    Claim(
        id="wrr-more-small",
        section="5.1",
        text="WRR processes 16-21 % more than dynamic in small cells",
        thesis="it surpasses dynamic algorithms by processing 16-21% more requests in scenarios "
        "involving small and medium loads and package sizes",
        figure_label=f"throughput wrr / lc, dwrr, {SMALL_CELL}",
        fmt="{:.2f}",
        op=">=",
        threshold=1.08,
        basis="half the thesis's 16 %",
        figure=throughput_ratio(["wrr"], DYNAMIC, SMALL_CELL),
        why=_why_wrr_small,
    ),
    Claim(
        id="static-faster-variation",
        section="5.3",
        text="R and RR have about 20 % lower mean latency in the variation test",
        thesis="both R and RR algorithms yield a slightly 20% smaller average response time in the "
        "variation test than dynamic strategies",
        figure_label="1 - mean latency r, rr / lc, dwrr, variation",
        fmt="{:.0%}",
        op=">=",
        threshold=0.10,
        basis="half the thesis's 20 %",
        figure=latency_cut(STATIC, DYNAMIC, VARIATION),
        why=_why_static_latency,
    ),
    Claim(
        id="dwrr-faster-than-lc-variation",
        section="5.3, 5.4",
        text="DWRR has 50 % lower mean latency than LC in the variation test",
        thesis="in variation test, DWRR showed 50% shorter average response time, then LC",
        figure_label="1 - mean latency dwrr / lc, variation",
        fmt="{:.0%}",
        op=">=",
        threshold=0.25,
        basis="half the thesis's 50 %",
        figure=latency_cut(["dwrr"], ["lc"], VARIATION),
        why=_why_dwrr_vs_lc,
    ),
    Claim(
        id="wrr-faster-than-dwrr-large",
        section="5.3",
        text="WRR beats DWRR's mean latency by 30-70 % with large work",
        thesis="in large processing tests, WRR exhibits a significantly better average response time "
        "compared to DWRR, outperforming it by 30-70%",
        figure_label=f"1 - mean latency wrr / dwrr, {LARGE_CELL}",
        fmt="{:.0%}",
        op=">=",
        threshold=0.15,
        basis="half the thesis's 30 %",
        figure=latency_cut(["wrr"], ["dwrr"], LARGE_CELL),
        why=_why_wrr_vs_dwrr_large,
    ),
    Claim(
        id="wrr-slow-variation",
        section="5.3, 6.1",
        text="WRR's mean latency in the variation test is over twice DWRR's",
        thesis="the average latency in WRR for the variation test is more than twice as long as that "
        "of DWRR",
        figure_label="mean latency wrr / dwrr, variation",
        fmt="{:.2f}",
        op=">=",
        threshold=1.5,
        basis="half the thesis's excess (2x)",
        figure=latency_ratio("wrr", "dwrr", VARIATION),
        why=_why_wrr_variation,
    ),
    Claim(
        id="r-rr-identical",
        section="6.1",
        text="R and RR perform almost identically",
        thesis="The Round Robin (RR) and Random (R) algorithms performed almost identically in every "
        "metric",
        figure_label="largest |throughput r / rr - 1| over the thesis cells",
        fmt="{:.1%}",
        op="<=",
        threshold=0.10,
        basis="within 10 % in every cell",
        figure=r_rr_gap,
        why=_why_r_rr,
    ),
    Claim(
        id="failures-identical",
        section="5.7, 5.8",
        text="Failure rates are nearly identical (no 1 MB work)",
        thesis="all five algorithms exhibited nearly identical failure rates",
        figure_label=f"failure rate max - min over the five, {SMALL_CELL} (pp)",
        fmt="{:.2f} pp",
        op="<=",
        threshold=1.0,
        basis="within 1 percentage point",
        figure=failure_spread,
        why=_why_failures_identical,
    ),
    Claim(
        id="dynamic-fail-1mb",
        section="5.7, 5.8",
        text="Dynamic algorithms fail more with 1 MB of work",
        thesis="there was a notable increase in failure rates for the dynamic algorithms when "
        "processing 1Mb of data",
        figure_label=f"failure rate lc, dwrr - r, rr, {LARGE_CELL} (pp)",
        fmt="{:.2f} pp",
        op=">=",
        threshold=1.0,
        basis="'notable': at least 1 percentage point",
        figure=dynamic_failure_excess,
        why=_why_failures_1mb,
    ),
)
"""Every claim, in the thesis's order of sections."""


# ------------------------------------------------------------------ judging


@dataclass(frozen=True)
class Judgement:
    claim: Claim
    values: list[float]
    ci: MeanCI
    verdict: str
    why: str
    failed_checks: list[str]

    def as_dict(self) -> dict[str, Any]:
        c = self.claim

        def num(x: float) -> float | None:
            return None if math.isnan(x) else round(x, 6)

        return {
            "id": c.id,
            "section": c.section,
            "claim": c.text,
            "thesis": c.thesis,
            "figure_label": c.figure_label,
            "figure": num(self.ci.mean),
            "lo": num(self.ci.lo),
            "hi": num(self.ci.hi),
            "replications": self.ci.n,
            "values": [num(v) for v in self.values],
            "holds_if": c.holds_if,
            "threshold_basis": c.basis,
            "verdict": self.verdict,
            "why": self.why,
            "failed_checks": self.failed_checks,
        }

    def table_row(self) -> dict[str, str]:
        c, ci = self.claim, self.ci
        interval = f"{c.format(ci.lo)} .. {c.format(ci.hi)}" if ci.has_ci else "no interval"
        return {
            "claim": f"{c.text} (§{c.section})",
            "figure": c.format(ci.mean),
            "95 % interval": interval,
            "n": str(ci.n),
            "holds if": c.holds_if,
            "verdict": self.verdict,
            "why": self.why,
        }


def verdict_of(ci: MeanCI, op: str, threshold: float) -> str:
    """Supported / contradicted when the interval lies wholly on one side of the threshold."""
    if ci.n == 0 or math.isnan(ci.mean):
        return NA
    if not ci.has_ci:
        return INCONCLUSIVE
    if op == ">=":
        return (
            SUPPORTED if ci.lo >= threshold else CONTRADICTED if ci.hi < threshold else INCONCLUSIVE
        )
    return SUPPORTED if ci.hi <= threshold else CONTRADICTED if ci.lo > threshold else INCONCLUSIVE


def _failed_checks(t: RunTables, values: pd.Series) -> list[str]:
    """Validity checks that failed in any phase of the replications behind the figure."""
    rows = t.phases[t.phases["replication"].isin(list(values.index))]
    return sorted({name for names in rows["failed_checks"] for name in names})


def judge(claim: Claim, tables: RunTables) -> Judgement:
    try:
        values = claim.figure(tables).astype(float).replace([np.inf, -np.inf], np.nan).dropna()
    except MissingCells as missing:
        return Judgement(claim, [], mean_ci([]), NA, f"this run lacks the cells: {missing}", [])
    ci = mean_ci(values.to_numpy())
    verdict = verdict_of(ci, claim.op, claim.threshold)
    if verdict == SUPPORTED:
        why = ""
    elif verdict == INCONCLUSIVE and not ci.has_ci:
        why = "one replication: no interval; run at least 3"
    else:
        why = claim.why(tables)
        if verdict == INCONCLUSIVE:
            each = ", ".join(claim.format(v) for v in values)
            why = f"the interval straddles {claim.format(claim.threshold)} (replications: {each}); {why}"
    return Judgement(claim, values.tolist(), ci, verdict, why, _failed_checks(tables, values))


def judge_all(tables: RunTables, claims: Sequence[Claim] = CLAIMS) -> list[Judgement]:
    return [judge(c, tables) for c in claims]


def markdown(judgements: Sequence[Judgement], title: str) -> str:
    """The claims table as markdown, the thesis's words listed under it."""
    head = ["claim", "figure", "95 % interval", "n", "holds if", "verdict", "why"]
    lines = [f"## {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for j in judgements:
        row = j.table_row()
        lines.append("| " + " | ".join(row[h].replace("|", "/") for h in head) + " |")
    lines += ["", "What each figure is, and the thesis's words:", ""]
    for j in judgements:
        c = j.claim
        lines.append(
            f"- **{c.text}** (§{c.section}): {c.figure_label}; holds if {c.holds_if} "
            f'({c.basis}). Thesis: "{c.thesis}".'
        )
    return "\n".join(lines) + "\n"
