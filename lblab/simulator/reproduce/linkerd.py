"""Linkerd's "Beyond Round Robin" experiment, re-run in the simulator.

Source: S. Jenson, R. Oanta, *Beyond Round Robin: Load Balancing for Latency*, Linkerd
/ Buoyant blog, 16 March 2016 (linkerd.io/2016/03/16/beyond-round-robin-load-balancing-
for-latency). Setup as published: 11 backends "replaying latency captured from a
production system" (median 167 ms, standard deviation 5 ms, no significant peaks); one
Finagle client at 1000 req/s, balancing over all 11, for one minute; after 15 s one
backend's latency "was fixed to 2 seconds for 30 seconds, then returned to normal".
Outcome: round robin is slow above p95, least loaded above p99, peak EWMA above p99.9;
with a caller's 1 s timeout, success rates of about 95 %, 99 % and 99.9 %.

Our model, and why:

- A backend is a pure delay (10 000 workers: no queueing), since a replayed latency does
  not depend on load. The latency is lognormal with median 167 ms and sigma 0.03
  (standard deviation 5.0 ms): the post gives only those two moments and "no
  significant peaks", and a lognormal with them is a tight, single-peaked, positive
  distribution. Poisson arrivals at 1000 req/s.
- The slow backend is ``s1``: every request it starts in ``[15 s, 45 s)`` takes 2 s
  (``simulator.slowdown``). Under ``lc`` (ties to the first) that is the backend ties
  favour, the hardest case for it.
- Two timeout models, both in every run of ``reproduce linkerd``:
  ``post`` is the post's: the balancer waits for every answer (its latency estimates
  see the 2 s answers) and "success" is an answer within the caller's 1 s; passive
  ejection is off (Finagle's client in the post had no failure accrual in play).
  ``lblab`` is lblab's balancer as it runs: a 1 s request deadline ends the request as
  a timeout (the strategy sees 1000 ms, the in-flight count drops at once) and five
  consecutive timeouts eject the backend with exponential backoff (``balancer/health.py``).
- Strategies: ``rr``, ``lc`` (lblab's least connections: the fewest in flight over all
  backends; Finagle's "least loaded" is P2C over in-flight counts, which is lblab's
  ``p2c``, available with ``--strategies``) and ``peak-ewma`` (Finagle's P2C over peak
  EWMA cost, tau 10 s).

Percentiles are of every request's latency, a failure counting at the time it ended
(in the ``post`` model a request to the slow backend counts at its 2 s). The post's
findings are judged in its own model over seeds (``CLAIMS``, ``analysis.paper_claims``):
each strategy fast (under the 1 s timeout) up to its percentile, round robin slow above
p95, and the success rates in the post's order by at least half its gaps. The measured
table and what differs from the post are in docs/results/reproductions.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Literal

import numpy as np

from lblab.analysis.paper_claims import Missing, PaperClaim, Verdict, judge_all
from lblab.balancer.health import HealthConfig
from lblab.simulator.config import EPOCH, ServerGroup, SimConfig
from lblab.simulator.reproduce.parallel import run_calls
from lblab.simulator.run import Simulation
from lblab.simulator.service import LogNormal
from lblab.simulator.workload import OpenArrivals

BACKENDS = 11
RATE = 1000.0
SECONDS = 60.0
SLOW_AT_S, SLOW_FOR_S, SLOW_LATENCY_S = 15.0, 30.0, 2.0
TIMEOUT_S = 1.0
MEDIAN_S, SD_S = 0.167, 0.005
WORKERS = 10_000
"""More than any backend ever has in flight: a backend is a pure delay (see above)."""
STRATEGIES = ("rr", "lc", "peak-ewma")
MODES = ("post", "lblab")
PERCENTILES = (50.0, 95.0, 99.0, 99.9)
PAPER_OK_PCT = {"rr": 95.0, "lc": 99.0, "p2c": 99.0, "peak-ewma": 99.9}
PAPER_FAST_UNTIL = {"rr": "p95", "lc": "p99", "p2c": "p99", "peak-ewma": "p99.9"}
"""The post's figure: the percentile up to which each strategy stays fast."""


def service_model() -> LogNormal:
    """Lognormal with median ``MEDIAN_S`` and standard deviation ``SD_S``."""
    # sd^2 = (exp(s^2) - 1) * exp(2 mu + s^2), median = exp(mu): solve for s^2.
    ratio = (SD_S / MEDIAN_S) ** 2
    s2 = math.log((1.0 + math.sqrt(1.0 + 4.0 * ratio)) / 2.0)
    return LogNormal(MEDIAN_S * math.exp(s2 / 2.0), math.sqrt(s2))


