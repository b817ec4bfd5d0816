"""The health policy's options as a user writes them, for ``lblab balancer``'s flags and a
run's ``[health]`` table alike: one list of names, defaults and units.

A name is a flag with ``--`` and dashes (``slow_start_window`` is
``--slow-start-window``). Durations are written as durations (``"10s"``), shares as
percents from 0 to 100 (as ``--panic-threshold``); ``health_config`` turns them into the
pool's ``HealthConfig`` (seconds, shares from 0 to 1), ``health_flags`` into the flags
that give a balancer the same policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from lblab.balancer.health import HealthConfig
from lblab.config import parse_duration, parse_float, parse_int
from lblab.errors import ConfigError

Kind = Literal["count", "count_or_off", "duration", "percent", "number", "factor_or_off"]
"""``count``: 1 to 1,000,000; ``count_or_off``: 0 (off) to 1,000,000; ``number``: above 0,
at most 1,000; ``factor_or_off``: 0 (off) to 100; ``percent``: 0 to 100."""

HEALTH_OPTIONS: Final[dict[str, tuple[Any, Kind, str]]] = {
    "eject_after": (
        5,
        "count_or_off",
        "Consecutive failures a backend is responsible for (timeouts, lost connections, its "
        "own faults; never REJECTED or errors about the request) that eject it "
        "(0..1000000; 0: off).",
    ),
    "eject_base": ("1s", "duration", "First ejection's length; each next one doubles."),
    "eject_max": ("30s", "duration", "Longest ejection."),
    "panic_threshold": (
        50.0,
        "percent",
        "Percent (0..100) of connected backends that must be un-ejected; below it ejection "
        "is ignored and all take requests (Envoy's panic threshold); 0: off.",
    ),
    "success_rate_threshold": (
        0.0,
        "percent",
        "Eject a backend whose percent (0..100) of successes over the success-rate window is "
        "below this, as a failure run would (Linkerd's unified breaker: 80); the same failures "
        "count as for eject-after; 0: off.",
    ),
    "success_rate_window": ("10s", "duration", "The trailing window the success rate is over."),
    "success_rate_min_requests": (
        100,
        "count",
        "Outcomes the window must hold before the success rate can eject (1..1000000).",
    ),
    "success_rate_stdev_factor": (
        0.0,
        "factor_or_off",
        "Envoy's statistical success-rate ejection: at the end of each success-rate window, "
        "eject a backend whose success rate in it is below the backends' mean less this "
        "many standard deviations (Envoy's 1900, i.e. 1.9); 0: off.",
    ),
    "success_rate_minimum_hosts": (
        5,
        "count",
        "Backends with --success-rate-min-requests outcomes in a window needed for the "
        "statistical ejection to judge it (1..1000000).",
    ),
    "slow_start_window": (
        "10s",
        "duration",
        "Slow start (Envoy's slow_start_config, gRPC's A100): a backend that joins or comes "
        "back has its weight scaled up over this long; 0s: off.",
    ),
    "slow_start_aggression": (
        0.5,
        "number",
        "Shape of the slow-start ramp (time share to the power 1/aggression; 1: linear as "
        "Envoy's default, above 1: faster at first, 0.5: a square, slower). Above 0.",
    ),
    "slow_start_min_weight": (
        1.0,
        "percent",
        "Percent (0..100) of its weight a backend gets at least in slow start (Envoy's and "
        "A100's min_weight_percent, whose default is 10).",
    ),
    "slow_start_fast_after": (
        5,
        "count_or_off",
        "End a backend's slow start early once it has given this many successful answers "
        "since it came and is as fast as its peers (--slow-start-fast-ratio; lblab's rule, "
        "not Envoy's or A100's); 0: off (0..1000000).",
    ),
    "slow_start_fast_ratio": (
        1.0,
        "number",
        "As fast as its peers: the mean latency of its answers since it came at most this "
        "many times the median of the peers' latency EWMAs. Above 0.",
    ),
}
"""name -> (default as written, kind, help)."""

DEFAULTS: Final = {name: default for name, (default, _, _) in HEALTH_OPTIONS.items()}


def flag(name: str) -> str:
    """``--slow-start-window`` for ``slow_start_window``."""
    return "--" + name.replace("_", "-")


def health_config(values: Mapping[str, Any], *, flags: bool = False) -> HealthConfig:
    """The pool's policy from options as written (missing ones take their defaults);
    a bad one is a ``ConfigError`` naming it as the user wrote it: ``--eject-base`` with
    ``flags``, else ``health.eject_base``."""
    unknown = sorted(set(values) - set(HEALTH_OPTIONS))
    if unknown:
        raise ConfigError(
            f"health: {', '.join(unknown)} is not a health option; the options are "
            f"{', '.join(HEALTH_OPTIONS)}"
        )
    parsed: dict[str, float] = {}
    for name, (default, kind, _) in HEALTH_OPTIONS.items():
        where = flag(name) if flags else f"health.{name}"
        raw = values.get(name, default)
        match kind:
            case "count" | "count_or_off":
                least = 0 if kind == "count_or_off" else 1
                value: float = parse_int(raw, where, minimum=least, maximum=1_000_000)
            case "duration":
                value = parse_duration(raw, where)
            case "percent":
                value = parse_float(raw, where, minimum=0, maximum=100) / 100.0
            case "factor_or_off":
                value = parse_float(raw, where, minimum=0, maximum=100)
            case "number":
                value = parse_float(raw, where, above=0, maximum=1000)
        parsed[name] = value
    try:
        return _build(parsed)
    except ConfigError as exc:  # a rule across options: name them as the user did
        message = str(exc)
        for name in sorted(HEALTH_OPTIONS, key=len, reverse=True):
            written = flag(name) if flags else f"health.{name}"
            message = message.replace(f"{name}_s", written).replace(f"{name}=", f"{written}=")
        raise ConfigError(message.replace("health: health.", "")) from None


def _build(parsed: Mapping[str, float]) -> HealthConfig:
    return HealthConfig(
        eject_after=int(parsed["eject_after"]),
        eject_base_s=parsed["eject_base"],
        eject_max_s=parsed["eject_max"],
        panic_threshold=parsed["panic_threshold"],
        success_rate_threshold=parsed["success_rate_threshold"],
        success_rate_window_s=parsed["success_rate_window"],
        success_rate_min_requests=int(parsed["success_rate_min_requests"]),
        success_rate_stdev_factor=parsed["success_rate_stdev_factor"],
        success_rate_minimum_hosts=int(parsed["success_rate_minimum_hosts"]),
        slow_start_window_s=parsed["slow_start_window"],
        slow_start_aggression=parsed["slow_start_aggression"],
        slow_start_min_weight=parsed["slow_start_min_weight"],
        slow_start_fast_after=int(parsed["slow_start_fast_after"]),
        slow_start_fast_ratio=parsed["slow_start_fast_ratio"],
    )


def health_flags(values: Mapping[str, Any]) -> list[str]:
    """``lblab balancer`` flags for the options in ``values`` (checked first)."""
    health_config(values)
    return [part for name, value in values.items() for part in (flag(name), str(value))]
