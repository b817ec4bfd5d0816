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

import math
import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lblab.balancer.aperture import (
    MIN_APERTURE,
    MIN_DETERMINISTIC_APERTURE,
    ApertureConfig,
    check_mode,
)
from lblab.balancer.health import HealthConfig
from lblab.balancer.health_options import health_config
from lblab.config import (
    MAX_DURATION,
    MAX_SEED,
    check_id,
    check_range,
    check_weight,
    parse_duration,
    parse_float,
    parse_int,
)
from lblab.errors import ConfigError
from lblab.experiment.runconfig import MAX_SIMULATED_BALANCERS as MAX_BALANCERS
from lblab.experiment.spikes import Spike, check_spikes
from lblab.servers.defaults import DRAIN_TIMEOUT_S
from lblab.servers.slowdown import Control
from lblab.simulator.service import ServiceModel, parse_service
from lblab.simulator.workload import (
    Arrivals,
    Cell,
    ClosedUsers,
    OpenArrivals,
    TraceArrivals,
    scenario_cells,
)
from lblab.traces import BUILTIN_TRACES, TraceWindow

DEFAULT_HEALTH = HealthConfig()

MAX_SERVERS = 100_000
MAX_WORKERS = 10_000
MAX_REQUESTS = 1_000_000_000
MAX_ROUTING_KEYS = 1_000_000
"""Past these a run would not finish (or not fit in memory): a typo, not an experiment."""
MIN_PERIOD = 0.001
"""Shortest agent or health period (1 ms): shorter ones only add events (and below the
clock's 1 ns grid one would never advance the clock)."""
MAX_SIM_SECONDS = MAX_DURATION
"""Longest simulated span: a week, the longest duration any lblab setting takes."""
MAX_CPU_ROWS = 10_000_000
"""Most agent samples (cpu rows: servers x span / report period), about a gigabyte."""
PROBE_COST_S = 40e-6
"""Server CPU per probe (``prequal``), measured on ``lblab server`` on this 2-core VM:
10,000 probes on one connection, 1 or 3 in flight, cost 44 and 32 us of the server
process's CPU (user + system from ``/proc/PID/stat``) per probe answered: decoding,
answering and the socket calls, all on the event loop."""

SIMULATED_ACTIONS = (
    "kill", "drain", "restart", "slow", "pause", "resume", "add", "remove",
    "fail", "reject", "cold", "capacity",
)  # fmt: skip
"""The timeline events of a server the simulator runs (``ServerEvent``); a ``spike`` is
of the load (``SimConfig.spikes``)."""

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
    cpu_quota: float | None = None
    """Cores a cgroup lets each server use per ``quota_period`` (``simulator.quota``); the
    service model then gives CPU demand at full speed (None: no quota)."""
    quota_period: float = 0.1
    serial_cpu: bool = False
    """A live server's slots (``simulator.slot``): the workers' CPU work runs one request
    at a time, on at most one core (Python's GIL), under ``cpu_quota`` if given (any
    value: a quota of a core or more never binds a serial CPU, but is the agent's
    allowance); the agent reads the CPU used, not the busy workers."""
    sleep: ServiceModel | None = None
    """Slept in the slot after each request's work, as a live server's ``delay_ms`` and
    ``delay_dist`` are: it holds the slot and takes no CPU (None: none). Needs
    ``serial_cpu``, whose books tell the CPU from the sleep."""

    def __post_init__(self) -> None:
        if self.sleep is not None and not self.serial_cpu:
            raise ConfigError("lblab.servers.sleep: a slept slot needs serial_cpu")
        check_range("lblab.servers.count", self.count, minimum=1, maximum=MAX_SERVERS)
        check_range("lblab.servers.workers", self.workers, minimum=1, maximum=MAX_WORKERS)
        check_range("lblab.servers.speed", self.speed, minimum=1e-3, maximum=1e6)
        check_range("lblab.servers.weight", self.weight, above=0, maximum=1e6)
        if self.capacity is not None:
            check_range("lblab.servers.capacity", self.capacity, minimum=1)
        if self.delay is not None:
            check_range("lblab.servers.delay", self.delay, minimum=0)
        if self.cpu_quota is not None:
            check_range("lblab.servers.cpu_quota", self.cpu_quota, above=0, maximum=MAX_WORKERS)
        check_range("lblab.servers.quota_period", self.quota_period, above=0, maximum=10)

    @property
    def slot_mean_s(self) -> float:
        """A request's mean time in a worker at full speed: its work and its sleep."""
        return self.service.mean_s + (0.0 if self.sleep is None else self.sleep.mean_s)


