"""The twin in the simulator: its SimConfigs, and each strategy's front end solved on them.

``configs_for`` turns the testbed and the fitted model into one ``SimConfig`` per
scenario x strategy x replication, for the run's server count or a scaled one: each
server's measured service times (scaled by its CPU demand where its quota bound, under
that quota), the client part of the front end between generator and balancer, and a
front-end load term per server between the balancer and the server.

That load term depends on how busy the strategy keeps each server, which the twin only
knows once it has simulated the strategy: ``solve_fronts`` finds it as a fixed point,
simulating each cell until the term its utilisation asks for is the one it was given.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import cast

from lblab.simulator.config import ServerGroup, SimConfig
from lblab.simulator.service import ServiceModel
from lblab.simulator.twin.measure import slot_utilisation
from lblab.simulator.twin.measured_service import MeasuredService, ScaledService
from lblab.simulator.twin.model import ScenarioModel
from lblab.simulator.twin.testbed import Testbed, TwinScenario
from lblab.simulator.workload import Arrivals, ClosedUsers, OpenArrivals


def _groups(
    testbed: Testbed,
    services: Mapping[str, MeasuredService],
    total: int,
    model: ScenarioModel,
    server_ms: Mapping[str, float],
) -> tuple[ServerGroup, ...]:
    """``total`` servers with the run's capacity mix (each server repeated in turn), each
    request costing its server ``model.demand_scale`` times a measured slot time, under
    the server's CPU quota as a cgroup enforces it, and spending ``server_ms`` (round
    trip) between the balancer and its server (its event loop)."""
    n = len(testbed.servers)
    base, extra = divmod(total, n)
    groups = []
    for i, s in enumerate(testbed.servers):
        count = base + (1 if i < extra else 0)
        if count:
            groups.append(
                ServerGroup(
                    count=count,
                    # duck-typed like the others
                    service=cast(
                        ServiceModel,
                        ScaledService(
                            model.service_of(s.id, services[s.id]), model.demand_scale[s.id]
                        ),
                    ),
                    workers=s.workers,
                    weight=s.weight,
                    capacity=s.capacity,
                    cpu_quota=s.cpu_quota if model.quota_binds[s.id] else None,
                    quota_period=s.quota_period,
                    delay=server_ms.get(s.id, 0.0) / 2000.0,
                )
            )
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
    only: Sequence[tuple[str, str]] | None = None,
) -> list[SimConfig]:
    """One SimConfig per scenario x strategy x replication for ``servers`` servers
    (``only``: these (scenario, strategy) cells); ``server_ms[(scenario, strategy)]``
    gives each server's front-end load term (``solve_fronts``); ``max_requests`` caps a
    phase's requests, one cap or one per scenario."""
    factor = servers / len(testbed.servers)
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

    n = len(testbed.servers)
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
        configs = configs_for(testbed, services, models, n, 1, None, "solve", solved, todo)
        todo = []
        for cfg in configs:
            key = (cfg.scenario, cfg.strategy)
            front = models[cfg.scenario].front
            result = simulate(cfg)
            busy = slot_utilisation(result, testbed.warmup_fraction)
            # the n-server twin's servers are the run's, in order (``_groups``)
            ids = {name: testbed.servers[i].id for i, name in enumerate(result.servers)}
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
