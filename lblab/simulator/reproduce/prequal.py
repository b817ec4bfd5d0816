"""Prequal's qualitative claims, and a table of today's production strategies, in the simulator.

Source: B. Wydrowski, R. Kleinberg, S. M. Rumble, A. Archer, *Load is not what you
should balance: Introducing Prequal*, NSDI 2024 (arXiv 2312.10172). Its abstract:
Prequal "does not balance CPU load, but instead selects servers according to estimated
latency and active requests-in-flight (RIF)", and "has dramatically decreased tail
latency, error rates, and resource use". The claims checked here are lblab's
reading of the paper, in words: the paper's own figures (its testbed's latencies) were
not at hand when this was written, so the table gives each claim, not a number.

1. Against weighted round robin from CPU reports (gRPC's ``weighted_round_robin``,
   lblab's ``wrr-orca``) and P2C, under heterogeneous servers and many balancers,
   Prequal keeps the tail latency (p99, p99.9) lower;
2. and the tail RIF lower;
3. its tail rises sharply when the probes fall to one per query or fewer
   (``r_probe`` 1, 0.5, 0.25 against the default 3).

The setting (``CLAIMS``): 16 single-worker FIFO servers of three speeds (4 at half
speed, 8 at 1, 4 at twice; the service is exponential with mean 10 ms at speed 1, so
they serve 1800 requests a second in all), 8 independent balancers (each its own pool,
probes and strategy state; the arrivals split uniformly among them), Poisson arrivals
at 0.9 of the servers' capacity for 32 s, agents reporting every 250 ms, lblab's 30 s
deadline. The first 12 s are warm-up, left out of every figure:
``wrr-orca`` uses no weight before its 10 s blackout (gRFC A58's default).

Start-up. ``wrr-orca`` sends round robin until its weights are out of their blackout:
for gRPC's default 10 s the half-speed servers get twice what they serve, and at 0.9
load the backlog that leaves takes some 100 s of 10 % spare capacity to drain, so a
32 s run would measure the start, not WRR. Both run: ``wrr-orca`` as gRPC ships it,
and ``wrr-orca blackout_period=0`` (its weights used from the first update, after 1 s),
whose window is WRR's steady state, what the paper compared.

Figures, over the requests sent after the warm-up: p50, p99 and p99.9 latency with a
failure (a timeout) counted at its latency; the tail RIF is the p99 of every server's
requests in flight (queued plus in service), sampled every 10 ms after the warm-up; the
probes are those sent per query. Each claim is judged over seeds (``CLAIMS_JUDGED``,
``analysis.paper_claims``): claims 1 and 2 on Prequal's figure over the lowest rival's in
the same seed (holds when the interval is below 1), claim 3 on the smallest p99 at an
``r_probe`` of 1 or less over the p99 at 3 (holds when it is at least 2). Why it rises:
every query takes one probe out of the pool (the paper's removal, ``r_remove`` = 1), so
at one probe per query or fewer the pool never holds the 2 probes a pick needs and
Prequal picks at random, which overloads the slow servers; the runs at 1, 0.5 and 0.25
are then the same random picks, and their order among themselves is noise.

What the paper's testbed and YouTube had that this simulation does not: real servers
with many threads sharing CPUs, and antagonist load (co-tenant jobs taking CPU,
non-uniform and changing over time), which is what makes CPU a poor signal; real
YouTube queries, of very unequal cost; thousands of client tasks, each a balancer
(here 8); probes as RPCs over a real network, with its delays and losses (here probes
cost 40 us of server CPU and arrive at once); the RIF-latency estimates of real
servers; Google's own WRR (here gRPC's open-source A58 version).

The production table (``TABLE``, ``lblab reproduce prequal --study table``): 16 servers of
which 2 are 16 times slower, Poisson arrivals at 0.9 of the total capacity, 1 and 8
balancers, the p99 latency of each strategy with failures counted at their latency
(the simulator's own summary leaves failures out: here a timeout counts at 30 s).
``c3`` runs with ``clients`` = the number of balancers (C3's ``n``, the clients whose
requests a server sees); every other strategy with its defaults.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from lblab.analysis.paper_claims import Missing, PaperClaim, Verdict, judge_all
from lblab.simulator.clock import at
from lblab.simulator.config import EPOCH, ServerGroup, SimConfig
from lblab.simulator.reproduce.parallel import run_calls
from lblab.simulator.run import Simulation
from lblab.simulator.service import Exponential
from lblab.simulator.workload import OpenArrivals

MEAN_S = 0.010
"""Service time at speed 1 (exponential)."""
RIF_SAMPLE_S = 0.010
"""How often every server's requests in flight are sampled for the tail RIF."""
PERCENTILES = (50.0, 99.0, 99.9)
R_PROBES = (3.0, 1.0, 0.5, 0.25)
"""Prequal's default, then one probe per query and fewer (claim 3)."""
Options = tuple[tuple[str, str], ...]
NO_BLACKOUT: Options = (("blackout_period", "0"),)
"""``wrr-orca`` using its weights from the first update (module docstring, "Start-up")."""
RIVALS: tuple[tuple[str, Options], ...] = (("wrr-orca", ()), ("wrr-orca", NO_BLACKOUT), ("p2c", ()))
TABLE_STRATEGIES: tuple[tuple[str, Options], ...] = (
    ("rr", ()), ("p2c", ()), ("peak-ewma", ()), ("lc", ()), ("dwrr", ()), ("wrr-orca", ()),
    ("wrr-orca", NO_BLACKOUT), ("prequal", ()), ("c3", ()), ("least-request", ()),
)  # fmt: skip
"""The production table's strategies (``c3`` gets ``clients`` = the number of balancers)."""