@dataclass(frozen=True, slots=True)
class ServerEvent:
    """A live run's timeline event, in the simulator (``simulator.run``): at ``at``
    simulated seconds, ``kill`` the server (its balancers lose their connections and
    reconnect with the live backoff), ``drain`` it (SIGTERM: it refuses new requests,
    finishes the others and exits), ``restart`` it, ``slow`` it (every service time
    times ``factor`` plus ``add_ms`` from then on; 1 and 0 undo it), ``pause`` it
    (SIGSTOP: alive, connected and silent), ``resume`` it, ``remove`` it from the pools
    (its requests finish, then it is drained) or ``add`` it (with ``weight``); ``fail``,
    ``reject``, ``cold`` and ``capacity`` apply ``control`` as the live server does
    (``servers/behaviour.py``; a capacity needs the server's ``CpuQuota``)."""

    at: float
    action: str
    server: str
    factor: float = 1.0
    add_ms: float = 0.0
    weight: float = 1.0
    control: Control | None = None

    def __post_init__(self) -> None:
        if self.action not in SIMULATED_ACTIONS:
            raise ConfigError(
                f"timeline: {self.action!r} is not simulated; the simulator runs "
                f"{', '.join(SIMULATED_ACTIONS)}"
            )
        check_range("timeline.at", self.at, minimum=0, maximum=MAX_SIM_SECONDS)
        check_range("timeline.factor", self.factor, minimum=1.0, maximum=1000.0)
        check_range("timeline.add_ms", self.add_ms, minimum=0.0, maximum=3_600_000.0)
        check_weight(self.weight, "timeline.weight")


