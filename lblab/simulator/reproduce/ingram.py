"""Ingram's Node.js balancer experiment, re-run in the simulator as his code ran it.

Source: S. Ingram, *CS 422 Project Report* (Node.js load balancer,
github.com/VoxelrSam/LoadBalancer); ../shared/papers/004_57785e7970094215.txt.

Setup as published: five single-worker FIFO servers with fixed delays 250, 500, 100,
200 and 700 ms (in that list order); 10, 100 or 500 requests sent 25 ms apart; total
= first send to last response, average = mean response time. The report's algorithm
names map to ours: noBalancing -> ``first``, sequential -> ``rr``, random -> ``r``,
smallestQueue -> ``lc`` (ties to the first server), dynamic -> ``dynamic``,
dynamicImmediate -> ``dynamic-immediate``, dynamicHybrid -> ``dynamic-hybrid``.

What the report's algorithms really had is read from its code (``ingram_model``): the
servers' estimate is ``queue.length * delay`` (the POST sent on arrival leaves out the
request in service); the balancer never adjusts an estimate when it dispatches; and
the response-header estimates arrive as *strings*, so ``dynamic`` compares them as
text (``"10000" < "250"``) and keeps feeding servers with long queues. The testbed is
one Node.js process: 1 ms HTTP hops, ``setTimeout`` 0.8 ms late, sends 25.3 ms apart,
both timers jittering +-0.5 ms; each seed is one run. By default the dynamic rows run
those pickers; ``as_coded=False`` (``--lblab-strategies``) runs lblab's own
``dynamic*``, which compare numbers.

Measured (20 runs per row, medians; ``lblab reproduce ingram``), total ms, ours vs paper:

=================  ===============  ================  ===================
algorithm          10               100               500
=================  ===============  ================  ===================
noBalancing        2512 / 2538      25084 / 25106     125401 / 125372
sequential         1507 / 1504      14121 / 14113     70185 / 70165
random             2106 / 1407      15121 / 11266     71887 / 64123
smallestQueue      1031 / 1030      8515 / 8511       42854 / 42854
dynamic            2512 / 2510      30550 / 23536     68732 / 65519
dynamicImmediate   806 / 807        4797 / 4792       22849 / 23113
dynamicHybrid      806 / 803        4773 / 4763       23071 / 23055
=================  ===============  ================  ===================

first, rr and lc are within 1.1 % on totals and 2 % on averages; dynamicImmediate and
dynamicHybrid within 1.1 % and 1.6 %; dynamic at 10 and 500 within 5 %.

Report delay. The issue suspected the dynamic reports' lateness (HTTP POST). Measured
with ``run_one(..., post_delay_s=)``, a POST landing that much after the 1 ms hop (20
runs each): up to 22 ms late, dynamicImmediate and every 10- and 100-request row are
unchanged; from 23-24 ms (about one send gap) the ten requests of the 10-request run
take 1608 ms, twice the report's 807, and at 100 both take about 5020 ms (+5 %). So
the report's POSTs landed within a send gap, and lateness is not what made ``dynamic``
slow: the string comparison is. With numbers (lblab's ``dynamic``, same testbed) it
takes 16549 ms at 100 and 29864 ms at 500 (-30 %, -54 %) and beats smallestQueue, which
is what the numeric comparison shows. The one figure a late POST moves is
dynamicHybrid at 500 (below).

Where a figure still misses, and why:

- random: the paper's rows are one unseeded draw. Over 40 runs its totals lie at the
  18th, 3rd and 18th percentile (10/100/500); the author's own second run at 100
  (``metrics.json`` in his repository) took 16839 ms, above sequential. Random beats
  sequential in 30-48 % of our runs, so its rank is a coin toss.
- dynamic at 100: +30 % (median), runs spread from 21.5 to 31.2 s in clusters, and 12
  of 40 are at or below the paper's 23536 ms (the author's rerun: 25609 ms). Which
  server the balancer herds onto depends on whether a send lands just before or just
  after a response, a sub-millisecond race: over send gaps 25.0-26.0 ms, hops
  0.3-2 ms and jitter 0.5-1 ms the 10-run median moves from -12 % to +30 % at 100 and
  from 0 % to +16 % at 500 (lc needs a gap above 25.0 ms: at exactly 25 ms it is
  +8 %). Ours lands behind noBalancing (25084 ms) in 70 % of runs, as the author's
  rerun did (25609 vs 25078); the report has it just ahead.
- Ties the report orders: noBalancing and dynamic at 10 make the same picks (all ten
  to the first server); the report's 28 ms between them is noBalancing running first
  in a fresh process. dynamicImmediate and dynamicHybrid make the same picks at 10;
  at 500 the report has them 58 ms apart (hybrid ahead on total, behind on average:
  4995 vs 5000 ms), less than one request's service. Ours puts each run's total in
  one of two clusters, about 22.63 or 23.07 s for hybrid, and the median follows
  the larger cluster: with POSTs on time it is 23071 ms,
  behind immediate (22849); with POSTs 12-22 ms late it is 22638 ms, ahead, as in the
  report; averages do not move (5062 ms). Nothing in the report says how long its
  POSTs took, so the default keeps them on time. At 100 hybrid leads in 88 % of run
  pairs, as reported.

So the ranks match the report wherever two algorithms differ by more than the runs'
spread; the report's "hybrid is the clear winner" holds against everything but
dynamicImmediate, with which it is tied.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import median

from lblab.analysis.paper_claims import Missing, PaperClaim, Verdict, halfway, judge_all
from lblab.simulator.config import ServerGroup, SimConfig
from lblab.simulator.reproduce import paper_options
from lblab.simulator.reproduce.ingram_model import (
    AS_CODED,
    HOP_S,
    SEND_GAP_S,
    NodeTimer,
    SleepLoop,
)
from lblab.simulator.run import Simulation

SERVICE_MS = (250, 500, 100, 200, 700)
SEEDS = 20
ALGORITHMS = ("first", "rr", "r", "lc", "dynamic", "dynamic-immediate", "dynamic-hybrid")
DETERMINISTIC = ("first", "rr", "lc")
"""Rows that depend on no randomness and no report timing: within 3 % of the paper."""

PAPER_NAMES = {
    "first": "noBalancing",
    "rr": "sequential",
    "r": "random",
    "lc": "smallestQueue",
    "dynamic": "dynamic",
    "dynamic-immediate": "dynamicImmediate",
    "dynamic-hybrid": "dynamicHybrid",
}

# (total_ms, average_ms) per request count, copied from the report's three tables.
PAPER: dict[int, dict[str, tuple[float, float]]] = {
    10: {
        "first": (2538, 1292),
        "rr": (1504, 468),
        "r": (1407, 393),
        "lc": (1030, 350),
        "dynamic": (2510, 1267),
        "dynamic-immediate": (807, 298),
        "dynamic-hybrid": (803, 297),
    },
    100: {
        "first": (25106, 11439),
        "rr": (14113, 2527.8),
        "r": (11266, 2095),
        "lc": (8511, 1418),
        "dynamic": (23536, 4908),
        "dynamic-immediate": (4792, 1152),
        "dynamic-hybrid": (4763, 1142),
    },
    500: {
        "first": (125372, 56413),
        "rr": (70165, 11657),
        "r": (64123, 10534),
        "lc": (42854, 6234),
        "dynamic": (65519, 12850),
        "dynamic-immediate": (23113, 4995),
        "dynamic-hybrid": (23055, 5000),
    },
}

RERUN_100 = {"first": 25078, "rr": 14114, "r": 16839, "lc": 8512, "dynamic": 25609,
             "dynamic-immediate": 4759}  # fmt: skip
"""The author's own second run at 100 requests (``metrics.json`` in his repository)."""

