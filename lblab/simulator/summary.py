"""A one-screen summary of simulated runs (rich table) and the speed figure."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from lblab.simulator.run import SimResult


def latency_stats(result: SimResult) -> dict[str, Any]:
    t = result.requests
    lat = t.column("latency_ms").to_numpy()
    ok = t.column("ok").to_numpy(zero_copy_only=False)
    good = lat[ok]
    pct = np.percentile(good, [50, 99]) if len(good) else [float("nan")] * 2
    return {
        "strategy": result.config.strategy,
        "replication": result.config.replication,
        "requests": t.num_rows,
        "ok_pct": 100.0 * ok.mean() if len(ok) else float("nan"),
        "mean_ms": float(good.mean()) if len(good) else float("nan"),
        "p50_ms": float(pct[0]),
        "p99_ms": float(pct[1]),
        "sim_s": result.sim_seconds,
        "wall_s": result.wall_seconds,
        "req_per_wall_s": result.requests_per_wall_second,
    }


def balancer_stats(result: SimResult) -> list[dict[str, Any]]:
    """The per-balancer split of one result: requests, ok share and latency of each."""
    t = result.requests
    balancer = np.asarray(t.column("balancer").to_pylist())
    lat = t.column("latency_ms").to_numpy()
    ok = t.column("ok").to_numpy(zero_copy_only=False)
    rows = []
    for name in sorted(set(balancer.tolist()), key=lambda b: int(b[1:])):
        mine = balancer == name
        good = lat[mine & ok]
        pct = np.percentile(good, [50, 99]) if len(good) else [float("nan")] * 2
        rows.append(
            {
                "balancer": name,
                "requests": int(mine.sum()),
                "ok_pct": 100.0 * ok[mine].mean(),
                "p50_ms": float(pct[0]),
                "p99_ms": float(pct[1]),
            }
        )
    return rows


def connections(result: SimResult) -> dict[str, int]:
    """Balancers connected to each server, in server order: those whose aperture holds
    it (``SimResult.subsets``), or every balancer without one (the full mesh)."""
    if not result.subsets:
        return dict.fromkeys(result.servers, result.config.balancers)
    held = Counter(m.id for sub in result.subsets for m in sub.members)
    return {name: held.get(name, 0) for name in result.servers}


def print_summary(results: Sequence[SimResult]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="simulated runs")
    for col in ("strategy", "rep", "requests", "ok %", "mean ms", "p50 ms", "p99 ms"):
        table.add_column(col, justify="right")
    table.add_column("sim s", justify="right")
    table.add_column("wall s", justify="right")
    table.add_column("req / wall s", justify="right")
    for r in results:
        s = latency_stats(r)
        table.add_row(
            s["strategy"],
            str(s["replication"]),
            str(s["requests"]),
            f"{s['ok_pct']:.2f}",
            f"{s['mean_ms']:.2f}",
            f"{s['p50_ms']:.2f}",
            f"{s['p99_ms']:.2f}",
            f"{s['sim_s']:.1f}",
            f"{s['wall_s']:.2f}",
            f"{s['req_per_wall_s']:,.0f}",
        )
    console = Console(width=160)
    console.print(table)
    for r in results:
        if r.subsets:
            per = list(connections(r).values())
            sizes = [b["mean"] for b in r.bands]
            kind = (
                f"a load-banded random aperture, its window {sum(sizes) / len(sizes):.1f} "
                f"servers on average, {max(b['largest'] for b in r.bands)} at most"
                if r.bands
                else f"{r.subsets[0].mode} aperture of {r.subsets[0].aperture}"
            )
            console.print(
                f"{r.config.strategy} r{r.config.replication}: {kind}; connections per "
                "server (the servers each balancer has had) mean "
                f"{sum(per) / len(per):.1f}, min {min(per)}, max {max(per)} (a full mesh: "
                f"{r.config.balancers})"
            )
    split = [r for r in results if r.config.balancers > 1]
    if not split:
        return
    table = Table(title="per balancer (p50, p99 of successful requests)")
    for col in ("strategy", "rep", "balancer", "requests", "ok %", "p50 ms", "p99 ms"):
        table.add_column(col, justify="right")
    for r in split:
        for b in balancer_stats(r):
            table.add_row(
                r.config.strategy,
                str(r.config.replication),
                b["balancer"],
                str(b["requests"]),
                f"{b['ok_pct']:.2f}",
                f"{b['p50_ms']:.2f}",
                f"{b['p99_ms']:.2f}",
            )
    console.print(table)