@dataclass(frozen=True, slots=True, kw_only=True)
class SimConfig:
    strategy: str = "p2c"
    strategy_options: tuple[tuple[str, str], ...] = ()
    servers: tuple[ServerGroup, ...]
    requests: int = 10_000
    """Requests sent; with a ``duration``, the most it may send."""
    duration: float | None = None
    """Send for this many simulated seconds, as a live phase does, then answer what is in
    flight (None: send ``requests``). Not for traces, which send their own count."""
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
    probe_cost: float = PROBE_COST_S
    """Server CPU seconds one probe takes from the work (``simulator.model``, ``charge``)."""
    health: HealthConfig = DEFAULT_HEALTH
    """The pools' health policy (ejection, panic, success rate, slow start), as a live
    balancer's ``[health]`` flags give it."""
    balancers: int = 1
    """Independent balancers in front of the same servers, each with its own pool and
    strategy; the load is split among them (``simulator.run``, "Many balancers")."""
    aperture: ApertureConfig | None = None
    """Each balancer's pool holds only its aperture's servers (``balancer/aperture.py``;
    None: every balancer over every server, the full mesh)."""
    seed: int = 1
    replication: int = 1
    """Numbered from 1, as a live run's (its random streams are ``stream_index``'s)."""
    run_id: str = "sim"
    server_ids: tuple[str, ...] = ()
    """The servers' names in order (empty: ``s1`` .. ``sN``), as a run's [[servers]] ids."""
    timeline: tuple[ServerEvent, ...] = ()
    """Events on the servers, as a live run's [[timeline]] (``SIMULATED_ACTIONS``)."""
    joins_later: tuple[str, ...] = ()
    """Servers out of the pools at the start: a timeline ``add`` brings them in."""
    spikes: tuple[Spike, ...] = ()
    """A live run's ``spike`` events: the arrivals times ``factor`` (``experiment/spikes.py``)."""
    drain_timeout: float = DRAIN_TIMEOUT_S
    """How long a draining server finishes its requests before it exits anyway."""

    def __post_init__(self) -> None:
        from lblab.balancer.strategies.options import build_config
        from lblab.balancer.strategies.registry import strategy_class

        # The strategy is built per replication by the run; check its name and options now.
        build_config(
            strategy_class(self.strategy).Config, dict(self.strategy_options), self.strategy
        )
        if not self.servers:
            raise ConfigError("servers: at least one server is needed")
        if self.server_count > MAX_SERVERS:
            raise ConfigError(f"servers: {self.server_count} in all; give at most {MAX_SERVERS}")
        check_range("requests", self.requests, minimum=1, maximum=MAX_REQUESTS)
        if isinstance(self.balancers, bool) or not isinstance(self.balancers, int):
            raise ConfigError(f"balancers: {self.balancers!r} is not a whole number")
        check_range("balancers", self.balancers, minimum=1, maximum=MAX_BALANCERS)
        check_range("seed", self.seed, minimum=0, maximum=MAX_SEED)
        check_range("replication", self.replication, minimum=1, maximum=MAX_SEED)
        for name in ("report_period", "tick_period"):
            check_range(name, getattr(self, name), minimum=MIN_PERIOD)
        check_range("probe_cost", self.probe_cost, minimum=0, maximum=1)
        if self.deadline is not None:
            check_range("deadline", self.deadline, above=0, maximum=MAX_SIM_SECONDS)
        if self.server_ids:
            if len(self.server_ids) != self.server_count or len(set(self.server_ids)) != len(
                self.server_ids
            ):
                raise ConfigError(
                    f"server_ids: {len(self.server_ids)} names for {self.server_count} servers; "
                    "give one distinct name per server, in order"
                )
            for name in self.server_ids:
                check_id(name, "server_ids")
        check_spikes(self.spikes)
        if self.aperture is not None and self.aperture.load_band and self.timeline:
            raise ConfigError(
                "aperture_load_band: a load-banded window moves servers in and out of the "
                "pools, which lblab does not combine with timeline events (a server the "
                "window takes back would come back up in the pool); run it without a "
                "timeline"
            )
        if self.aperture is not None and (
            self.joins_later or any(e.action in ("add", "remove") for e in self.timeline)
        ):
            raise ConfigError(
                "aperture: the subsets are taken once over the configured servers; a server "
                "that joins or leaves would need them rebuilt (Finagle rebuilds on every "
                "change), which lblab does not do: leave out joins_later and add/remove"
            )
        for name in self.joins_later:
            if name not in self.server_names:
                raise ConfigError(f"joins_later: {name!r} is not one of the servers")
        for event in self.timeline:
            if event.server not in self.server_names:
                raise ConfigError(
                    f"timeline: {event.server!r} is not one of the servers "
                    f"{list(self.server_names)}"
                )
        if self.duration is not None:
            if isinstance(self.arrivals, TraceArrivals):
                raise ConfigError(
                    "duration: a trace sends its own requests; give requests (or none), not "
                    "a duration"
                )
            check_range("duration", self.duration, above=0, maximum=self.horizon)
        if not self.cells and not isinstance(self.arrivals, TraceArrivals):
            object.__setattr__(self, "cells", scenario_cells(self.scenario))
        if isinstance(self.arrivals, TraceArrivals) and not self.arrivals.window.loop:
            held = len(self.arrivals.schedule)
            if self.requests > held:
                raise ConfigError(
                    f"requests: {self.requests}, but the trace's window holds {held} and does "
                    f"not loop; give requests <= {held} or trace_loop = true"
                )
        span, why = self.least_span()
        if self.duration is None and span > self.horizon:
            raise ConfigError(
                f"{self.requests} requests take at least {span:.3g} simulated seconds ({why}); "
                f"{self.horizon_rule()}: raise the rate, lower think or service times, or "
                "send fewer requests"
            )

    @property
    def horizon(self) -> float:
        """The longest simulated span this run may have (``MAX_SIM_SECONDS``, or less
        where its agent samples would pass ``MAX_CPU_ROWS``); the run stops with a
        ``ConfigError`` past it, and a config whose ``least_span`` passes it is refused."""
        return min(MAX_SIM_SECONDS, MAX_CPU_ROWS * self.report_period / self.server_count)

    def horizon_rule(self) -> str:
        """Why the horizon is where it is, for the message that refuses a run."""
        if self.horizon == MAX_SIM_SECONDS:
            return f"a simulation spans at most a week ({MAX_SIM_SECONDS:g} s)"
        return (
            f"{self.server_count} servers sampled every {self.report_period:g} s may span "
            f"at most {self.horizon:.3g} s ({MAX_CPU_ROWS:,} samples)"
        )

    def least_span(self) -> tuple[float, str]:
        """Simulated seconds the run lasts at least, and why: its arrivals' span (the
        mean gaps between sends), or the work its servers do at full speed."""
        arrivals = self.arrivals
        if isinstance(arrivals, OpenArrivals):
            sending = (self.requests - 1) / arrivals.rate
            why = f"sent at {arrivals.rate:g} per second"
        elif isinstance(arrivals, TraceArrivals):
            sending = arrivals.schedule.due(self.requests - 1)
            why = f"the trace replayed at {arrivals.schedule.rate:g} per second"
        else:
            sending = max(self.requests / arrivals.users - 1, 0) * arrivals.think
            why = f"{arrivals.users} users thinking {arrivals.think:g} s"
        per_second = sum(
            g.count * g.workers * g.speed / g.slot_mean_s if g.slot_mean_s > 0 else math.inf
            for g in self.servers
        )
        working = self.requests / per_second
        if working > sending:
            return working, f"served at most {per_second:.3g} per second"
        return sending, why

    @property
    def server_count(self) -> int:
        return sum(g.count for g in self.servers)

    @property
    def server_names(self) -> tuple[str, ...]:
        return self.server_ids or tuple(f"s{i + 1}" for i in range(self.server_count))

    def describe(self) -> dict[str, Any]:
        """The config as plain JSON-able data (for the manifest)."""
        out = asdict(self)
        out["servers"] = [
            {**asdict(g), "service": g.service.spec(), "sleep": g.sleep and g.sleep.spec()}
            for g in self.servers
        ]  # the spec string is what a person can re-type
        out["arrivals"] = {"model": type(self.arrivals).__name__, **asdict(self.arrivals)}
        out["strategy_options"] = dict(self.strategy_options)
        return out