WHY = {"r": "the paper's is one unseeded draw", "dynamic": "herding, set by sub-ms timing"}


@dataclass(frozen=True, slots=True)
class IngramRow:
    algorithm: str
    requests: int
    total_ms: float
    """Median over the seeds (each seed is one run with its own timer jitter)."""
    total_min_ms: float
    total_max_ms: float
    totals_ms: tuple[float, ...]
    """Each seed's total, seeds 1, 2, ... (the claims' figures pair them across algorithms)."""
    average_ms: float
    """Median over the seeds."""
    paper_total_ms: float | None
    paper_average_ms: float | None
    seeds: int
    note: str
    rank: int = 0
    """Place by total among the algorithms run at this request count (1 = fastest, ties share)."""
    paper_rank: int | None = None

    @property
    def total_diff_pct(self) -> float | None:
        if self.paper_total_ms is None:
            return None
        return 100.0 * (self.total_ms - self.paper_total_ms) / self.paper_total_ms

    @property
    def average_diff_pct(self) -> float | None:
        if self.paper_average_ms is None:
            return None
        return 100.0 * (self.average_ms - self.paper_average_ms) / self.paper_average_ms

    def as_dict(self) -> dict[str, object]:
        return {
            "algorithm": self.algorithm,
            "paper_name": PAPER_NAMES.get(self.algorithm),
            "requests": self.requests,
            "total_ms": round(self.total_ms, 1),
            "total_range_ms": f"{self.total_min_ms:.0f}-{self.total_max_ms:.0f}",
            "paper_total_ms": self.paper_total_ms,
            "total_diff_pct": _round(self.total_diff_pct),
            "average_ms": round(self.average_ms, 1),
            "paper_average_ms": self.paper_average_ms,
            "average_diff_pct": _round(self.average_diff_pct),
            "rank": self.rank,
            "paper_rank": self.paper_rank,
            "seeds": self.seeds,
            "note": self.note,
        }


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def ingram_config(algorithm: str, requests: int, seed: int = 1) -> SimConfig:
    """The testbed: Node timers on the servers and the sender, 1 ms HTTP hops."""
    return SimConfig(
        strategy=algorithm,
        strategy_options=paper_options(algorithm),
        servers=tuple(
            ServerGroup(count=1, service=NodeTimer(ms / 1000.0), workers=1) for ms in SERVICE_MS
        ),
        requests=requests,
        arrivals=SleepLoop(rate=1.0 / SEND_GAP_S, poisson=False),
        client_delay=HOP_S,
        server_delay=HOP_S,
        deadline=None,
        picks_every=0,
        report_period=1.0,
        seed=seed,
        run_id="ingram",
        scenario="ingram",
        cells=((100, 10_000),),
    )


