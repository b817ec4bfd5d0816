"""The plan of a run: its phases, in blocks (replications) of every scenario x strategy.

A block runs every scenario, and within it every strategy once, back to back, in an
order drawn from the run's seed (``plan_block``). The live runner (``experiment/runner.py``)
runs the plan; the simulated testbed (``simulator/simulated_testbed.py``) simulates it; an
adaptive run appends blocks (``Runner.next_block``). Phase ``k`` is seeded ``seed + k``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from lblab.experiment.runconfig import RunConfig
from lblab.manifest import PhaseEntry
from lblab.traces import TraceWindow, schedule


@dataclass(frozen=True, slots=True)
class Phase:
    index: int
    scenario: str
    strategy: str
    replication: int
    duration_s: float | None = None
    """Its measured length when the plan gave it its own (an adaptive run lengthens a
    scenario's later blocks); None: the run's ``duration``."""

    @property
    def key(self) -> str:
        safe = re.sub(r"[^A-Za-z0-9+_.-]", "_", f"{self.scenario}-{self.strategy}")
        return f"r{self.replication}-{self.index:03d}-{safe}"

    @property
    def label(self) -> str:
        return f"{self.scenario} {self.strategy} rep {self.replication}"


def plan(config: RunConfig) -> list[Phase]:
    """The first ``config.replications`` blocks."""
    phases: list[Phase] = []
    for block in range(1, config.replications + 1):
        phases += plan_block(config, block, len(phases))
    return phases


def plan_block(
    config: RunConfig, block: int, first_index: int, scenarios: Sequence[str] | None = None
) -> list[Phase]:
    """One block: every scenario (or those named, as an adaptive block runs the ones
    still open), and within it every strategy once, in an order drawn from
    ``random.Random(f"{seed}-block-{block}")``: no strategy always runs first (after a
    heavy cell) or next to the same neighbour, and a drift of the machine cannot line up
    with one strategy; the order is reproducible from the run's seed."""
    rng = random.Random(f"{config.seed}-block-{block}")
    phases: list[Phase] = []
    for scenario in config.scenarios:
        order = list(config.strategies)
        rng.shuffle(order)  # for every scenario: the orders do not depend on which run
        if scenarios is not None and scenario.name not in scenarios:
            continue
        for strategy in order:
            phases.append(Phase(first_index + len(phases), scenario.name, strategy, block))
    return phases


def planned(entries: Sequence[PhaseEntry]) -> list[Phase]:
    """The phases a manifest plans, in its order (a phase's index is its place), each
    with the length the plan gave it: how a resumed run or a twin takes up the plan."""
    return [
        Phase(i, e.scenario, e.strategy, e.replication, e.duration_s) for i, e in enumerate(entries)
    ]


def phase_entry(config: RunConfig, p: Phase) -> PhaseEntry:
    """A phase as the manifest plans it, before it runs (``duration_s``: its measured
    length, the run's unless an adaptive run lengthened its scenario)."""
    return PhaseEntry(
        key=p.key,
        scenario=p.scenario,
        strategy=p.strategy,
        replication=p.replication,
        seed=config.seed + p.index,
        duration_s=config.duration if p.duration_s is None else p.duration_s,
    )


def phase_config(config: RunConfig, phase: Phase) -> RunConfig:
    """The config a phase runs with: the run's, with the phase's own length (an adaptive
    run may lengthen a scenario)."""
    duration = phase.duration_s
    if duration is None or duration == config.duration:
        return config
    return replace(config, duration=duration)


def load_seconds(
    duration: float, trace: TraceWindow | None, rate: float, model: str, count: int
) -> float:
    """How long a phase's load lasts (warm-up included), answers excluded: ``duration``,
    or less when a trace (replayed at ``rate``) or an open model's ``count`` of requests
    ends first."""
    if trace is not None:  # until its last send: the trace may end first
        replay = schedule(trace, rate)
        return replay.due(replay.count(None if count else duration, count or None) - 1)
    if model == "open" and count:
        return count / rate
    return duration


def phase_seconds(config: RunConfig, phase: Phase) -> float:
    """``load_seconds`` of ``phase`` run with ``config``: its progress line's length."""
    load = config.loads[phase.scenario]
    scenario = next(s for s in config.scenarios if s.name == phase.scenario)
    duration = config.warmup + config.duration
    return load_seconds(duration, scenario.trace, load.rate, load.model, load.count)