@dataclass(frozen=True, slots=True, eq=False)
class LinkerdRow:
    strategy: str
    mode: str
    seeds: tuple[int, ...]
    """The run's seed, or (``pooled``) the seeds whose requests the row holds."""
    requests: int
    ok_pct: float
    percentiles_ms: tuple[float, ...]
    slow_requests: int
    """Requests the slow backend started inside its slow window."""
    ejections: int
    latency_ms: np.ndarray = field(repr=False)

    def as_dict(self) -> dict[str, object]:
        row: dict[str, object] = {"strategy": self.strategy, "model": self.mode}
        row["seeds"] = len(self.seeds)
        row["requests"] = self.requests
        row["ok_pct"] = round(self.ok_pct, 2)
        row["paper_ok_pct"] = PAPER_OK_PCT.get(self.strategy)
        for p, v in zip(PERCENTILES, self.percentiles_ms, strict=True):
            row[f"p{p:g}_ms"] = round(v, 1)
        row["paper_fast_until"] = PAPER_FAST_UNTIL.get(self.strategy)
        row["to_slow_backend"] = self.slow_requests
        row["ejections"] = self.ejections
        return row


def linkerd_config(strategy: str, mode: str, seconds: float, rate: float, seed: int) -> SimConfig:
    return SimConfig(
        strategy=strategy,
        servers=(ServerGroup(count=BACKENDS, service=service_model(), workers=WORKERS),),
        requests=max(1, round(rate * seconds)),
        arrivals=OpenArrivals(rate=rate, poisson=True),
        scenario="linkerd",
        cells=((100, 0),),
        deadline=TIMEOUT_S if mode == "lblab" else None,
        picks_every=0,
        report_period=1.0,
        seed=seed,
        run_id="linkerd",
    )


def linkerd_run(strategy: str, mode: str, seconds: float, rate: float, seed: int) -> LinkerdRow:
    """One run; the slow window keeps the post's place in time (15 s in 60 s: 25 %-75 %)."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r} is not one of {MODES}")
    sim = Simulation(linkerd_config(strategy, mode, seconds, rate, seed))
    if mode == "post":
        for pool in sim.pools:
            pool.health = HealthConfig(eject_after=0)
    scale = seconds / SECONDS
    start, end = SLOW_AT_S * scale, (SLOW_AT_S + SLOW_FOR_S) * scale
    sim.servers[0].slow_window(start, end, SLOW_LATENCY_S)
    result = sim.run()
    t = result.requests
    latency = t.column("latency_ms").to_numpy()
    ok = t.column("ok").to_numpy(zero_copy_only=False)
    if mode == "post":
        ok = ok & (latency <= TIMEOUT_S * 1000.0)
    # A request starts at the backend at its send time (no queueing, no link delay).
    sent = t.column("t_sent").to_numpy() - EPOCH
    server = np.asarray(t.column("server").to_pylist())
    slow = int(((server == result.servers[0]) & (sent >= start) & (sent < end)).sum())
    counters = result.counters.get(result.servers[0], {})
    return LinkerdRow(
        strategy=strategy,
        mode=mode,
        seeds=(seed,),
        requests=len(latency),
        ok_pct=100.0 * float(ok.mean()),
        percentiles_ms=tuple(float(v) for v in np.percentile(latency, PERCENTILES)),
        slow_requests=slow,
        ejections=int(counters.get("ejections", 0)) if isinstance(counters, dict) else 0,
        latency_ms=latency,
    )


def reproduce_linkerd(
    strategies: Sequence[str] = STRATEGIES,
    modes: Sequence[str] = MODES,
    seconds: float = SECONDS,
    rate: float = RATE,
    seeds: Sequence[int] = (1,),
    jobs: int = 1,
    progress: Callable[[str], None] | None = None,
) -> list[LinkerdRow]:
    """One row per run: each model, strategy and seed."""
    calls = [
        (linkerd_run, (s, m, seconds, rate, seed), f"{s} ({m} timeout model, seed {seed})")
        for m in modes
        for s in strategies
        for seed in seeds
    ]
    return run_calls(calls, jobs, progress)


def pooled(rows: Sequence[LinkerdRow]) -> list[LinkerdRow]:
    """One row per strategy and model: the requests of all its seeds, counts summed."""
    out = []
    for key in dict.fromkeys((r.strategy, r.mode) for r in rows):
        runs = [r for r in rows if (r.strategy, r.mode) == key]
        latency = np.concatenate([r.latency_ms for r in runs])
        requests = sum(r.requests for r in runs)
        out.append(
            LinkerdRow(
                strategy=key[0],
                mode=key[1],
                seeds=tuple(s for r in runs for s in r.seeds),
                requests=requests,
                ok_pct=sum(r.ok_pct * r.requests for r in runs) / requests,
                percentiles_ms=tuple(float(v) for v in np.percentile(latency, PERCENTILES)),
                slow_requests=sum(r.slow_requests for r in runs),
                ejections=sum(r.ejections for r in runs),
                latency_ms=latency,
            )
        )
    return out


def _percentile(strategy: str, p: float, op: Literal[">=", "<="], text: str) -> PaperClaim:
    return PaperClaim(
        id=f"{strategy}-p{p:g}-{'fast' if op == '<=' else 'slow'}",
        text=text,
        source=f"the post's latency figure: {strategy} fast until "
        f"{PAPER_FAST_UNTIL[strategy]}, slow above",
        figure_label=f"{strategy}'s p{p:g} latency (ms), the post's model",
        op=op,
        threshold=TIMEOUT_S * 1000.0,
        basis="fast: under the caller's 1 s timeout; slow: at or above it (the held backend's 2 s)",
        fmt="{:.0f}",
    )


CLAIMS: tuple[PaperClaim, ...] = (
    _percentile("rr", 95.0, "<=", "round robin stays fast to p95"),
    _percentile("rr", 99.0, ">=", "round robin is slow above p95"),
    _percentile("lc", 99.0, "<=", "least loaded stays fast to p99"),
    _percentile("peak-ewma", 99.9, "<=", "peak EWMA stays fast to p99.9"),
    PaperClaim(
        id="lc-succeeds-more-than-rr",
        text="least loaded answers more within 1 s than round robin",
        source="the post: success rates of about 95 % (round robin) and 99 % (least loaded)",
        figure_label="lc's success rate minus rr's (points), the post's model, paired by seed",
        op=">=",
        threshold=2.0,
        basis="half the post's 4 points",
    ),
    PaperClaim(
        id="peak-ewma-succeeds-more-than-lc",
        text="peak EWMA answers more within 1 s than least loaded",
        source="the post: success rates of about 99 % (least loaded) and 99.9 % (peak EWMA)",
        figure_label="peak-ewma's success rate minus lc's (points), the post's model, paired "
        "by seed",
        op=">=",
        threshold=0.45,
        basis="half the post's 0.9 points",
    ),
)
"""The post's findings, in its own model (``post``): the strategies' latency up to the
percentile where each turns slow, and their success rates with a 1 s caller timeout.
lblab's model (``lblab``) is lblab's balancer, not the post's: it has no claims."""


