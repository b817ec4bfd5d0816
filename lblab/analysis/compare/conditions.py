"""What a strategy x scenario cell of a run ran under, and what its own checks found.

A difference between two runs says something about a strategy only when both runs
offered the cell the same load and gave it the same capacity: a throughput that rose
with the offered rate, or with a server's quota, is the testbed's change, not the
strategy's. ``conditions`` reads, per cell, everything the manifest records that sets
either, as label -> text:

- offered load: the load model, the users (closed) or the offered rate (open, trace),
  think time and spawn rate, the request shapes or the trace and its window, the phase
  length and warm-up;
- capacity: the servers' CPU quotas as they ran (``testbed.cpu_layout.quotas``: scaled
  to fit the isolated CPUs, which may differ from the configured ones), their workers,
  in-flight caps and delays, the CPUs they ran on, the CPU limit, the host's CPUs, the
  testbed, the balancer's arguments and the fault timeline;
- the strategy's options and the server weights (weighted strategies read them; the
  manifest does not say which strategy does, so every cell carries them).

A live run gives these in its manifest (``scenarios[].load``, ``phases[].duration_s``,
``testbed``, ``config``), a simulated one in each phase's config (``config[]``: arrivals,
servers' service models, request count). The two kinds describe load and capacity in
different terms; ``SHARED`` are the labels both give alike.

``cell_checks`` gathers each cell's validity checks (``phases[].verdicts``,
``lblab/validity.py``), so a comparison can show beside every difference whether the
phases it rests on passed them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lblab.config import parse_duration
from lblab.errors import ConfigError
from lblab.manifest import Manifest, PhaseEntry
from lblab.validity import FAIL, WARN

MODEL, USERS, RATE, SHAPES, OPTIONS = (
    "load model",
    "users",
    "offered rate",
    "request shapes",
    "strategy options",
)
SHARED = (MODEL, USERS, RATE, SHAPES, OPTIONS)
"""The labels a live and a simulated run give in the same terms."""
_SIMULATED_SKIP = frozenset(
    {"strategy", "scenario", "seed", "replication", "run_id", "picks_every"}
    | {"arrivals", "servers", "cells", "strategy_options", "requests"}  # labelled below
)
"""Simulated config keys that are no condition (the cell's own name, its seeds, how
densely picks are recorded) or that get a label of their own."""


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _text(value: Any) -> str:
    """Numbers as ``%g``, text as given, ``s1 1, s2 4`` for a flat table, anything else
    as compact JSON; empty as ``none``."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return f"{value:g}"
    if isinstance(value, str):
        return value
    if not value:
        return "none"
    if isinstance(value, Mapping) and all(isinstance(v, int | float | str) for v in value.values()):
        return ", ".join(f"{k} {_text(v)}" for k, v in value.items())
    return json.dumps(value, sort_keys=True, separators=(", ", ": "))


def _seconds(value: Any) -> float | None:
    """Seconds from a number or a duration text (``10s``, as a config gives it), so a
    phase length reads alike from every manifest; None when it is neither."""
    if value is None or isinstance(value, bool):
        return None
    try:
        return parse_duration(value)
    except ConfigError:
        return None


def _shapes(cells: Sequence[tuple[Any, Any]]) -> str:
    """``100/10000 B (package/work)``, one pair per request shape."""
    return ", ".join(f"{p}/{w}" for p, w in cells) + " B (package/work)"


def _window(source: Any, start: Any, length: Any, loop: Any) -> str:
    """``azure-conv from 600 s for 60 s, looping``: what a trace phase replayed."""
    span = f" for {_text(length)} s" if length else " to its end"
    return f"{source} from {_text(start or 0)} s{span}" + (", looping" if loop else "")


def _options(value: Any) -> str:
    options = _dict(value)
    return ", ".join(f"{k}={_text(v)}" for k, v in sorted(options.items())) or "defaults"


def conditions(manifest: Manifest, strategy: str, scenario: str) -> dict[str, str]:
    """What the cell (``strategy`` x ``scenario``) was offered and had, as label -> text;
    a label the manifest does not give is left out."""
    if manifest.simulated:
        return _simulated(manifest, strategy, scenario)
    return _live(manifest, strategy, scenario)


