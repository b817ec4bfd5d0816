"""The experiment file that ``lblab simulate``'s flags say, and that an old ``lblab
simulate`` file (the simulator's own settings) says.

Both speak the simulator's older dialect (``simulator/config.py``, which sweeps still
read): a pool of identical or grouped servers, each an abstract queue, and one load.
``experiment_layer`` says the same as an experiment file's layer, run on the simulated
testbed as ``lblab run --config FILE --testbed simulated`` runs it:

- the servers ``s1`` .. ``sN``, each a queue server (``[[servers]]`` ``service``,
  ``workers``, ``speed``, ``max_inflight`` for a group's ``capacity``, ``server_delay``
  for its ``delay``; ``runconfig.QUEUE_SERVER_KEYS``) and its ``weight`` in ``[weights]``;
- the load as one scenario's: open arrivals (Poisson unless ``poisson = false``) or
  closed users with their think time, a trace, and ``requests`` as ``load.count`` (or
  ``duration`` as ``run.duration``), with no warm-up;
- the strategies (``strategy_options`` for each of them), the seed, one replication,
  the deadline as ``run.request_timeout``, the report period as the agents' interval,
  the balancers, ``[health]``, and the simulator's own knobs in ``[simulator]``.

The plan seeds phase k with ``seed + k``, as every experiment's, so a run of these
flags draws what the same experiment file draws, not what the pool's runner drew.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lblab.config import (
    MAX_DURATION,
    check_range,
    check_weight,
    parse_duration,
    parse_float,
    parse_int,
)
from lblab.errors import ConfigError
from lblab.experiment.config_layers import SIMULATOR_KEYS
from lblab.experiment.runconfig import MAX_COUNT, MAX_GROUP, TestbedKind
from lblab.simulator.config import KNOWN_KEYS, MIN_PERIOD
from lblab.traces import BUILTIN_TRACES

DEFAULT_SERVICE = "exp:10ms"
"""A queue server's service model unless ``service`` says otherwise."""
DEFAULT_REQUESTS = 10_000
DEFAULT_RATE = 1000.0
GROUP_KEYS = ("count", "service", "workers", "speed", "weight", "capacity", "delay")
"""What a group of the older dialect's ``[[servers]]`` may give."""
UNSAID = ("tick_period", "probe_cost", "exponential_think", "replication")
"""Settings of the older dialect that no experiment file says (a sweep still takes them)."""


def experiment_layer(raw: Mapping[str, Any], strategies: Sequence[str]) -> dict[str, Any]:
    """The experiment layer ``raw`` (the older dialect's settings) says; ``strategies``:
    the strategies as given (names, specs, options in brackets), else ``raw``'s."""
    given = {str(k).replace("-", "_"): v for k, v in raw.items()}
    unknown = set(given) - KNOWN_KEYS
    if unknown:
        raise ConfigError(f"unknown settings {sorted(unknown)}; known are {sorted(KNOWN_KEYS)}")
    unsaid = [k for k in UNSAID if k in given]
    if unsaid:
        raise ConfigError(
            f"{', '.join(unsaid)}: `lblab simulate` runs an experiment file, which has no "
            "such setting; drop it (a sweep's settings still take it)"
        )
    servers, weights = _servers(given)
    scenario, load, defs = _load(given)
    count, duration = _length(given, load)
    load["count"] = count
    names = list(strategies) or _strategy_list(given.get("strategy", "p2c"))
    run: dict[str, Any] = {
        "name": str(given.get("run_id", "simulate")),
        "strategies": names,
        "scenarios": [scenario],
        "warmup": 0,
        "duration": duration,
        "seed": parse_int(given.get("seed", 1), "seed"),
        "replications": 1,
        "request_timeout": _deadline(given.get("deadline", 30.0)),
    }
    testbed: dict[str, Any] = {"kind": TestbedKind.SIMULATED.value}
    if given.get("report_period") is not None:
        period = parse_duration(given["report_period"], "report_period")
        check_range("report_period", period, minimum=MIN_PERIOD)
        testbed["agent_interval"] = period
    if given.get("balancers") is not None:
        testbed["balancers"] = given["balancers"]
    layer: dict[str, Any] = {
        "run": run,
        "load": load,
        "testbed": testbed,
        "servers": servers,
        "weights": weights,
        "strategy_options": _shared_options(given.get("strategy_options"), names),
    }
    if defs:
        layer["scenario_defs"] = defs
    knobs = {k: given[k] for k in SIMULATOR_KEYS if given.get(k) is not None}
    if knobs:
        layer["simulator"] = knobs
    if given.get("health"):
        layer["health"] = given["health"]
    return layer


def _strategy_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ConfigError(f'strategy: {value!r}; give a name, e.g. strategy = "p2c"')


