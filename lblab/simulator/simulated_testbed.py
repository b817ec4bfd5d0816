"""The simulated testbed: an experiment file run in the simulator (``[testbed] kind =
"simulated"``).

``SimulatedTestbed`` is a ``experiment.testbed.Testbed``: the runner
(``experiment/runner.py``) drives it as it drives a live one, through the same plan
(``experiment/plan.py``: blocks of every scenario x strategy in the run's seeded order,
phase k seeded ``seed + k``), adaptive blocks, manifest and resume; each phase is a
simulation of the file's testbed whose tables are written as the phase ends, in the
results contract (``simulator/output.write_phase``), so the report, the notebooks and
``lblab compare`` read the run as they read a measured one. The composition root
(``lblab/app/testbeds.py``) makes it.

From the file: the servers (``[[servers]]`` ids in order, ``[weights]``), each as the
live ``lblab server`` its keys start (``simulator/slot.py``): ``workers`` service slots
fed FIFO whose CPU work runs one at a time on at most one core (the GIL), ``cpu_quota``
as its cgroup quota with the live period (``servers.cpulimit.quota_for``: 10 ms),
``delay_ms`` slept in the slot after the work, holding it without CPU (fixed, or
exponential with that mean under ``delay_dist = "exp"``), ``max_inflight`` as the most
queued plus in service, one more answered REJECTED (the live server's defaults unless
given); no network delay, as on loopback. Their work is a service model (``[testbed]
service``, a spec ``lblab calibrate`` fits; default ``DEFAULT_SIMULATED_SERVICE``), the
CPU a request's JSON work takes at full speed. Also from the file: the load of each
scenario (closed users and their think time, open arrivals constant or Poisson, a
count instead of a duration, a trace), each strategy's options, the request timeout,
the agent interval and the number of balancers. A phase sends for warm-up plus
duration; its measured window is a live phase's: the first send plus the warm-up to the
end of the load (``lblab/windows.py``).

Every timeline action runs as ``simulator/run.py`` describes (``slow`` and ``pause``
with their ``duration``); a server that an ``add`` starts (not in ``[[servers]]``) is
simulated from the start, out of the pools until it is added. Not simulated (yet)
either: the start-up of a restarted server (it takes requests at once), Locust's spawn
rate (every user starts at once) and a think time's spread (uniform between its two
bounds live, its mean here).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lblab.errors import ConfigError
from lblab.experiment.plan import Phase, plan
from lblab.experiment.progress import RunProgress
from lblab.experiment.runconfig import (
    DEFAULT_SIMULATED_SERVICE,
    LoadConfig,
    RunConfig,
    ServerSpec,
    TestbedKind,
)
from lblab.experiment.testbed import PhaseRun
from lblab.experiment.timeline import planned_log, undo
from lblab.experiment.validity import offered_capacity
from lblab.manifest import ManifestFile
from lblab.servers.cpulimit import quota_for
from lblab.servers.defaults import DEFAULT_MAX_INFLIGHT
from lblab.simulator.capacity import capacities
from lblab.simulator.config import (
    EPOCH,
    MAX_REQUESTS,
    ServerEvent,
    ServerGroup,
    SimConfig,
    simulator_knobs,
)
from lblab.simulator.output import write_phase
from lblab.simulator.run import SimResult, simulate
from lblab.simulator.service import Exponential, Fixed, ServiceModel, parse_service
from lblab.simulator.workload import Arrivals, ClosedUsers, OpenArrivals, TraceArrivals
from lblab.windows import Window


def server_groups(config: RunConfig, specs: Sequence[ServerSpec]) -> tuple[ServerGroup, ...]:
    """One group per server of ``specs`` (``servers``), in order: a model of the live
    server, or a queue where the server gives its own ``service``."""
    try:
        work = parse_service(config.testbed.service or DEFAULT_SIMULATED_SERVICE)
    except ConfigError as exc:
        raise ConfigError(f"testbed.{exc}") from None
    return tuple(_group(config, spec, work) for spec in specs)


def _group(config: RunConfig, spec: ServerSpec, work: ServiceModel) -> ServerGroup:
    shared: dict[str, Any] = {
        "count": 1,
        "workers": spec.workers or 1,
        "speed": 1.0 if spec.speed is None else spec.speed,
        "weight": config.weights.get(spec.id, 1.0),
        "delay": spec.server_delay,
        "cpu_quota": spec.cpu_quota,
        "quota_period": quota_for(spec.cpu_quota or 1.0)[0] / 1e6,
    }
    if spec.service is None:  # the live server: serial CPU work, slept delays, its cap
        capacity = spec.max_inflight or DEFAULT_MAX_INFLIGHT
        return ServerGroup(
            **shared, service=work, capacity=capacity, serial_cpu=True, sleep=slot_sleep(spec)
        )
    try:
        service = parse_service(spec.service)
    except ConfigError as exc:
        raise ConfigError(f"servers.{spec.id}.{exc}") from None
    return ServerGroup(**shared, service=service, capacity=spec.max_inflight)


def slot_sleep(spec: ServerSpec) -> ServiceModel | None:
    """What a live server of ``spec`` sleeps per request in its slot (``delay_ms``, spent
    as ``delay_dist`` says: fixed unless "exp"), or None."""
    if not spec.delay_ms:
        return None
    seconds = spec.delay_ms / 1000.0
    return Exponential(seconds) if spec.delay_dist == "exp" else Fixed(seconds)


def mean_sleeps_ms(servers: Sequence[ServerSpec]) -> dict[str, float]:
    """Each server's mean sleep per request in its slot (``slot_sleep``: ``delay_ms``,
    fixed or the mean of ``delay_dist = "exp"``), for the servers that sleep."""
    return {s.id: sleep.mean_s * 1000.0 for s in servers if (sleep := slot_sleep(s)) is not None}


def _arrivals(load: LoadConfig) -> Arrivals:
    if load.model == "closed":
        lo, hi = load.think_time
        return ClosedUsers(users=load.users, think=(lo + hi) / 2.0)
    if load.model == "open":
        return OpenArrivals(rate=load.rate, poisson=load.arrival == "poisson")
    window = load.window
    assert window is not None  # the trace model always has one (LoadConfig checks it)
    return TraceArrivals(window, load.rate)


def timeline(config: RunConfig, scenario: str) -> tuple[ServerEvent, ...]:
    """The file's [[timeline]] events of ``scenario``, each timed fault with its undo."""
    events = []
    for event in config.timeline:
        if not event.applies_to(scenario):
            continue
        for each in (event, undo(event)):
            if each is not None:
                if each.action == "spike":
                    continue  # of the load: ``spikes``
                control = None if each.action == "slow" else each.control()
                events.append(
                    ServerEvent(
                        each.at,
                        each.action,
                        each.server,
                        each.factor,
                        each.add_ms,
                        each.weight,
                        control,
                    )
                )
    return tuple(sorted(events, key=lambda e: e.at))