def _live(manifest: Manifest, strategy: str, scenario: str) -> dict[str, str]:
    config = manifest.config
    entry = manifest.scenario(scenario)
    load = {**_dict(config.get("load")), **(entry.load if entry is not None else {})}
    out: dict[str, Any] = {MODEL: load.get("model")}
    if load.get("model") == "open":
        out |= {RATE: load.get("rate"), "arrival": load.get("arrival")}
    elif load.get("model") == "trace":
        out |= {
            RATE: load.get("trace_rate", load.get("rate")),
            "trace": _window(
                load.get("trace"),
                load.get("trace_start"),
                load.get("trace_length"),
                load.get("trace_loop"),
            ),
        }
    elif load.get("model"):
        think = load.get("think_time")
        out |= {
            USERS: load.get("users"),
            "spawn rate": load.get("spawn_rate"),
            "think time": f"{_text(think[0])}-{_text(think[1])} s"
            if isinstance(think, list) and len(think) == 2
            else think,
        }
    if load.get("count"):
        out["requests per phase"] = load.get("count")
    run = _dict(config.get("run"))
    fallback = _seconds(load.get("duration_s", run.get("duration")))
    lengths = sorted(
        {
            p.duration_s
            for p in manifest.phases
            if (p.strategy, p.scenario) == (strategy, scenario) and p.duration_s is not None
        }
    ) or ([] if fallback is None else [fallback])
    out["phase length"] = " | ".join(f"{v:g} s" for v in lengths) or None
    warmup = _seconds(
        load.get(
            "warmup_s", manifest.warmup_s if manifest.warmup_s is not None else run.get("warmup")
        )
    )
    out["warm-up"] = None if warmup is None else f"{warmup:g} s"
    if entry is not None and entry.cells:
        out[SHAPES] = _shapes([(c.package_bytes, c.work_bytes) for c in entry.cells])
    testbed = manifest.testbed
    layout = _dict(testbed.get("cpu_layout"))
    servers = _dict(testbed.get("servers"))
    quotas = _dict(layout.get("quotas")) or {
        sid: _dict(s).get("cpu_quota") for sid, s in servers.items()
    }
    if not quotas and isinstance(config.get("servers"), list):
        quotas = {str(_dict(s).get("id")): _dict(s).get("cpu_quota") for s in config["servers"]}
    if quotas:
        out["server CPU quotas as run"] = ", ".join(
            f"{sid} {q:.3g}" if isinstance(q, int | float) else f"{sid} unlimited"
            for sid, q in quotas.items()
        )
    if servers:
        out["server workers, in-flight cap, delay"] = "; ".join(
            f"{sid}: {_text(_dict(s).get('workers'))}, {_text(_dict(s).get('max_inflight'))}, "
            f"{_text(_dict(s).get('delay_ms'))} ms"
            + (" exp" if _dict(s).get("delay_dist") == "exp" else "")
            for sid, s in servers.items()
        )
    if layout:
        cpus = ",".join(str(c) for c in layout.get("server_cpus") or [])
        out["server CPUs"] = f"{cpus or 'all'} ({layout.get('method')})"
    host = manifest.host
    testbed_config = _dict(config.get("testbed"))
    out |= {
        "CPU limit": manifest.cpu_limit_method,
        "host CPUs": f"{host['cpus']} on {host.get('hostname', '?')}" if host.get("cpus") else None,
        "testbed": testbed.get("kind") or testbed_config.get("kind"),
        "balancer arguments": testbed_config.get("balancer_args"),
        "fault timeline": config.get("timeline"),
        "server weights": config.get("weights"),
    }
    if "strategy_options" in config:
        out[OPTIONS] = _options(_dict(config["strategy_options"]).get(strategy))
    return {k: _text(v) for k, v in out.items() if v is not None}


