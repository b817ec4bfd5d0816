"""Building a run's twin: the steps in order, and what they write to ``RUN/twin/``.

``make_twin`` reads the run's testbed and figures, fits each server's service times
and each scenario's model, solves each strategy's front end, simulates the twin (and
each scaled twin) and writes the simulated phases as a run, with the measured windows
cut as the live runner cuts them, so ``measure`` reads both sides alike. ``twin.json``
is a ``TwinReport`` (``analysis/twin/file.py``, which the report reads it with): the
model as fitted, the compared cells, the rankings, the scaled twins and the summary.
"""

from __future__ import annotations

import math
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lblab.analysis.twin import (
    TWIN_JSON,
    ModelFront,
    ModelScenario,
    ModelServer,
    ScaledFigures,
    TooShort,
    TwinModel,
    TwinReport,
    TwinScale,
    save_twin,
)
from lblab.errors import ConfigError
from lblab.simulator.config import SimConfig
from lblab.simulator.twin.compare import cell_figures, compare, harness_flags, scale_ranks, summary
from lblab.simulator.twin.measure import measure, measure_simulated, sim_window, utilisation
from lblab.simulator.twin.measured_service import fit_service
from lblab.simulator.twin.model import scenario_models
from lblab.simulator.twin.scale import MAX_SCALE, auto_scale_requests, too_short
from lblab.simulator.twin.solve import MAX_REPEATS, REPEATS, configs_for, run_configs, solve_fronts
from lblab.simulator.twin.testbed import Testbed, file_testbed, simulated_testbed
from lblab.strategy.sources import RECORD_KEY, install_copies


