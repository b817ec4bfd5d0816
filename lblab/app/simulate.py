"""``lblab simulate``: an experiment on the simulated testbed, from an experiment file or
from this command's flags.

Given an experiment file (what ``lblab run --print-config`` prints: ``[run]``,
``[load]``, ``[[servers]]`` with ids, ``[testbed]``, a timeline ...), it runs that file
as ``lblab run --config FILE --testbed simulated`` does, to the same tables; the flags
that say the same as a key of the file (``SHORTHANDS``, ``KEY_SHORTHANDS``: the
``[simulator]`` table's knobs among them) override it, and the others (a pool's servers
and load, which the file's ``[[servers]]`` and ``[load]`` say) are refused with the key
to set instead. Without a file, the flags are shorthand for an experiment file of queue
servers ``s1`` .. ``sN`` and one load (``app/simulate_layer.py``), run the same way; a
file of the simulator's older dialect (server groups with ``count``, ``speed`` and
``capacity``) is still read as those flags, with a note on the experiment file.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from lblab.app.flags import flags_layer
from lblab.app.simulate_layer import experiment_layer
from lblab.config import load_toml, parse_assignments, parse_duration, parse_names
from lblab.errors import ConfigError
from lblab.experiment.config_layers import KNOWN_KEYS as EXPERIMENT_KEYS
from lblab.experiment.config_layers import SIMULATOR_KEYS, merge
from lblab.experiment.presets import NO_PRESET
from lblab.experiment.runconfig import TestbedKind
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
    "note: {file} is in the simulator's older dialect, still read; `lblab simulate -c "
    "{file} --print-config > experiment.toml` writes it as an experiment file, which "
    "`lblab run` and `lblab simulate` both take (the experiment-file guide)"
)


def is_experiment_file(raw: dict[str, Any]) -> bool:
    """True when ``raw`` (a parsed TOML file) is an experiment file: it has a section only
    that dialect has, or servers with ids (the simulator's groups have none)."""
    if EXPERIMENT_ONLY & set(raw):
        return True
    servers = raw.get("servers")
    return isinstance(servers, list) and any(isinstance(s, dict) and "id" in s for s in servers)


def simulate(
    strategy: Annotated[
        list[str] | None,
        typer.Option(
            "--strategy",
            "-s",
            help="Strategy: a name (`lblab strategies`) or a file of your own as "
            "path/to/file.py:Class, with options of its own in brackets "
            "('least-request[choice_count=3]'); repeat, or give a comma list, to compare several.",
        ),
    ] = None,
    strategy_option: Annotated[
        list[str] | None,
        typer.Option(
            "--strategy-option",
            help="NAME=VALUE for every strategy, e.g. tie=random (one strategy's own: "
            "-s 'lc[tie=random]').",
        ),
    ] = None,
    servers: Annotated[
        int | None, typer.Option(help="Number of identical queue servers, s1 .. sN [3].")
    ] = None,
    requests: Annotated[
        int | None,
        typer.Option(help="Requests to send, each phase (load.count) [10000]; or give --duration."),
    ] = None,
    duration: Annotated[
        str | None,
        typer.Option(
            help="Send for this long, e.g. 30s, as a live phase does (run.duration), instead of --requests."
        ),
    ] = None,
    service: Annotated[
        str | None,
        typer.Option(
            help="Service model: fixed:250ms, exp:10ms, bimodal:1ms,500ms,0.1, json:a=..."
        ),
    ] = None,
    workers: Annotated[int | None, typer.Option(help="Workers per server [1].")] = None,
    rate: Annotated[
        float | None, typer.Option(help="Open arrivals: requests per second [1000].")
    ] = None,
    constant: Annotated[
        bool, typer.Option(help="Open arrivals evenly spaced, not Poisson.")
    ] = False,
    users: Annotated[int | None, typer.Option(help="Closed arrivals: this many users.")] = None,
    think: Annotated[
        str | None, typer.Option(help="Closed arrivals: think time, e.g. 100ms.")
    ] = None,
    scenario: Annotated[
        str | None,
        typer.Option(
            help="Request shapes: sp+sr ... lp+lr, variation; or a trace's sends and shapes, "
            "azure-code, azure-conv (time-scaled to --rate; 0 or none: its own pace)."
        ),
    ] = None,
    routing_keys: Annotated[
        int | None, typer.Option(help="Distinct routing keys (hash strategies).")
    ] = None,
    report_period: Annotated[
        str | None, typer.Option(help="Agent sample/report period [250ms].")
    ] = None,
    report_delay: Annotated[
        str | None, typer.Option(help="Extra staleness of agent reports [0].")
    ] = None,
    client_delay: Annotated[
        str | None, typer.Option(help="One-way client<->balancer delay [0].")
    ] = None,
    server_delay: Annotated[
        str | None, typer.Option(help="One-way balancer<->server delay [0].")
    ] = None,
    deadline: Annotated[
        str | None,
        typer.Option(help="Request deadline (run.request_timeout), or 'none' (an hour) [30s]."),
    ] = None,
    max_tries: Annotated[int | None, typer.Option(help="Attempts when servers reject [3].")] = None,
    picks_every: Annotated[int | None, typer.Option(help="Record every n-th pick [1].")] = None,
    no_picks: Annotated[
        bool, typer.Option("--no-picks", help="Record no picks (huge runs).")
    ] = False,
    balancers: Annotated[
        int | None,
        typer.Option(
            help="Independent balancers sharing the servers, each with its own pool and "
            "strategy state; the load is split among them [1]."
        ),
    ] = None,
    aperture: Annotated[
        str | None,
        typer.Option(
            help="Each balancer connects to and picks within a subset of the servers: "
            "deterministic (Finagle's ring) or random, or none (every server) [none]."
        ),
    ] = None,
    aperture_size: Annotated[
        int | None,
        typer.Option(
            help="Servers in each balancer's aperture (min with the servers) [12]; with "
            "--aperture-load-band the least [1]."
        ),
    ] = None,
    aperture_load_band: Annotated[
        bool,
        typer.Option(
            "--aperture-load-band",
            help="Size each random aperture by Finagle's load band (0.875-1.125 "
            "outstanding requests a server, smoothed over 15 s).",
        ),
    ] = False,
    seed: Annotated[int | None, typer.Option(help="Random seed [1].")] = None,
    replications: Annotated[
        int | None, typer.Option(min=1, max=1000, help="Replications (seed, seed+1, ...) [1].")
    ] = None,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            help="An experiment file (what `lblab run --print-config` prints), run on the "
            "simulated testbed as `lblab run` runs it; or a file of this command's own "
            "settings (the simulator's older dialect, still read).",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="The run's folder (tables, manifest, report) [results/<name>-<time>]."),
    ] = None,
    no_report: Annotated[
        bool,
        typer.Option("--no-report", help="Write no report at the end (lblab report makes one)."),
    ] = False,
    print_config: Annotated[
        bool,
        typer.Option("--print-config", help="Print the experiment file these flags say, and exit."),
    ] = False,
) -> None:
    """Simulate an experiment: from an experiment file, or from these flags.

    With --config FILE, an experiment file (`lblab run --print-config`) runs
    on the simulated testbed as `lblab run --testbed simulated` runs it: the
    same plan, tables, checks and report. -s, --duration, --seed,
    --replications, --users, --out, --balancers, --service, --report-period
    and --deadline override its keys, and the link delays, --report-delay,
    --max-tries, --routing-keys, --picks-every (--no-picks) and the aperture
    flags set its simulator table. Without one, the flags say such a file:
    --servers queue servers (each its own --service, --workers in parallel),
    one scenario's load (--rate, or --users and --think), --requests of it
    in each phase, one phase per strategy and replication; --print-config
    prints that file (see the simulate guide).
    """
    given = dict(locals())
    if out is not None and out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; give a directory for the run's tables")
    raw = load_toml(config) if config is not None else None
    if config is not None and raw is not None and is_experiment_file(raw):
        raise typer.Exit(_run_file(config, given))
    settings = dict(raw or {})
    flags = _pool_flags(given)
    for load, other in (("users", "rate"), ("rate", "users")):
        if load in flags:  # a flag's load model over a file's other one
            settings.pop(other, None)
    settings.update(flags)
    layer = experiment_layer(settings, parse_names(strategy))
    if replications is not None:
        layer["run"]["replications"] = replications
    if out is not None:
        layer["run"]["out"] = str(out)
    from lblab.app.service import Experiment, run_experiment  # a run's imports, for a run

    if print_config:  # a file that runs as printed: no preset under it
        cfg = Experiment.resolve(NO_PRESET, None, layer)
        sys.stdout.write(f'preset = "{NO_PRESET}"\n{cfg.to_toml()}')
        raise typer.Exit(0)
    code = run_experiment(NO_PRESET, None, layer, no_report=no_report)
    if config is not None:
        typer.secho(OLD_DIALECT_NOTE.format(file=config), err=True)
    raise typer.Exit(code)


