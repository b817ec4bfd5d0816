"""Writing simulated runs in the results contract (``lblab/results.py``).

Each replication lands as its own part files, then ``consolidate`` merges them, so a
simulated run directory reads exactly like a measured one; its manifest says
``"simulated": true`` and carries the full config and seeds.
"""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lblab import __version__
from lblab.results import MANIFEST, consolidate, write_part
from simulator.config import EPOCH
from simulator.run import SimResult


def _software() -> dict[str, str]:
    import pyarrow
    import simpy

    return {
        "lblab": __version__,
        "python": platform.python_version(),
        "simpy": simpy.__version__,
        "pyarrow": pyarrow.__version__,
    }


def write_run(
    run_dir: Path, results: Sequence[SimResult], extra: dict[str, Any] | None = None
) -> dict[str, int]:
    """Write every result's tables and the manifest; returns rows per table."""
    run_dir.mkdir(parents=True, exist_ok=True)
    for r in results:
        c = r.config
        key = f"{c.scenario}__{c.strategy}__r{c.replication}".replace("+", "_")
        write_part(run_dir, "requests", key, r.requests)
        write_part(run_dir, "picks", key, r.picks)
        write_part(run_dir, "cpu", key, r.cpu)
    counts = consolidate(run_dir)
    first = results[0].config
    manifest = {
        "run_id": first.run_id,
        "simulated": True,
        "config": [r.config.describe() for r in results],
        "scenarios": sorted({r.config.scenario for r in results}),
        "strategies": sorted({r.config.strategy for r in results}),
        "seeds": {f"{r.config.strategy}/r{r.config.replication}": r.config.seed for r in results},
        "software": _software(),
        "host": {"machine": platform.machine(), "system": platform.system()},
        "cpu_limit": "simulated",
        "start": EPOCH,
        "end": EPOCH + max(r.sim_seconds for r in results),
        "status": {
            f"{r.config.scenario}/{r.config.strategy}/r{r.config.replication}": "ok"
            for r in results
        },
        "rows": counts,
        "wall_seconds": {
            f"{r.config.strategy}/r{r.config.replication}": round(r.wall_seconds, 3)
            for r in results
        },
        "pool_counters": {
            f"{r.config.strategy}/r{r.config.replication}": r.counters for r in results
        },
        "written_at": time.time(),
        **(extra or {}),
    }
    (run_dir / MANIFEST).write_text(json.dumps(manifest, indent=2, default=str) + "\n")
    return counts