def _get(raw: Mapping[str, Any], key: str, default: Any = None) -> Any:
    return raw.get(key, raw.get(key.replace("_", "-"), default))


def _int(raw: Mapping[str, Any], key: str, default: int) -> int:
    return parse_int(_get(raw, key, default), key)


def _duration_or_none(value: Any, key: str) -> float | None:
    if value is None or (isinstance(value, str) and value.lower() in {"none", "off", ""}):
        return None
    return parse_duration(value, key)


def _groups(raw: Mapping[str, Any]) -> tuple[ServerGroup, ...]:
    groups = _get(raw, "servers", 3)
    workers = _int(raw, "workers", 1)
    service = parse_service(str(_get(raw, "service", "exp:10ms")))
    if isinstance(groups, int | str) and not isinstance(groups, bool):
        count = parse_int(groups, "servers", minimum=1)
        return (ServerGroup(count=count, service=service, workers=workers),)
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
        where = f"servers[{i}]"
        out.append(
            ServerGroup(
                count=parse_int(g.get("count", 1), f"{where}.count"),
                service=parse_service(str(g["service"])) if "service" in g else service,
                workers=parse_int(g.get("workers", workers), f"{where}.workers"),
                speed=parse_float(g.get("speed", 1.0), f"{where}.speed"),
                weight=parse_float(g.get("weight", 1.0), f"{where}.weight"),
                capacity=parse_int(g["capacity"], f"{where}.capacity") if "capacity" in g else None,
                delay=parse_duration(g["delay"], f"{where}.delay") if "delay" in g else None,
            )
        )
    return tuple(out)


