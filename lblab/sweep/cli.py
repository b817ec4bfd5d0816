"""Commands of `sweep/`: `lblab sweep FILE --out DIR` and `lblab sweep report DIR`."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from lblab.errors import ConfigError

METRIC_HELP = "throughput, mean, p50, p95, p99, p99.9, failure_rate, imbalance"
"""``analysis.sweep.map.METRICS``'s names, written out: the help must not load pandas."""
LIVE_SECONDS = 20.0


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
        typer.Option(
            help="A running Dask scheduler (tcp://HOST:PORT, or tls://HOST:PORT with "
            "--tls-dir); default: a local cluster."
        ),
    ] = None,
    tls_dir: Annotated[
        Path | None,
        typer.Option(
            help="Folder with the TLS scheduler's ca.pem, cert.pem and key.pem (infra/dask.yml "
            "makes them in ~/.config/lblab/dask-tls)."
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(min=1, max=1024, help="Local cluster: worker processes [one per core]."),
    ] = None,
    force: Annotated[
        bool, typer.Option(help="Sweep into a DIR that holds a sweep of a different file.")
    ] = False,
    live_check: Annotated[
        int,
        typer.Option(
            min=0,
            max=100,
            help="Then run this many cells near the winner boundaries live on this machine "
            "(the best against its runner-up) and show measured vs simulated in the report.",
        ),
    ] = 0,
    live_seconds: Annotated[
        float,
        typer.Option(
            min=1,
            max=3600,
            help="Live checks: sending time per strategy (fewer requests than the point's "
            "are sent; the point is simulated again with as many).",
        ),
    ] = LIVE_SECONDS,
    metric: Annotated[
        str,
        typer.Option(help=f"The report's and the live checks' metric: {METRIC_HELP}."),
    ] = "p99",
) -> None:
    """Run every point of FILE missing from DIR (a rerun finishes a killed sweep); exit 1
    if any point failed (its error is in sweep.parquet) or a live check did."""
    from lblab.sweep.grid import load_sweep
    from lblab.sweep.report import build_report
    from lblab.sweep.run import run_sweep, scheduler_security, sweep_folder

    if scheduler is not None and workers is not None:
        raise ConfigError(
            "--workers sizes the local cluster; with --scheduler, start workers there"
        )
    if tls_dir is not None and scheduler is None:
        raise ConfigError("--tls-dir is for --scheduler tls://HOST:PORT, not a local cluster")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file; give a folder for the sweep")
    from lblab.analysis.sweep import metric_column

    metric_column(metric)
    sweep = load_sweep(file)
    security = None if scheduler is None else scheduler_security(scheduler, tls_dir)
    sweep_folder(out, sweep, file, force)
    try:
        outcome = run_sweep(sweep, out, scheduler=scheduler, workers=workers, security=security)
    except KeyboardInterrupt:
        typer.echo(f"interrupted: finished points are in {out}; rerun to run the rest", err=True)
        raise typer.Exit(130) from None
    typer.echo(
        f"wrote {outcome.table} ({outcome.planned} points, {outcome.ran} run now in "
        f"{outcome.seconds:.1f} s, {outcome.failed} failed)"
    )
    checked = _live_checks(out, sweep, live_check, live_seconds, metric) if live_check else True
    typer.echo(f"wrote {build_report(out, None, metric)}")
    typer.echo(f"in a notebook: lblab notebooks {out}")
    if outcome.failed or not checked:
        raise typer.Exit(1)


def _live_checks(out: Path, sweep: Any, n: int, seconds: float, metric: str) -> bool:
    """Run ``n`` cells live (``sweep/live_check.py``); False if a check failed."""
    from lblab.analysis.sweep import read_sweep
    from lblab.sweep.live_check import LiveCheckFailed, cells, pick, run_checks

    chosen, skipped = pick(cells(read_sweep(out)[0], sweep, metric), n)
    if skipped:
        reasons = Counter(skipped.values()).most_common(3)
        typer.echo(
            f"live check: {len(skipped)} cells cannot run live: "
            + "; ".join(f"{why} ({k})" for why, k in reasons),
            err=True,
        )
    if not chosen:
        typer.echo("live check: no cell of this sweep can run live; nothing checked", err=True)
        return True
    try:
        typer.echo(f"wrote {run_checks(out, chosen, seconds, lambda m: typer.echo(m, err=True))}")
    except LiveCheckFailed as exc:
        typer.echo(f"live check failed: {exc}", err=True)
        return False
    except KeyboardInterrupt:
        typer.echo(f"interrupted: rerun to finish the live checks ({out})", err=True)
        raise typer.Exit(130) from None
    return True


@sweep_app.command("report")
def report(
    folder: Annotated[Path, typer.Argument(help="A sweep's --out folder.")],
    axes: Annotated[
        list[str] | None,
        typer.Option(help="Axes of a map, x,y (repeat for more maps) [the first two]."),
    ] = None,
    metric: Annotated[str, typer.Option(help=f"{METRIC_HELP}.")] = "p99",
) -> None:
    """Redraw DIR/report/index.html: the winner maps on another metric or axes."""
    from lblab.results import SWEEP_META, SWEEP_TABLE
    from lblab.sweep.report import build_report

    for name in (SWEEP_META, SWEEP_TABLE):
        if not (folder / name).is_file():
            raise ConfigError(f"{folder} has no {name}: give the --out folder of a finished sweep")
    pairs: list[tuple[str, ...]] = [tuple(a.split(",")) for a in axes or []]
    typer.echo(f"wrote {build_report(folder, pairs or None, metric)}")
    typer.echo(f"in a notebook: lblab notebooks {folder}")


def register(app: Any) -> None:
    """Add this part's commands to ``app``."""
    app.add_typer(sweep_app, name="sweep")
