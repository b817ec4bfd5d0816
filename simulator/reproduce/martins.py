"""Martins et al.'s storage-cluster experiment, re-run in the simulator.

Source: E. Martins, H. Nguyen, Y. Evans, *An Overview of Server Load-Balancing*,
CSC 466 report, 2025; ../shared/papers/000_8ee1799ae44a5da5.txt, Sect. 4-6.

Setup as published: 10 data nodes x 5 worker threads (FIFO queue when all are busy),
25 ms network delay, open arrivals at 10, 50, 100, 150 and 200 requests/s for 20 s,
objects of 66 KB, 1 MB and 17 MB, a 3-minute request timeout; homogeneous nodes, or
heterogeneous ones that sleep 10 ms (nodes 0-2), 500 ms (3-5) or 900 ms (6-9) before
serving. Algorithms: round robin (``rr``), least connections (``lc``; the node's
completion message decrements the count, so it is 25 ms stale) and least response
time (``lrt``: fewest connections, ties by the node-reported mean response time).

What the paper leaves open, and our choice: the transfer speed of a worker (we take
40 MB/s, so a homogeneous cluster runs at 60 % load at 200 req/s; the authors' laptop
saturated earlier, hence their tens-of-seconds service times) and the delay on each
hop (25 ms each way on both client<->balancer and balancer<->node links). The figure
compared is the direction of Fig. 15 and Fig. 18: with homogeneous nodes the three
are alike; with heterogeneous nodes LC and LRT beat RR, by more as the rate grows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from simulator.config import ServerGroup, SimConfig
from simulator.run import simulate
from simulator.service import JsonCost
from simulator.workload import OpenArrivals

RATES = (10, 50, 100, 150, 200)
ALGORITHMS = ("rr", "lc", "lrt")
OBJECT_BYTES = (66_000, 1_000_000, 17_000_000)
HETEROGENEOUS_SLEEP_S = ((3, 0.010), (3, 0.500), (4, 0.900))
NODES, WORKERS = 10, 5
DELAY_S = 0.025
TIMEOUT_S = 180.0
BANDWIDTH = 40e6
"""Bytes per second one worker transfers (our assumption; see the module docstring)."""


@dataclass(frozen=True, slots=True)
class MartinsRow:
    heterogeneous: bool
    rate: float
    algorithm: str
    requests: int
    mean_service_ms: float
    p95_service_ms: float
    ok_pct: float

    def as_dict(self) -> dict[str, object]:
        return {
            "nodes": "heterogeneous" if self.heterogeneous else "homogeneous",
            "rate": self.rate,
            "algorithm": self.algorithm,
            "requests": self.requests,
            "mean_service_ms": round(self.mean_service_ms, 1),
            "p95_service_ms": round(self.p95_service_ms, 1),
            "ok_pct": round(self.ok_pct, 2),
        }


def martins_config(
    algorithm: str, rate: float, heterogeneous: bool, seconds: float = 20.0, seed: int = 1
) -> SimConfig:
    b = 1.0 / BANDWIDTH
    if heterogeneous:
        groups = tuple(
            ServerGroup(count=n, service=JsonCost(sleep, b, 0.0), workers=WORKERS)
            for n, sleep in HETEROGENEOUS_SLEEP_S
        )
    else:
        groups = (ServerGroup(count=NODES, service=JsonCost(0.0, b, 0.0), workers=WORKERS),)
    return SimConfig(
        strategy=algorithm,
        servers=groups,
        requests=max(1, round(rate * seconds)),
        arrivals=OpenArrivals(rate=rate, poisson=True),
        scenario="martins-" + ("het" if heterogeneous else "hom"),
        cells=tuple((100, size) for size in OBJECT_BYTES),
        client_delay=DELAY_S,
        server_delay=DELAY_S,
        deadline=TIMEOUT_S,
        picks_every=0,
        report_period=1.0,
        seed=seed,
        run_id="martins",
    )


def martins_point(
    algorithm: str, rate: float, heterogeneous: bool, seconds: float, seeds: int
) -> MartinsRow:
    lat, ok = [], []
    for seed in range(1, seeds + 1):
        t = simulate(martins_config(algorithm, rate, heterogeneous, seconds, seed)).requests
        lat.append(t.column("latency_ms").to_numpy())
        ok.append(t.column("ok").to_numpy(zero_copy_only=False))
    latency, good = np.concatenate(lat), np.concatenate(ok)
    served = latency[good] if good.any() else latency
    return MartinsRow(
        heterogeneous=heterogeneous,
        rate=rate,
        algorithm=algorithm,
        requests=len(latency),
        mean_service_ms=float(served.mean()),
        p95_service_ms=float(np.percentile(served, 95)),
        ok_pct=100.0 * float(good.mean()),
    )


def reproduce_martins(
    rates: Sequence[float] = RATES,
    algorithms: Sequence[str] = ALGORITHMS,
    seconds: float = 20.0,
    seeds: int = 3,
    progress: Callable[[str], None] | None = None,
) -> list[MartinsRow]:
    rows = []
    for heterogeneous in (False, True):
        for rate in rates:
            for algo in algorithms:
                if progress:
                    progress(f"{'het' if heterogeneous else 'hom'} {rate} req/s {algo}")
                rows.append(martins_point(algo, rate, heterogeneous, seconds, seeds))
    return rows


def martins_chart(rows: Sequence[MartinsRow], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, het in zip(axes, (False, True), strict=True):
        for algo in dict.fromkeys(r.algorithm for r in rows):
            pts = sorted(
                (r.rate, r.mean_service_ms / 1000.0)
                for r in rows
                if r.algorithm == algo and r.heterogeneous is het
            )
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=algo.upper())
        ax.set_title(
            "heterogeneous nodes (cf. Fig. 18)" if het else "homogeneous nodes (cf. Fig. 15)"
        )
        ax.set_xlabel("request rate (req/s)")
        ax.set_ylabel("average service time (s)")
        ax.set_ylim(bottom=0)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