def _arrivals(raw: Mapping[str, Any]) -> Arrivals:
    rate, users = _get(raw, "rate"), _get(raw, "users")
    if rate is not None and users is not None:
        raise ConfigError("give either rate (open arrivals) or users (closed), not both")
    trace = _trace(raw)
    if trace is not None:
        if users is not None:
            raise ConfigError("a trace gives the send times: give rate (0: its own), not users")
        rate = parse_float(0.0 if rate is None else rate, "rate", minimum=0, maximum=1e9)
        return TraceArrivals(trace, rate)
    if users is not None:
        return ClosedUsers(
            users=parse_int(users, "users", minimum=1, maximum=MAX_REQUESTS),
            think=parse_duration(_get(raw, "think", 0), "think"),
            exponential_think=bool(_get(raw, "exponential_think", False)),
        )
    value = parse_float(1000.0 if rate is None else rate, "rate", above=0, maximum=1e9)
    return OpenArrivals(rate=value, poisson=bool(_get(raw, "poisson", True)))


def _trace(raw: Mapping[str, Any]) -> TraceWindow | None:
    """``trace`` (a file or built-in name; a built-in trace scenario names its own) and
    its window, ``trace_start``, ``trace_length`` (0: to the end), ``trace_loop``."""
    scenario = _get(raw, "scenario")
    source = _get(raw, "trace") or (scenario if scenario in BUILTIN_TRACES else None)
    if source is None:
        return None
    length = parse_duration(_get(raw, "trace_length", 0), "trace_length")
    loop = _get(raw, "trace_loop", False)
    if not isinstance(loop, bool):
        raise ConfigError(f"trace_loop: {loop!r} is not true or false")
    return TraceWindow(
        source=str(source),
        start=parse_duration(_get(raw, "trace_start", 0), "trace_start"),
        length=length or None,
        loop=loop,
    )


KNOWN_KEYS = {
    "strategy", "strategy_options", "servers", "workers", "service", "requests", "duration",
    "rate",
    "poisson", "users", "think", "exponential_think", "scenario", "routing_keys",
    "trace", "trace_start", "trace_length", "trace_loop",
    "report_period", "report_delay", "client_delay", "server_delay", "deadline",
    "max_tries", "picks_every", "tick_period", "probe_cost", "balancers", "seed", "replication",
    "run_id", "health", "aperture", "aperture_size", "aperture_load_band",
}  # fmt: skip


def config_from_mapping(raw: Mapping[str, Any]) -> SimConfig:
    """Build a ``SimConfig`` from TOML-style data (string durations, service specs)."""
    unknown = {k.replace("-", "_") for k in raw} - KNOWN_KEYS
    if unknown:
        raise ConfigError(f"unknown settings {sorted(unknown)}; known are {sorted(KNOWN_KEYS)}")
    options = _get(raw, "strategy_options", {}) or {}
    if not isinstance(options, Mapping):
        raise ConfigError("strategy_options: give a table of NAME = VALUE")
    health = _get(raw, "health", {})
    if not isinstance(health, Mapping):
        raise ConfigError("health: give a table of health options (HEALTH_OPTIONS)")
    arrivals = _arrivals(raw)
    duration = _duration_or_none(_get(raw, "duration"), "duration")
    # With a duration the count only caps the run (unless given, it does not).
    requests, named = (10_000 if duration is None else MAX_REQUESTS), "sp+sr"
    if isinstance(arrivals, TraceArrivals):  # unless told: one pass, under the trace's name
        requests, named = len(arrivals.schedule), Path(arrivals.window.source).name.split(".")[0]
    return SimConfig(
        strategy=str(_get(raw, "strategy", "p2c")),
        strategy_options=tuple((str(k), str(v)) for k, v in options.items()),
        servers=_groups(raw),
        requests=_int(raw, "requests", requests),
        duration=duration,
        arrivals=arrivals,
        scenario=str(_get(raw, "scenario", named)),
        report_period=parse_duration(_get(raw, "report_period", 0.25), "report_period"),
        deadline=_duration_or_none(_get(raw, "deadline", 30.0), "deadline"),
        tick_period=parse_duration(_get(raw, "tick_period", 0.1), "tick_period"),
        probe_cost=parse_duration(_get(raw, "probe_cost", PROBE_COST_S), "probe_cost"),
        balancers=_int(raw, "balancers", 1),
        **simulator_knobs(raw),
        seed=_int(raw, "seed", 1),
        replication=_int(raw, "replication", 1),
        run_id=str(_get(raw, "run_id", "sim")),
        health=health_config(health),
    )


