"""The run's testbed as the twin copies it, read from the run's manifest.

A run's manifest holds its experiment file (``loadtests.runconfig``: every live run, and
a simulated one ``lblab run`` made) or, for a run ``lblab simulate`` made, only one
SimConfig per phase. Either becomes one ``Testbed``: the servers in order, the
strategies and their options, the scenarios with their load, and the settings
(replications, seed, deadline, agent interval, share of warm-up) a scaled twin or a
``lblab simulate`` run's twin builds its phases from (``solve.configs_for``). A run
with its file also gives its phases as it ran them (``RunPhase``): its twin is that file's
phases simulated (``solve.file_configs``), timeline and balancers included. A live
run's servers come with the workers, max-inflight and CPU quotas they ran with.
Nothing here is measured: that is ``measure.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lblab.errors import ConfigError
from lblab.manifest import Manifest
from lblab.servers.cpulimit import quota_for
from lblab.simulator.workload import Cell

if TYPE_CHECKING:
    from lblab.experiment.plan import Phase
    from lblab.experiment.runconfig import RunConfig
    from lblab.simulator.config import SimConfig


@dataclass(frozen=True, slots=True)
class TwinServer:
    id: str
    weight: float
    workers: int
    capacity: int | None
    cpu_quota: float | None
    joins_later: bool = False
    """Started by a timeline ``add`` (not in the file's ``[[servers]]``): in the run's
    own phases, out of the pools until it is added; not in a scaled twin's mix."""

    @property
    def quota_period(self) -> float:
        """Seconds per quota period, the live server's own (``servers.cpulimit.quota_for``;
        a whole core's without a quota, where it is unused)."""
        return quota_for(self.cpu_quota or 1.0)[0] / 1e6


@dataclass(frozen=True, slots=True)
class TwinScenario:
    name: str
    cells: tuple[Cell, ...]
    closed: bool
    users: int = 0
    rate: float = 0.0
    poisson: bool = False


@dataclass(frozen=True, slots=True)
class RunPhase:
    """A phase the run's file ran (``plan.Phase``: its index, so its seed, and its cell)
    with the config it ran with: the run's, at the phase's own length
    (``plan.phase_config``: an adaptive run may lengthen a scenario's later blocks)."""

    phase: Phase
    config: RunConfig


@dataclass(frozen=True, slots=True)
class Testbed:
    """What the twin copies from the run: servers, load, matrix, settings."""

    servers: tuple[TwinServer, ...]
    strategies: tuple[str, ...]
    strategy_options: Mapping[str, Mapping[str, str]]
    scenarios: tuple[TwinScenario, ...]
    replications: int
    seed: int
    deadline: float | None
    report_period: float
    warmup_fraction: float
    live: bool = True
    """Live servers do work outside their slot; a simulated run's servers do none."""
    phases: tuple[RunPhase, ...] = ()
    """The phases the run's file ran, in its plan's order (those done): its twin simulates
    these. Empty for a run without its file (``lblab simulate``), whose twin's phases
    the twin builds from the fields above."""
    warmup: float = 0.0
    """Seconds of warm-up at the start of each phase of the run's file."""
    unscaled: tuple[str, ...] = ()
    """What of the run's file a scaled twin leaves out (its timeline, its balancers):
    a scaled twin is built from the fields above, not from the file."""

    @property
    def start_servers(self) -> tuple[TwinServer, ...]:
        """The servers the run started with: the capacity mix a scaled twin repeats."""
        return tuple(s for s in self.servers if not s.joins_later)

    def warmup_fraction_of(self, config: SimConfig) -> float:
        """The share of a simulated phase's sends that is warm-up (``measure.sim_window``):
        of a phase that sends for a duration (one of the run's file, at its own length),
        the run's warm-up over that duration; of one that sends a count, the run's share."""
        if config.duration:
            return min(self.warmup / config.duration, 1.0)
        return self.warmup_fraction


def file_testbed(manifest: Manifest) -> Testbed:
    """The testbed of a run whose manifest holds its experiment file: the file, with the
    quotas and workers a live run's servers ran with, and the phases the run did."""
    from lblab.experiment.plan import phase_config, planned
    from lblab.experiment.runconfig import build

    config = build(dict(manifest.config))
    facts = manifest.testbed.get("servers", {})
    # The quotas the servers ran with: scaled to fit their CPUs (loadtests/isolation.py).
    running = (manifest.testbed.get("cpu_layout") or {}).get("quotas") or {}
    servers = []
    for i, spec in enumerate(config.every_server()):
        started = facts.get(spec.id, {})
        servers.append(
            TwinServer(
                id=spec.id,
                weight=float(config.weights.get(spec.id, 1.0)),
                workers=int(started.get("workers") or spec.workers or 1),
                capacity=started.get("max_inflight") or spec.max_inflight,
                cpu_quota=running.get(spec.id, spec.cpu_quota),
                joins_later=i >= len(config.servers),
            )
        )
    scenarios = []
    for s in config.scenarios:
        load = config.loads[s.name]
        cells = tuple((c.package_bytes, c.work_bytes) for c in s.cells)
        if load.model == "trace":
            raise ConfigError(
                f"scenario {s.name}: the twin does not model trace phases; simulate the "
                f"trace itself: lblab simulate --scenario {s.name} (or trace = FILE)"
            )
        if load.model == "closed":
            scenarios.append(TwinScenario(s.name, cells, True, users=load.users))
        else:
            scenarios.append(
                TwinScenario(
                    s.name, cells, False, rate=load.rate, poisson=load.arrival == "poisson"
                )
            )
    phases = tuple(
        RunPhase(p, phase_config(config, p))
        for p in planned(manifest.phases)
        if manifest.phases[p.index].status == "done"
    )
    unscaled = []
    if config.timeline:
        unscaled.append("timeline events (kill, drain, add...)")
    if config.testbed.balancers > 1:
        unscaled.append(f"{config.testbed.balancers} balancers (a scaled twin has one)")
    length = config.warmup + config.duration
    return Testbed(
        servers=tuple(servers),
        strategies=config.strategies,
        strategy_options=config.strategy_options,
        scenarios=tuple(scenarios),
        replications=max((p.phase.replication for p in phases), default=config.replications),
        seed=config.seed,
        deadline=config.request_timeout,
        report_period=config.testbed.agent_interval,
        warmup_fraction=config.warmup / length if length > 0 else 0.0,
        warmup=config.warmup,
        live=not manifest.simulated,
        phases=phases,
        unscaled=tuple(unscaled),
    )


def simulated_testbed(manifest: Manifest) -> Testbed:
    """A simulated run's testbed, from its phases' SimConfigs (the first one's servers)."""
    configs = manifest.phase_configs
    if not configs:
        raise ConfigError("the simulated run's manifest has no config list; re-run lblab simulate")
    first = configs[0]
    servers: list[TwinServer] = []
    for group in first["servers"]:
        for _ in range(int(group["count"])):
            servers.append(
                TwinServer(
                    id=f"s{len(servers) + 1}",
                    weight=float(group["weight"]),
                    workers=int(group["workers"]),
                    capacity=group.get("capacity"),
                    cpu_quota=None,
                )
            )
    scenarios: dict[str, TwinScenario] = {}
    options: dict[str, dict[str, str]] = {}
    for c in configs:
        options[c["strategy"]] = dict(c.get("strategy_options") or {})
        arrivals = c["arrivals"]
        closed = arrivals["model"] == "ClosedUsers"
        scenarios.setdefault(
            c["scenario"],
            TwinScenario(
                c["scenario"],
                tuple((int(p), int(w)) for p, w in c["cells"]),
                closed,
                users=int(arrivals.get("users", 0)),
                rate=float(arrivals.get("rate", 0.0)),
                poisson=bool(arrivals.get("poisson", False)),
            ),
        )
    return Testbed(
        servers=tuple(servers),
        strategies=tuple(dict.fromkeys(c["strategy"] for c in configs)),
        strategy_options=options,
        scenarios=tuple(scenarios.values()),
        replications=len({c["replication"] for c in configs}),
        # The first replication's seed (replications were numbered from 0, now from 1;
        # each one's seed is the first's plus its place in either numbering).
        seed=int(min(c["seed"] for c in configs)),
        deadline=first.get("deadline"),
        report_period=float(first["report_period"]),
        warmup_fraction=0.0,
        live=False,
    )