@dataclass(frozen=True, slots=True)
class Setting:
    """Servers, balancers and load of one study."""

    name: str
    servers: tuple[ServerGroup, ...]
    balancers: tuple[int, ...]
    """Each study runs with each of these numbers of balancers."""
    load: float = 0.9
    """Arrivals as a share of the servers' capacity."""
    seconds: float = 32.0
    """Span of the arrivals."""
    warmup: float = 12.0
    """Left out of every figure (``wrr-orca``'s 10 s blackout, and 2 s to use its weights)."""

    @property
    def rate(self) -> float:
        capacity = sum(g.count * g.workers * g.speed / MEAN_S for g in self.servers)
        return self.load * capacity

    def describe(self) -> str:
        speeds = ", ".join(f"{g.count} at speed {g.speed:g}" for g in self.servers)
        return (
            f"{sum(g.count for g in self.servers)} servers ({speeds}; exponential service, "
            f"{MEAN_S * 1e3:g} ms at speed 1), {' and '.join(map(str, self.balancers))} "
            f"balancer(s), Poisson at "
            f"{self.load:g} of capacity ({self.rate:.0f}/s) for {self.seconds:g} s, the first "
            f"{self.warmup:g} s left out"
        )


def _group(count: int, speed: float) -> ServerGroup:
    return ServerGroup(count=count, service=Exponential(MEAN_S), speed=speed)


CLAIMS = Setting("claims", (_group(4, 0.5), _group(8, 1.0), _group(4, 2.0)), balancers=(8,))
TABLE = Setting("table", (_group(14, 1.0), _group(2, 1.0 / 16)), balancers=(1, 8))
"""The production table's setting: 16 servers, 2 of them 16 times slower, 1 and 8 balancers."""


@dataclass(frozen=True, slots=True)
class PrequalRow:
    """One strategy in one setting: its figures over the measured window."""

    setting: str
    strategy: str
    options: Options
    label: str
    """The strategy and the options that set it apart, as the tables show it."""
    balancers: int
    seed: int
    requests: int
    ok_pct: float
    percentiles_ms: tuple[float, ...]
    rif_p99: float
    probes_per_query: float

    @property
    def p99_ms(self) -> float:
        return self.percentiles_ms[PERCENTILES.index(99.0)]

    @property
    def p999_ms(self) -> float:
        return self.percentiles_ms[PERCENTILES.index(99.9)]

    def as_dict(self) -> dict[str, object]:
        row: dict[str, object] = {
            "setting": self.setting,
            "strategy": self.label,
            "balancers": self.balancers,
            "requests": self.requests,
            "ok_pct": round(self.ok_pct, 2),
        }
        for p, v in zip(PERCENTILES, self.percentiles_ms, strict=True):
            row[f"p{p:g}_ms"] = round(v, 1)
        row["rif_p99"] = round(self.rif_p99, 1)
        row["probes_per_query"] = round(self.probes_per_query, 2)
        return row


def _label(strategy: str, options: Options) -> str:
    if strategy == "c3":
        return "c3 (clients = K)"
    opts = ",".join(f"{k}={v}" for k, v in options)
    return f"{strategy} {opts}" if opts else strategy


def prequal_config(
    setting: Setting, strategy: str, options: Options, balancers: int, seed: int
) -> SimConfig:
    rate = setting.rate
    return SimConfig(
        strategy=strategy,
        strategy_options=options,
        servers=setting.servers,
        requests=round(rate * setting.seconds),
        arrivals=OpenArrivals(rate=rate, poisson=True),
        scenario="prequal",
        cells=((100, 0),),
        picks_every=0,
        balancers=balancers,
        seed=seed,
        run_id=f"prequal-{setting.name}",
    )