def _runs(rows: Sequence[LinkerdRow], strategy: str) -> list[LinkerdRow]:
    runs = sorted(
        (r for r in rows if r.strategy == strategy and r.mode == "post"), key=lambda r: r.seeds
    )
    if not runs:
        raise Missing(f"{strategy} in the post's model")
    return runs


def _latency(strategy: str, p: float) -> Callable[[Sequence[LinkerdRow]], list[float]]:
    index = PERCENTILES.index(p)
    return lambda rows: [r.percentiles_ms[index] for r in _runs(rows, strategy)]


def _more_ok(first: str, second: str) -> Callable[[Sequence[LinkerdRow]], list[float]]:
    def figure(rows: Sequence[LinkerdRow]) -> list[float]:
        pairs = zip(_runs(rows, first), _runs(rows, second), strict=True)
        return [a.ok_pct - b.ok_pct for a, b in pairs]

    return figure


_FIGURES = {
    "rr-p95-fast": _latency("rr", 95.0),
    "rr-p99-slow": _latency("rr", 99.0),
    "lc-p99-fast": _latency("lc", 99.0),
    "peak-ewma-p99.9-fast": _latency("peak-ewma", 99.9),
    "lc-succeeds-more-than-rr": _more_ok("lc", "rr"),
    "peak-ewma-succeeds-more-than-lc": _more_ok("peak-ewma", "lc"),
}


def judge_claims(
    rows: Sequence[LinkerdRow], claims: Sequence[PaperClaim] = CLAIMS
) -> list[Verdict]:
    """Each claim (of ``CLAIMS``, or one with its id and another bound) on the runs."""
    return judge_all([(c, partial(_FIGURES[c.id], rows)) for c in claims])


def linkerd_chart(rows: Sequence[LinkerdRow], path: Path) -> Path:
    """Latency by percentile, log-scaled toward the tail (the post's results figure)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    q = 100.0 * (1.0 - np.logspace(0, -4, 200))  # 0 .. 99.99
    q = q[q >= 50.0]
    x = -np.log10(1.0 - q / 100.0)
    modes = list(dict.fromkeys(r.mode for r in rows))
    fig, axes = plt.subplots(1, len(modes), figsize=(5.5 * len(modes), 4), squeeze=False)
    for ax, mode in zip(axes[0], modes, strict=True):
        for r in rows:
            if r.mode == mode:
                ax.plot(x, np.percentile(r.latency_ms, q), label=r.strategy)
        ticks = [50, 90, 95, 99, 99.9, 99.99]
        ax.set_xticks([-math.log10(1 - t / 100) for t in ticks], [f"p{t:g}" for t in ticks])
        ax.axhline(TIMEOUT_S * 1000, color="grey", linestyle=":", linewidth=1)
        ax.set_xlabel("percentile")
        ax.set_ylabel("latency (ms)")
        ax.set_title(
            "post's model (balancer waits, 1 s caller timeout)"
            if mode == "post"
            else "lblab balancer (1 s deadline, passive ejection)",
            fontsize=9,
        )
        ax.legend()
    fig.suptitle("Beyond Round Robin: 11 backends, one held at 2 s from 15 s for 30 s")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
