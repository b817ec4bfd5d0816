"""Synthetic results directories: for tests of edge cases, the loading benchmark and demos.

The numbers are made up (a plausible shape: three servers, s3 four times the capacity of
s1 and s2, strategies that share load differently); they are never a finding. Real runs
come from ``lblab run`` / ``lblab simulate``. The tables go through
``lblab.results.to_arrow``/``write_part``/``consolidate``, the same path a runner uses.

    python -m lblab.analysis.synthetic OUT_DIR --rows 5000000
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lblab.manifest import Manifest, ScenarioEntry, save
from lblab.results import ERROR_KINDS, MANIFEST, consolidate, to_arrow, write_part
from lblab.strategy_names import THESIS_FIVE

SERVERS = ("s1", "s2", "s3")
CAPACITY = np.array([0.25, 0.25, 1.0])
# Share of requests each strategy sends to s1, s2, s3 (made up, shaped like the thesis).
SHARES = {
    "r": (1 / 3, 1 / 3, 1 / 3),
    "rr": (1 / 3, 1 / 3, 1 / 3),
    "wrr": (1 / 9, 1 / 9, 7 / 9),
    "lc": (0.45, 0.45, 0.10),
    "dwrr": (0.15, 0.15, 0.70),
}


def write_synthetic_run(
    run_dir: Path,
    *,
    rows_per_unit: int = 200,
    strategies: Sequence[str] = THESIS_FIVE,
    scenarios: Sequence[str] = ("sp+sr", "mp+mr", "lp+lr", "variation"),
    replications: int = 2,
    seed: int = 1,
    simulated: bool = False,
    unit_seconds: float = 20.0,
    warmup_s: float = 0.0,
) -> Path:
    """Write a consolidated results directory with requests, cpu, picks and a manifest.

    Rows of each unit's first ``warmup_s`` seconds are marked ``warmup`` as the runner
    marks them.
    """
    rng = np.random.default_rng(seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    run_id = run_dir.name
    t0 = 1_700_000_000.0
    for strategy in strategies:
        share = np.array(SHARES.get(strategy, (1 / 3, 1 / 3, 1 / 3)))
        for scenario in scenarios:
            heavy = 1.0 + 4.0 * scenario.count("l") + 1.5 * scenario.count("m")
            for rep in range(1, replications + 1):
                key = f"{strategy}.{scenario}.{rep}".replace("+", "_")
                base = {
                    "run_id": run_id,
                    "scenario": scenario,
                    "strategy": strategy,
                    "replication": rep,
                }
                n = rows_per_unit
                server_idx = rng.choice(3, size=n, p=share)
                load = share[server_idx] / CAPACITY[server_idx] * 3
                latency = rng.lognormal(np.log(2.0 * heavy * load), 0.5)
                failed = rng.random(n) < 0.002 * heavy * load
                kinds = rng.choice(np.array(ERROR_KINDS, dtype=object), size=n)
                kinds[~failed] = None
                origins = np.full(n, None, dtype=object)
                origins[failed] = "server"
                t_sent = t0 + np.sort(rng.random(n)) * unit_seconds
                requests: dict[str, Any] = {
                    **{k: [v] * n for k, v in base.items()},
                    "t_sent": t_sent,
                    "warmup": t_sent < t0 + warmup_s,
                    "latency_ms": latency,
                    "ok": ~failed,
                    "error_kind": kinds,
                    "error_origin": origins,
                    "package_bytes": np.full(n, 100, dtype=np.int64),
                    "work_bytes": np.full(n, 10_000, dtype=np.int64),
                    "server": np.array(SERVERS)[server_idx],
                }
                write_part(run_dir, "requests", key, to_arrow("requests", requests))
                ts = np.arange(0.0, unit_seconds, 0.25)
                m = len(ts) * 3
                cpu_level = np.clip(100 * share / CAPACITY / 3 * min(heavy / 3, 1.0), 0, 100)
                cpu: dict[str, Any] = {
                    **{k: [v] * m for k, v in base.items()},
                    "t": np.tile(t0 + ts, 3),
                    "warmup": np.tile(ts < warmup_s, 3),
                    "server": np.repeat(np.array(SERVERS), len(ts)),
                    "cpu_percent": np.clip(
                        np.repeat(cpu_level, len(ts)) + rng.normal(0, 5, m), 0, 100
                    ),
                }
                write_part(run_dir, "cpu", key, to_arrow("cpu", cpu))
                picks: dict[str, Any] = {
                    **{k: [v] * min(n, 50) for k, v in base.items()},
                    "t": requests["t_sent"][:50],
                    "server": requests["server"][:50],
                    "inflight_at_pick": rng.integers(0, 5, size=min(n, 50)),
                    "warmup": requests["warmup"][:50],
                }
                write_part(run_dir, "picks", key, to_arrow("picks", picks))
                t0 += unit_seconds + 1.0
    consolidate(run_dir)
    manifest = Manifest(
        run_id=run_id,
        simulated=simulated,
        status="done",
        cpu_limit_method="none",
        started=1_700_000_000.0,
        strategies=tuple(strategies),
        scenarios=tuple(ScenarioEntry(name=s) for s in scenarios),
        extra={"synthetic": True, "seed": seed, "replications": replications},
    )
    save(run_dir / MANIFEST, manifest)
    return run_dir


def _main() -> None:
    parser = argparse.ArgumentParser(description="Write a synthetic (made-up) results directory.")
    parser.add_argument("out", type=Path)
    parser.add_argument("--rows", type=int, default=100_000, help="request rows in total")
    parser.add_argument("--replications", type=int, default=3)
    args = parser.parse_args()
    units = 5 * 4 * args.replications
    write_synthetic_run(
        args.out, rows_per_unit=max(1, args.rows // units), replications=args.replications
    )


if __name__ == "__main__":
    _main()
