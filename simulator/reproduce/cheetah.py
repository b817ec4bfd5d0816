"""Cheetah's large-scale simulations: load imbalance, and connections broken by pool changes.

Source: T. Barbette et al., *Cheetah: A High-Speed Programmable Load-Balancer Framework
With Guaranteed Per-Connection-Consistency*, IEEE/ACM ToN 2021;
../shared/papers/003_9c5fbd34c61d91d8.txt, Sect. II (Fig. 2b) and Sect. V-C (Fig. 9).

Both studies are connection-level: a connection arrives, the real ``Pool`` and a
registry strategy pick its server, it stays there for a random duration. A backend's
``inflight`` is then its number of active connections.

Imbalance (Fig. 2b). The paper: 468 servers, 20K..200K active connections, "imbalance"
of a server = its active connections / the mean, system imbalance = the maximum over
servers, averaged over the run. Published: round robin 1.2x better than a uniform hash
(Beamer/Faild), power of two choices 10x and least loaded 40x better. We compare
``maglev`` with a random key per connection (a uniform-hash indirection table), ``rr``,
``p2c`` and ``lc`` (least loaded, random tie-break), with lognormal durations standing
in for the web-server flow-size distribution the paper takes from SilkRoad. The figure
we report is ``max / mean``; the paper's "factor" compares the excess ``max / mean - 1``.

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
the study checks that it holds.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import simpy

from balancer.pool import BackendSpec, HealthConfig, Pool
from balancer.strategies.base import BackendView, Health, Outcome, RequestView
from balancer.strategies.registry import make_strategy
from simulator.clock import LATE, At
from simulator.service import LogNormal

IMBALANCE_STRATEGIES = {"maglev": "uniform hash (maglev)", "rr": "round robin", "p2c": "P2C", "lc": "least loaded"}  # fmt: skip
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


class _Conn:
    __slots__ = ("broken", "request", "view")

    def __init__(self, request: RequestView, view: BackendView) -> None:
        self.request = request
        self.view = view
        self.broken = False


class ConnectionSim:
    """Connections arriving at a pool; each holds its server for a sampled duration."""

    def __init__(
        self, strategy: str, servers: int, seed: int, options: dict[str, str] | None = None
    ) -> None:
        self.env = simpy.Environment()
        self.rng = random.Random(f"cheetah:{seed}:workload")
        self.pool = Pool(
            [BackendSpec(f"s{i + 1}") for i in range(servers)],
            make_strategy(strategy, options, rng=random.Random(f"cheetah:{seed}:strategy")),
            health=_NO_HEALTH,
        )
        self.open: dict[int, _Conn] = {}
        self.completed = 0
        self.broken = 0
        self._next_id = 0

    def connect(self, duration: float) -> None:
        now = self.env._now
        rid = self._next_id
        self._next_id += 1
        rng = self.rng
        request = RequestView(
            request_id=rid,
            routing_key=rng.randbytes(8),
            client_address=f"{rng.randrange(1, 224)}.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}",
        )
        view = self.pool.pick(request, now)
        if view is None:
            raise RuntimeError("no server available for a new connection")
        self.pool.dispatch(view, request, now)
        self.open[rid] = _Conn(request, view)
        At(self.env, duration, rid, self._close)

    def _close(self, event: At) -> None:
        conn = self.open.pop(event._value)
        now = self.env._now
        self.pool.complete(conn.view, conn.request, Outcome(ok=True, latency_ms=0.0), now)
        self.completed += 1

    def recheck(self) -> int:
        """Re-derive every open connection's server (stateless balancer); newly broken."""
        now = self.env._now
        newly = 0
        for conn in self.open.values():
            if conn.broken:
                continue
            again = RequestView(
                request_id=conn.request.request_id,
                routing_key=conn.request.routing_key,
                client_address=conn.request.client_address,
            )
            view = self.pool.pick(again, now)
            if view is None or view.id != conn.view.id:
                conn.broken = True
                newly += 1
        self.broken += newly
        return newly

    def imbalance(self) -> float:
        loads = [v.inflight for v in self.pool.views]
        mean = sum(loads) / len(loads)
        return max(loads) / mean if mean > 0 else 1.0


# ---- imbalance -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ImbalanceRow:
    strategy: str
    servers: int
    active: int
    imbalance: float
    """Time-averaged max / mean active connections."""

    @property
    def excess_pct(self) -> float:
        return 100.0 * (self.imbalance - 1.0)