def run_one(
    algorithm: str, requests: int, seed: int, as_coded: bool = True, post_delay_s: float = 0.0
) -> tuple[float, float]:
    """``(total_ms, average_ms)`` of one simulated run.

    ``as_coded`` runs the dynamic algorithms as the report's JavaScript did
    (``ingram_model``); False runs lblab's own strategies of those names.
    ``post_delay_s`` delays the dynamic algorithms' POSTed estimates further.
    """
    picker = AS_CODED.get(algorithm) if as_coded else None
    strategy = None if picker is None else picker(SERVICE_MS, post_delay_s)
    result = Simulation(ingram_config(algorithm, requests, seed), strategy).run()
    t = result.requests
    sent = t.column("t_sent").to_numpy()
    lat = t.column("latency_ms").to_numpy()
    total = max(sent * 1000.0 + lat) - min(sent) * 1000.0
    return float(total), float(lat.mean())


def _note(row: IngramRow, totals: Sequence[float]) -> str:
    total_diff, avg_diff = row.total_diff_pct, row.average_diff_pct
    if total_diff is None or avg_diff is None or row.paper_total_ms is None:
        return "no published figure for this request count"
    limit = 3.0 if row.algorithm in DETERMINISTIC else 10.0
    if abs(total_diff) <= limit and abs(avg_diff) <= limit:
        return f"within {limit:g} % of the paper"
    below = sum(t <= row.paper_total_ms for t in totals)
    note = f"{WHY.get(row.algorithm, 'see the docstring')}; {below}/{len(totals)} runs <= paper"
    rerun = RERUN_100.get(row.algorithm) if row.requests == 100 else None
    return note if rerun is None else f"{note}; author's rerun {rerun}"


def _ranks(values: dict[str, float]) -> dict[str, int]:
    """1 = fastest; equal totals (to 0.1 ms: the same picks) share the better rank."""
    ordered = sorted(round(v, 1) for v in values.values())
    return {a: ordered.index(round(v, 1)) + 1 for a, v in values.items()}


def reproduce_ingram(
    requests: Sequence[int] = (10, 100, 500),
    algorithms: Sequence[str] = ALGORITHMS,
    seeds: int = SEEDS,
    as_coded: bool = True,
) -> list[IngramRow]:
    """One row per (request count, algorithm): medians over ``seeds`` runs, ranks by total."""
    rows = []
    for n in requests:
        block, runs = [], {}
        for algo in algorithms:
            figures = [run_one(algo, n, seed, as_coded) for seed in range(1, seeds + 1)]
            runs[algo] = totals = [f[0] for f in figures]
            paper = PAPER.get(n, {}).get(algo)
            block.append(
                IngramRow(
                    algorithm=algo,
                    requests=n,
                    total_ms=median(totals),
                    total_min_ms=min(totals),
                    total_max_ms=max(totals),
                    totals_ms=tuple(totals),
                    average_ms=median(f[1] for f in figures),
                    paper_total_ms=paper[0] if paper else None,
                    paper_average_ms=paper[1] if paper else None,
                    seeds=seeds,
                    note="",
                )
            )
        ours = _ranks({r.algorithm: r.total_ms for r in block})
        published = {r.algorithm: r.paper_total_ms for r in block if r.paper_total_ms}
        theirs = _ranks(published) if len(published) == len(block) else {}
        for r in block:
            r = replace(r, rank=ours[r.algorithm], paper_rank=theirs.get(r.algorithm))
            rows.append(replace(r, note=_note(r, runs[r.algorithm])))
    return rows