def phase_config(config: RunConfig, phase: Phase, run_id: str) -> SimConfig:
    """The simulation of one phase of ``config``'s plan."""
    load = config.loads[phase.scenario]
    scenario = next(s for s in config.scenarios if s.name == phase.scenario)
    arrivals = _arrivals(load)
    if isinstance(arrivals, TraceArrivals):
        requests, duration = load.count or len(arrivals.schedule), None
    elif load.count:  # open, or closed (a simulated testbed's only)
        requests, duration = load.count, None
    else:
        requests, duration = MAX_REQUESTS, config.warmup + config.duration
    options = config.strategy_options.get(phase.strategy, {})
    specs = config.every_server()
    return SimConfig(
        strategy=phase.strategy,
        strategy_options=tuple((str(k), str(v)) for k, v in options.items()),
        servers=server_groups(config, specs),
        server_ids=tuple(s.id for s in specs),
        joins_later=tuple(s.id for s in specs[len(config.servers) :]),
        timeline=timeline(config, phase.scenario),
        spikes=config.spikes(phase.scenario),
        requests=requests,
        duration=duration,
        arrivals=arrivals,
        scenario=phase.scenario,
        cells=tuple((c.package_bytes, c.work_bytes) for c in scenario.cells),
        report_period=config.testbed.agent_interval,
        deadline=config.request_timeout,
        balancers=config.testbed.balancers,
        **simulator_knobs(config.simulator, "simulator."),
        health=config.health,
        seed=config.seed + phase.index,
        replication=phase.replication,
        run_id=run_id,
    )


