"""The experiment's configuration: built-in defaults <- preset <- config file <- flags.

Every layer is a plain TOML-shaped dict (``config_layers``: the defaults, merging);
``resolve`` merges them (tables merge key by key, everything else replaces) and checks
the result once into frozen dataclasses, so a bad value is a ``ConfigError`` naming the
field before any process starts. Each table becomes its dataclass (``from_table``), which
checks itself in ``__post_init__``; ``RunConfig`` checks the rules across tables and
builds every strategy it names through the balancer's registry, so a misspelt strategy
option stops the run at load. ``to_toml`` prints the resolved config in the same shape,
so ``--print-config > my.toml`` gives a file that ``--config my.toml`` reproduces exactly.

Shape (every key optional; ``experiment/presets/*.toml`` are examples)::

    preset = "quick"                       # start from a preset (a config file may say it)
    [run]      name, strategies, scenarios, duration, warmup, replications, seed,
               max_replications, budget, equivalence (adaptive blocks),
               metrics (the answer's metrics; empty: the headline ones),
               request_timeout, locust_workers, out,
               locust_master_bind = "HOST[:PORT]", expect_workers  (workers on other hosts)
    [load]     model = "closed"|"open"|"trace", users, spawn_rate, think_time = [min, max],
               rate, arrival = "constant"|"poisson", count,
               trace, trace_start, trace_length, trace_loop   (the trace model)
    [testbed]  kind = "local"|"external"|"simulated", balancer = "HOST:PORT",
               admin = "HOST:PORT", agent_interval, balancer_args = [...],
               isolation = "auto"|"cpuset"|"affinity"|"off", harness_cpus (0: a third),
               balancers (independent balancer nodes: local 1..16, simulated 1..1024),
               service (simulated: the servers' service model, e.g. "json:a=0ms,b=7e-8,c=3e-9"
               from `lblab calibrate`; "" : this machine's, DEFAULT_SIMULATED_SERVICE)
    [[servers]]           id, cpu_quota, workers, delay_ms, delay_dist, max_inflight;
                          count = N: N such servers <id>1 .. <id>N; simulated only:
                          service (a queue server: its own service model), speed,
                          server_delay (QUEUE_SERVER_KEYS)
    [weights]             s1 = 1, ... (a group's id weighs each of its members)
    [health]              the balancers' health policy: eject_after, eject_base, eject_max,
                          panic_threshold, success_rate_*, slow_start_window,
                          slow_start_aggression, slow_start_min_weight (HEALTH_OPTIONS in
                          balancer/health_options.py: `lblab balancer`'s flags of those names)
    [strategy_options.lc] tie = "random"
    [strategy_specs]      NAME = "path/to/file.py:Class" (a strategy of your own; run.strategies
                          may also give the spec itself, and options as "p2c[choice_count=3]")
    [scenario_defs.NAME]  cells = ["sp+sr", ...] or [[...cells]] name/package/work,
                          or no cells and trace = "FILE" (a trace scenario),
                          plus any [load] key to override for this scenario
    [[timeline]]          at, action (ACTIONS), server (not for spike), scenarios = [...]
                          (default: all), and the action's keys (TIMELINE_KEYS): for add:
                          cpu_quota, weight...; slow: factor, add_ms; fail: rate, delay_ms;
                          reject: limit, burst; cold: factor, duration; capacity: cpu_quota;
                          spike: factor, duration; slow, pause, fail, reject: duration
    [simulator]           the simulated testbed's own knobs (SIMULATOR_KEYS: client_delay,
                          server_delay, report_delay, max_tries, routing_keys, picks_every,
                          aperture, aperture_size, aperture_load_band); a live testbed
                          refuses them: a file for both gives them in [simulated.simulator]
    [simulated]           any of the sections above: a layer over this file's own on the
                          simulated testbed (e.g. more servers where a case is about scale)
    [scorecard]           title, source, tests, headline: what a scenario of `lblab
                          scorecard`'s library is (recorded; it changes nothing in a run)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from lblab.balancer.health import HealthConfig
from lblab.balancer.health_options import DEFAULTS as HEALTH_DEFAULTS
from lblab.balancer.health_options import health_config, health_flags
from lblab.config import (
    MAX_DURATION,
    MAX_SEED,
    check_id,
    check_range,
    check_weight,
    parse_duration,
    parse_float,
    parse_hostport,
    parse_int,
    parse_size,
    split_commas,
)
from lblab.errors import ConfigError
from lblab.experiment.config_layers import DEFAULTS, SIMULATED, check_keys, merge
from lblab.experiment.spikes import MAX_SPIKE_FACTOR, Spike, check_spikes
from lblab.experiment.toml_writer import dumps_toml
from lblab.scenarios import (
    CELLS,
    TRACE_SCENARIOS,
    Cell,
    Scenario,
    builtin_scenario,
)
from lblab.servers.behaviour import (
    MAX_COLD_FACTOR,
    MAX_COLD_S,
    MAX_FAIL_DELAY_MS,
    MAX_LIMIT,
    ColdStart,
    Failing,
    RateLimit,
)
from lblab.servers.slowdown import Control, Slowdown
from lblab.servers.work import MAX_WORK_BYTES
from lblab.traces import BUILTIN_TRACES, TraceWindow, schedule
from lblab.wire.codes import MAX_FRAME_LENGTH


class TestbedKind(StrEnum):
    """What runs a run's phases (``[testbed] kind``; the composition root,
    ``lblab/app/testbeds.py``, makes the driver for it)."""

    LOCAL = "local"
    """Processes started here, a headless Locust per phase (``loadtests/``)."""
    EXTERNAL = "external"
    """A balancer someone else runs (the ansible roles'), a headless Locust per phase."""
    SIMULATED = "simulated"
    """A simulation per phase (``simulator/``)."""


TESTBEDS = tuple(kind.value for kind in TestbedKind)
ISOLATION_METHODS = ("auto", "cpuset", "affinity", "off")
"""How a local testbed keeps servers and harness on their own CPUs (``testbed.isolation``)."""
MODELS = ("closed", "open", "trace")
"""The load models (``load.model``): Locust users, open-loop arrivals, a trace's arrivals."""
ARRIVALS = ("constant", "poisson")
"""The open model's inter-arrival times (``load.arrival``)."""
DEFAULT_SIMULATED_SERVICE = "json:a=0ms,b=6.73e-8,c=2.65e-9"
"""What a simulated server's request costs unless ``[testbed] service`` says: the JSON
cost model ``lblab calibrate`` fitted (service_ms of every ok request in the window) to
the server with a whole CPU of a measured run on this 2-core VM (2026-11-26: 79,243
requests, R^2 0.886; medians 0.39 ms at 10 kB of work, 4.6 ms at 100 kB, 66 ms at
1 MB). Calibrate your own machine with ``lblab calibrate RUN``."""
ACTIONS = (
    "kill", "restart", "drain", "add", "remove", "slow", "pause", "resume",
    "fail", "reject", "cold", "capacity", "spike",
)  # fmt: skip
DEFAULT_MASTER_PORT = 5557  # Locust's own default master port
# Bounds past which a value is a typo, not an experiment (10^12 users is not a plan).
MAX_USERS = 100_000
MAX_RATE = 1_000_000.0  # requests/s
MAX_COUNT = 1_000_000_000
MAX_REPLICATIONS = 1000
MAX_LOCUST_WORKERS = 256
MAX_REQUEST_TIMEOUT = 3600.0  # the balancer's own bound (balancer/node.py)


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadConfig:
    model: str = "closed"
    users: int = 50
    spawn_rate: float = 10.0
    think_time: tuple[float, float] = (0.0, 0.0)
    rate: float = 0.0
    arrival: str = "constant"
    count: int = 0
    """This many requests instead of a duration (0: by duration); the closed model's
    only on the simulated testbed."""
    trace: str = ""
    """trace model: what it replays, a built-in trace (azure-code, azure-conv) or a CSV
    file (time_s or timestamp, package_bytes, work_bytes); rate = R time-scales the
    replay to a mean of R requests/s (0: the trace's own pace)"""
    trace_start: float = 0.0
    """trace model: seconds into the trace (from its first request) where the replay starts"""
    trace_length: float = 0.0
    """trace model: seconds of trace replayed from trace_start (0: to its end)"""
    trace_loop: bool = False
    """trace model: at the end of the window start it again; false: the phase ends there
    (or at run.duration, whichever comes first)"""

    def __post_init__(self) -> None:
        _one_of("load.model", self.model, MODELS)
        _one_of("load.arrival", self.arrival, ARRIVALS)
        check_range("load.users", self.users, minimum=1, maximum=MAX_USERS)
        check_range("load.spawn_rate", self.spawn_rate, above=0, maximum=MAX_USERS)
        lo, hi = self.think_time
        if not 0 <= lo <= hi:
            raise ConfigError(f"load.think_time: {list(self.think_time)} needs 0 <= min <= max")
        check_range("load.rate", self.rate, minimum=0, maximum=MAX_RATE)
        if self.model == "open" and self.rate <= 0:
            raise ConfigError("load.rate: the open model needs a rate above 0 requests/s")
        check_range("load.count", self.count, minimum=0, maximum=MAX_COUNT)
        if self.model == "open" and self.count and self.count / self.rate > MAX_DURATION:
            raise ConfigError(
                f"load: {self.count} requests at {self.rate:g}/s take {self.count / self.rate:.3g} "
                f"s; a phase lasts at most a week ({MAX_DURATION:g} s): raise load.rate or "
                "lower load.count"
            )
        if self.model == "trace":
            self._check_trace()

    @property
    def window(self) -> TraceWindow | None:
        """What the trace model replays (None for the other models)."""
        if self.model != "trace":
            return None
        if not self.trace:
            raise ConfigError(
                "load.trace: the trace model needs a trace: a built-in one "
                f"({', '.join(BUILTIN_TRACES)}) or a CSV file (time_s or timestamp, "
                "package_bytes, work_bytes)"
            )
        return TraceWindow(
            source=self.trace,
            start=self.trace_start,
            length=self.trace_length or None,
            loop=self.trace_loop,
        )

    def _check_trace(self) -> None:
        """The trace is read and its window scaled now, so a bad file or window stops the
        run at its start; its sizes must be ones a request can carry."""
        assert self.window is not None
        replay = schedule(self.window, self.rate)
        where = f"load.trace {self.trace}"
        if max(replay.packages) > MAX_FRAME_LENGTH - 1024:
            raise ConfigError(
                f"{where}: a request of {max(replay.packages)} package bytes is more than a "
                f"frame carries ({MAX_FRAME_LENGTH - 1024}); scale the trace's sizes down"
            )
        if max(replay.works) > MAX_WORK_BYTES:
            raise ConfigError(
                f"{where}: a request of {max(replay.works)} work bytes is more than a server "
                f"takes ({MAX_WORK_BYTES}); scale the trace's sizes down"
            )
        if self.count and not self.trace_loop and self.count > len(replay):
            raise ConfigError(
                f"load.count: {self.count} requests, but the trace's window holds "
                f"{len(replay)} and does not loop; give count <= {len(replay)} or "
                "trace_loop = true"
            )
        if self.count and replay.due(self.count - 1) > MAX_DURATION:
            raise ConfigError(
                f"load: {self.count} requests of the trace at {replay.rate:g}/s take "
                f"{replay.due(self.count - 1):.3g} s; a phase lasts at most a week "
                f"({MAX_DURATION:g} s): raise load.rate or lower load.count"
            )

    def facts(self) -> dict[str, Any]:
        """The load model as a phase's manifest entry records it (``count`` aside)."""
        out = {
            "model": self.model,
            "users": self.users,
            "spawn_rate": self.spawn_rate,
            "think_time": list(self.think_time),
            "rate": self.rate,
            "arrival": self.arrival,
        }
        window = self.window
        if window is not None:
            replay = schedule(window, self.rate)
            out |= {
                "trace": self.trace,
                "trace_start": self.trace_start,
                "trace_length": self.trace_length,
                "trace_loop": self.trace_loop,
                "trace_requests": len(replay),
                "trace_own_rate": replay.native_rate,
                "trace_rate": replay.rate,
            }
        return out

    @classmethod
    def from_table(cls, raw: Mapping[str, Any], where: str) -> LoadConfig:
        """A [load] table (or a scenario's, with its overrides merged in)."""
        think = raw.get("think_time", [0, 0])
        if isinstance(think, int | float | str):
            think = [think, think]
        if not isinstance(think, list) or len(think) != 2:
            raise ConfigError(f"{where}.think_time: give [min, max] seconds, e.g. [0.5, 1.5]")
        return cls(
            model=raw.get("model", "closed"),
            users=parse_int(raw.get("users", 50), f"{where}.users", minimum=1),
            spawn_rate=parse_float(raw.get("spawn_rate", 10), f"{where}.spawn_rate"),
            think_time=(
                parse_duration(think[0], f"{where}.think_time"),
                parse_duration(think[1], f"{where}.think_time"),
            ),
            rate=parse_float(raw.get("rate", 0), f"{where}.rate"),
            arrival=raw.get("arrival", "constant"),
            count=parse_int(raw.get("count", 0), f"{where}.count"),
            trace=_trace_source(str(raw.get("trace", ""))),
            trace_start=parse_duration(raw.get("trace_start", 0), f"{where}.trace_start"),
            trace_length=parse_duration(raw.get("trace_length", 0), f"{where}.trace_length"),
            trace_loop=_bool(raw.get("trace_loop", False), f"{where}.trace_loop"),
        )


def _trace_source(source: str) -> str:
    """A built-in trace's name, or a file's absolute path (every Locust process of the
    run reads it, whatever its working directory)."""
    if not source or source in BUILTIN_TRACES:
        return source
    return str(Path(source).expanduser().resolve())


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: {value!r} is not true or false")
    return value


LIVE_SERVER_KEYS = ("cpu_quota", "workers", "delay_ms", "delay_dist", "max_inflight")
"""What a [[servers]] entry (or a timeline ``add``) gives that ``lblab server`` takes."""
QUEUE_SERVER_KEYS = ("service", "speed", "server_delay")
"""What only a simulated server has: ``service``, its own service model (``lblab
simulate --service``'s specs), makes it an abstract queue of ``workers`` parallel slots
(M/G/c) instead of a model of ``lblab server``; ``speed`` divides its service times;
``server_delay``, its one-way link delay (over ``[simulator] server_delay``). A live
testbed refuses them."""
SERVER_KEYS = (*LIVE_SERVER_KEYS, *QUEUE_SERVER_KEYS)
"""What a [[servers]] entry (or a timeline ``add``) may give besides its id."""
MAX_GROUP = 100_000
"""Most servers one ``count`` makes (the simulator's most servers; a local testbed
refuses more than its CPUs can hold before it starts any)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerSpec:
    id: str
    cpu_quota: float | None = None
    workers: int | None = None
    delay_ms: float | None = None
    delay_dist: str | None = None
    max_inflight: int | None = None
    service: str | None = None
    """A queue server's service model, a spec the simulated testbed parses
    (``QUEUE_SERVER_KEYS``); a queue server holds every request sent to it unless
    ``max_inflight`` caps it."""
    speed: float | None = None
    server_delay: float | None = None
    """Seconds, one way."""

    def __post_init__(self) -> None:
        if self.cpu_quota is not None:
            check_range(f"servers.{self.id}.cpu_quota", self.cpu_quota, above=0, maximum=64)
        if self.speed is not None:
            check_range(f"servers.{self.id}.speed", self.speed, minimum=1e-3, maximum=1e6)
        if self.service is None:
            self.check_here(cpu_quota=False)
            return
        if self.delay_ms:
            raise ConfigError(
                f"servers.{self.id}: delay_ms is slept in a live server's slot beside its "
                "work; a server with its own service model (a queue) has its whole slot time "
                "there: fold the sleep into service, or drop service"
            )
        if self.workers is not None:  # a queue's slots, not a live server's threads
            check_range(f"servers.{self.id}.workers", self.workers, minimum=1, maximum=10_000)

    @property
    def simulated_only(self) -> tuple[str, ...]:
        """The ``QUEUE_SERVER_KEYS`` this server gives."""
        return tuple(k for k in QUEUE_SERVER_KEYS if getattr(self, k) is not None)

    @classmethod
    def from_table(cls, raw: Any, where: str) -> ServerSpec:
        """One [[servers]] entry: an id and any of ``SERVER_KEYS``."""
        if not isinstance(raw, Mapping) or "id" not in raw:
            raise ConfigError(
                f'{where}: each server needs an id, e.g. {{id = "s1", cpu_quota = 0.25}}'
            )
        unknown = set(raw) - {"id", *SERVER_KEYS}
        if unknown:
            raise ConfigError(f"{where}: unknown server keys {sorted(unknown)}")

        def number(key: str, parse: Callable[..., Any], **bounds: Any) -> Any:
            return None if raw.get(key) is None else parse(raw[key], f"{where}.{key}", **bounds)

        return cls(
            id=check_id(str(raw["id"]), f"{where}.id"),
            cpu_quota=number("cpu_quota", parse_float),
            workers=number("workers", parse_int, minimum=1),
            delay_ms=number("delay_ms", parse_float, minimum=0, maximum=3_600_000),
            delay_dist=None if raw.get("delay_dist") is None else str(raw["delay_dist"]),
            max_inflight=number("max_inflight", parse_int, minimum=1, maximum=1_000_000),
            service=None if raw.get("service") is None else str(raw["service"]),
            speed=number("speed", parse_float),
            server_delay=number("server_delay", parse_duration),
        )

    def check_here(self, cpu_quota: bool = True) -> None:
        """The checks ``lblab server`` makes at its start on this host, made before it starts.

        The CPU quota is bounded by this host's CPUs, so it is checked only for servers
        this host runs (the local testbed).
        """
        from lblab.servers.server import ServerConfig

        names: tuple[str, ...] = ("workers", "delay_ms", "delay_dist", "max_inflight")
        names += ("cpu_quota",) if cpu_quota else ()
        given = {k: getattr(self, k) for k in names if getattr(self, k) is not None}
        try:
            ServerConfig(id=self.id, port=0, **given)
        except ConfigError as exc:
            raise ConfigError(f"servers.{self.id}: {exc}") from None

    def argv(self) -> list[str]:
        """``lblab server`` flags for this spec (id and port are the testbed's)."""
        out = []
        for flag, value in (
            ("--cpu-quota", self.cpu_quota),
            ("--workers", self.workers),
            ("--delay-ms", self.delay_ms),
            ("--delay-dist", self.delay_dist),
            ("--max-inflight", self.max_inflight),
        ):
            if value is not None:
                out += [flag, str(value)]
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class TimelineEvent:
    at: float
    action: str
    server: str
    scenarios: tuple[str, ...] = ()  # empty: every scenario
    spec: ServerSpec | None = None  # for "add" of a server not in [[servers]]
    weight: float = 1.0
    factor: float = 1.0  # slow: service time multiplied by this ...; cold, spike: theirs
    add_ms: float = 0.0  # ... plus this
    duration: float | None = None  # slow, pause, fail, reject: undone after this many
    # seconds; cold: eased over them; spike: lasts them
    rate: float = 0.0  # fail: share of requests failed ...
    delay_ms: float = 1.0  # ... each after this long
    limit: float = 0.0  # reject: requests/s admitted ...
    burst: float = 0.0  # ... with a bucket of this many (0: a tenth of a second's)
    cpu_quota: float | None = None  # capacity: the server's new CPU quota

    def __post_init__(self) -> None:
        check_range("timeline.at", self.at, minimum=0)
        check_weight(self.weight, f"timeline.{self.server}.weight")
        if self.duration is not None:
            check_range(f"timeline.{self.server}.duration", self.duration, above=0)

    def control(self) -> Control | None:
        """What a ``slow``, ``fail``, ``reject``, ``cold`` or ``capacity`` asks of its
        server (``servers/slowdown.py``); None for the other actions."""
        match self.action:
            case "slow":
                return Control(slow=Slowdown(self.factor, self.add_ms))
            case "fail":
                return Control(fail=Failing(self.rate, self.delay_ms))
            case "reject":
                return Control(reject=RateLimit(self.limit, self.burst))
            case "cold":
                return Control(cold=ColdStart(self.factor, self.duration or 0.0))
            case "capacity":
                return Control(cpu_quota=self.cpu_quota)
        return None

    def spike(self) -> Spike | None:
        if self.action != "spike":
            return None
        return Spike(self.at, self.duration or 0.0, self.factor)

    @classmethod
    def from_table(cls, raw: Any, where: str, servers: Collection[str]) -> TimelineEvent:
        """One [[timeline]] entry; ``servers`` are the ids of [[servers]] (an ``add`` of
        another id starts a new server on this host, from the entry's server keys)."""
        if not isinstance(raw, Mapping) or not {"at", "action"} <= set(raw):
            raise ConfigError(
                f'{where}: needs at, action and server, e.g. {{at = "10s", action = "kill", server = "s2"}}'
            )
        _one_of(f"{where}.action", raw["action"], ACTIONS)
        if raw["action"] == "spike":
            if "server" in raw:
                raise ConfigError(f"{where}.server: a spike is of the load, not of a server")
        elif "server" not in raw:
            raise ConfigError(
                f'{where}: needs at, action and server, e.g. {{at = "10s", action = "kill", server = "s2"}}'
            )
        server = str(raw.get("server", ""))
        spec = None
        if raw["action"] == "spike":
            pass
        elif raw["action"] == "add" and server not in servers:
            given = {k: v for k, v in raw.items() if k in SERVER_KEYS}
            spec = ServerSpec.from_table({"id": server, **given}, where)
            spec.check_here()  # an added server runs on this host
        elif server not in servers:
            raise ConfigError(
                f"{where}.server: {server!r} is not one of the servers {list(servers)}"
            )
        return cls(
            at=parse_duration(raw["at"], f"{where}.at"),
            action=raw["action"],
            server=server,
            scenarios=_names(f"{where}.scenarios", raw["scenarios"])
            if raw.get("scenarios")
            else (),
            spec=spec,
            weight=check_weight(raw.get("weight", 1.0), f"{where}.weight"),
            **_timed_fault(raw, where),
        )

    def applies_to(self, scenario: str) -> bool:
        return not self.scenarios or scenario in self.scenarios


MAX_BALANCERS = 16
"""Balancer nodes a local testbed starts at most (each is a process on the harness's CPUs)."""
MAX_SIMULATED_BALANCERS = 1024
"""Balancers a simulated testbed holds at most (each a pool and a strategy in memory)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TestbedConfig:
    kind: TestbedKind = TestbedKind.LOCAL
    balancer: tuple[str, int] | None = None
    admin: tuple[str, int] | None = None
    agent_interval: float = 0.25
    balancer_args: tuple[str, ...] = ()
    isolation: str = "auto"
    """How the local testbed keeps servers and harness on their own CPUs
    (``loadtests/isolation.py``)."""
    harness_cpus: int = 0
    """CPUs the harness gets under isolation; 0: a third of the machine, at least one."""
    balancers: int = 1
    """Independent balancer nodes of a local testbed (``b1`` .. ``bK``), each with its
    own pool and strategy state, the Locust users spread over them."""
    service: str = ""
    """A simulated testbed's service model (``simulator/service.py`` specs; empty:
    ``DEFAULT_SIMULATED_SERVICE``), checked by the simulator before the run starts."""

    def __post_init__(self) -> None:
        _one_of("testbed.kind", self.kind, TESTBEDS)
        object.__setattr__(self, "kind", TestbedKind(self.kind))
        _one_of("testbed.isolation", self.isolation, ISOLATION_METHODS)
        if self.kind == TestbedKind.EXTERNAL and self.balancer is None:
            raise ConfigError(
                "testbed.kind = external needs testbed.balancer = HOST:PORT (or --balancer)"
            )
        # The agent's own bounds (servers/agent.py, --interval); a simulated agent's are
        # the simulator's (its shortest period, and the longest span).
        if self.kind == TestbedKind.SIMULATED:
            bounds = {"minimum": 0.001, "maximum": MAX_DURATION}
        else:
            bounds = {"minimum": 0.01, "maximum": 60}
        check_range("testbed.agent_interval", self.agent_interval, **bounds)
        most = MAX_SIMULATED_BALANCERS if self.kind == TestbedKind.SIMULATED else MAX_BALANCERS
        check_range("testbed.balancers", self.balancers, minimum=1, maximum=most)
        if self.kind == TestbedKind.EXTERNAL and self.balancers != 1:
            raise ConfigError(
                "testbed.balancers: an external testbed is the balancer someone else runs; "
                "start several with testbed.kind = local, or drop testbed.balancers"
            )

    @classmethod
    def from_table(cls, raw: Mapping[str, Any]) -> TestbedConfig:
        def address(key: str) -> tuple[str, int] | None:
            return parse_hostport(raw[key], f"testbed.{key}") if raw.get(key) else None

        return cls(
            kind=raw.get("kind", "local"),
            balancer=address("balancer"),
            admin=address("admin"),
            agent_interval=parse_float(raw.get("agent_interval", 0.25), "testbed.agent_interval"),
            balancer_args=tuple(
                str(a) for a in _list("testbed.balancer_args", raw.get("balancer_args", []))
            ),
            isolation=str(raw.get("isolation", "auto")),
            harness_cpus=parse_int(
                raw.get("harness_cpus", 0), "testbed.harness_cpus", minimum=0, maximum=4096
            ),
            balancers=parse_int(
                raw.get("balancers", 1),
                "testbed.balancers",
                minimum=1,
                maximum=MAX_SIMULATED_BALANCERS,
            ),
            service=str(raw.get("service", "")),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class RunConfig:
    name: str
    strategies: tuple[str, ...]
    scenarios: tuple[Scenario, ...]
    loads: Mapping[str, LoadConfig]  # scenario name -> its load
    duration: float
    warmup: float
    replications: int
    """Blocks run in any case (each block: every scenario x strategy once)."""
    max_replications: int
    """Adaptive when above ``replications``: blocks are added until every pair of
    strategies is resolved or equivalent on every headline metric, up to this many."""
    budget: float
    """Adaptive: seconds of phases after which no block is added (0: no budget)."""
    equivalence: float
    """The margin within which two strategies are equivalent (relative, e.g. 0.05)."""
    metrics: tuple[str, ...]
    """The metrics the answer judges and adaptive blocks settle (``winners.json``); empty:
    the headline ones (``analysis/metrics.py``: ``HEADLINE``)."""
    seed: int
    request_timeout: float
    locust_workers: int
    # Where the Locust master listens for workers, and how many it waits for that someone
    # else starts (``lblab locust-workers`` on other loader hosts); None: local loopback.
    locust_master_bind: tuple[str, int] | None
    expect_workers: int
    out: str
    testbed: TestbedConfig
    servers: tuple[ServerSpec, ...]
    weights: Mapping[str, float]
    health: HealthConfig
    """The balancers' health policy (live: their flags, ``health_flags``; simulated: the
    pools')."""
    strategy_options: Mapping[str, Mapping[str, str]]
    strategy_specs: Mapping[str, str]
    """The run's strategies of the user's own: name -> spec (``file.py:Class``)."""
    timeline: tuple[TimelineEvent, ...]
    simulator: Mapping[str, Any] = field(default_factory=dict)
    """The ``[simulator]`` table as given (``config_layers.SIMULATOR_KEYS``), for the
    simulated testbed's driver, which checks the values."""
    raw: Mapping[str, Any] = field(repr=False)  # the merged dict, for manifest and printing

    def __post_init__(self) -> None:
        """The rules across tables; each table's own rules are its dataclass's."""
        self._check_run()
        self._check_servers()
        self._check_strategies()
        self._check_testbed()
        self._check_health()
        self._check_timeline()
        self._check_locust()

    def _check_run(self) -> None:
        if not self.name or "/" in self.name:
            raise ConfigError(f"run.name: {self.name!r} must be a non-empty name without '/'")
        if self.duration <= 0 and not all(load.count for load in self.loads.values()):
            raise ConfigError(
                "run.duration must be above 0 (only phases with a load.count may omit it)"
            )
        check_range("run.replications", self.replications, minimum=1, maximum=MAX_REPLICATIONS)
        if self.max_replications and not (
            self.replications <= self.max_replications <= MAX_REPLICATIONS
        ):
            raise ConfigError(
                f"run.max_replications = {self.max_replications}: give 0 (a fixed number of "
                f"blocks) or {self.replications}..{MAX_REPLICATIONS} (at least run.replications)"
            )
        check_range("run.equivalence", self.equivalence, above=0, maximum=1)
        if self.metrics:
            from lblab.analysis.metrics import METRICS

            unknown = [m for m in self.metrics if m not in METRICS]
            if unknown:
                raise ConfigError(
                    f"run.metrics: {', '.join(map(repr, unknown))} is not a metric; metrics "
                    f"are {', '.join(METRICS)}"
                )
        simulated = self.testbed.kind == TestbedKind.SIMULATED
        check_range(
            "run.request_timeout",
            self.request_timeout,
            above=0,
            maximum=MAX_DURATION if simulated else MAX_REQUEST_TIMEOUT,
        )

    def _check_servers(self) -> None:
        ids = [s.id for s in self.servers]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"servers: ids {ids} repeat one")
        added = {e.server for e in self.timeline if e.action == "add"}
        for server, weight in self.weights.items():
            if server not in ids and server not in added:
                raise ConfigError(
                    f"weights.{server}: no server has that id (servers: {', '.join(ids)}); "
                    "give [weights] for the servers of this run"
                )
            check_weight(weight, f"weights.{server}")

    def _check_strategies(self) -> None:
        """Every strategy of the run, and every one given options, built once through the
        balancer's registry with this run's options and weights: a bad name or option
        fails here, at start, not when its phase asks the balancer for it."""
        # Imported here: the registry pulls in numpy, which the Locust processes that
        # import LoadConfig from this module do without.
        from lblab.balancer.strategies.registry import make_strategy, strategy_names, user_sources

        known = [*strategy_names(), *user_sources()]
        for name in dict.fromkeys([*self.strategies, *self.strategy_options]):
            if name not in known:
                where = "run.strategies" if name in self.strategies else f"strategy_options.{name}"
                raise ConfigError(
                    f"{where}: unknown strategy {name!r}; valid names are {', '.join(known)}, "
                    "or a file of your own as path/to/file.py:Class"
                )
            make_strategy(name, self.strategy_options.get(name), weights=self.weights)

    def _check_testbed(self) -> None:
        kind = self.testbed.kind
        if kind == TestbedKind.EXTERNAL and self.testbed.admin is None and len(self.strategies) > 1:
            raise ConfigError(
                "an external testbed without testbed.admin (--admin HOST:PORT) cannot switch "
                "strategies: give the admin address or run one strategy"
            )
        if self.simulator and kind != TestbedKind.SIMULATED:
            raise ConfigError(
                f"simulator: [simulator] sets what only the simulated testbed has "
                f"({', '.join(self.simulator)}), and this run's testbed is {kind}; for a "
                "file run on both, give the table as [simulated.simulator], which applies "
                "only when the testbed is simulated"
            )
        if kind != TestbedKind.SIMULATED:
            for each in self.every_server():
                if each.simulated_only:
                    raise ConfigError(
                        f"servers.{each.id}: {', '.join(each.simulated_only)} describe a "
                        f"simulated queue server, and this run's testbed is {kind}; give them "
                        "in [simulated] (its [[servers]] apply only when the testbed is "
                        "simulated), or drop them"
                    )
            for name, load in self.loads.items():
                if load.model == "closed" and load.count:
                    raise ConfigError(
                        f"load.count: {load.count} requests of the closed model (scenario "
                        f"{name}) is for the simulated testbed; a live closed phase runs for "
                        "run.duration: drop count, or give the open model"
                    )
        if kind in (TestbedKind.LOCAL, TestbedKind.SIMULATED) and not self.servers:
            raise ConfigError(f"the {kind} testbed needs at least one [[servers]] entry")
        if kind == TestbedKind.LOCAL:
            for each in self.servers:
                each.check_here()

    def _check_health(self) -> None:
        if self.testbed.kind == TestbedKind.EXTERNAL and self.health_flags():
            raise ConfigError(
                "health: an external testbed's balancer has its own health flags (`lblab "
                "balancer --slow-start-window ...`; the ansible role's balancer_extra_args); "
                "leave [health] at its defaults for it"
            )

    def _check_timeline(self) -> None:
        if self.timeline and self.testbed.kind == TestbedKind.EXTERNAL:
            raise ConfigError(
                "timeline events need the local testbed (the runner owns those processes)"
            )
        names = {s.name for s in self.scenarios}
        for i, event in enumerate(self.timeline):
            for s in event.scenarios:
                if s not in names:
                    raise ConfigError(
                        f"timeline[{i}].scenarios: {s!r} is not a scenario of this run"
                    )
        self._check_behaviour()

    def _check_behaviour(self) -> None:
        """``capacity`` changes a quota the server has; ``spike``s of a scenario do not
        overlap, and a closed model's run in one Locust process (its users count)."""
        quotas = {s.id: s.cpu_quota for s in self.servers}
        quotas.update({e.server: e.spec.cpu_quota for e in self.timeline if e.spec is not None})
        for i, event in enumerate(self.timeline):
            if event.action == "capacity" and quotas.get(event.server) is None:
                raise ConfigError(
                    f"timeline[{i}].server: capacity changes a CPU quota, and {event.server} "
                    "has none; give it a cpu_quota in [[servers]]"
                )
            if event.action == "capacity" and self.testbed.kind == TestbedKind.LOCAL:
                check_range(
                    f"timeline[{i}].cpu_quota", event.cpu_quota or 0, maximum=os.cpu_count() or 1
                )
        for scenario in self.scenarios:
            given = self.spikes(scenario.name)
            check_spikes(given, f"timeline (scenario {scenario.name})")
            closed = self.loads[scenario.name].model == "closed"
            live = self.testbed.kind != TestbedKind.SIMULATED
            if given and closed and live and (self.locust_workers or self.expect_workers):
                raise ConfigError(
                    f"timeline: a spike of the closed model (scenario {scenario.name}) "
                    "needs one Locust process; give run.locust_workers = 0, or the open "
                    "model"
                )

    def _check_locust(self) -> None:
        check_range("run.locust_workers", self.locust_workers, maximum=MAX_LOCUST_WORKERS)
        check_range("run.expect_workers", self.expect_workers, maximum=MAX_LOCUST_WORKERS)
        if self.expect_workers and self.locust_master_bind is None:
            raise ConfigError(
                f"run.expect_workers = {self.expect_workers} needs run.locust_master_bind "
                "(--locust-master-bind HOST[:PORT]): the address on this host that the other "
                "hosts' workers connect to"
            )
        if self.locust_master_bind is not None and not (self.locust_workers or self.expect_workers):
            raise ConfigError(
                "run.locust_master_bind is for a distributed Locust: give --expect-workers N "
                "(workers on other hosts) or --locust-workers N as well"
            )

    def health_flags(self) -> list[str]:
        """``lblab balancer`` flags for the ``[health]`` options that are not the defaults
        (none for a default policy, so its balancers start as they always did)."""
        given = self.raw.get("health", {})
        return health_flags({k: v for k, v in given.items() if v != HEALTH_DEFAULTS.get(k)})

    def every_server(self) -> tuple[ServerSpec, ...]:
        """The ``[[servers]]`` in the file's order, then those a timeline ``add`` starts."""
        known = {s.id: s for s in self.servers}
        for event in self.timeline:
            if event.action == "add" and event.spec is not None:
                known.setdefault(event.spec.id, event.spec)
        return tuple(known.values())

    def spikes(self, scenario: str) -> tuple[Spike, ...]:
        """The ``spike`` events of ``scenario``'s phases (``experiment/spikes.py``)."""
        return tuple(
            s for e in self.timeline if e.applies_to(scenario) and (s := e.spike()) is not None
        )

    def to_toml(self) -> str:
        return dumps_toml(self.raw)


