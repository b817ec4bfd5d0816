"""``lblab simulate``: an experiment file on the simulated testbed, or the simulator's own
settings.

Given an experiment file (what ``lblab run --print-config`` prints: ``[run]``,
``[load]``, ``[[servers]]`` with ids, ``[testbed]``, a timeline ...), it runs that file
as ``lblab run --config FILE --testbed simulated`` does, to the same tables; the flags
that say the same as a key of the file (``SHORTHANDS``, ``KEY_SHORTHANDS``: the
``[simulator]`` table's knobs among them) override it, and the simulator's other flags
(a pool's servers and load, which the file's ``[[servers]]`` and ``[load]`` say) are
refused with the key to set instead. Any other file, or
none, is the simulator's own settings (``simulator/config.py``: a pool of server groups
with ``count``, ``speed`` and ``capacity``, link delays, apertures), read as before, with
a note on the experiment file when a file was given.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import typer

from lblab.app.flags import flags_layer
from lblab.config import load_toml, parse_duration
from lblab.errors import ConfigError
from lblab.experiment.config_layers import KNOWN_KEYS as EXPERIMENT_KEYS
from lblab.experiment.config_layers import SIMULATOR_KEYS, merge
from lblab.experiment.runconfig import TestbedKind
from lblab.simulator.cli import simulate as simulate_pool
from lblab.simulator.config import KNOWN_KEYS as POOL_KEYS

EXPERIMENT_ONLY = frozenset(EXPERIMENT_KEYS) - POOL_KEYS
"""The top-level keys only an experiment file has (``[run]``, ``[load]``, ...)."""

SHORTHANDS = {
    "strategy": "strategies",
    "duration": "duration",
    "seed": "seed",
    "replications": "replications",
    "out": "out",
    "users": "users",
}
"""The flags of ``lblab simulate`` that override an experiment file's key: each says what
``lblab run``'s flag of this name says (``app.flags.flags_layer``)."""

KEY_SHORTHANDS = {
    "balancers": ("testbed", "balancers"),
    "service": ("testbed", "service"),
    "report_period": ("testbed", "agent_interval"),
    "deadline": ("run", "request_timeout"),
    **{key: ("simulator", key) for key in SIMULATOR_KEYS},
}
"""The flags of ``lblab simulate`` that set a key ``lblab run`` has no flag for, by its
section and name; ``--no-picks`` is ``simulator.picks_every = 0``."""

OLD_DIALECT_NOTE = (
    "note: {file} holds the simulator's own settings, still read; an experiment file says "
    "the same for `lblab run` and `lblab simulate` alike ([run], [load], [[servers]] with "
    'ids, [testbed] kind = "simulated"): start from `lblab run --print-config`, and see '
    "the experiment-file guide"
)


def is_experiment_file(raw: dict[str, Any]) -> bool:
    """True when ``raw`` (a parsed TOML file) is an experiment file: it has a section only
    that dialect has, or servers with ids (the simulator's groups have none)."""
    if EXPERIMENT_ONLY & set(raw):
        return True
    servers = raw.get("servers")
    return isinstance(servers, list) and any(isinstance(s, dict) and "id" in s for s in servers)


@functools.wraps(simulate_pool, assigned=("__module__", "__name__", "__qualname__"))
def simulate(**given: Any) -> None:
    """Simulate an experiment file, or a pool from this command's flags.

    With --config FILE, an experiment file (`lblab run --print-config`) runs
    on the simulated testbed as `lblab run --testbed simulated` runs it: the
    same plan, tables, checks and report. -s, --duration, --seed,
    --replications, --users, --out, --balancers, --service, --report-period
    and --deadline override its keys, and the link delays, --report-delay,
    --max-tries, --routing-keys, --picks-every (--no-picks) and the aperture
    flags its [simulator] table's. Without one (or with
    a file of this command's own settings), the flags describe a pool and its
    load, and it prints requests per wall second.
    """
    config: Path | None = given.get("config")
    raw = load_toml(config) if config is not None else None
    if raw is None or not is_experiment_file(raw):
        simulate_pool(**given)
        if config is not None:  # after: a file it refuses gets its one error line alone
            typer.secho(OLD_DIALECT_NOTE.format(file=config), err=True)
        return
    taken = {*SHORTHANDS, *KEY_SHORTHANDS, "no_picks", "config"}
    refused = [
        name for name, value in given.items() if name not in taken and value not in (None, False)
    ]
    if refused:
        named = ", ".join("--" + name.replace("_", "-") for name in sorted(refused))
        raise ConfigError(
            f"{named}: not a shorthand for a key of the experiment file {config}; set it in "
            f"the file, or drop it (with an experiment file `lblab simulate` takes "
            f"{', '.join('--' + n.replace('_', '-') for n in sorted(taken - {'config'}))})"
        )
    out = given.get("out")
    shorthand = {run_flag: given.get(flag) for flag, run_flag in SHORTHANDS.items()}
    shorthand["out"] = None if out is None else str(out)
    flags = merge(flags_layer(**shorthand, testbed=TestbedKind.SIMULATED.value), _keys(given))
    from lblab.app.service import run_experiment  # the run's imports, only for a run

    raise typer.Exit(run_experiment(None, str(config), flags, out=shorthand["out"]))


def _keys(given: dict[str, Any]) -> dict[str, Any]:
    """The config layer of the flags in ``KEY_SHORTHANDS`` that were given."""
    if given.get("no_picks"):
        given = {**given, "picks_every": 0}
    layer: dict[str, Any] = {}
    for flag, (section, key) in KEY_SHORTHANDS.items():
        value = given.get(flag)
        if value is None or value is False:
            continue
        if flag == "report_period":  # a duration here, seconds in the file
            value = parse_duration(value, "--report-period")
        layer.setdefault(section, {})[key] = value
    return layer
