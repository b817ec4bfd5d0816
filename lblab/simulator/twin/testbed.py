"""The run's testbed as the twin copies it, read from the run's manifest.

A live run's manifest holds its config (``loadtests.runconfig``) and the facts of the
servers it started (workers, max-inflight, the CPU quotas they ran with); a simulated
run's holds one SimConfig per phase. Either becomes one ``Testbed``: the servers in
order, the strategies and their options, the scenarios with their load, and the
settings (replications, seed, deadline, agent interval, share of warm-up) that make
the twin's phases the run's. Nothing here is measured: that is ``measure.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from lblab.errors import ConfigError
from lblab.manifest import Manifest
from lblab.servers.cpulimit import quota_for
from lblab.simulator.workload import Cell


@dataclass(frozen=True, slots=True)
class TwinServer:
    id: str
    weight: float
    workers: int
    capacity: int | None
    cpu_quota: float | None

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
    notes: tuple[str, ...]
    live: bool = True
    """Live servers do work outside their slot; a simulated run's servers do none."""


def live_testbed(manifest: Manifest) -> Testbed:
    """A live run's testbed: its config, with the quotas and workers its servers ran with."""
    from lblab.loadtests.runconfig import build

    config = build(dict(manifest.config))
    facts = manifest.testbed.get("servers", {})
    # The quotas the servers ran with: scaled to fit their CPUs (loadtests/isolation.py).
    running = (manifest.testbed.get("cpu_layout") or {}).get("quotas") or {}
    servers = []
    for spec in config.servers:
        started = facts.get(spec.id, {})
        servers.append(
            TwinServer(
                id=spec.id,
                weight=float(config.weights.get(spec.id, 1.0)),
                workers=int(started.get("workers") or spec.workers or 1),
                capacity=started.get("max_inflight") or spec.max_inflight,
                cpu_quota=running.get(spec.id, spec.cpu_quota),
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
    notes = []
    if config.timeline:
        notes.append("the run's timeline events (kill, drain, add...) are not modelled")
    length = config.warmup + config.duration
    return Testbed(
        servers=tuple(servers),
        strategies=config.strategies,
        strategy_options=config.strategy_options,
        scenarios=tuple(scenarios),
        replications=config.replications,
        seed=config.seed,
        deadline=config.request_timeout,
        report_period=config.testbed.agent_interval,
        warmup_fraction=config.warmup / length if length > 0 else 0.0,
        notes=tuple(notes),
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
        notes=(),
        live=False,
    )