def simulator_knobs(raw: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``SimConfig``'s keywords for the knobs only a simulation has
    (``experiment.config_layers.SIMULATOR_KEYS``: an experiment file's ``[simulator]``
    table, the same keys in this dialect), each at its default unless ``raw`` gives it,
    checked here (the one place) and named ``prefix`` + key in an error."""

    def whole(key: str, default: int, most: int, least: int = 0) -> int:
        value = parse_int(_get(raw, key, default), prefix + key)
        check_range(prefix + key, value, minimum=least, maximum=most)
        return value

    def delay(key: str) -> float:
        value = parse_duration(_get(raw, key, 0.0), prefix + key)
        check_range(prefix + key, value, minimum=0, maximum=MAX_SIM_SECONDS)
        return value

    return {
        "routing_keys": whole("routing_keys", 0, MAX_ROUTING_KEYS),
        "report_delay": delay("report_delay"),
        "client_delay": delay("client_delay"),
        "server_delay": delay("server_delay"),
        "max_tries": whole("max_tries", 3, 100, least=1),
        "picks_every": whole("picks_every", 1, MAX_REQUESTS),
        "aperture": _aperture(raw, prefix),
    }


def _aperture(raw: Mapping[str, Any], prefix: str) -> ApertureConfig | None:
    """``aperture = "deterministic" | "random" | "none"``, ``aperture_size`` (default 12,
    Finagle's minimum deterministic aperture) and ``aperture_load_band`` (a random one
    sized by load; ``aperture_size`` is then its least size, default 1, Finagle's
    ``minAperture``)."""
    mode = _get(raw, "aperture", "none")
    band = _get(raw, "aperture_load_band", False)
    if not isinstance(band, bool):
        raise ConfigError(f"{prefix}aperture_load_band: {band!r} is not true or false")
    default = MIN_APERTURE if band else MIN_DETERMINISTIC_APERTURE
    size = parse_int(_get(raw, "aperture_size", default), prefix + "aperture_size")
    if mode in ("none", "", None):
        if _get(raw, "aperture_size") is not None or band:
            raise ConfigError(
                f"{prefix}aperture_size, {prefix}aperture_load_band: give "
                f"{prefix}aperture = 'deterministic' or 'random' too"
            )
        return None
    if band and mode == "deterministic":
        raise ConfigError(
            f"{prefix}aperture_load_band: Finagle sizes only a random aperture by load (its "
            f"deterministic one is fixed); give {prefix}aperture = 'random'"
        )
    check_mode(str(mode), size, prefix + "aperture", prefix + "aperture_size")
    return ApertureConfig(mode=mode, size=size, load_band=band)


def stream_index(replication: int) -> int:
    """The random streams' index of a replication: replication 1 draws what the
    simulator drew for its replication 0 before replications were numbered from 1."""
    return replication - 1


def rng_stream(seed: int, replication: int, name: str) -> random.Random:
    """One independent random stream per purpose (str seeds hash stably across runs)."""
    return random.Random(f"lblab-sim:{seed}:{replication}:{name}")
