"""Cheetah's large-scale simulations: load imbalance, and connections broken by pool changes.

Source: T. Barbette et al., *Cheetah: A High-Speed Programmable Load-Balancer Framework
With Guaranteed Per-Connection-Consistency*, IEEE/ACM ToN 2021;
../shared/papers/003_9c5fbd34c61d91d8.txt, Sect. II (Fig. 2b) and Sect. V-C (Fig. 9).
The third study, AWRR vs Pow2 vs least loaded (Fig. 8), is ``cheetah_awrr``.

Both studies here are connection-level: a connection arrives, a strategy picks its
server, it stays there for a random duration (lognormal, standing in for the web-server
flow-size distribution the paper takes from SilkRoad). Strategies whose pick depends on
the loads (``p2c``, ``lc``, and the pinned row) run as registry strategies on the real
``Pool``, driven by a heap of connection ends (``ConnectionPool``; a backend's
``inflight`` is its number of active connections). Picks blind to the loads (``rr``,
``maglev`` with a random key) are drawn for all connections at once with numpy, and the
loads counted from the arrays. Arrivals and durations are numpy draws in both cases.

Imbalance (Fig. 2b). The paper: 468 servers, 20K..200K active connections, "imbalance"
of a server = its active connections / the mean, system imbalance = the maximum over
servers, averaged over the run. Published: round robin 1.2x better than a uniform hash
(Beamer/Faild), power of two choices 10x and least loaded 40x better. We compare
``maglev`` with a random key per connection (a uniform-hash indirection table), ``rr``,
``p2c`` and ``lc`` (least loaded, random tie-break). The figure we report is
``max / mean``; the paper's "factor" compares the excess ``max / mean - 1``. A point
starts in steady state (Poisson(active) connections open with their equilibrium
residual durations), runs ``Depth.warmup`` mean durations and averages ``samples``
snapshots over ``Depth.measure``: 0.5 + 0.5 by default (``QUICK``), 2 + 4 with
``--full`` (the first version's depth, which started empty). The paper does not say
how long its runs were or how it sampled.

Broken connections (Fig. 9). The paper: 24 servers, 1500 -> 2500 -> 1500 new
connections/s over 40 s (sinusoidal), 7 servers added while the load rises and 8
drained while it falls; hashing broke up to 11 % of the connections, consistent
hashing 3 %, Beamer 0.5 %, Cheetah none. A stateless balancer re-derives a connection's
server from its key on every packet, so a connection is broken when a pool change
maps its key elsewhere while it is open (counted once). We re-pick every open
connection at each pool change: ``ip-hash`` (plain modulo hashing of the client
address), ``ring-hash`` and ``maglev`` (consistent hashing of the routing key); the
``pinned`` row is Cheetah: the first pick is kept for the connection's life (here by
``p2c``), drained servers finish what they have, nothing breaks by construction, and
the study checks that it holds. Not modelled: Beamer's daisy chaining, TCP
retransmissions (the paper counts some breaks seconds late), the paper's exact
durations (ours: lognormal, mean 0.3 s).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache, partial
from heapq import heappop, heappush
from pathlib import Path
from typing import TypeVar

import numpy as np

from lblab.analysis.paper_claims import Missing, PaperClaim, Verdict, halfway, judge_all
from lblab.balancer.pool import BackendSpec, HealthConfig, Pool
from lblab.balancer.strategies.base import BackendView, Health, Outcome, RequestView
from lblab.balancer.strategies.maglev import DEFAULT_TABLE_SIZE, populate
from lblab.balancer.strategies.registry import make_strategy
from lblab.simulator.service import LogNormal

IMBALANCE_STRATEGIES = {"maglev": "uniform hash (maglev)", "rr": "round robin", "p2c": "P2C", "lc": "least loaded"}  # fmt: skip
STATELESS = ("maglev", "rr")
"""Their pick does not depend on the loads: drawn for all connections at once (numpy)."""
LC_OPTIONS = {"lc": {"tie": "random"}}
"""Least loaded with thousands of equal loads must not herd on the first in list order."""

BROKEN_STRATEGIES = {"ip-hash": "hashing", "ring-hash": "ring hash", "maglev": "maglev", "pinned": "pinned (Cheetah)"}  # fmt: skip
PINNED_BY = "p2c"

PAPER_IMBALANCE_FACTORS = {"rr": 1.2, "p2c": 10.0, "lc": 40.0}
"""Reduction of imbalance against the uniform hash, Sect. II."""
PAPER_BROKEN_PCT = {"ip-hash": 11.0, "ring-hash": 3.0, "pinned": 0.0}
"""Largest share of broken requests per second in Fig. 9 (hashing, consistent hashing, Cheetah)."""

_NO_HEALTH = HealthConfig(eject_after=0, slow_start_window_s=0.0)
"""Connections never fail here, and a joining server takes its full share at once."""
_OK = Outcome(ok=True, latency_ms=0.0)


def _np_rng(seed: int, stream: str) -> np.random.Generator:
    return np.random.default_rng([seed, *stream.encode()])


def poisson_times(rate: float, end: float, rng: np.random.Generator) -> np.ndarray:
    """Arrival instants of a Poisson process of ``rate`` on ``[0, end)``."""
    n = int(rate * end + 6 * math.sqrt(rate * end) + 10)
    t = np.cumsum(rng.exponential(1.0 / rate, n))
    while t[-1] < end:  # the margin above makes this rare
        t = np.concatenate([t, t[-1] + np.cumsum(rng.exponential(1.0 / rate, n))])
    return t[t < end]


def lognormal(model: LogNormal, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` durations of ``model`` (mean ``model.mean``, shape ``model.sigma``)."""
    return rng.lognormal(math.log(model.mean) - model.sigma**2 / 2, model.sigma, n)


