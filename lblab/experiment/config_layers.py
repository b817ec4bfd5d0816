"""The experiment config's layers as TOML-shaped dicts, before anything is checked.

``DEFAULTS`` is the bottom layer; a preset, a config file and the flags go over it in
that order (``runconfig.resolve``). ``merge`` puts one layer over another and
``check_keys`` refuses a layer's unknown sections and keys, naming the valid ones. What
the keys mean, and the checks on their values, are ``runconfig``'s.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from lblab.balancer.health_options import DEFAULTS as HEALTH_DEFAULTS
from lblab.errors import ConfigError
from lblab.scenarios import BUILTIN_SCENARIOS
from lblab.strategy_names import THESIS_FIVE

DEFAULTS: dict[str, Any] = {
    "run": {
        "name": "run",
        "strategies": list(THESIS_FIVE),
        "scenarios": list(BUILTIN_SCENARIOS),
        "duration": "20m",
        "warmup": "30s",
        "replications": 3,
        "max_replications": 0,
        "budget": "0s",
        "equivalence": 0.05,
        "metrics": [],
        "seed": 1,
        "request_timeout": "30s",
        "locust_workers": 0,
        "locust_master_bind": "",
        "expect_workers": 0,
        "out": "",
    },
    "load": {
        "model": "closed",
        "users": 50,
        "spawn_rate": 10,
        "think_time": [0, 0],
        "rate": 0,
        "arrival": "constant",
        "count": 0,
        "trace": "",
        "trace_start": 0,
        "trace_length": 0,
        "trace_loop": False,
    },
    "testbed": {
        "kind": "local",
        "balancer": "",
        "admin": "",
        "agent_interval": 0.25,
        "balancer_args": [],
        "isolation": "auto",
        "harness_cpus": 0,
        "balancers": 1,
        "service": "",
    },
    "servers": [
        {"id": "s1", "cpu_quota": 0.25},
        {"id": "s2", "cpu_quota": 0.25},
        {"id": "s3", "cpu_quota": 1.0},
    ],
    "weights": {"s1": 1, "s2": 1, "s3": 4},
    "health": dict(HEALTH_DEFAULTS),
    "strategy_options": {},
    "strategy_specs": {},
    "scenario_defs": {},
    "timeline": [],
}


# Tables that describe one whole thing: a layer that gives them replaces them.
WHOLE_TABLES = frozenset({"weights"})


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Tables merge key by key (except ``WHOLE_TABLES``); arrays and scalars in ``over``
    replace those in ``base``."""
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if (
            isinstance(value, Mapping)
            and isinstance(out.get(key), Mapping)
            and key not in WHOLE_TABLES
        ):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


SCORECARD_KEYS = ("title", "source", "tests", "headline")
"""The ``[scorecard]`` table: what a scenario of the scorecard's library is (``lblab
scorecard``); a run records it and is not changed by it."""
SIMULATOR_KEYS = (
    "client_delay", "server_delay", "report_delay", "max_tries", "routing_keys",
    "picks_every", "aperture", "aperture_size", "aperture_load_band",
)  # fmt: skip
"""The ``[simulator]`` table: knobs only the simulated testbed has, in ``lblab
simulate``'s names (one-way link delays, the agents' extra staleness, attempts on
REJECTED, routing keys for the hash strategies, which picks to record, each balancer's
aperture). Its driver checks their values (``simulator/config.py``); a live testbed
refuses the table, so a file for both gives it under ``[simulated]``."""
SIMULATED = "simulated"
"""The ``[simulated]`` table: a layer over its file's own that applies when the testbed
is simulated (a case about scale gives its simulated server count here)."""

KNOWN_KEYS = {
    "preset": None,
    "run": DEFAULTS["run"],
    "load": DEFAULTS["load"],
    "testbed": DEFAULTS["testbed"],
    "servers": None,
    "weights": None,
    "health": DEFAULTS["health"],
    "strategy_options": None,
    "strategy_specs": None,
    "scenario_defs": None,
    "timeline": None,
    "scorecard": SCORECARD_KEYS,
    "simulator": SIMULATOR_KEYS,
    SIMULATED: None,
}


def check_keys(layer: Mapping[str, Any], source: str) -> None:
    """Unknown sections or keys are typos: name them and the valid ones."""
    for key, value in layer.items():
        if key not in KNOWN_KEYS:
            raise ConfigError(
                f"{source}: unknown section [{key}]; sections are {', '.join(KNOWN_KEYS)}"
            )
        known = KNOWN_KEYS[key]
        if key == SIMULATED:
            if not isinstance(value, Mapping) or SIMULATED in value or "preset" in value:
                raise ConfigError(
                    f"{source}: [{SIMULATED}] must be a table of the file's own sections "
                    "(no preset, no [simulated] in it)"
                )
            check_keys(value, f"{source}: [{SIMULATED}]")
        elif known is not None:
            if not isinstance(value, Mapping):
                raise ConfigError(f"{source}: [{key}] must be a table")
            for sub in value:
                if sub not in known:
                    raise ConfigError(
                        f"{source}: unknown key {key}.{sub}; keys of [{key}] are {', '.join(known)}"
                    )
