"""Why a thesis claim did not hold on a run: one sentence from the run's own evidence.

Each ``why_*`` names which harness explains it, lblab's or the thesis's (or neither),
from this run's own figures (means over its replications): CPU per server, shares,
failure rates, the balancer's CPU per request, how often a pick found its server idle.
The thesis's harness is known from the thesis and the field notes: a new connection per
request, request handlers that block the server's event loop, in-flight counts that
could leak, and its own WRR and DWRR.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pandas as pd

from lblab.analysis.thesis.figures import MissingCells, large_share
from lblab.analysis.thesis.tables import (
    CLOSED,
    DYNAMIC,
    LARGE_CELL,
    LIGHT,
    SMALL_CELL,
    STATIC,
    VARIATION,
    RunTables,
)
from lblab.strategy_names import THESIS_FIVE as FIVE


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
        shares = pd.concat([large_share(t, s, scenario) for s in strategies])
    except MissingCells:
        return "unknown"
    return f"{shares.mean():.0%}"


def why_even(t: RunTables) -> str:
    requests = _avg(t, "requests", ["r"], [LARGE_CELL])
    return (
        "neither harness: r picks at random, and in a phase of the large cell it sends only "
        f"{requests:.0f} requests, so one server's share strays by sqrt(2/9 / n) = "
        f"{100 * math.sqrt(2 / 9 / max(requests, 1)):.0f} points by chance; longer phases "
        "(the thesis: 20 minutes) close the gap"
    )


def why_large_cpu(t: RunTables) -> str:
    cells = "; ".join(f"{c}: {_cpu(t, STATIC, c)}" for c in CLOSED)
    return (
        f"lblab's harness: under r, rr {cells}; each server gets a third of the requests, so "
        f"{t.large} stays low only while the small servers are the ones that run out of CPU"
    )


def why_large_share(strategy: str) -> Callable[[RunTables], str]:
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


def why_even_cpu(t: RunTables) -> str:
    return (
        f"lblab's harness: in {VARIATION} under wrr, dwrr {_cpu(t, ('wrr', 'dwrr'), VARIATION)}; "
        "1 MB packages load the balancer and Locust on the same 2 cores, so the servers' CPU "
        "follows the shared machine, not only the weights"
    )


def why_lc_light(t: RunTables) -> str:
    return (
        f"lblab's load: at {_rate(t, ['lc'], LIGHT)} the light test kept "
        f"{_cpu(t, ['lc'], LIGHT)} and {t.large} took {_share(t, ['lc'], LIGHT)} of lc's "
        "requests: the first servers were busy often enough for LC to move on (with "
        "tie=first a request reaches the last server only when every other one has more in "
        "flight)"
    )


def why_lc_first_two(t: RunTables) -> str:
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


def why_dynamic_large(t: RunTables) -> str:
    return (
        f"lblab's harness: in {LARGE_CELL} r, rr ran {_rate(t, STATIC, LARGE_CELL)} with "
        f"{_cpu(t, STATIC, LARGE_CELL)}, lc, dwrr {_rate(t, DYNAMIC, LARGE_CELL)}, where "
        f"{_large_wait(t, DYNAMIC, LARGE_CELL)}: it waits for the shared cores, not its "
        "quota, so the spare capacity dynamic algorithms would use is not there on a busy "
        "2-core machine"
    )


def why_static_small(t: RunTables) -> str:
    extra = _avg_us(t, DYNAMIC, SMALL_CELL) - _avg_us(t, STATIC, SMALL_CELL)
    rate = _avg(t, "throughput_rps", DYNAMIC, [SMALL_CELL])
    return (
        f"lblab's harness: under r, rr {_cpu(t, STATIC, SMALL_CELL)} in {SMALL_CELL}, so the "
        "even split is capped by the small servers; lc and dwrr cost the balancer "
        f"{abs(extra):.0f} us {'more' if extra >= 0 else 'less'} a request "
        f"({_pick_us(t, DYNAMIC, SMALL_CELL)} vs {_pick_us(t, STATIC, SMALL_CELL)} for r, rr), "
        f"{extra * rate / 1e4:+.1f} % of a core at {rate:.0f} req/s: the slower selection the "
        "thesis blamed costs no throughput here"
    )


def why_wrr_small(t: RunTables) -> str:
    return (
        f"lblab's harness: under wrr in {SMALL_CELL} {_cpu(t, ['wrr'], SMALL_CELL)} at "
        f"{_rate(t, ['wrr'], SMALL_CELL)} (lc, dwrr: {_rate(t, DYNAMIC, SMALL_CELL)}): no "
        "server was saturated, so the shared 2 cores (Locust, balancer, others' work), not "
        "the algorithm, set the pace; the thesis's servers had machines of their own"
    )


def why_static_latency(t: RunTables) -> str:
    return (
        f"lblab's harness: with closed-loop users mean latency is users / throughput: in "
        f"{VARIATION} r, rr {_lat(t, STATIC, VARIATION)} at {_rate(t, STATIC, VARIATION)}, "
        f"lc, dwrr {_lat(t, DYNAMIC, VARIATION)} at {_rate(t, DYNAMIC, VARIATION)}; the "
        f"balancer's CPU per request ({_pick_us(t, STATIC, VARIATION)} vs "
        f"{_pick_us(t, DYNAMIC, VARIATION)}) cannot add the thesis's 20 %"
    )


def why_dwrr_vs_lc(t: RunTables) -> str:
    return (
        f"lblab's harness: in {VARIATION} lc {_lat(t, ['lc'], VARIATION)} with "
        f"{_cpu(t, ['lc'], VARIATION)}, dwrr {_lat(t, ['dwrr'], VARIATION)} with "
        f"{_cpu(t, ['dwrr'], VARIATION)}; LC's in-flight counts are exact (its picks in the "
        f"light test found the server idle {_idle(t, 'lc', LIGHT)} of the time), so it does "
        "not pile large requests on the small servers as the thesis's LC did, and dwrr's "
        "0.5 s weights lag the mix of 10 KB to 1 MB work"
    )


def why_wrr_vs_dwrr_large(t: RunTables) -> str:
    large = _avg(t, "latency_mean_ms", ["wrr"], [LARGE_CELL], [t.large])
    small = _avg(t, "latency_mean_ms", ["wrr"], [LARGE_CELL], t.small)
    return (
        f"lblab's harness: wrr sends 2/3 of the 1 MB work to {t.large}, whose answers took "
        f"{large:.0f} ms against {small:.0f} ms on the small servers ({_cpu(t, ['wrr'], LARGE_CELL)}): "
        f"on a busy 2-core machine {t.large} does not get the 4x capacity its weight assumes"
    )


def why_wrr_variation(t: RunTables) -> str:
    return (
        "the thesis's harness: its WRR sent w requests in a row to one server (lblab's "
        "`wrr-block`, not in this preset), lblab's wrr interleaves them (smooth WRR); here "
        f"wrr {_lat(t, ['wrr'], VARIATION)} vs dwrr {_lat(t, ['dwrr'], VARIATION)}: run "
        "wrr-block to see whether the bunching makes the thesis's slow variation test"
    )


def why_r_rr(t: RunTables) -> str:
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


def why_failures_identical(t: RunTables) -> str:
    return f"lblab's harness: failure rates in {SMALL_CELL}: " + ", ".join(
        f"{s} {_avg(t, 'failure_rate', [s], [SMALL_CELL]):.2%}" for s in FIVE
    )


def why_failures_1mb(t: RunTables) -> str:
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