class ConnectionPool:
    """Connections on the real ``Pool``: each holds its server until it closes.

    The driver calls ``advance(t)`` before acting at ``t``: connections that ended by
    then close first (as SimPy ran completions before sends at one instant).
    """

    def __init__(
        self, strategy: str, servers: int, seed: int, options: dict[str, str] | None = None
    ) -> None:
        self.pool = Pool(
            [BackendSpec(f"s{i + 1}") for i in range(servers)],
            make_strategy(strategy, options, rng=random.Random(f"cheetah:{seed}:strategy")),
            health=_NO_HEALTH,
        )
        self.open: dict[int, tuple[RequestView, BackendView]] = {}
        self._ends: list[tuple[float, int]] = []
        self.completed = 0

    def advance(self, t: float, on_close: Callable[[float], None] | None = None) -> None:
        ends, pool = self._ends, self.pool
        while ends and ends[0][0] <= t:
            end, rid = heappop(ends)
            request, view = self.open.pop(rid)
            pool.complete(view, request, _OK, end)
            self.completed += 1
            if on_close:
                on_close(end)

    def connect(self, request: RequestView, now: float, duration: float) -> None:
        view = self.pool.pick(request, now)
        if view is None:
            raise RuntimeError("no server available for a new connection")
        self.pool.dispatch(view, request, now)
        self.open[request.request_id] = (request, view)
        heappush(self._ends, (now + duration, request.request_id))

    def recheck(self, now: float, broken: set[int]) -> int:
        """Re-derive every open connection's server (stateless balancer); newly broken."""
        newly = 0
        for rid, (request, view) in self.open.items():
            if rid in broken:
                continue
            again = self.pool.pick(request, now)
            if again is None or again.id != view.id:
                broken.add(rid)
                newly += 1
        return newly

    def imbalance(self) -> float:
        return imbalance_of([v.inflight for v in self.pool.views])


def imbalance_of(loads: Sequence[int] | np.ndarray) -> float:
    """max / mean of the loads (1 when all are empty)."""
    total = sum(loads)
    return max(loads) * len(loads) / total if total else 1.0