def _servers(given: Mapping[str, Any]) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """``[[servers]]`` tables ``s1`` .. ``sN`` and their ``[weights]``."""
    groups = given.get("servers", 3)
    service = str(given.get("service", DEFAULT_SERVICE))
    workers = given.get("workers", 1)
    if isinstance(groups, int | str) and not isinstance(groups, bool):
        count = parse_int(groups, "servers", minimum=1, maximum=MAX_GROUP)
        servers = [{"id": "s", "count": count, "service": service, "workers": workers}]
        return servers, {f"s{n}": 1.0 for n in range(1, count + 1)}
    if not isinstance(groups, list) or not all(isinstance(g, Mapping) for g in groups):
        raise ConfigError("servers: give a count or a list of [[servers]] tables")
    servers, weights = [], {}
    for i, group in enumerate(groups):
        unknown = set(group) - set(GROUP_KEYS)
        if unknown:
            raise ConfigError(
                f"servers[{i}]: unknown keys {sorted(unknown)}; known are {sorted(GROUP_KEYS)}"
            )
        where = f"servers[{i}]"
        table = {
            "service": str(group.get("service", service)),
            "workers": group.get("workers", workers),
        }
        if "speed" in group:
            table["speed"] = parse_float(group["speed"], f"{where}.speed")
            check_range(f"{where}.speed", table["speed"], minimum=1e-3, maximum=1e6)
        if "capacity" in group:
            table["max_inflight"] = parse_int(group["capacity"], f"{where}.capacity", minimum=1)
        if "delay" in group:
            table["server_delay"] = parse_duration(group["delay"], f"{where}.delay")
        weight = check_weight(group.get("weight", 1.0), f"{where}.weight")
        for _ in range(parse_int(group.get("count", 1), f"{where}.count", minimum=1)):
            sid = f"s{len(servers) + 1}"
            servers.append({"id": sid, **table})
            weights[sid] = weight
    if len(servers) > MAX_GROUP:
        raise ConfigError(f"servers: {len(servers)} in all; give at most {MAX_GROUP}")
    return servers, weights


def _load(given: Mapping[str, Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The scenario's name, its ``[load]``, and a ``[scenario_defs]`` for a trace file."""
    rate, users = given.get("rate"), given.get("users")
    if rate is not None and users is not None:
        raise ConfigError("give either rate (open arrivals) or users (closed), not both")
    scenario = str(given.get("scenario") or "sp+sr")
    trace = given.get("trace") or (scenario if scenario in BUILTIN_TRACES else None)
    if trace is not None:
        if users is not None:
            raise ConfigError("a trace gives the send times: give rate (0: its own), not users")
        window = {k: given[k] for k in ("trace_start", "trace_length", "trace_loop") if k in given}
        load = {"model": "trace", "rate": 0.0 if rate is None else rate, **window}
        if str(trace) in BUILTIN_TRACES and scenario == trace:
            return scenario, load, {}
        name = Path(str(trace)).name.split(".")[0]
        return name, load, {name: {"trace": str(trace)}}
    if users is not None:
        think = given.get("think", 0)
        return scenario, {"model": "closed", "users": users, "think_time": [think, think]}, {}
    poisson = given.get("poisson", True)
    if not isinstance(poisson, bool):
        raise ConfigError(f"poisson: {poisson!r} is not true or false")
    arrival = "poisson" if poisson else "constant"
    return scenario, {"model": "open", "rate": DEFAULT_RATE if rate is None else rate,
                      "arrival": arrival}, {}  # fmt: skip


def _length(given: Mapping[str, Any], load: Mapping[str, Any]) -> tuple[Any, Any]:
    """``load.count`` and ``run.duration``: the requests, or the duration, to send."""
    duration = given.get("duration")
    if isinstance(duration, str) and duration.lower() in {"none", "off", ""}:
        duration = None
    requests = given.get("requests")
    if duration is not None and requests is not None:
        raise ConfigError(
            "requests, duration: give one; a simulation sends this many requests, or sends "
            "for this long"
        )
    if duration is not None:
        return 0, duration
    if requests is None and load["model"] == "trace":
        return 0, MAX_DURATION  # one pass of its window, which ends first
    if requests is None:
        return DEFAULT_REQUESTS, 0
    return parse_int(requests, "requests", minimum=1, maximum=MAX_COUNT), 0


def _deadline(value: Any) -> float:
    """``run.request_timeout`` for a ``deadline``; none is the longest a simulation spans."""
    if value is None or (isinstance(value, str) and value.lower() in {"none", "off", ""}):
        return MAX_DURATION
    return parse_duration(value, "deadline", above=0)


def _shared_options(options: Any, strategies: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``strategy_options`` (options for every strategy) as ``[strategy_options.NAME]``
    for each of ``strategies``, under the name the run gives it; one of them named twice
    is refused (a run's tables tell strategies apart by name)."""
    from lblab.balancer.strategies.options import split_options
    from lblab.balancer.strategies.registry import resolve

    if options is None:
        options = {}
    if not isinstance(options, Mapping):
        raise ConfigError("strategy_options: give a table of NAME = VALUE")
    out: dict[str, dict[str, Any]] = {}
    for entry in strategies:
        name = resolve(split_options(entry, "--strategy")[0])
        if name in out:
            raise ConfigError(
                f"--strategy names {name!r} twice; a run's tables and summary tell strategies "
                "apart by name, so compare two option sets of one strategy in two runs "
                "(each with its own --out)"
            )
        out[name] = {str(k): v for k, v in options.items()}
    return out
