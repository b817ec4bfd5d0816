"""Writing simulated runs in the results contract (``lblab/results.py``).

Each replication lands as its own part files, then ``consolidate`` merges them, so a
simulated run directory reads exactly like a measured one; its manifest
(``lblab/manifest.py``) says ``"simulated": true`` and carries each phase's config and
seed.
"""

from __future__ import annotations

import platform
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lblab import __version__
from lblab.manifest import Manifest, PhaseEntry, ScenarioEntry, measured_fields, save
from lblab.results import MANIFEST, consolidate, write_part
from lblab.simulator.config import EPOCH
from lblab.simulator.run import SimResult
from lblab.strategy.sources import RECORD_KEY, sources_of, write_copies
from lblab.validity import judge, phase_facts
from lblab.windows import WINDOW_COLUMN, Window, with_window


def _whole(requests: pa.Table) -> Window:
    """First send to last answer (an empty table: an empty window at EPOCH)."""
    if requests.num_rows == 0:
        return Window(EPOCH, EPOCH)
    answered = pc.add(requests["t_sent"], pc.divide(requests["latency_ms"], 1000.0))
    return Window(pc.min(requests["t_sent"]).as_py(), pc.max(answered).as_py())


def _labelled(table: pa.Table, column: str, window: Window, interval: float = 0.0) -> pa.Table:
    if WINDOW_COLUMN in table.column_names:  # labelled by the caller already
        return table
    return with_window(table, column, window, interval)


def write_phase(
    run_dir: Path,
    key: str,
    result: SimResult,
    window: Window,
    offered_capacity: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """Write one simulated phase's requests, picks and cpu parts, labelled by its
    measured ``window``; returns its manifest facts: the requests, the window's fields,
    the validity checks that apply to a simulation (accounting, steady state, warm-up,
    and with ``offered_capacity`` the load against the servers' capacity; the harness's
    own CPU is n/a), the pools' counters (``pool_counters``), the strategy's own
    (``strategy_decisions``) and, with an aperture, each balancer's subset
    (``apertures``)."""
    requests = _labelled(result.requests, "t_sent", window)
    write_part(run_dir, "requests", key, requests)
    write_part(run_dir, "picks", key, _labelled(result.picks, "t", window))
    cpu = _labelled(result.cpu, "t", window, result.config.report_period)
    write_part(run_dir, "cpu", key, cpu)
    facts = measured_fields(requests, window)
    n = requests.num_rows
    return {
        "requests": n,
        "failures": n - pc.sum(requests["ok"]).as_py() if n else 0,
        **facts,
        **judge(phase_facts(window, facts["measured"], offered_capacity=offered_capacity)),
        "pool_counters": result.counters,
        **({"strategy_decisions": result.decisions} if result.decisions else {}),
        **_apertures(result),
    }


def _software() -> dict[str, str]:
    import pyarrow
    import simpy

    return {
        "lblab": __version__,
        "python": platform.python_version(),
        "simpy": simpy.__version__,
        "pyarrow": pyarrow.__version__,
    }


def _apertures(result: SimResult) -> dict[str, Any]:
    """``apertures``: the balancers' subsets (``b1`` ...: mode, place, servers with the
    share of each one's arc in the window; a random one's ring ``order``; a load-banded
    one's largest window and its ``load_band`` sizes), when the run has an aperture."""
    if not result.subsets:
        return {}
    return {
        "apertures": {
            f"b{i + 1}": {
                **sub.describe(),
                **({"load_band": result.bands[i]} if result.bands else {}),
            }
            for i, sub in enumerate(result.subsets)
        }
    }


def write_run(
    run_dir: Path,
    results: Sequence[SimResult],
    extra: Mapping[str, Any] | None = None,
    windows: Sequence[Window] | None = None,
) -> dict[str, int]:
    """Write every result's tables and the manifest; returns rows per table.

    Each result is a phase with a measured window, as in a live run
    (``lblab/windows.py``): ``windows`` (one per result), by default from the first
    send to the last answer. Rows are labelled ``window``, the manifest's ``phases``
    hold the windows and the validity checks that apply to a simulation (accounting,
    steady state, warm-up; the harness's own CPU is n/a).
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    phases = []
    for i, r in enumerate(results):
        c = r.config
        key = f"{c.scenario}__{c.strategy}__r{c.replication}".replace("+", "_")
        window = windows[i] if windows is not None else _whole(r.requests)
        facts = write_phase(run_dir, key, r, window)
        entry = PhaseEntry(
            key=key, scenario=c.scenario, strategy=c.strategy, replication=c.replication
        )
        phases.append(entry.updated(status="done", **facts))
    counts = consolidate(run_dir)
    manifest = Manifest(
        run_id=results[0].config.run_id,
        simulated=True,
        status="done",
        phase_configs=tuple(r.config.describe() for r in results),
        scenarios=tuple(
            ScenarioEntry(name=s) for s in sorted({r.config.scenario for r in results})
        ),
        strategies=tuple(sorted({r.config.strategy for r in results})),
        software=_software(),
        host={"machine": platform.machine(), "system": platform.system()},
        cpu_limit_method="simulated",
        phases=tuple(phases),
        extra={
            "seeds": {
                f"{r.config.strategy}/r{r.config.replication}": r.config.seed for r in results
            },
            "start": EPOCH,
            "end": EPOCH + max(r.sim_seconds for r in results),
            "rows": counts,
            "wall_seconds": {
                f"{r.config.strategy}/r{r.config.replication}": round(r.wall_seconds, 3)
                for r in results
            },
            "written_at": time.time(),
            RECORD_KEY: write_copies(run_dir, sources_of(r.config.strategy for r in results)),
        },
    )
    save(run_dir / MANIFEST, manifest.updated(**extra) if extra else manifest)
    return counts
