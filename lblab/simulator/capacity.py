"""What the servers can serve: each server's capacity under a scenario's requests, and the
load a phase offers against it.

A server of ``[[servers]]`` (or of a timeline ``add``) does a request's CPU work one at a
time on at most one core (its slots are threads under Python's GIL), within its CPU quota
``q`` (at most 1 core), and holds a slot through the work and its ``delay_ms`` sleep ``d``.
With ``s`` the request's CPU seconds at a full core (the testbed's service model, the
mean over the scenario's cells or its trace window's requests) and ``w`` slots::

    capacity = min(q / s, w / (s / q + d))          requests per second

the CPU bound and the slots' bound, as ``simulator/slot.py`` serves it (a server's
``speed`` divides ``s``). A queue server (one with its own ``service``: ``w`` slots in
parallel, each taking ``s`` of its model at its speed) serves ``w / s``, and at most
``q / s`` under a quota. It is what the
simulated testbed can serve exactly, and an estimate for a live one (the service model
is fitted on this project's 2-core VM; ``lblab calibrate`` fits a machine's own).

The offered load is the open model's and the trace model's rate (requests/s, spikes
aside); the closed model offers what its users send back to back, which no server count
can fall behind, so it has none, and an open load of ``count`` requests is a batch
(Ingram's), whose queue is what it measures. ``describe`` is the preflight's line; ``to_json`` is the
manifest's ``capacity`` entry of a scenario, from which the analysis reads each server's
share of the pool's capacity (``analysis/hard_cases.py``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lblab.experiment.runconfig import DEFAULT_SIMULATED_SERVICE, RunConfig, ServerSpec
from lblab.simulator.service import JsonCost, ServiceModel, parse_service
from lblab.traces import schedule

OVERLOADED = 1.0
"""Offered load over the pool's capacity above which a phase is past what it can serve."""


@dataclass(frozen=True, slots=True)
class Capacity:
    """One scenario's servers: what each can serve, and what the load offers."""

    scenario: str
    servers: dict[str, float]
    """Requests/s each server completes at most (``math.inf``: no bound, no work)."""
    offered: float | None
    """Requests/s the load sends (None: the closed model)."""
    service: str
    batch: int = 0
    """An open load of this many requests (``count``): a batch, whose queue is the
    experiment (Ingram's), so it is weighed against no capacity."""

    @property
    def total(self) -> float:
        return sum(self.servers.values())

    @property
    def utilization(self) -> float | None:
        """Offered over total capacity (None: closed model, or no bound)."""
        if self.offered is None or self.batch or not math.isfinite(self.total) or self.total <= 0:
            return None
        return self.offered / self.total

    @property
    def overloaded(self) -> bool:
        u = self.utilization
        return u is not None and u > OVERLOADED

    def describe(self) -> str:
        """``sp+sr: the servers can serve 812 req/s (s1 102, s2 102, s3 608); the load
        offers 400 req/s (49 % of it)``."""
        each = ", ".join(f"{k} {_rate(v)}" for k, v in self.servers.items())
        line = f"{self.scenario}: the servers can serve {_rate(self.total)} req/s ({each})"
        u = self.utilization
        if self.offered is None:
            return line + "; the closed model offers what its users send back to back"
        if self.batch:
            return line + (
                f"; the load is a batch of {self.batch:,} requests at {_rate(self.offered)} "
                "req/s (its queue is the experiment)"
            )
        if u is None:
            return line + f"; the load offers {_rate(self.offered)} req/s"
        line += f"; the load offers {_rate(self.offered)} req/s ({u:.0%} of it)"
        if self.overloaded:
            line += (
                ": past what they can serve, so requests queue until they time out or are "
                "REJECTED; lower the rate or add capacity"
            )
        return line

    def to_json(self) -> dict[str, Any]:
        return {
            "servers": {k: (v if math.isfinite(v) else None) for k, v in self.servers.items()},
            "total": self.total if math.isfinite(self.total) else None,
            "offered": self.offered,
            "utilization": self.utilization,
            "batch": self.batch,
            "service": self.service,
            "definition": (
                "min(q / s, w / (s / q + d)) per server, w / s for a queue server "
                "(lblab/simulator/capacity.py)"
            ),
        }


def _rate(value: float) -> str:
    return "unbounded" if not math.isfinite(value) else f"{value:,.0f}"


def server_capacity(spec: ServerSpec, service_s: float) -> float:
    """Requests/s one server of ``spec`` completes at most, each taking ``service_s`` CPU
    seconds at a full core."""
    q = min(spec.cpu_quota or 1.0, 1.0)
    d = (spec.delay_ms or 0.0) / 1000.0
    w = spec.workers or 1
    cpu = q / service_s if service_s > 0 else math.inf
    hold = service_s / q + d
    slots = w / hold if hold > 0 else math.inf
    return min(cpu, slots)


def _capacity_of(spec: ServerSpec, work_s: float, shapes: Sequence[tuple[int, int]]) -> float:
    """``server_capacity`` of a model of the live server (its work at its speed), or a
    queue server's: its slots in parallel over its own service model's mean."""
    speed = 1.0 if spec.speed is None else spec.speed
    if spec.service is None:
        return server_capacity(spec, work_s / speed)
    each = mean_service_s(parse_service(spec.service), shapes) / speed
    if each <= 0:
        return math.inf
    slots = (spec.workers or 1) / each
    return slots if spec.cpu_quota is None else min(slots, spec.cpu_quota / each)


def mean_service_s(model: ServiceModel, shapes: Sequence[tuple[int, int]]) -> float:
    """Mean CPU seconds of a request over ``shapes`` (package bytes, work bytes)."""
    if isinstance(model, JsonCost) and shapes:
        return sum(model.predict(w, p) for p, w in shapes) / len(shapes)
    return model.mean_s


def capacities(config: RunConfig) -> list[Capacity]:
    """Each scenario's ``capacity``, for every server the run has (those a timeline ``add``
    brings in too)."""
    specs = config.every_server()
    return [capacity(config, s.name, specs) for s in config.scenarios]


def capacity(config: RunConfig, scenario: str, specs: Sequence[ServerSpec]) -> Capacity:
    """What ``specs`` can serve under ``scenario``'s requests, and what its load offers."""
    spec_text = config.testbed.service or DEFAULT_SIMULATED_SERVICE
    model = parse_service(spec_text)
    load = config.loads[scenario]
    found = next(s for s in config.scenarios if s.name == scenario)
    shapes = [(c.package_bytes, c.work_bytes) for c in found.cells]
    offered: float | None = None
    if load.model == "open":
        offered = load.rate
    window = load.window
    if window is not None:
        replay = schedule(window, load.rate)
        shapes = list(zip(replay.packages, replay.works, strict=True))
        offered = replay.rate
    service_s = mean_service_s(model, shapes)
    return Capacity(
        scenario,
        {s.id: _capacity_of(s, service_s, shapes) for s in specs},
        offered,
        spec_text,
        load.count if load.model == "open" else 0,
    )