def make_twin(
    run_dir: str | Path,
    scales: Sequence[int] = (),
    *,
    scale_replications: int = 1,
    scale_requests: int | None = None,
    repeats: int | None = None,
    echo: Any = None,
) -> Path:
    """Build the twin of ``run_dir``; returns ``run_dir/twin/twin.json``. Each of the
    run's phases is simulated ``repeats`` times (by default ``solve.REPEATS``).

    ``lblab run --twin`` calls this at the end of a run. Raises ``ConfigError`` (one
    line for the user) when the run cannot be twinned.
    """
    from lblab.analysis.load import open_run

    say = echo or (lambda _msg: None)
    for n in scales:  # before the run is read: a bad count is refused at once
        if not 1 <= n <= MAX_SCALE:
            raise ConfigError(f"--scale {n}: give a server count from 1 to {MAX_SCALE}")
    repeats = REPEATS if repeats is None else repeats
    if not 1 <= repeats <= MAX_REPEATS:
        raise ConfigError(f"--repeats {repeats}: give a number of draws from 1 to {MAX_REPEATS}")
    run_dir = Path(run_dir)
    run = open_run(run_dir)
    install_copies(run_dir, run.manifest.extra.get(RECORD_KEY, {}))
    testbed = file_testbed(run.manifest) if run.manifest.config else simulated_testbed(run.manifest)
    measured = measure(run_dir)
    services = {}
    for s in testbed.servers:
        rows = measured.rows[measured.rows["server"].astype(str) == s.id]
        if len(rows) < 3:
            raise ConfigError(
                f"server {s.id} answered {len(rows)} requests in the run: too few to fit its "
                "service model; give a run where every server served (e.g. a longer one)"
            )
        services[s.id] = fit_service(rows)
    models = scenario_models(testbed, measured, services)
    out = run_dir / TWIN_JSON.parent
    if out.is_dir():
        shutil.rmtree(out)  # rebuilt whole: no part of an earlier twin may linger in it
    t0 = time.perf_counter()
    n = len(testbed.start_servers)
    live_busy = (
        measured.servers.assign(u=utilisation(measured.servers))
        .groupby(["scenario", "server"], observed=True)["u"]
        .median()
    )
    say("twin: solving each strategy's front end for the load it puts on its servers")
    fronts = solve_fronts(
        testbed,
        services,
        models,
        {(str(sc), str(sv)): float(u) for (sc, sv), u in live_busy.items()},
    )
    base_configs = run_configs(
        testbed, services, models, f"twin-{run.run_id}", fronts, repeats=repeats
    )
    say(f"twin: simulating {len(base_configs)} phases on {n} servers")
    _simulate_all(base_configs, testbed, out)
    simulated = measure_simulated(out)
    cells, ranks = compare(testbed, measured.pooled, simulated, harness_flags(run.manifest))
    scaled_out = []
    for total in scales:
        caps = (
            scale_requests
            if scale_requests is not None
            else auto_scale_requests(testbed, simulated, total / n)
        )
        configs = configs_for(
            testbed,
            services,
            models,
            total,
            scale_replications,
            caps,
            f"twin-{run.run_id}-x{total}",
            fronts,
        )
        say(
            f"twin: simulating {len(configs)} phases on {total} servers "
            f"({sum(c.requests for c in configs):,} requests)"
        )
        folder = out / f"scale-{total}"
        windows = _simulate_all(configs, testbed, folder, say)
        pooled = measure_simulated(folder)
        short = {
            scenario: TooShort(
                window_s=entry["window_s"],
                strategies=tuple(entry["strategies"]),
                agent_periods=entry["agent_periods"],
            )
            for scenario, entry in too_short(windows, testbed.report_period).items()
        }
        for scenario, entry in short.items():
            say(
                f"twin: at {total} servers a {scenario} window lasted {entry.window_s:g} "
                f"simulated s ({entry.agent_periods:g} agent periods): too short for "
                f"{', '.join(entry.strategies)}, which follow the agents' reports; "
                "raise --scale-requests"
            )
        scaled_out.append(
            TwinScale(
                servers=total,
                dir=str(folder.relative_to(run_dir)),
                replications=scale_replications,
                requests_per_phase={c.scenario: c.requests for c in configs},
                too_short_for_agent_reports=short,
                figures=tuple(
                    ScaledFigures(
                        strategy=st, scenario=sc.name, figures=cell_figures(pooled, st, sc.name)
                    )
                    for sc in testbed.scenarios
                    for st in testbed.strategies
                ),
                rank=scale_ranks(testbed, simulated, measured.pooled, pooled),
            )
        )
    model = TwinModel(
        servers=tuple(
            ModelServer(
                id=s.id,
                weight=s.weight,
                workers=s.workers,
                capacity=s.capacity,
                cpu_quota=s.cpu_quota,
                quota_period_s=s.quota_period if s.cpu_quota else None,
                **services[s.id].describe(),
            )
            for s in testbed.servers
        ),
        scenarios={
            name: ModelScenario(
                front=ModelFront(
                    client_ms=round(m.front.client_ms, 3),
                    slope_ms=round(m.front.slope_ms, 3),
                    server_ms={
                        strategy: {k: round(v, 3) for k, v in fronts[(name, strategy)].items()}
                        for strategy in testbed.strategies
                    },
                ),
                think_ms=round(m.think_ms, 3),
                demand_scale={k: round(v, 3) for k, v in m.demand_scale.items()},
                quota_binds=dict(m.quota_binds),
                quota_bound_work_from=m.work_servers,
                requests_per_phase=m.requests,
            )
            for name, m in models.items()
        },
        deadline_s=testbed.deadline,
        replications=testbed.replications,
        notes=_notes(testbed, scales),
        repeats=repeats,
    )
    report = TwinReport(
        run=str(run_dir),
        run_id=run.run_id,
        simulated_input=run.simulated,
        created=time.time(),
        wall_seconds=round(time.perf_counter() - t0, 1),
        model=model,
        cells=cells,
        rank=ranks,
        scales=tuple(scaled_out),
        summary=summary(cells, ranks),
    )
    return save_twin(run_dir / TWIN_JSON, report)


def _notes(testbed: Testbed, scales: Sequence[int]) -> tuple[str, ...]:
    """What the twin leaves out of the run, for the reader of its figures."""
    if scales and testbed.unscaled:
        return (f"the scaled twins leave out the run's {' and '.join(testbed.unscaled)}",)
    return ()


def _simulate_all(
    configs: Sequence[SimConfig], testbed: Testbed, out: Path, progress: Any = None
) -> dict[tuple[str, str], float]:
    """Run every config and write it with measured windows as the live runner does
    (``measure.sim_window``, with the phase's share of warm-up). Returns each
    (scenario, strategy)'s shortest window in simulated seconds."""
    from lblab.simulator.output import write_run
    from lblab.simulator.run import simulate

    results, windows = [], []
    shortest: dict[tuple[str, str], float] = {}
    for i, cfg in enumerate(configs, 1):
        if progress is not None:
            progress(
                f"twin:   {cfg.scenario} {cfg.strategy} ({i}/{len(configs)}, "
                f"{cfg.requests:,} requests)"
            )
        r = simulate(cfg)
        window = sim_window(r, testbed.warmup_fraction_of(cfg))
        windows.append(window)
        results.append(r)
        key = (cfg.scenario, cfg.strategy)
        shortest[key] = min(shortest.get(key, math.inf), window.seconds)
    write_run(out, results, extra={"twin": True}, windows=windows)
    return shortest