class _RifSampler:
    """Every server's requests in flight, every ``RIF_SAMPLE_S`` from ``start`` to ``end``."""

    def __init__(self, sim: Simulation, start: float, end: float) -> None:
        self.sim, self.end = sim, end
        self.samples: list[int] = []
        at(sim.env, start, self._sample)

    def _sample(self, _: None = None) -> None:
        self.samples.extend(s.load for s in self.sim.servers)
        if self.sim.env.now + RIF_SAMPLE_S <= self.end:
            at(self.sim.env, RIF_SAMPLE_S, self._sample)


def prequal_run(
    setting: Setting, strategy: str, options: Options = (), balancers: int = 1, seed: int = 1
) -> PrequalRow:
    """One strategy in ``setting`` with ``balancers``, measured after the warm-up; ``c3``
    gets ``clients`` = ``balancers``."""
    label = _label(strategy, options)
    if strategy == "c3":
        options = (*options, ("clients", str(balancers)))
    sim = Simulation(prequal_config(setting, strategy, options, balancers, seed))
    rif = _RifSampler(sim, setting.warmup, setting.seconds)
    result = sim.run()
    t = result.requests
    measured = t.column("t_sent").to_numpy() - EPOCH >= setting.warmup
    latency = t.column("latency_ms").to_numpy()[measured]
    ok = t.column("ok").to_numpy(zero_copy_only=False)[measured]
    probes = sum(int(c["probes_sent"]) for c in result.counters.values())
    return PrequalRow(
        setting=setting.name,
        strategy=strategy,
        options=options,
        label=label,
        balancers=balancers,
        seed=seed,
        requests=len(latency),
        ok_pct=100.0 * float(ok.mean()),
        percentiles_ms=tuple(float(v) for v in np.percentile(latency, PERCENTILES)),
        rif_p99=float(np.percentile(rif.samples, 99)),
        probes_per_query=probes / t.num_rows,
    )


def _r_probe(value: float) -> Options:
    return (("r_probe", f"{value:g}"),)


def reproduce_claims(
    setting: Setting = CLAIMS,
    seeds: Sequence[int] = (1,),
    jobs: int = 1,
    progress: Callable[[str], None] | None = None,
) -> list[PrequalRow]:
    """Prequal at each of ``R_PROBES`` and its rivals, in ``setting`` (its first K), at
    each seed."""
    k = setting.balancers[0]
    calls = [
        (prequal_run, (setting, "prequal", _r_probe(r), k, seed),
         f"prequal r_probe={r:g}, seed {seed}")
        for r in R_PROBES  # the costliest first (the most probes): workers take them in order
        for seed in seeds
    ]  # fmt: skip
    calls += [
        (prequal_run, (setting, name, options, k, seed), f"{_label(name, options)}, seed {seed}")
        for name, options in RIVALS
        for seed in seeds
    ]
    return run_calls(calls, jobs, progress)


def reproduce_table(
    setting: Setting = TABLE,
    seed: int = 1,
    jobs: int = 1,
    progress: Callable[[str], None] | None = None,
    strategies: Sequence[tuple[str, Options]] = TABLE_STRATEGIES,
) -> list[PrequalRow]:
    """The production table: every strategy in ``setting`` with each of its numbers of balancers."""
    calls = [
        (
            prequal_run,
            (setting, name, options, k, seed),
            f"{_label(name, options)} with {k} balancer(s)",
        )
        for k in sorted(setting.balancers, reverse=True)
        for name, options in strategies
    ]
    return run_calls(calls, jobs, progress)


def runs_table(rows: Sequence[PrequalRow]) -> list[dict[str, object]]:
    """A row per strategy run: its figures averaged over the seeds."""
    out: list[dict[str, object]] = []
    for label in dict.fromkeys(r.label for r in rows):
        runs = [r.as_dict() for r in rows if r.label == label]
        row = {**runs[0], "seeds": len(runs)}
        for key in FIGURES_AVERAGED:
            row[key] = round(float(np.mean([r[key] for r in runs])), 2)
        out.append(row)
    return out


FIGURES_AVERAGED = ("requests", "ok_pct", *(f"p{p:g}_ms" for p in PERCENTILES), "rif_p99",
                    "probes_per_query")  # fmt: skip


