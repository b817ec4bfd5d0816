"""The simulation's configuration: typed, checked once, built from CLI flags or TOML.

A TOML file uses the CLI's option names (with ``_`` for ``-``) at the top level, and
may describe heterogeneous servers as groups::

    strategy = "p2c"
    requests = 100000
    rate = 5000
    report_period = "250ms"
    [[servers]]
    count = 2
    service = "exp:10ms"
    [[servers]]
    count = 1
    service = "exp:10ms"
    speed = 7          # a large server: service times divided by 7
    workers = 1
    weight = 7
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from lblab.config import parse_duration
from lblab.errors import ConfigError
from simulator.service import ServiceModel, parse_service
from simulator.workload import Arrivals, Cell, ClosedUsers, OpenArrivals, scenario_cells

EPOCH = 1_700_000_000.0
"""Simulated time 0 in epoch seconds (2023-11-14T22:13:20Z): fixed, so runs are reproducible."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerGroup:
    """``count`` identical servers."""

    count: int = 1
    service: ServiceModel
    workers: int = 1
    speed: float = 1.0
    """Service times are divided by this (a server of twice the CPU has speed 2)."""
    weight: float = 1.0
    """Static weight handed to the pool (``wrr``, ``ring-hash``, ...)."""
    capacity: int | None = None
    """Most requests queued plus in service; one more is REJECTED (None: unbounded)."""
    delay: float | None = None
    """One-way balancer<->server delay in seconds for this group (None: the global one)."""

    def __post_init__(self) -> None:
        if self.count < 1:
            raise ConfigError(f"servers: count {self.count} must be at least 1")
        if self.workers < 1:
            raise ConfigError(f"servers: workers {self.workers} must be at least 1")
        if self.speed <= 0:
            raise ConfigError(f"servers: speed {self.speed} must be > 0")
        if self.weight <= 0:
            raise ConfigError(f"servers: weight {self.weight} must be > 0")
        if self.capacity is not None and self.capacity < 1:
            raise ConfigError(f"servers: capacity {self.capacity} must be at least 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class SimConfig:
    strategy: str = "p2c"
    strategy_options: tuple[tuple[str, str], ...] = ()
    servers: tuple[ServerGroup, ...]
    requests: int = 10_000
    arrivals: Arrivals
    scenario: str = "sp+sr"
    cells: tuple[Cell, ...] = ()
    """Request shapes; empty means the scenario's cells."""
    routing_keys: int = 0
    """Distinct routing keys drawn per request for hash strategies (0: no key)."""
    report_period: float = 0.25
    """Agent sample period: CPU table rows and, for strategies that use them, reports."""
    report_delay: float = 0.0
    """Extra age of every agent report when it reaches the pool (staleness study)."""
    client_delay: float = 0.0
    """One-way client<->balancer delay in seconds."""
    server_delay: float = 0.0
    """One-way balancer<->server delay in seconds (per group override: ``delay``)."""
    deadline: float | None = 30.0
    """Request deadline from the client's send time; later -> ``timeout`` (None: none)."""
    max_tries: int = 3
    """Attempts per request when servers answer REJECTED (replayed elsewhere)."""
    picks_every: int = 1
    """Record every n-th pick in the picks table (0: none)."""
    tick_period: float = 0.1
    """How often the pool's health clock (ejection backoff, slow start) advances."""
    seed: int = 1
    replication: int = 0
    run_id: str = "sim"

    def __post_init__(self) -> None:
        if not self.servers:
            raise ConfigError("servers: at least one server is needed")
        if self.requests < 1:
            raise ConfigError(f"requests: {self.requests} must be at least 1")
        if self.max_tries < 1:
            raise ConfigError(f"max_tries: {self.max_tries} must be at least 1")
        if self.picks_every < 0:
            raise ConfigError(f"picks_every: {self.picks_every} must be 0 (none) or more")
        if self.routing_keys < 0:
            raise ConfigError(f"routing_keys: {self.routing_keys} must be 0 or more")
        for name in ("report_period", "tick_period"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name}: {getattr(self, name)} must be > 0 seconds")
        if self.deadline is not None and self.deadline <= 0:
            raise ConfigError(f"deadline: {self.deadline} must be > 0 seconds")
        if not self.cells:
            object.__setattr__(self, "cells", scenario_cells(self.scenario))

    @property
    def server_count(self) -> int:
        return sum(g.count for g in self.servers)

    def describe(self) -> dict[str, Any]:
        """The config as plain JSON-able data (for the manifest)."""
        out = asdict(self)
        out["servers"] = [
            {**asdict(g), "service": g.service.spec()} for g in self.servers
        ]  # the spec string is what a person can re-type
        out["arrivals"] = {"model": type(self.arrivals).__name__, **asdict(self.arrivals)}
        out["strategy_options"] = dict(self.strategy_options)
        return out


def _get(raw: Mapping[str, Any], key: str, default: Any = None) -> Any:
    return raw.get(key, raw.get(key.replace("_", "-"), default))


def _int(raw: Mapping[str, Any], key: str, default: int) -> int:
    value = _get(raw, key, default)
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}: {value!r} is not a whole number") from None


