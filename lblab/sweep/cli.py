"""Commands of `sweep/`: `lblab sweep FILE --out DIR` and `lblab sweep report DIR`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from lblab.errors import ConfigError


class _RunByDefault(TyperGroup):
    """`lblab sweep FILE ...` is `lblab sweep run FILE ...`: a first word that names no
    subcommand (nor asks for help) is the sweep file."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # a click Context
        if args and args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


sweep_app = typer.Typer(
    cls=_RunByDefault,
    help="Sweep a design space in the simulator on Dask: `lblab sweep FILE --out DIR`; "
    "`lblab sweep report DIR` redraws the winner map.",
    no_args_is_help=True,
)


@sweep_app.command("run")
def run(
    file: Annotated[Path, typer.Argument(help="Sweep file: TOML with [base] and [grid].")],
    out: Annotated[Path, typer.Option(help="Folder for the points, sweep.parquet, report/.")],
    scheduler: Annotated[
        str | None,
        typer.Option(help="A running Dask scheduler (tcp://HOST:PORT); default: a local cluster."),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(min=1, max=1024, help="Local cluster: worker processes [one per core]."),
    ] = None,
    force: Annotated[
        bool, typer.Option(help="Sweep into a DIR that holds a sweep of a different file.")
    ] = False,
) -> None:
    """Run every point of FILE missing from DIR (a rerun finishes a killed sweep); exit 1
    if any point failed (its error is in sweep.parquet)."""
    from lblab.sweep.grid import load_sweep
    from lblab.sweep.report import build_report
    from lblab.sweep.run import run_sweep, sweep_folder

    if scheduler is not None and workers is not None:
        raise ConfigError(
            "--workers sizes the local cluster; with --scheduler, start workers there"
        )
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; give a folder for the sweep")
    sweep = load_sweep(file)
    sweep_folder(out, sweep, file, force)
    try:
        outcome = run_sweep(sweep, out, scheduler=scheduler, workers=workers)
    except KeyboardInterrupt:
        typer.echo(f"interrupted: finished points are in {out}; rerun to run the rest", err=True)
        raise typer.Exit(130) from None
    report = build_report(out)
    typer.echo(
        f"wrote {outcome.table} ({outcome.planned} points, {outcome.ran} run now in "
        f"{outcome.seconds:.1f} s, {outcome.failed} failed) and {report}"
    )
    typer.echo(f"in a notebook: lblab notebooks {out}")
    if outcome.failed:
        raise typer.Exit(1)


@sweep_app.command("report")
def report(
    folder: Annotated[Path, typer.Argument(help="A sweep's --out folder.")],
    axes: Annotated[
        list[str] | None,
        typer.Option(help="Axes of a map, x,y (repeat for more maps) [the first two]."),
    ] = None,
    metric: Annotated[
        str, typer.Option(help="throughput, mean, p50, p95, p99, p99.9, failure_rate, imbalance.")
    ] = "p99",
) -> None:
    """Redraw DIR/report/index.html: the winner maps on another metric or axes."""
    from lblab.analysis.sweep_map import META, TABLE
    from lblab.sweep.report import build_report

    for name in (META, TABLE):
        if not (folder / name).is_file():
            raise ConfigError(f"{folder} has no {name}: give the --out folder of a finished sweep")
    pairs: list[tuple[str, ...]] = [tuple(a.split(",")) for a in axes or []]
    typer.echo(f"wrote {build_report(folder, pairs or None, metric)}")
    typer.echo(f"in a notebook: lblab notebooks {folder}")


def register(app: Any) -> None:
    """Add this part's commands to ``app``."""
    app.add_typer(sweep_app, name="sweep")