def _claim(first: str, second: str, n: int, text: str, basis: str) -> PaperClaim:
    """``first``'s total over ``second``'s at ``n`` requests: at most half the report's
    saving below 1, or (``basis`` given) below 1 by any margin."""
    published = PAPER[n][first][0] / PAPER[n][second][0]
    name_a, name_b = PAPER_NAMES[first], PAPER_NAMES[second]
    return PaperClaim(
        id=f"{first}-vs-{second}-{n}",
        text=text,
        source=f"report's table, {n} requests: {name_a} {PAPER[n][first][0]:.0f} ms, "
        f"{name_b} {PAPER[n][second][0]:.0f} ms (ratio {published:.3f})",
        figure_label=f"{name_a}'s total over {name_b}'s, {n} requests, paired by seed",
        op="<=",
        threshold=1.0 if basis else round(halfway(published), 3),
        basis=basis or f"half the report's {100 * (1 - published):.0f} % saving",
        fmt="{:.3f}",
    )


_SPECS = (
    ("rr", "first", 500, "sequential finishes well before noBalancing", ""),
    ("lc", "rr", 500, "smallestQueue finishes well before sequential", ""),
    ("dynamic-immediate", "lc", 500, "dynamicImmediate finishes well before smallestQueue", ""),
    ("dynamic-hybrid", "lc", 500, "dynamicHybrid finishes well before smallestQueue", ""),
    ("dynamic", "rr", 500, "dynamic (as coded) finishes before sequential", ""),
    ("dynamic-hybrid", "dynamic-immediate", 100, "dynamicHybrid is the clear winner",
     "ahead, by any margin (the report's gap is 0.6 %)"),
    ("dynamic-hybrid", "dynamic-immediate", 500, "dynamicHybrid is the clear winner",
     "ahead, by any margin (the report's gap is 0.25 %)"),
)  # fmt: skip
CLAIMS: tuple[PaperClaim, ...] = tuple(_claim(*spec) for spec in _SPECS)
"""The report's findings where its tables state them (500 requests: its largest run; "the
clear winner" is its conclusion, checked at 100 and 500)."""
_RUNS = {claim.id: spec[:3] for claim, spec in zip(CLAIMS, _SPECS, strict=True)}


def _ratio(rows: Sequence[IngramRow], first: str, second: str, n: int) -> Callable[[], list[float]]:
    def figure() -> list[float]:
        by = {(r.algorithm, r.requests): r for r in rows}
        need = [a for a in (first, second) if (a, n) not in by]
        if need:
            raise Missing(", ".join(f"{a} at {n} requests" for a in need))
        a, b = by[(first, n)].totals_ms, by[(second, n)].totals_ms
        return [x / y for x, y in zip(a, b, strict=True)]

    return figure


def judge_claims(rows: Sequence[IngramRow], claims: Sequence[PaperClaim] = CLAIMS) -> list[Verdict]:
    """Each claim (of ``CLAIMS``, or one with its id and another bound) on the per-seed totals."""
    return judge_all([(c, _ratio(rows, *_RUNS[c.id])) for c in claims])


def ingram_chart(rows: Sequence[IngramRow], path: Path) -> Path:
    """Simulated vs published total and average time, one panel per request count."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    counts = list(dict.fromkeys(r.requests for r in rows))
    fig, axes = plt.subplots(len(counts), 1, figsize=(9, 3.2 * len(counts)), squeeze=False)
    for ax, n in zip(axes[:, 0], counts, strict=True):
        sub = [r for r in rows if r.requests == n]
        x = range(len(sub))
        bars = (
            ("total (sim)", [r.total_ms for r in sub], -0.3),
            ("total (paper)", [r.paper_total_ms or 0 for r in sub], -0.1),
            ("average (sim)", [r.average_ms for r in sub], 0.1),
            ("average (paper)", [r.paper_average_ms or 0 for r in sub], 0.3),
        )
        for label, values, shift in bars:
            ax.bar([i + shift for i in x], [v / 1000 for v in values], width=0.2, label=label)
        ax.set_xticks(list(x), [r.algorithm for r in sub])
        ax.set_ylabel("seconds")
        ax.set_title(f"{n} requests")
    axes[0, 0].legend(ncol=4, fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