# ---- imbalance -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ImbalanceRow:
    strategy: str
    servers: int
    active: int
    imbalance: float
    """Time-averaged max / mean active connections."""
    seed: int

    @property
    def excess_pct(self) -> float:
        return 100.0 * (self.imbalance - 1.0)


@dataclass(frozen=True, slots=True)
class Depth:
    """How long one imbalance point runs after its stationary start, in mean durations."""

    warmup: float = 2.0
    measure: float = 4.0
    samples: int = 40


QUICK = Depth(warmup=0.5, measure=0.5, samples=20)
FULL = Depth()
"""The first version's depth (``--full``); it started empty, this starts in steady state."""


@cache
def _maglev_table(servers: int) -> np.ndarray:
    return np.array(populate([f"s{i + 1}" for i in range(servers)], DEFAULT_TABLE_SIZE))


def stateless_servers(strategy: str, servers: int, count: int, seed: int) -> np.ndarray:
    """The server of each of ``count`` connections, for a pick blind to the loads.

    ``rr``: connection k goes to server k mod n. ``maglev`` with a fresh random key per
    connection: a uniformly random slot of the real Maglev table (what ``key_slot`` of a
    random key gives).
    """
    if strategy == "rr":
        return np.arange(count) % servers
    if strategy == "maglev":
        slots = _np_rng(seed, "maglev-keys").integers(0, DEFAULT_TABLE_SIZE, count)
        return _maglev_table(servers)[slots]
    raise ValueError(f"{strategy!r} depends on the loads; it runs on the pool")