POOL_FLAGS = (
    "servers", "requests", "duration", "service", "workers", "rate", "users", "think",
    "scenario", "routing_keys", "report_period", "report_delay", "client_delay",
    "server_delay", "deadline", "max_tries", "picks_every", "balancers", "aperture",
    "aperture_size", "seed",
)  # fmt: skip
"""The flags that set the older dialect's key of their name (``app/simulate_layer.py``)."""


def _pool_flags(given: dict[str, Any]) -> dict[str, Any]:
    """The older dialect's settings the flags in ``given`` say."""
    out = {k: given[k] for k in POOL_FLAGS if given.get(k) is not None}
    if given.get("no_picks"):
        out["picks_every"] = 0
    if given.get("aperture_load_band"):
        out["aperture_load_band"] = True
    if given.get("constant"):
        out["poisson"] = False
    options: dict[str, Any] = {}
    for item in given.get("strategy_option") or ():
        options |= parse_assignments(item, "--strategy-option", "tie=random")
    if options:
        out["strategy_options"] = options
    return out


def _run_file(config: Path, given: dict[str, Any]) -> int:
    """``config``, an experiment file, run on the simulated testbed with the shorthand
    flags of ``given`` over it; the others are refused."""
    taken = {*SHORTHANDS, *KEY_SHORTHANDS, "no_picks", "config", "no_report", "print_config"}
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

    return run_experiment(
        None,
        str(config),
        flags,
        out=shorthand["out"],
        no_report=given["no_report"],
        print_config=given["print_config"],
    )


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
