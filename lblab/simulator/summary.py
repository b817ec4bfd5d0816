"""A one-screen summary of simulated runs (rich table) and the speed figure."""

from __future__ import annotations

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
    Console(width=160).print(table)