def _tail(what: str, fmt: str) -> PaperClaim:
    return PaperClaim(
        id=f"{what.replace(' ', '-').replace('.', '').lower()}-below-rivals",
        text=f"prequal keeps the {what} below wrr-orca's and p2c's",
        source='abstract: Prequal "has dramatically decreased tail latency" (and RIF) against '
        "WRR, heterogeneous servers, many clients",
        figure_label=f"prequal's {what} over the lowest of its rivals' (wrr-orca, wrr-orca "
        "blackout_period=0, p2c), paired by seed",
        op="<=",
        threshold=1.0,
        basis="lower, by any margin (the paper's own figures were not at hand)",
        fmt=fmt,
    )


SHARP = 2.0
"""Claim 3's "sharply", lblab's reading: the p99 at least doubles."""
CLAIMS_JUDGED: tuple[PaperClaim, ...] = (
    _tail("p99 latency", "{:.3f}"),
    _tail("p99.9 latency", "{:.3f}"),
    _tail("p99 RIF", "{:.3f}"),
    PaperClaim(
        id="tail-rises-at-one-probe",
        text="prequal's tail rises sharply at one probe per query or fewer",
        source="the paper's probing-rate study: sharp rise at r_probe <= 1",
        figure_label="the smallest, over r_probe 1, 0.5 and 0.25, of prequal's p99 over its p99 "
        "at r_probe 3, paired by seed",
        op=">=",
        threshold=SHARP,
        basis="'sharply', lblab's reading: at least twice",
        fmt="{:.1f}",
    ),
)
"""The claims of the module docstring, each with its figure and bound."""


def _seeded(rows: Sequence[PrequalRow], strategy: str, options: Options) -> list[PrequalRow]:
    runs = sorted((r for r in rows if (r.strategy, r.options) == (strategy, options)),
                  key=lambda r: r.seed)  # fmt: skip
    if not runs:
        raise Missing(f"{_label(strategy, options)} in the claims study")
    return runs


def _below_rivals(rows: Sequence[PrequalRow], figure: Callable[[PrequalRow], float]) -> list[float]:
    mine = np.array([figure(r) for r in _seeded(rows, "prequal", _r_probe(R_PROBES[0]))])
    rivals = np.array([[figure(r) for r in _seeded(rows, *rival)] for rival in RIVALS])
    return (mine / rivals.min(axis=0)).tolist()


def _rise(rows: Sequence[PrequalRow]) -> list[float]:
    base = np.array([r.p99_ms for r in _seeded(rows, "prequal", _r_probe(R_PROBES[0]))])
    few = [[r.p99_ms for r in _seeded(rows, "prequal", _r_probe(p))] for p in R_PROBES if p <= 1]
    return (np.min(few, axis=0) / base).tolist()


_FIGURES: dict[str, Callable[[Sequence[PrequalRow]], list[float]]] = {
    "p99-latency-below-rivals": lambda rows: _below_rivals(rows, lambda r: r.p99_ms),
    "p999-latency-below-rivals": lambda rows: _below_rivals(rows, lambda r: r.p999_ms),
    "p99-rif-below-rivals": lambda rows: _below_rivals(rows, lambda r: r.rif_p99),
    "tail-rises-at-one-probe": _rise,
}


def judge_claims(
    rows: Sequence[PrequalRow], claims: Sequence[PaperClaim] = CLAIMS_JUDGED
) -> list[Verdict]:
    """Each claim (of ``CLAIMS_JUDGED``, or one with its id and another bound) on the runs."""
    return judge_all([(c, partial(_FIGURES[c.id], rows)) for c in claims])


def strategies_table(rows: Sequence[PrequalRow]) -> list[dict[str, object]]:
    """The production table: a row per strategy, its p99 and ok share with each K balancers."""
    out: list[dict[str, object]] = []
    for label in dict.fromkeys(r.label for r in rows):
        row: dict[str, object] = {"strategy": label}
        for r in sorted((r for r in rows if r.label == label), key=lambda r: r.balancers):
            row[f"p99_ms_k{r.balancers}"] = round(r.p99_ms, 1)
            row[f"ok_pct_k{r.balancers}"] = round(r.ok_pct, 2)
        out.append(row)
    return out


TESTBED_GAPS = (
    "real servers with many threads sharing CPUs, and antagonist load (co-tenant jobs taking "
    "CPU, non-uniform and changing over time): here single-worker servers of fixed speeds",
    "real YouTube traffic, queries of very unequal cost: here exponential service times",
    "thousands of client tasks, each balancing on its own: here 8 balancers",
    "probes as RPCs over a real network, with delays and losses: here they cost 40 us of "
    "server CPU and arrive at once",
    "Google's own WRR on CPU utilization: here gRPC's open-source A58 (wrr-orca)",
)