def _duration_or_none(value: Any, key: str) -> float | None:
    if value is None or (isinstance(value, str) and value.lower() in {"none", "off", ""}):
        return None
    return parse_duration(value, key)


def _groups(raw: Mapping[str, Any]) -> tuple[ServerGroup, ...]:
    groups = _get(raw, "servers", 3)
    workers = _int(raw, "workers", 1)
    service = parse_service(str(_get(raw, "service", "exp:10ms")))
    if isinstance(groups, int):
        return (ServerGroup(count=groups, service=service, workers=workers),)
    if not isinstance(groups, list) or not all(isinstance(g, Mapping) for g in groups):
        raise ConfigError("servers: give a count or a list of [[servers]] tables")
    known = {"count", "service", "workers", "speed", "weight", "capacity", "delay"}
    out = []
    for i, g in enumerate(groups):
        unknown = set(g) - known
        if unknown:
            raise ConfigError(
                f"servers[{i}]: unknown keys {sorted(unknown)}; known are {sorted(known)}"
            )
        out.append(
            ServerGroup(
                count=int(g.get("count", 1)),
                service=parse_service(str(g["service"])) if "service" in g else service,
                workers=int(g.get("workers", workers)),
                speed=float(g.get("speed", 1.0)),
                weight=float(g.get("weight", 1.0)),
                capacity=int(g["capacity"]) if "capacity" in g else None,
                delay=parse_duration(g["delay"], "delay") if "delay" in g else None,
            )
        )
    return tuple(out)


def _arrivals(raw: Mapping[str, Any]) -> Arrivals:
    rate, users = _get(raw, "rate"), _get(raw, "users")
    if rate is not None and users is not None:
        raise ConfigError("give either rate (open arrivals) or users (closed), not both")
    if users is not None:
        return ClosedUsers(
            users=int(users),
            think=parse_duration(_get(raw, "think", 0), "think"),
            exponential_think=bool(_get(raw, "exponential_think", False)),
        )
    try:
        value = float(rate if rate is not None else 1000.0)
    except (TypeError, ValueError):
        raise ConfigError(f"rate: {rate!r} is not a number of requests per second") from None
    return OpenArrivals(rate=value, poisson=bool(_get(raw, "poisson", True)))


KNOWN_KEYS = {
    "strategy", "strategy_options", "servers", "workers", "service", "requests", "rate",
    "poisson", "users", "think", "exponential_think", "scenario", "routing_keys",
    "report_period", "report_delay", "client_delay", "server_delay", "deadline",
    "max_tries", "picks_every", "tick_period", "seed", "replication", "run_id",
}  # fmt: skip


def config_from_mapping(raw: Mapping[str, Any]) -> SimConfig:
    """Build a ``SimConfig`` from TOML-style data (string durations, service specs)."""
    unknown = {k.replace("-", "_") for k in raw} - KNOWN_KEYS
    if unknown:
        raise ConfigError(f"unknown settings {sorted(unknown)}; known are {sorted(KNOWN_KEYS)}")
    options = _get(raw, "strategy_options", {}) or {}
    if not isinstance(options, Mapping):
        raise ConfigError("strategy_options: give a table of NAME = VALUE")
    return SimConfig(
        strategy=str(_get(raw, "strategy", "p2c")),
        strategy_options=tuple((str(k), str(v)) for k, v in options.items()),
        servers=_groups(raw),
        requests=_int(raw, "requests", 10_000),
        arrivals=_arrivals(raw),
        scenario=str(_get(raw, "scenario", "sp+sr")),
        routing_keys=_int(raw, "routing_keys", 0),
        report_period=parse_duration(_get(raw, "report_period", 0.25), "report_period"),
        report_delay=parse_duration(_get(raw, "report_delay", 0.0), "report_delay"),
        client_delay=parse_duration(_get(raw, "client_delay", 0.0), "client_delay"),
        server_delay=parse_duration(_get(raw, "server_delay", 0.0), "server_delay"),
        deadline=_duration_or_none(_get(raw, "deadline", 30.0), "deadline"),
        max_tries=_int(raw, "max_tries", 3),
        picks_every=_int(raw, "picks_every", 1),
        tick_period=parse_duration(_get(raw, "tick_period", 0.1), "tick_period"),
        seed=_int(raw, "seed", 1),
        replication=_int(raw, "replication", 0),
        run_id=str(_get(raw, "run_id", "sim")),
    )


def rng_stream(seed: int, replication: int, name: str) -> random.Random:
    """One independent random stream per purpose (str seeds hash stably across runs)."""
    return random.Random(f"lblab-sim:{seed}:{replication}:{name}")
