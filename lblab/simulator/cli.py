"""Commands of `simulator/` for the `lblab` command line: validate, calibrate, twin, reproduce."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lblab.errors import ConfigError
from lblab.pages import FORMAT_HELP, check_format, this_command

reproduce_app = typer.Typer(
    help="Re-run a published experiment in the simulator and print it beside the paper.",
    no_args_is_help=True,
)


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