def stationary_start(
    active: int, duration: LogNormal, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Connections open at t = 0 in steady state, and their remaining durations.

    An M/G/inf system in equilibrium holds Poisson(``active``) connections, each with the
    residual of a length-biased duration (lognormal: mu + sigma^2) times U(0, 1).
    """
    n = rng.poisson(active)
    mu = math.log(duration.mean) + duration.sigma**2 / 2
    remaining = rng.lognormal(mu, duration.sigma, n) * rng.random(n)
    return np.zeros(n), remaining


def imbalance_point(
    strategy: str,
    servers: int,
    active: int,
    duration: LogNormal,
    seed: int = 1,
    depth: Depth = QUICK,
) -> ImbalanceRow:
    """One point: Poisson arrivals sized for ``active`` open connections (Little's law).

    The run starts in steady state (``stationary_start``; load-aware strategies place
    those connections at t = 0, then ``depth.warmup`` lets them settle), and
    ``depth.samples`` evenly spaced snapshots of the loads over ``depth.measure`` are
    averaged. Load-blind strategies are drawn at once; the others run on the pool.
    """
    rng = _np_rng(seed, "workload")
    rate = active / duration.mean
    end = (depth.warmup + depth.measure) * duration.mean
    open_at, open_for = stationary_start(active, duration, rng)
    arrivals = poisson_times(rate, end, rng)
    starts = np.concatenate([open_at, arrivals])
    lengths = np.concatenate([open_for, lognormal(duration, len(arrivals), rng)])
    step = depth.measure * duration.mean / depth.samples
    at = [depth.warmup * duration.mean + (k + 1) * step for k in range(depth.samples)]
    if strategy in STATELESS:
        server = stateless_servers(strategy, servers, len(starts), seed)
        stops = starts + lengths
        sampled = [
            imbalance_of(np.bincount(server[(starts <= t) & (stops > t)], minlength=servers))
            for t in at
        ]
    else:
        sim = ConnectionPool(strategy, servers, seed, LC_OPTIONS.get(strategy))
        sampled = []
        k = 0
        for rid, (t, d) in enumerate(zip(starts.tolist(), lengths.tolist(), strict=True)):
            while k < len(at) and at[k] < t:
                sim.advance(at[k])
                sampled.append(sim.imbalance())
                k += 1
            sim.advance(t)
            sim.connect(RequestView(request_id=rid), t, d)
        for t in at[k:]:
            sim.advance(t)
            sampled.append(sim.imbalance())
    return ImbalanceRow(strategy, servers, active, sum(sampled) / len(sampled), seed)


def imbalance_study(
    servers: int,
    actives: Sequence[int],
    strategies: Sequence[str] = tuple(IMBALANCE_STRATEGIES),
    duration: LogNormal | None = None,
    seed: int = 1,
    depth: Depth = QUICK,
    progress: Callable[[str], None] | None = None,
) -> list[ImbalanceRow]:
    duration = duration or LogNormal(1.0, 1.0)
    rows = []
    for name in strategies:
        for active in actives:
            if progress:
                progress(f"imbalance {name} {active} active")
            rows.append(imbalance_point(name, servers, active, duration, seed, depth))
    return rows


# ---- broken connections -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BrokenRow:
    strategy: str
    connections: int
    broken: int
    peak_pct_per_s: float
    """Largest share of broken connections among those completed in one second."""
    timeline: tuple[float, ...]
    """Broken connections per second, as a percentage of connections completed in it."""
    seed: int

    @property
    def broken_pct(self) -> float:
        return 100.0 * self.broken / self.connections if self.connections else 0.0


@dataclass(frozen=True, slots=True)
class ScalingPlan:
    start_servers: int = 24
    add: int = 7
    drain: int = 8
    seconds: float = 40.0
    rate_low: float = 1500.0
    rate_high: float = 2500.0

    def rate(self, t: float | np.ndarray) -> float | np.ndarray:
        """Sinusoidal: ``rate_low`` at 0 and at the end, ``rate_high`` half way."""
        return self.rate_low + (self.rate_high - self.rate_low) * np.sin(
            np.pi * np.asarray(t) / self.seconds
        )

    def add_times(self) -> list[float]:
        half = self.seconds / 2
        return [half * (k + 1) / (self.add + 1) for k in range(self.add)]

    def drain_times(self) -> list[float]:
        half = self.seconds / 2
        return [half + half * (k + 1) / (self.drain + 1) for k in range(self.drain)]


def _requests(starts: np.ndarray, rng: np.random.Generator) -> list[RequestView]:
    """One request per connection, with a random routing key and client address."""
    keys = rng.bytes(8 * len(starts))
    octets = np.column_stack(
        [
            rng.integers(1, 224, len(starts)),
            rng.integers(0, 256, (len(starts), 2)),
            rng.integers(1, 255, len(starts)),
        ]
    ).tolist()
    return [
        RequestView(
            request_id=i,
            routing_key=keys[8 * i : 8 * i + 8],
            client_address=f"{a}.{b}.{c}.{d}",
        )
        for i, (a, b, c, d) in enumerate(octets)
    ]


def broken_run(strategy: str, plan: ScalingPlan, duration: LogNormal, seed: int = 1) -> BrokenRow:
    """One strategy through the plan's scale-up and drain; counts broken connections."""
    pinned = strategy == "pinned"
    sim = ConnectionPool(PINNED_BY if pinned else strategy, plan.start_servers, seed)
    pool = sim.pool
    rng = _np_rng(seed, "workload")
    drain_rng = random.Random(f"cheetah:{seed}:drain")
    candidates = poisson_times(plan.rate_high, plan.seconds, rng)
    keep = rng.random(len(candidates)) * plan.rate_high < plan.rate(candidates)  # thinning
    starts = candidates[keep]
    lengths = lognormal(duration, len(starts), rng)
    requests = _requests(starts, rng)
    seconds = math.ceil(plan.seconds + 10 * duration.mean)
    broken_at = [0] * (seconds + 1)
    done_at = [0] * (seconds + 1)
    broken: set[int] = set()
    changes = sorted([(t, "add") for t in plan.add_times()] + [(t, "drain") for t in plan.drain_times()])  # fmt: skip
    added = 0

    def closed(end: float) -> None:
        done_at[min(int(end), seconds)] += 1

    def change(t: float, kind: str) -> None:
        nonlocal added
        if kind == "add":
            added += 1
            pool.add(BackendSpec(f"n{added}"), t)
        else:
            up = sorted(v.id for v in pool.views if v.state is Health.UP)
            pool.set_state(drain_rng.choice(up), Health.DRAINING, t)
        if not pinned:
            broken_at[int(t)] += sim.recheck(t, broken)

    k = 0
    for request, t, d in zip(requests, starts.tolist(), lengths.tolist(), strict=True):
        while k < len(changes) and changes[k][0] < t:
            sim.advance(changes[k][0], closed)
            change(*changes[k])
            k += 1
        sim.advance(t, closed)
        sim.connect(request, t, d)
    for t, kind in changes[k:]:
        sim.advance(t, closed)
        change(t, kind)
    sim.advance(math.inf, closed)
    if pinned and any(v.inflight for v in pool.views):
        raise RuntimeError("pinned connections left open at the end")
    timeline = tuple(100.0 * b / d if d else 0.0 for b, d in zip(broken_at, done_at, strict=True))
    return BrokenRow(
        strategy=strategy,
        connections=sim.completed,
        broken=len(broken),
        peak_pct_per_s=max(timeline, default=0.0),
        timeline=timeline,
        seed=seed,
    )


def broken_study(
    strategies: Sequence[str] = tuple(BROKEN_STRATEGIES),
    plan: ScalingPlan | None = None,
    duration: LogNormal | None = None,
    seed: int = 1,
    progress: Callable[[str], None] | None = None,
) -> list[BrokenRow]:
    plan = plan or ScalingPlan()
    duration = duration or LogNormal(0.3, 1.0)
    rows = []
    for name in strategies:
        if progress:
            progress(f"broken connections {name}")
        rows.append(broken_run(name, plan, duration, seed))
    return rows


# ---- the paper's claims -----------------------------------------------------------------


def _hash_factor(strategy: str, published: float) -> PaperClaim:
    name = IMBALANCE_STRATEGIES[strategy]
    return PaperClaim(
        id=f"{strategy}-imbalance-vs-hash",
        text=f"{name} is {published:g}x less imbalanced than a uniform hash",
        source=f"Sect. II, Fig. 2b: {name} {published:g}x better than the hash",
        figure_label="the hash's excess (max / mean - 1) over "
        f"{strategy}'s, at the most active connections run, paired by seed",
        op=">=",
        threshold=halfway(published),
        basis=f"half the paper's {published:g}x",
        fmt="{:.1f}",
    )


IMBALANCE_CLAIMS = tuple(_hash_factor(s, x) for s, x in PAPER_IMBALANCE_FACTORS.items())
BROKEN_CLAIMS = (
    PaperClaim(
        id="hashing-breaks-connections",
        text="modulo hashing breaks connections when the pool changes",
        source="Fig. 9: hashing broke up to 11 % of the connections (per second)",
        figure_label="ip-hash's largest share of broken connections in one second (%)",
        op=">=",
        threshold=PAPER_BROKEN_PCT["ip-hash"] / 2,
        basis="half the paper's 11 %",
        fmt="{:.1f}",
    ),
    PaperClaim(
        id="ring-hash-breaks-fewer",
        text="consistent hashing breaks far fewer than modulo hashing",
        source="Fig. 9: consistent hashing up to 3 %, hashing 11 %",
        figure_label="ring-hash's peak broken share over ip-hash's, paired by seed",
        op="<=",
        threshold=round(halfway(PAPER_BROKEN_PCT["ring-hash"] / PAPER_BROKEN_PCT["ip-hash"]), 3),
        basis="half the paper's saving (ratio 3 / 11)",
        fmt="{:.3f}",
    ),
    PaperClaim(
        id="pinned-breaks-none",
        text="Cheetah's pinned connections break none",
        source="Fig. 9: Cheetah 0 %",
        figure_label="the pinned row's broken connections (% of all)",
        op="<=",
        threshold=0.0,
        basis="none, by construction",
        fmt="{:.3f}",
    ),
)


_FACTOR_OF = {c.id: s for c, s in zip(IMBALANCE_CLAIMS, PAPER_IMBALANCE_FACTORS, strict=True)}
R = TypeVar("R", ImbalanceRow, BrokenRow)


def _by_seed(rows: Sequence[R], strategy: str, what: str) -> list[R]:
    runs = sorted((r for r in rows if r.strategy == strategy), key=lambda r: r.seed)
    if not runs:
        raise Missing(f"{strategy} in the {what} study")
    return runs


def _imbalance_factor(rows: Sequence[ImbalanceRow], strategy: str) -> list[float]:
    hashed = _by_seed(rows, "maglev", "imbalance")
    mine = _by_seed(rows, strategy, "imbalance")
    top = max({r.active for r in hashed} & {r.active for r in mine}, default=None)
    if top is None:
        raise Missing(f"maglev and {strategy} at one number of active connections")
    hashed, mine = ([r for r in runs if r.active == top] for runs in (hashed, mine))
    return [h.excess_pct / m.excess_pct for h, m in zip(hashed, mine, strict=True)]


def _broken_figure(rows: Sequence[BrokenRow], claim_id: str) -> list[float]:
    if claim_id == "pinned-breaks-none":
        return [r.broken_pct for r in _by_seed(rows, "pinned", "broken connections")]
    ip = _by_seed(rows, "ip-hash", "broken connections")
    if claim_id == "hashing-breaks-connections":
        return [r.peak_pct_per_s for r in ip]
    ring = _by_seed(rows, "ring-hash", "broken connections")
    return [r.peak_pct_per_s / i.peak_pct_per_s for r, i in zip(ring, ip, strict=True)]


def judge_claims(
    imbalance: Sequence[ImbalanceRow],
    broken: Sequence[BrokenRow],
    claims: Sequence[PaperClaim] = IMBALANCE_CLAIMS + BROKEN_CLAIMS,
) -> list[Verdict]:
    """Each claim (of the two studies', or one with its id and another bound) on the rows,
    one per strategy, point and seed."""
    return judge_all([
        (c, partial(_imbalance_factor, imbalance, _FACTOR_OF[c.id]) if c.id in _FACTOR_OF
            else partial(_broken_figure, broken, c.id))
        for c in claims
    ])  # fmt: skip


def mean_imbalance(rows: Sequence[ImbalanceRow]) -> list[ImbalanceRow]:
    """One row per strategy and point: the imbalance averaged over its seeds (seed: the first)."""
    keys = dict.fromkeys((r.strategy, r.servers, r.active) for r in rows)
    out = []
    for strategy, servers, active in keys:
        runs = [r for r in rows if (r.strategy, r.servers, r.active) == (strategy, servers, active)]
        mean = sum(r.imbalance for r in runs) / len(runs)
        out.append(ImbalanceRow(strategy, servers, active, mean, min(r.seed for r in runs)))
    return out


# ---- charts ------------------------------------------------------------------------------


def imbalance_chart(rows: Sequence[ImbalanceRow], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for name in dict.fromkeys(r.strategy for r in rows):
        pts = sorted((r.active, r.excess_pct) for r in rows if r.strategy == name)
        ax.plot(
            [p[0] for p in pts],
            [p[1] for p in pts],
            marker="o",
            label=IMBALANCE_STRATEGIES.get(name, name),
        )
    ax.set_xlabel("active connections")
    ax.set_ylabel("imbalance: max / mean - 1 (%)")
    ax.set_yscale("log")
    ax.set_title(f"Imbalance over {rows[0].servers} servers (cf. Cheetah Fig. 2b)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def broken_chart(rows: Sequence[BrokenRow], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for r in rows:
        ax.plot(
            range(len(r.timeline)), r.timeline, label=BROKEN_STRATEGIES.get(r.strategy, r.strategy)
        )
    ax.set_xlabel("time (s)")
    ax.set_ylabel("broken / completed connections (%)")
    ax.set_title("Connections broken while scaling (cf. Cheetah Fig. 9)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