# ------------------------------------------------------------------ checking


def _one_of(name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ConfigError(f"{name}: {value!r} is not one of {', '.join(choices)}")


def _table(name: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name}: give a table ([{name}] with NAME = VALUE lines), not {value!r}")
    return value


def _list(name: str, value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ConfigError(f"{name}: give a list ([...] or [[{name}]] tables), not {value!r}")
    return value


def _names(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = split_commas(value)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ConfigError(f'{name}: give a non-empty list of names, e.g. ["rr", "lc"]')
    if len(set(value)) != len(value):
        raise ConfigError(f"{name}: {value} names something twice")
    return tuple(value)


def _cell(raw: Any, where: str) -> Cell:
    if isinstance(raw, str):
        if raw not in CELLS:
            raise ConfigError(f"{where}: unknown cell {raw!r}; cells are {', '.join(CELLS)}")
        return CELLS[raw]
    if not isinstance(raw, Mapping) or not {"package", "work"} <= set(raw):
        raise ConfigError(
            f'{where}: a custom cell needs package and work, e.g. {{package = "66KB", work = "10KB"}}'
        )
    package = parse_size(raw["package"], f"{where}.package")
    work = parse_size(raw["work"], f"{where}.work")
    # A request is one frame (24-bit length); the server refuses more work than it allows.
    check_range(f"{where}.package", package, maximum=MAX_FRAME_LENGTH - 1024)
    check_range(f"{where}.work", work, maximum=MAX_WORK_BYTES)
    return Cell(str(raw.get("name", f"{package}B+{work}B")), package, work)


# ------------------------------------------------------------------ building, table by table


def build(raw: Mapping[str, Any]) -> RunConfig:
    """Check a merged config dict into a ``RunConfig`` (raises ConfigError).

    Each table becomes its dataclass, which checks itself; ``RunConfig`` then checks the
    rules across tables (weights name servers, the strategies and their options build).
    """
    raw = _counted_servers(_named_strategies(raw))
    run = _table("run", raw["run"])
    scenarios, loads = _scenarios(run["scenarios"], raw)
    servers = tuple(
        ServerSpec.from_table(s, f"servers[{i}]")
        for i, s in enumerate(_list("servers", raw.get("servers", [])))
    )
    ids = [s.id for s in servers]
    return RunConfig(
        **_run_values(run),
        strategies=_names("run.strategies", run["strategies"]),
        scenarios=scenarios,
        loads=loads,
        testbed=TestbedConfig.from_table(_table("testbed", raw["testbed"])),
        servers=servers,
        weights=_weights(raw.get("weights", {})),
        health=health_config(_table("health", raw.get("health", {}))),
        strategy_options=_strategy_options(raw.get("strategy_options", {})),
        strategy_specs=dict(raw["strategy_specs"]),
        timeline=_timeline(raw.get("timeline", []), ids),
        simulator=dict(_table("simulator", raw.get("simulator", {}))),
        raw=raw,
    )


def _run_values(run: Mapping[str, Any]) -> dict[str, Any]:
    """The [run] table's scalars (strategies and scenarios are built on their own)."""
    return {
        "name": str(run["name"]),
        "duration": parse_duration(run["duration"], "run.duration"),
        "warmup": parse_duration(run["warmup"], "run.warmup"),
        "replications": parse_int(run["replications"], "run.replications", minimum=1),
        "max_replications": parse_int(run.get("max_replications", 0), "run.max_replications"),
        "budget": parse_duration(run.get("budget", "0s"), "run.budget"),
        "equivalence": parse_float(run.get("equivalence", 0.05), "run.equivalence"),
        "metrics": _names("run.metrics", run["metrics"]) if run.get("metrics") else (),
        "seed": parse_int(run["seed"], "run.seed", maximum=MAX_SEED),
        "request_timeout": parse_duration(run["request_timeout"], "run.request_timeout"),
        "locust_workers": parse_int(run["locust_workers"], "run.locust_workers"),
        "locust_master_bind": _master_bind(str(run.get("locust_master_bind") or "")),
        "expect_workers": parse_int(run.get("expect_workers", 0), "run.expect_workers"),
        "out": str(run.get("out", "")),
    }


def _scenarios(
    names: Any, raw: Mapping[str, Any]
) -> tuple[tuple[Scenario, ...], dict[str, LoadConfig]]:
    """``run.scenarios``, built in or from [scenario_defs], each with its load."""
    defs = _table("scenario_defs", raw.get("scenario_defs", {}))
    scenarios, loads = [], {}
    for name in _names("run.scenarios", names):
        if name in defs:
            scenario, load = _defined_scenario(name, defs[name], raw["load"])
        elif name in TRACE_SCENARIOS:
            # A built-in trace scenario replays the built-in trace of its name.
            traced = merge(raw["load"], {"model": "trace", "trace": name})
            load = LoadConfig.from_table(traced, "load")
            scenario = Scenario(name, (), load.window)
        else:
            # [load] is checked only where it is used (martins sets the rate per scenario).
            scenario, load = builtin_scenario(name), LoadConfig.from_table(raw["load"], "load")
            _not_traced(name, load, "load")
        scenarios.append(scenario)
        loads[name] = load
    return tuple(scenarios), loads


def _defined_scenario(name: str, raw: Any, load: Mapping[str, Any]) -> tuple[Scenario, LoadConfig]:
    """A [scenario_defs.NAME] table: its cells, and [load] with the table's overrides."""
    where = f"scenario_defs.{name}"
    table = _table(where, raw)
    cells = table.get("cells")
    overrides = {k: v for k, v in table.items() if k != "cells"}
    unknown = set(overrides) - set(DEFAULTS["load"])
    if unknown:
        raise ConfigError(
            f"{where}: unknown keys {sorted(unknown)}; besides cells it "
            f"takes load keys ({', '.join(DEFAULTS['load'])})"
        )
    if cells is None and (overrides.get("trace") or load.get("trace")):
        # No cells: a trace scenario, replaying the trace its table or [load] names.
        traced = LoadConfig.from_table(merge(load, {**overrides, "model": "trace"}), where)
        return Scenario(name, (), traced.window), traced
    if not isinstance(cells, list) or not cells:
        raise ConfigError(
            f"{where}.cells: give a non-empty list of cells (or no cells and trace = FILE)"
        )
    if "trace" in overrides:
        raise ConfigError(f"{where}: give cells or a trace, not both")
    scenario = Scenario(name, tuple(_cell(c, f"{where}.cells") for c in cells))
    loaded = LoadConfig.from_table(merge(load, overrides), where)
    _not_traced(name, loaded, where)
    return scenario, loaded


def _not_traced(name: str, load: LoadConfig, where: str) -> None:
    """A scenario of cells cannot run under the trace model: the trace has its shapes."""
    if load.model == "trace":
        raise ConfigError(
            f"{where}.model: scenario {name} has cells, but the trace model takes each "
            f"request's shape from the trace; run a trace scenario ({', '.join(TRACE_SCENARIOS)}, "
            "or [scenario_defs.NAME] with trace = FILE and no cells)"
        )


def _counted_servers(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """``count = N`` in a [[servers]] entry: N servers ``<id>1`` .. ``<id>N``, each with the
    entry's other keys; a [weights] entry of the group's id weighs each member (one a
    member names itself wins). The resolved config (``raw``, the manifest's, what
    ``--print-config`` prints) holds the members, so every reader sees one server per id."""
    servers = raw.get("servers")
    if not isinstance(servers, list) or not any(
        isinstance(s, Mapping) and "count" in s for s in servers
    ):
        return raw
    members: dict[str, list[str]] = {}
    out: list[Any] = []
    for i, entry in enumerate(servers):
        if not isinstance(entry, Mapping) or "count" not in entry:
            out.append(entry)
            continue
        where = f"servers[{i}]"
        if "id" not in entry:
            raise ConfigError(
                f'{where}: a group of servers needs an id, its members\' prefix: {{id = "s", '
                "count = 3}} makes s1, s2 and s3"
            )
        prefix = check_id(str(entry["id"]), f"{where}.id")
        count = parse_int(entry["count"], f"{where}.count", minimum=1, maximum=MAX_GROUP)
        ids = [f"{prefix}{n}" for n in range(1, count + 1)]
        members[prefix] = ids
        keys = {k: v for k, v in entry.items() if k not in ("id", "count")}
        out += [{"id": sid, **keys} for sid in ids]
    weights = raw.get("weights")
    if not isinstance(weights, Mapping):
        return {**raw, "servers": out}
    weighed: dict[str, Any] = {}
    for sid, weight in weights.items():
        for member in members.get(sid, [sid]):
            if member == sid or member not in weights:
                weighed[member] = weight
    return {**raw, "servers": out, "weights": weighed}


def _weights(raw: Any) -> dict[str, float]:
    return {str(k): check_weight(v, f"weights.{k}") for k, v in _table("weights", raw).items()}


def _strategy_options(raw: Any) -> dict[str, dict[str, str]]:
    """[strategy_options.NAME] tables as the balancer's flags take them (text values);
    ``RunConfig`` builds each strategy with them."""
    return {
        name: {k: str(v) for k, v in _table(f"strategy_options.{name}", values).items()}
        for name, values in _table("strategy_options", raw).items()
    }


TIMELINE_KEYS: dict[str, tuple[str, ...]] = {
    "add": ("weight", *SERVER_KEYS),
    "slow": ("factor", "add_ms", "duration"),
    "pause": ("duration",),
    "fail": ("rate", "delay_ms", "duration"),
    "reject": ("limit", "burst", "duration"),
    "cold": ("factor", "duration"),
    "capacity": ("cpu_quota",),
    "spike": ("factor", "duration"),
}
"""The keys each action takes besides at, action, server and scenarios."""
REQUIRED_KEYS = {
    "fail": ("rate",),
    "reject": ("limit",),
    "cold": ("factor", "duration"),
    "capacity": ("cpu_quota",),
    "spike": ("factor", "duration"),
}
EXAMPLES = {
    "fail": "rate = 0.3",
    "reject": "limit = 100",
    "cold": 'factor = 5, duration = "10s"',
    "capacity": "cpu_quota = 0.5",
    "spike": 'factor = 3, duration = "5s"',
}


def _event_keys(ev: Mapping[str, Any], where: str) -> None:
    """Every key of an entry is one its action takes, and the ones it needs are there."""
    action = ev["action"]
    takes = TIMELINE_KEYS.get(action, ())
    others = {k for keys in TIMELINE_KEYS.values() for k in keys}
    wrong = set(ev) - {"at", "action", "server", "scenarios", *takes}
    said = f"{action} takes {', '.join(takes)}" if takes else f"{action} takes no other keys"
    unknown = sorted(wrong - others)
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {', '.join(map(repr, unknown))} for {action!r} ({said})"
        )
    if wrong:
        raise ConfigError(
            f"{where}: {', '.join(sorted(wrong))} do not apply to {action!r} ({said})"
        )
    missing = [k for k in REQUIRED_KEYS.get(action, ()) if k not in ev]
    if missing:
        raise ConfigError(
            f"{where}: {action} needs {' and '.join(missing)}, e.g. {EXAMPLES[action]}"
        )


def _timed_fault(ev: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The action's own keys (``TIMELINE_KEYS``), checked."""
    _event_keys(ev, where)
    action = ev["action"]
    out: dict[str, Any] = {}
    if "duration" in ev:
        out["duration"] = parse_duration(ev["duration"], f"{where}.duration")
    if action in ("fail", "reject", "cold", "capacity", "spike"):
        out.update(_behaviour(ev, where))
    if action == "slow":
        factor = parse_float(ev.get("factor", 1.0), f"{where}.factor")
        add_ms = parse_float(ev.get("add_ms", 0.0), f"{where}.add_ms")
        try:
            Slowdown(factor, add_ms)
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        if factor == 1.0 and add_ms == 0.0:
            raise ConfigError(
                f"{where}: slow needs factor > 1 or add_ms > 0, e.g. factor = 10 or add_ms = 500"
            )
        out.update(factor=factor, add_ms=add_ms)
    return out


def _behaviour(ev: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``fail``'s, ``reject``'s, ``cold``'s, ``capacity``'s and ``spike``'s keys."""
    match ev["action"]:
        case "fail":
            return {
                "rate": parse_float(ev["rate"], f"{where}.rate", above=0, maximum=1),
                "delay_ms": parse_float(
                    ev.get("delay_ms", 1.0),
                    f"{where}.delay_ms",
                    minimum=0,
                    maximum=MAX_FAIL_DELAY_MS,
                ),
            }
        case "reject":
            return {
                "limit": parse_float(ev["limit"], f"{where}.limit", above=0, maximum=MAX_LIMIT),
                "burst": parse_float(
                    ev.get("burst", 0), f"{where}.burst", minimum=0, maximum=MAX_LIMIT
                ),
            }
        case "cold":
            duration = parse_duration(ev["duration"], f"{where}.duration")
            check_range(f"{where}.duration", duration, maximum=MAX_COLD_S)
            return {
                "factor": parse_float(
                    ev["factor"], f"{where}.factor", above=1, maximum=MAX_COLD_FACTOR
                )
            }
        case "capacity":
            quota = parse_float(ev["cpu_quota"], f"{where}.cpu_quota", minimum=0.01, maximum=64)
            return {"cpu_quota": quota}
    factor = parse_float(ev["factor"], f"{where}.factor", above=1, maximum=MAX_SPIKE_FACTOR)
    return {"factor": factor}


def _timeline(raw: Any, ids: Sequence[str]) -> tuple[TimelineEvent, ...]:
    """The [[timeline]] entries. An event may name a server of ``ids`` or one that an
    ``add`` at or before its ``at`` brings in."""
    entries = _list("timeline", raw)
    times = [
        parse_duration(e["at"], f"timeline[{i}].at")
        if isinstance(e, Mapping) and "at" in e
        else 0.0
        for i, e in enumerate(entries)
    ]
    adds = [
        (t, str(e.get("server")))
        for t, e in zip(times, entries, strict=True)
        if isinstance(e, Mapping) and e.get("action") == "add"
    ]
    events = []
    for i, (t, entry) in enumerate(zip(times, entries, strict=True)):
        known = list(ids)
        if isinstance(entry, Mapping) and entry.get("action") != "add":
            known += [s for at, s in adds if at <= t and s not in known]
        events.append(TimelineEvent.from_table(entry, f"timeline[{i}]", known))
    return tuple(events)


def _master_bind(value: str) -> tuple[str, int] | None:
    """``HOST`` (Locust's port 5557) or ``HOST:PORT``; empty: no fixed address."""
    if not value:
        return None
    if ":" not in value:
        return value, DEFAULT_MASTER_PORT
    return parse_hostport(value, "run.locust_master_bind")


def resolve(
    preset: Mapping[str, Any] | None,
    config_file: Mapping[str, Any] | None,
    flags: Mapping[str, Any],
) -> RunConfig:
    """defaults <- preset <- config file <- flags, checked. On the simulated testbed a
    layer's ``[simulated]`` table goes over that layer (under the ones after it)."""
    layers = [(preset, "preset"), (config_file, "config file"), (flags, "flags")]
    for layer, source in layers:
        if layer:
            check_keys(layer, source)

    def merged(simulated: bool) -> dict[str, Any]:
        raw: dict[str, Any] = merge(DEFAULTS, {})
        for layer, _ in layers:
            if layer:
                raw = merge(raw, {k: v for k, v in layer.items() if k != "preset"})
                if simulated and isinstance(layer.get(SIMULATED), Mapping):
                    raw = merge(raw, layer[SIMULATED])
        return raw

    raw = merged(False)
    if raw["testbed"].get("kind") == TestbedKind.SIMULATED:
        raw = merged(True)
    return build(raw)


def _named_strategies(raw: Mapping[str, Any]) -> dict[str, Any]:
    """``raw`` with every strategy of ``run.strategies`` as a name: a spec
    (``file.py:Class``) or an entry point becomes its class's name, recorded under
    ``[strategy_specs]`` (name -> spec), and options in brackets (``p2c[choice_count=3]``)
    move to ``[strategy_options.NAME]``. Every spec is loaded in this process."""
    from lblab.balancer.strategies.options import split_options
    from lblab.balancer.strategies.registry import STRATEGIES, resolve, user_sources

    out = dict(raw)
    specs = {str(k): v for k, v in _table("strategy_specs", raw.get("strategy_specs", {})).items()}
    options = {
        k: dict(v) for k, v in _table("strategy_options", raw.get("strategy_options", {})).items()
    }
    for name, spec in specs.items():
        if not isinstance(spec, str):
            raise ConfigError(
                f'strategy_specs.{name}: give a spec, e.g. {name} = "./file.py:Class"'
            )
        try:
            loaded = resolve(spec)
        except ConfigError as exc:
            raise ConfigError(f"strategy_specs.{name}: {exc}") from None
        if loaded != name:
            raise ConfigError(
                f'strategy_specs.{name}: {spec} is named {loaded!r}; write {loaded} = "{spec}"'
            )
    run = dict(_table("run", raw["run"]))
    names = []
    for entry in _names("run.strategies", run["strategies"]):
        ref, extra = split_options(entry, "run.strategies")
        try:
            name = resolve(ref) if ref not in STRATEGIES and ref not in specs else ref
        except ConfigError as exc:
            raise ConfigError(f"run.strategies: {exc}") from None
        if name not in STRATEGIES:
            specs[name] = user_sources()[name].spec
        if extra:
            options[name] = {**options.get(name, {}), **extra}
        names.append(name)
    run["strategies"] = names
    out["run"] = run
    out["strategy_specs"] = specs
    out["strategy_options"] = options
    return out