def _window(config: RunConfig, result: SimResult) -> Window:
    """A live phase's window: the first send plus the warm-up to the end of the load."""
    start = EPOCH + config.warmup
    end = EPOCH + (result.config.duration or result.sim_seconds)
    return Window(start, max(start, end))


def unsimulated(strategy: str) -> str | None:
    """Why ``strategy`` cannot be simulated yet, or None: the simulated servers grant no
    LEASE frames, so a strategy that sends only within leases would refuse every request."""
    from lblab.balancer.strategies.registry import strategy_class

    if strategy_class(strategy).uses_leases:
        return (
            f"{strategy} sends only within the servers' LEASE frames, and the simulated "
            "servers grant none yet: run it on the local testbed"
        )
    return None


def check(config: RunConfig) -> None:
    """A ``ConfigError`` naming the field if any phase of ``config`` cannot be simulated
    (before a run folder is made)."""
    for strategy in config.strategies:
        why = unsimulated(strategy)
        if why is not None:
            raise ConfigError(f"run.strategies: {why}")
    for phase in plan(config):
        phase_config(config, phase, "check")


class SimulatedTestbed:
    """``experiment.testbed.Testbed``: each phase simulated, its parts written at once."""

    kind = TestbedKind.SIMULATED
    flush_grace = 0.0

    @classmethod
    def preflight(cls, config: RunConfig) -> str | None:
        """``check``: every phase can be simulated."""
        check(config)
        return None

    def __init__(self, config: RunConfig, run_dir: Path, manifest: ManifestFile) -> None:
        """``manifest``: the runner's; a simulated phase hands all it writes there back
        as its ``PhaseRun``."""
        self.config, self.run_dir = config, run_dir
        # Each scenario's load against its servers' capacity, for the capacity check: a
        # fact of the file (a phase's length does not change it), so worked out once.
        self.offered = {c.scenario: offered_capacity(c.to_json()) for c in capacities(config)}

    def start(self, strategy: str) -> None:
        """Nothing runs between phases."""

    def facts(self) -> dict[str, Any]:
        return {
            "kind": "simulated",
            "service": self.config.testbed.service or DEFAULT_SIMULATED_SERVICE,
            "cpu_limit_method": "simulated",
        }

    def run_phase(
        self, phase: Phase, config: RunConfig, attempt: str, progress: RunProgress
    ) -> PhaseRun:
        sim = phase_config(config, phase, self.run_dir.name)
        result = simulate(sim)
        offered = self.offered[phase.scenario]
        facts = write_phase(self.run_dir, phase.key, result, _window(config, result), offered)
        facts["load_start"] = EPOCH
        events = [e for e in config.timeline if e.applies_to(phase.scenario)]
        if events:
            facts["timeline"] = planned_log(events, EPOCH)
        status, error = "done", None
        if not facts["requests"]:
            status, error = "failed", "no requests were simulated"
        return PhaseRun(status, error, time.time(), facts, sim.describe())

    def collect(self, phases: Sequence[Phase], before: float, force: bool = False) -> None:
        """Nothing to collect: a phase's parts and checks are written as it ends."""

    def recollect(self, phases: Sequence[Phase]) -> None:
        raise ConfigError(
            f"--collect: {self.run_dir} is a simulated run; its phases wrote their tables "
            "as they ran, and no other host holds records of it"
        )

    def recover(self) -> None:
        """Nothing to recover: a simulated phase leaves nothing running."""

    def stop(self) -> None:
        """Nothing to stop."""