def imbalance_point(
    strategy: str,
    servers: int,
    active: int,
    duration: LogNormal,
    seed: int = 1,
    warmup: float = 2.0,
    measure: float = 4.0,
    samples: int = 40,
) -> ImbalanceRow:
    """One point: Poisson arrivals sized for ``active`` open connections (Little's law).

    ``warmup`` and ``measure`` are in mean durations; ``samples`` evenly spaced
    snapshots of the loads are averaged.
    """
    sim = ConnectionSim(strategy, servers, seed, LC_OPTIONS.get(strategy))
    rate = active / duration.mean
    end = (warmup + measure) * duration.mean
    rng = sim.rng
    sampled: list[float] = []

    def arrive(_: At) -> None:
        sim.connect(duration.sample(rng, 0, 0))
        if sim.env._now < end:
            At(sim.env, rng.expovariate(rate), None, arrive, LATE)

    def sample(_: At) -> None:
        sampled.append(sim.imbalance())

    At(sim.env, 0.0, None, arrive, LATE)
    step = measure * duration.mean / samples
    for k in range(samples):
        At(sim.env, warmup * duration.mean + (k + 1) * step, None, sample)
    sim.env.run(until=end + 1e-9)
    return ImbalanceRow(strategy, servers, active, sum(sampled) / len(sampled))


def imbalance_study(
    servers: int,
    actives: Sequence[int],
    strategies: Sequence[str] = tuple(IMBALANCE_STRATEGIES),
    duration: LogNormal | None = None,
    seed: int = 1,
    progress: Callable[[str], None] | None = None,
) -> list[ImbalanceRow]:
    duration = duration or LogNormal(1.0, 1.0)
    rows = []
    for name in strategies:
        for active in actives:
            if progress:
                progress(f"imbalance {name} {active} active")
            rows.append(imbalance_point(name, servers, active, duration, seed))
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

    def rate(self, t: float) -> float:
        """Sinusoidal: ``rate_low`` at 0 and at the end, ``rate_high`` half way."""
        return self.rate_low + (self.rate_high - self.rate_low) * math.sin(
            math.pi * t / self.seconds
        )

    def add_times(self) -> list[float]:
        half = self.seconds / 2
        return [half * (k + 1) / (self.add + 1) for k in range(self.add)]

    def drain_times(self) -> list[float]:
        half = self.seconds / 2
        return [half + half * (k + 1) / (self.drain + 1) for k in range(self.drain)]


def broken_run(strategy: str, plan: ScalingPlan, duration: LogNormal, seed: int = 1) -> BrokenRow:
    """One strategy through the plan's scale-up and drain; counts broken connections."""
    pinned = strategy == "pinned"
    sim = ConnectionSim(PINNED_BY if pinned else strategy, plan.start_servers, seed)
    env, rng, pool = sim.env, sim.rng, sim.pool
    drain_rng = random.Random(f"cheetah:{seed}:drain")
    seconds = math.ceil(plan.seconds + 10 * duration.mean)
    broken_at = [0] * (seconds + 1)
    done_at = [0] * (seconds + 1)
    added = 0

    def arrive(_: At) -> None:
        now = env._now
        if rng.random() * plan.rate_high < plan.rate(now):  # thinning: sinusoidal Poisson
            sim.connect(duration.sample(rng, 0, 0))
        nxt = now + rng.expovariate(plan.rate_high)
        if nxt < plan.seconds:
            At(env, nxt - now, None, arrive, LATE)

    def changed() -> None:
        if not pinned:
            broken_at[int(env._now)] += sim.recheck()

    def add(_: At) -> None:
        nonlocal added
        added += 1
        pool.add(BackendSpec(f"n{added}"), env._now)
        changed()

    def drain(_: At) -> None:
        up = sorted(v.id for v in pool.views if v.state is Health.UP)
        pool.set_state(drain_rng.choice(up), Health.DRAINING, env._now)
        changed()

    completed_before = 0

    def second(_: At) -> None:
        nonlocal completed_before
        done_at[int(env._now) - 1] = sim.completed - completed_before
        completed_before = sim.completed
        if env._now < seconds:
            At(env, 1.0, None, second)

    At(env, 0.0, None, arrive, LATE)
    for t in plan.add_times():
        At(env, t, None, add)
    for t in plan.drain_times():
        At(env, t, None, drain)
    At(env, 1.0, None, second)
    env.run()
    if pinned and any(v.inflight for v in pool.views):
        raise RuntimeError("pinned connections left open at the end")
    timeline = tuple(100.0 * b / d if d else 0.0 for b, d in zip(broken_at, done_at, strict=True))
    return BrokenRow(
        strategy=strategy,
        connections=sim.completed,
        broken=sim.broken,
        peak_pct_per_s=max(timeline, default=0.0),
        timeline=timeline,
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
