"""Commands of `simulator/` for the `lblab` command line: simulate, calibrate, reproduce."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from lblab.errors import ConfigError
from lblab.pages import FORMAT_HELP, check_format, this_command

reproduce_app = typer.Typer(
    help="Re-run a published experiment in the simulator and print it beside the paper.",
    no_args_is_help=True,
)


def _given(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


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
    servers: Annotated[int | None, typer.Option(help="Number of identical servers [3].")] = None,
    requests: Annotated[
        int | None,
        typer.Option(help="Requests to send [10000]; with --duration, the most it sends."),
    ] = None,
    duration: Annotated[
        str | None,
        typer.Option(help="Send for this long, e.g. 30s, as a live phase does [none]."),
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
    deadline: Annotated[str | None, typer.Option(help="Request deadline, or 'none' [30s].")] = None,
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
        Path | None, typer.Option(help="Write results/<run> here (tables, manifest).")
    ] = None,
) -> None:
    """Simulate a balancer pool with the real strategies; prints requests per wall second."""
    from dataclasses import replace

    from lblab.balancer.strategies.options import split_options
    from lblab.balancer.strategies.registry import resolve
    from lblab.config import load_toml, parse_assignments, parse_names
    from lblab.simulator.config import config_from_mapping
    from lblab.simulator.run import simulate as run_one
    from lblab.simulator.summary import print_summary

    if out is not None and out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; give a directory for the run's tables")
    raw: dict[str, Any] = load_toml(config) if config else {}
    raw.update(
        _given(
            servers=servers,
            requests=requests,
            duration=duration,
            service=service,
            workers=workers,
            rate=rate,
            users=users,
            think=think,
            scenario=scenario,
            routing_keys=routing_keys,
            report_period=report_period,
            report_delay=report_delay,
            client_delay=client_delay,
            server_delay=server_delay,
            deadline=deadline,
            max_tries=max_tries,
            picks_every=0 if no_picks else picks_every,
            balancers=balancers,
            aperture=aperture,
            aperture_size=aperture_size,
            aperture_load_band=aperture_load_band or None,
            seed=seed,
        )
    )
    if constant:
        raw["poisson"] = False
    if users is not None:
        raw.pop("rate", None)
    if strategy_option:
        opts = dict(raw.get("strategy_options", {}))
        for item in strategy_option:
            opts |= parse_assignments(item, "--strategy-option", "tie=random")
        raw["strategy_options"] = opts
    if out is not None:
        raw.setdefault("run_id", out.name)
    shared = dict(raw.get("strategy_options", {}))
    chosen = {}  # name -> its options
    for given in parse_names(strategy) or [raw.get("strategy", "p2c")]:
        ref, own = split_options(given, "--strategy")
        name = resolve(ref)
        if name in chosen:
            raise ConfigError(
                f"--strategy names {name!r} twice; a run's tables and summary tell strategies "
                "apart by name, so compare two option sets of one strategy in two runs "
                "(each with its own --out)"
            )
        chosen[name] = {**shared, **own}
    # Every config is built (and so checked) before the first simulation starts.
    base = config_from_mapping({**raw, "strategy": next(iter(chosen)), "strategy_options": {}})
    configs = [
        replace(
            base,
            strategy=name,
            strategy_options=tuple(options.items()),
            replication=rep,
            seed=base.seed + rep - 1,
        )
        for name, options in chosen.items()
        for rep in range(1, (replications or 1) + 1)
    ]
    results = [run_one(cfg) for cfg in configs]
    print_summary(results)
    if out is not None:
        from lblab.simulator.output import write_run

        counts = write_run(out, results)
        typer.echo(f"wrote {out} ({', '.join(f'{k} {v} rows' for k, v in counts.items())})")


def calibrate(
    run_dir: Annotated[Path, typer.Argument(help="A results dir with requests.parquet.")],
    column: Annotated[
        str, typer.Option(help="Column with the server's service time (falls back to latency_ms).")
    ] = "service_ms",
) -> None:
    """Fit the JSON-work cost model service = a + b*work_bytes + c*package_bytes.

    A run whose servers sleep (``delay_ms`` in its ``[[servers]]``) has each server's
    mean sleep taken out of its service times first: the fit is of what the slot spends
    besides the sleep (the work, and on a busy machine the sleep's overshoot and the
    hand-off to the work thread, which ``a`` then holds), so a simulated run of the same
    file adds its own sleeps to it.
    """
    from lblab.analysis.load import open_results
    from lblab.experiment.runconfig import ServerSpec
    from lblab.simulator.service import fit_cost_model
    from lblab.simulator.simulated_testbed import mean_sleeps_ms

    # The analysis reader checks the directory and its files (and drops warm-up rows).
    results = open_results(run_dir)
    columns = ["ok", "server", "work_bytes", "package_bytes", "latency_ms", column]
    table = results.table("requests", columns)
    table = table[table["ok"]]
    if table.empty:
        raise ConfigError(f"{run_dir} has no successful requests to fit; give a measured run")
    if column not in table.columns:
        typer.secho(
            f"warning: no {column!r} column; fitting latency_ms (includes queueing and network)",
            err=True,
        )
        column = "latency_ms"
    # The run's resolved [[servers]] (none in a manifest of the simulator's own settings).
    given = results.runs[0].manifest.config.get("servers") or []
    sleeps = mean_sleeps_ms(
        [
            ServerSpec.from_table(s, f"{run_dir}: manifest config servers[{i}]")
            for i, s in enumerate(given)
        ]
    )
    slept = table["server"].astype(str).map(sleeps).fillna(0.0)
    if sleeps:
        said = ", ".join(f"{sid} {ms:g} ms" for sid, ms in sleeps.items())
        typer.secho(f"note: each server's mean sleep taken out first ({said})", err=True)
    fit = fit_cost_model(table["work_bytes"], table["package_bytes"], table[column] - slept)
    typer.echo(f"{fit.model.spec()}    # R^2 {fit.r2:.3f} over {fit.samples} requests")


def twin(
    run_dir: Annotated[
        Path, typer.Argument(help="A finished results dir (lblab run or simulate).")
    ],
    scale: Annotated[
        list[int] | None,
        typer.Option(help="Also simulate this many servers (same mix, same load per server)."),
    ] = None,
    scale_replications: Annotated[
        int, typer.Option(min=1, max=100, help="Replications of each scaled run.")
    ] = 1,
    scale_requests: Annotated[
        int | None,
        typer.Option(
            min=100,
            max=10_000_000,
            help="Most requests per scaled phase (default: enough for 10 agent periods in "
            "its window at the scaled load, 20 000 to 2 000 000; fewer make dwrr and kin "
            "rank without CPU reports).",
        ),
    ] = None,
    repeats: Annotated[
        int | None,
        typer.Option(
            help="Draws of each of the run's phases, pooled per cell (default 3; 1: one "
            "per phase, as the run had; more: nearer the model's expectation, less of the "
            "simulation's own noise in the ranking).",
        ),
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help=FORMAT_HELP)] = "table",
) -> None:
    """Simulate the run's testbed and compare: RESULTS_DIR/twin/twin.json.

    table: progress and a one-line summary; json: twin.json; markdown: the section of
    docs/results/twin.md (stamped). Besides table, progress goes to stderr.
    """
    from lblab.analysis.twin import twin_markdown
    from lblab.simulator.twin import MISS, TAU_TARGET, make_twin
    from lblab.stamp import take

    check_format(fmt)
    stamp = take()

    def say(message: str) -> None:
        typer.echo(message, err=fmt != "table")

    path = make_twin(
        run_dir,
        scale or [],
        scale_replications=scale_replications,
        scale_requests=scale_requests,
        repeats=repeats,
        echo=say,
    )
    from lblab.analysis.twin import load_twin

    report = load_twin(path)
    summary = report.summary
    worst = summary.max_abs_throughput_error
    held = summary.throughput_misses_where_the_harness_held or ()
    say(
        f"wrote {path}: worst throughput error "
        f"{'n/a' if worst is None else f'{worst:.0%}'}, "
        f"{len(summary.throughput_misses)} of {len(report.cells)} cells above "
        f"{MISS:.0%} ({len(held)} where the run's harness checks held), "
        f"tau < {TAU_TARGET} in: {', '.join(summary.tau_below_target) or 'none'}, "
        "measured differences reversed (intervals apart) in: "
        f"{', '.join(summary.resolved_pairs_contradicted or {}) or 'none'}"
    )
    if fmt == "json":
        typer.echo(path.read_text(), nl=False)
    elif fmt == "markdown":
        typer.echo(twin_markdown(report, stamp, this_command()), nl=False)


def register(app: typer.Typer) -> None:
    """Add this part's commands to ``app``."""
    from lblab.simulator.reproduce.commands import register_reproductions
    from lblab.simulator.validate import validate

    app.command("validate")(validate)
    app.command("calibrate")(calibrate)
    app.command("twin")(twin)
    register_reproductions(reproduce_app)
    app.add_typer(reproduce_app, name="reproduce")