def _simulated(manifest: Manifest, strategy: str, scenario: str) -> dict[str, str]:
    """Each label's values over the cell's replications (one config each), joined."""
    values: dict[str, set[str]] = {}
    for c in manifest.phase_configs:
        if (c.get("strategy"), c.get("scenario")) != (strategy, scenario):
            continue
        for label, text in _one_simulated(c).items():
            values.setdefault(label, set()).add(text)
    return {label: " | ".join(sorted(texts)) for label, texts in values.items()}


def _one_simulated(config: Mapping[str, Any]) -> dict[str, str]:
    arrivals = _dict(config.get("arrivals"))
    model = arrivals.get("model")
    out: dict[str, Any] = {}
    if model == "OpenArrivals":
        out |= {
            MODEL: "open",
            RATE: arrivals.get("rate"),
            "arrival": "poisson" if arrivals.get("poisson") else "constant",
        }
    elif model == "TraceArrivals":
        window = _dict(arrivals.get("window"))
        out |= {
            MODEL: "trace",
            RATE: arrivals.get("rate") or "the trace's own",
            "trace": _window(
                window.get("source"), window.get("start"), window.get("length"), window.get("loop")
            ),
        }
    elif model == "ClosedUsers":
        out |= {
            MODEL: "closed",
            USERS: arrivals.get("users"),
            "think time": f"{_text(arrivals.get('think'))} s"
            + (" (exponential)" if arrivals.get("exponential_think") else ""),
        }
    elif model:
        out[MODEL] = dict(arrivals)
    out["requests per phase"] = config.get("requests")
    cells = config.get("cells")
    if isinstance(cells, list) and cells:
        out[SHAPES] = _shapes([(c[0], c[1]) for c in cells])
    out["servers"] = "; ".join(
        ", ".join(f"{k} {_text(v)}" for k, v in _dict(g).items())
        for g in config.get("servers") or []
    )
    out[OPTIONS] = _options(config.get("strategy_options"))
    for key, value in config.items():
        if key not in _SIMULATED_SKIP:
            out[key.replace("_", " ")] = "none" if value is None else value
    return {k: _text(v) for k, v in out.items() if v is not None}


# ------------------------------------------------------------------ the cell's checks


@dataclass(frozen=True, slots=True)
class Checks:
    """A cell's validity checks over its phases: how many phases failed or warned, and
    which checks did."""

    level: str  # "fail" | "warn" | "pass" | "n/a" (no phase carries checks)
    phases: int
    failed: int
    warned: int
    fail_names: tuple[str, ...] = ()
    warn_names: tuple[str, ...] = ()

    def text(self) -> str:
        """``fail in 1 of 3 phases: disturbance (and warn: steady state)``, or ``pass``."""
        if not self.phases:
            return "not checked"
        if self.level == "pass":
            return "pass"
        count = self.failed if self.level == FAIL else self.warned
        text = f"{self.level} in {count} of {self.phases} phases: "
        text += ", ".join(self.fail_names if self.level == FAIL else self.warn_names)
        if self.level == FAIL and self.warn_names:
            text += f" (and warn: {', '.join(self.warn_names)})"
        return text


NOT_CHECKED = Checks("n/a", 0, 0, 0)


def cell_checks(manifest: Manifest) -> dict[tuple[str, str], Checks]:
    """(strategy, scenario) -> its phases' checks, from ``phases[].verdicts``."""
    grouped: dict[tuple[str, str], list[PhaseEntry]] = {}
    for p in manifest.checked_phases():
        grouped.setdefault((p.strategy, p.scenario), []).append(p)
    out = {}
    for cell, phases in grouped.items():
        verdicts = [p.verdict for p in phases]
        failed, warned = verdicts.count(FAIL), verdicts.count(WARN)
        fail_names = _names(phases, FAIL)
        out[cell] = Checks(
            FAIL if failed else WARN if warned else "pass",
            len(phases),
            failed,
            warned,
            fail_names,
            tuple(n for n in _names(phases, WARN) if n not in fail_names),
        )
    return out


def _names(phases: list[PhaseEntry], level: str) -> tuple[str, ...]:
    """The checks at ``level`` in any of ``phases``, each once, in the order they run."""
    return tuple(dict.fromkeys(c.name for p in phases for c in p.checks_at(level)))
