"""The twin in the simulator: its SimConfigs, and each strategy's front end solved on them.

The twin of a run with its experiment file is that file's phases simulated
(``file_configs``): each phase's SimConfig is the simulated testbed's own
(``simulator.simulated_testbed.phase_config``: strategy options, cells, seeds, deadline,
agent interval, balancers, timeline, length), with what the twin fits in place of what
the file says (``_fitted``). Its phases send for the run's warm-up plus the phase's
duration, as the run's did: the timeline's events and the agents' reports keep their
place in the phase (a measured request count would stretch or shrink the phase with the
twin's throughput). A scaled twin (``--scale N``), or the twin of a run
``lblab simulate`` made (no file), is built here instead (``configs_for``): one
SimConfig per scenario x strategy x replication for N servers of the run's capacity
mix, a measured number of requests each. ``run_configs`` gives the run's own twin,
whichever way it is built.

What the twin fits, either way (``_fit_group``, ``_fitted``): each server's measured
service times (scaled by its CPU demand where its quota bound, under that quota), the
client part of the front end between generator and balancer, a front-end load term per
server between the balancer and the server, and the closed users' think time.

That load term depends on how busy the strategy keeps each server, which the twin only
knows once it has simulated the strategy: ``solve_fronts`` finds it as a fixed point,
simulating each cell until the term its utilisation asks for is the one it was given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import cast

from lblab.simulator.config import ServerGroup, SimConfig
from lblab.simulator.service import ServiceModel
from lblab.simulator.twin.measure import slot_utilisation
from lblab.simulator.twin.measured_service import MeasuredService, ScaledService
from lblab.simulator.twin.model import ScenarioModel
from lblab.simulator.twin.testbed import Testbed, TwinScenario, TwinServer
from lblab.simulator.workload import Arrivals, ClosedUsers, OpenArrivals

Cells = Sequence[tuple[str, str]]
"""(scenario, strategy) cells."""


def _fit_group(
    group: ServerGroup,
    server: TwinServer,
    services: Mapping[str, MeasuredService],
    model: ScenarioModel,
    server_ms: Mapping[str, float],
) -> ServerGroup:
    """``group`` (the run's ``server``) with what the twin fits: each request costing
    the server ``model.demand_scale`` times a measured slot time (measured at the
    server's own speed, so at speed 1 here), under the server's CPU quota as a cgroup
    enforces it where that quota bound, and spending ``server_ms`` (round trip) between
    the balancer and the server (its event loop)."""
    return replace(
        group,
        speed=1.0,
        # duck-typed like the others
        service=cast(
            ServiceModel,
            ScaledService(
                model.service_of(server.id, services[server.id]), model.demand_scale[server.id]
            ),
        ),
        cpu_quota=server.cpu_quota if model.quota_binds[server.id] else None,
        quota_period=server.quota_period,
        delay=server_ms.get(server.id, 0.0) / 2000.0,
    )


def _fitted(
    config: SimConfig,
    testbed: Testbed,
    services: Mapping[str, MeasuredService],
    model: ScenarioModel,
    server_ms: Mapping[str, float],
) -> SimConfig:
    """A phase of the run's file (``simulated_testbed.phase_config``: one group per
    server, named by ``server_names``) with what the twin fits in place of what the file
    says: each server's service, quota and front-end load term (``_fit_group``), the
    client part of the front end and the closed users' think time."""
    servers = {s.id: s for s in testbed.servers}
    arrivals = config.arrivals
    if isinstance(arrivals, ClosedUsers):
        arrivals = replace(arrivals, think=model.think_ms / 1000.0)
    return replace(
        config,
        servers=tuple(
            _fit_group(group, servers[name], services, model, server_ms)
            for group, name in zip(config.servers, config.server_names, strict=True)
        ),
        arrivals=arrivals,
        client_delay=model.front.client_ms / 2000.0,
    )


REPEATS = 3
"""Draws of each of the run's phases in its twin (``file_configs``): the twin's figure of
a cell is the model's expectation, not one noisy draw of it. Measured on a ``quick`` run
(5 blocks, 4 seed sets): with one draw, the simulated ranking's own noise decided the
near-ties (Kendall tau by throughput 0.66 on average); with 3, 0.81."""
MAX_REPEATS = 20
SEED_STRIDE = 1_000_003
"""Between a phase's draws: past any phase index, so no two draws share a seed."""


def file_configs(
    testbed: Testbed,
    services: Mapping[str, MeasuredService],
    models: Mapping[str, ScenarioModel],
    run_id: str,
    server_ms: Mapping[tuple[str, str], Mapping[str, float]],
    only: Cells | None = None,
    first: bool = False,
    repeats: int = 1,
) -> list[SimConfig]:
    """The run's own phases (``testbed.phases``) as its file simulates them, fitted
    (``_fitted``); ``only``: the phases of these cells; ``first``: each cell's first.

    Each phase is drawn ``repeats`` times: the first with its own seed, the others with
    seeds ``SEED_STRIDE`` apart; block ``b``'s draws are the twin's replications
    ``(b - 1) * repeats + 1`` to ``b * repeats``."""
    from lblab.simulator.simulated_testbed import phase_config

    out, seen = [], set()
    for p in testbed.phases:
        key = (p.phase.scenario, p.phase.strategy)
        if (only is not None and key not in only) or (first and key in seen):
            continue
        seen.add(key)
        config = phase_config(p.config, p.phase, run_id)
        fitted = _fitted(config, testbed, services, models[key[0]], server_ms.get(key, {}))
        for draw in range(1 if first else repeats):
            out.append(
                replace(
                    fitted,
                    seed=fitted.seed + draw * SEED_STRIDE,
                    replication=(fitted.replication - 1) * repeats + draw + 1,
                )
            )
    return out


def _groups(
    testbed: Testbed,
    services: Mapping[str, MeasuredService],
    total: int,
    model: ScenarioModel,
    server_ms: Mapping[str, float],
) -> tuple[ServerGroup, ...]:
    """``total`` servers with the run's capacity mix (each server it started with
    repeated in turn), fitted (``_fit_group``)."""
    mix = testbed.start_servers
    base, extra = divmod(total, len(mix))
    groups = []
    for i, s in enumerate(mix):
        count = base + (1 if i < extra else 0)
        if count:
            group = ServerGroup(
                count=count,
                service=cast(ServiceModel, services[s.id]),
                workers=s.workers,
                weight=s.weight,
                capacity=s.capacity,
            )
            groups.append(_fit_group(group, s, services, model, server_ms))
    return tuple(groups)


def _arrivals(scenario: TwinScenario, model: ScenarioModel, factor: float) -> Arrivals:
    if scenario.closed:
        return ClosedUsers(
            users=max(1, round(scenario.users * factor)), think=model.think_ms / 1000.0
        )
    return OpenArrivals(rate=scenario.rate * factor, poisson=scenario.poisson)


def configs_for(
    testbed: Testbed,
    services: Mapping[str, MeasuredService],
    models: Mapping[str, ScenarioModel],
    servers: int,
    replications: int,
    max_requests: int | Mapping[str, int] | None,
    run_id: str,
    server_ms: Mapping[tuple[str, str], Mapping[str, float]],
    only: Cells | None = None,
) -> list[SimConfig]:
    """One SimConfig per scenario x strategy x replication for ``servers`` servers
    (``only``: these (scenario, strategy) cells); ``server_ms[(scenario, strategy)]``
    gives each server's front-end load term (``solve_fronts``); ``max_requests`` caps a
    phase's requests, one cap or one per scenario."""
    factor = servers / len(testbed.start_servers)
    out = []
    for scenario in testbed.scenarios:
        model = models[scenario.name]
        requests = round(model.requests * factor)
        cap = max_requests.get(scenario.name) if isinstance(max_requests, Mapping) else max_requests
        if cap is not None:
            requests = min(requests, cap)
        for strategy in testbed.strategies:
            if only is not None and (scenario.name, strategy) not in only:
                continue
            groups = _groups(
                testbed, services, servers, model, server_ms.get((scenario.name, strategy), {})
            )
            for rep in range(replications):
                out.append(
                    SimConfig(
                        strategy=strategy,
                        strategy_options=tuple(
                            (str(k), str(v))
                            for k, v in testbed.strategy_options.get(strategy, {}).items()
                        ),
                        servers=groups,
                        requests=max(requests, 1),
                        arrivals=_arrivals(scenario, model, factor),
                        scenario=scenario.name,
                        cells=scenario.cells,
                        report_period=testbed.report_period,
                        client_delay=model.front.client_ms / 2000.0,
                        deadline=testbed.deadline,
                        seed=testbed.seed + rep,
                        replication=rep + 1,
                        run_id=run_id,
                    )
                )
    return out


def run_configs(
    testbed: Testbed,
    services: Mapping[str, MeasuredService],
    models: Mapping[str, ScenarioModel],
    run_id: str,
    server_ms: Mapping[tuple[str, str], Mapping[str, float]],
    only: Cells | None = None,
    first: bool = False,
    repeats: int = 1,
) -> list[SimConfig]:
    """The twin of the run's own phases: its file's (``file_configs``), or for a run
    without one its servers and replications built here (``configs_for``), each drawn
    ``repeats`` times; ``first``: each cell's first replication only."""
    if testbed.phases:
        return file_configs(testbed, services, models, run_id, server_ms, only, first, repeats)
    replications = 1 if first else testbed.replications * repeats
    n = len(testbed.servers)
    return configs_for(testbed, services, models, n, replications, None, run_id, server_ms, only)


FRONT_ROUNDS = 12
"""At most this many rounds of ``solve_fronts`` (each simulates one replication of the
cells not settled yet)."""
FRONT_SETTLED = 0.02
"""A load term is settled when the one its utilisation asks for is within 2 % of it
(or within ``FRONT_FLOOR_MS``)."""
FRONT_FLOOR_MS = 0.05


def solve_fronts(
    testbed: Testbed,
    services: Mapping[str, MeasuredService],
    models: Mapping[str, ScenarioModel],
    start: Mapping[tuple[str, str], float],
) -> dict[tuple[str, str], dict[str, float]]:
    """Per (scenario, strategy): each server's front-end load term (ms, round trip) at
    the slot utilisation the twin's own simulation of that strategy gives it.

    The load term slows the strategy's server, which lowers its utilisation: a fixed
    point ``x = g(x)`` with ``g`` falling. Each round simulates the first replication of
    every cell not settled, reads each server's utilisation and moves its load term a
    step towards what that asks for: half the way at first, and half as far again each
    time the residual changes sign (a steep ``g`` would make plain steps oscillate).
    It starts from ``start[(scenario, server)]``, the server's median utilisation in the
    scenario's live units (the same start for every strategy). Servers whose quota bound
    get none (``FrontEnd``), nor does a scenario without a slope.
    """
    from lblab.simulator.run import simulate

    ids_in_order = tuple(s.id for s in testbed.servers)
    solved: dict[tuple[str, str], dict[str, float]] = {}
    todo = []
    for scenario in testbed.scenarios:
        model = models[scenario.name]
        for strategy in testbed.strategies:
            key = (scenario.name, strategy)
            solved[key] = {
                s.id: model.front.server_ms(start.get((scenario.name, s.id), 0.0))
                for s in testbed.servers
                if not model.quota_binds[s.id]
            }
            if model.front.slope_ms > 0 and solved[key]:
                todo.append(key)
    step = {(key, sid): 0.5 for key in todo for sid in solved[key]}
    last_sign: dict[tuple[tuple[str, str], str], float] = {}
    for _ in range(FRONT_ROUNDS):
        if not todo:
            break
        configs = run_configs(testbed, services, models, "solve", solved, todo, first=True)
        todo = []
        for cfg in configs:
            key = (cfg.scenario, cfg.strategy)
            front = models[cfg.scenario].front
            result = simulate(cfg)
            busy = slot_utilisation(result, testbed.warmup_fraction_of(cfg))
            # the run's own twin's servers are the run's: by name, else in order (``_groups``)
            ids = dict(zip(result.servers, cfg.server_ids or ids_in_order, strict=True))
            busy = {ids[name]: u for name, u in busy.items()}
            settled = True
            for sid, old in solved[key].items():
                residual = front.server_ms(busy.get(sid, 0.0)) - old
                if abs(residual) <= max(FRONT_SETTLED * old, FRONT_FLOOR_MS):
                    continue
                settled = False
                sign = math.copysign(1.0, residual)
                if last_sign.get((key, sid), sign) != sign:
                    step[(key, sid)] /= 2.0
                last_sign[(key, sid)] = sign
                solved[key][sid] = old + step[(key, sid)] * residual
            if not settled:
                todo.append(key)
    return solved
