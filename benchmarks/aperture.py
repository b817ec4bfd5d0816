"""Aperture in the simulator: K balancers over N equal servers, each over its subset
(deterministic or random aperture) or over every server (full-mesh p2c).

``uv run python benchmarks/aperture.py [--balancers 8,32,128] [--servers 64] [--size 12]
[--seeds 3] [--requests 60000] [--load 0.7] [--strategy p2c] [--layouts ...] [--markdown]``

``--servers`` servers (exp 10 ms, one worker each) take open Poisson arrivals at
``--load`` of their capacity, split over K independent balancers (each a Poisson stream
of rate / K: ``simulator/run.py``, "Many balancers"), every balancer picking by
``--strategy`` (``p2c``; ``p2c[weighted=true]`` is Finagle's weighted pick, which
honours an edge server's part of the window) within its pool. Four layouts per K
(``--layouts`` takes some): full mesh (every balancer's pool holds every server),
deterministic aperture (Finagle's ring, ``--size`` servers' worth of arc), random
aperture (the first ``--size`` servers of each balancer's own random order), and random
aperture sized by Finagle's load band (from 1 server; its connections are the servers
each balancer has had in its window). Per cell, the mean over ``--seeds`` seeds of:
connections per server (balancers whose pool holds it: mean, min, max; a full mesh has
K), the load deviation (the scorecard's: half the summed gap between each server's share
of the requests and 1 / N; 0 is even), the coefficient of variation of the requests per
server, and the p50 and p99 latency.
docs/FIELD-NOTES.md, "Aperture", has the table and what it says.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from dataclasses import dataclass, replace

import numpy as np

from lblab.analysis.hard_cases import load_deviation
from lblab.balancer.aperture import ApertureConfig
from lblab.balancer.strategies.options import split_options
from lblab.simulator.config import SimConfig, config_from_mapping
from lblab.simulator.connections import connections
from lblab.simulator.run import SimResult, simulate

SERVICE_MS = 10.0
LAYOUTS = ("full mesh", "deterministic", "random", "load band")


@dataclass(frozen=True, slots=True)
class Cell:
    """One layout at one K, one seed."""

    conn_mean: float
    conn_min: int
    conn_max: int
    deviation: float
    cv: float
    p50_ms: float
    p99_ms: float


def config(
    servers: int, balancers: int, requests: int, load: float, seed: int, strategy: str = "p2c"
) -> SimConfig:
    name, options = split_options(strategy, "--strategy")
    return config_from_mapping(
        {
            "strategy": name,
            "strategy_options": options,
            "servers": servers,
            "service": f"exp:{SERVICE_MS:g}ms",
            "rate": load * servers * 1000.0 / SERVICE_MS,
            "requests": requests,
            "balancers": balancers,
            "picks_every": 0,
            "seed": seed,
        }
    )


def measure(result: SimResult) -> Cell:
    per = list(connections(result).values())
    t = result.requests
    served = t.column("server").to_pandas()
    counts = served.value_counts()
    loads = np.array([int(counts.get(name, 0)) for name in result.servers], dtype=float)
    ok = t.column("ok").to_numpy(zero_copy_only=False)
    latency = t.column("latency_ms").to_numpy()[ok]
    p50, p99 = np.percentile(latency, [50, 99])
    return Cell(
        conn_mean=float(np.mean(per)),
        conn_min=min(per),
        conn_max=max(per),
        deviation=load_deviation(served, {name: 1.0 for name in result.servers}),
        cv=float(loads.std() / loads.mean()),
        p50_ms=float(p50),
        p99_ms=float(p99),
    )


def layout(cfg: SimConfig, name: str, size: int) -> SimConfig:
    if name == "full mesh":
        return cfg
    if name == "load band":  # Finagle's: sized by load, at least minAperture 1
        return replace(cfg, aperture=ApertureConfig(mode="random", size=1, load_band=True))
    return replace(cfg, aperture=ApertureConfig(mode=name, size=size))  # type: ignore[arg-type]


def table(
    ks: list[int],
    servers: int,
    size: int,
    seeds: int,
    requests: int,
    load: float,
    strategy: str = "p2c",
    layouts: tuple[str, ...] = LAYOUTS,
) -> list[tuple[int, str, Cell]]:
    rows = []
    for k in ks:
        for name in layouts:
            cells = [
                measure(
                    simulate(layout(config(servers, k, requests, load, s, strategy), name, size))
                )
                for s in range(1, seeds + 1)
            ]
            rows.append((k, name, _mean(cells)))
    return rows


def _mean(cells: list[Cell]) -> Cell:
    return Cell(
        conn_mean=statistics.fmean(c.conn_mean for c in cells),
        conn_min=min(c.conn_min for c in cells),
        conn_max=max(c.conn_max for c in cells),
        deviation=statistics.fmean(c.deviation for c in cells),
        cv=statistics.fmean(c.cv for c in cells),
        p50_ms=statistics.fmean(c.p50_ms for c in cells),
        p99_ms=statistics.fmean(c.p99_ms for c in cells),
    )


HEADER = ("K", "layout", "conns/server mean", "min", "max", "load deviation", "CV",
          "p50 ms", "p99 ms")  # fmt: skip


def lines(rows: list[tuple[int, str, Cell]], markdown: bool) -> list[str]:
    out = []
    body = [
        (str(k), name, f"{c.conn_mean:.1f}", str(c.conn_min), str(c.conn_max),
         f"{c.deviation:.4f}", f"{c.cv:.3f}", f"{c.p50_ms:.1f}", f"{c.p99_ms:.1f}")
        for k, name, c in rows
    ]  # fmt: skip
    if markdown:
        out.append("| " + " | ".join(HEADER) + " |")
        out.append("|" + "---|" * len(HEADER))
        out += ["| " + " | ".join(r) + " |" for r in body]
    else:
        widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(HEADER)]
        out.append("  ".join(h.rjust(w) for h, w in zip(HEADER, widths, strict=True)))
        out += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in body]
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--balancers", default="8,32,128", help="K values, comma-separated")
    parser.add_argument("--servers", type=int, default=64)
    parser.add_argument("--size", type=int, default=12, help="the aperture (servers)")
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=60_000)
    parser.add_argument("--load", type=float, default=0.7, help="offered load / capacity")
    parser.add_argument(
        "--strategy", default="p2c", help="the pick within each pool, e.g. 'p2c[weighted=true]'"
    )
    parser.add_argument(
        "--layouts", default=",".join(LAYOUTS), help=f"some of: {', '.join(LAYOUTS)}"
    )
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.balancers.split(",")]
    layouts = tuple(x.strip() for x in args.layouts.split(","))
    unknown = set(layouts) - set(LAYOUTS)
    if unknown:
        parser.error(f"--layouts: {', '.join(sorted(unknown))} unknown; give some of {LAYOUTS}")
    rows = table(
        ks, args.servers, args.size, args.seeds, args.requests, args.load, args.strategy, layouts
    )
    print("\n".join(lines(rows, args.markdown)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
