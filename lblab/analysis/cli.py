"""Commands of `analysis/` for the `lblab` command line: ``report`` and ``notebooks``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from lblab.errors import ConfigError

ResultsArg = Annotated[
    Path, typer.Argument(help="A results folder (results/<run-id>/).", show_default=False)
]


def _results_dir(path: Path) -> Path:
    if not path.is_dir():
        raise ConfigError(
            f"{path} is not a directory; pass a results folder written by `lblab run` or "
            "`lblab simulate` (results/<run-id>/)"
        )
    return path


def register(app: typer.Typer) -> None:
    """Add this part's commands to ``app``."""

    @app.command("report")
    def report_command(
        results_dir: ResultsArg,
    ) -> None:
        """Write RESULTS_DIR/report/index.html: every chart, the tables, the verdict."""
        _results_dir(results_dir)
        from lblab.analysis.load import open_run

        open_run(results_dir)  # a clear error before the charting imports
        from lblab.analysis.report import build_report

        path = build_report(results_dir)
        typer.echo(f"report: {path}")

    @app.command("notebooks")
    def notebooks_command(
        results_dir: ResultsArg,
        execute: Annotated[
            bool,
            typer.Option(
                "--execute",
                help="Execute the notebooks headless and exit (no server); exit 1 on any cell error.",
            ),
        ] = False,
        server: Annotated[
            bool,
            typer.Option(
                "--server/--no-server",
                "--open/--no-open",
                help="--no-server (or --no-open): only write the .ipynb files, not executed, "
                "and exit.",
            ),
        ] = True,
        only: Annotated[
            list[str] | None,
            typer.Option(
                "--only",
                metavar="NAME",
                help="Just this notebook (repeatable): overview, throughput, latency, "
                "failures, cpu; of a sweep folder: sweep.",
            ),
        ] = None,
        out: Annotated[
            Path | None,
            typer.Option(help="Where to write the .ipynb files [RESULTS_DIR/notebooks]."),
        ] = None,
    ) -> None:
        """Open the analysis notebooks of RESULTS_DIR in JupyterLab, already executed.

        RESULTS_DIR is a run's folder, or a sweep's --out folder (the sweep notebook).

        Executes them into RESULTS_DIR/notebooks (outputs and charts saved),
        then serves them on 127.0.0.1 and prints the URL with its token.
        Ctrl-C stops JupyterLab and its kernels.
        """
        _results_dir(results_dir)
        from lblab.analysis.nbrun import SWEEP_NOTEBOOKS, notebooks_for, pick_notebooks

        offered = notebooks_for(results_dir)
        names = pick_notebooks(offered, only)
        if offered == SWEEP_NOTEBOOKS:
            from lblab.analysis.sweep import read_sweep

            read_sweep(results_dir)  # a clear error before any kernel starts
            folder = results_dir
        else:
            from lblab.analysis.load import check_run, open_run

            run = open_run(results_dir)  # a clear error before any kernel starts
            check_run(run)
            folder = run.path
        from lblab.analysis import nbserver
        from lblab.analysis.nbrun import execute_notebooks, write_notebooks

        out_dir = out or folder / "notebooks"
        if not server and not execute:
            for path in write_notebooks(folder, out_dir, names):
                typer.echo(f"wrote: {path}")
            typer.echo(
                f"open them with: lblab notebooks {results_dir} (executes them and starts "
                "JupyterLab), or execute them headless: add --execute"
            )
            return
        typer.echo(f"executing {len(names)} notebook(s) on {folder} (up to a minute)...")
        try:
            paths, failures = execute_notebooks(folder, out_dir, names)
        except KeyboardInterrupt:
            typer.secho("interrupted: the kernels are shut down", err=True, fg=typer.colors.RED)
            raise typer.Exit(130) from None
        for path in paths:
            typer.echo(f"executed: {path}")
        for failure in failures:
            typer.secho(failure.describe(), err=True, fg=typer.colors.RED)
        if execute:
            raise typer.Exit(1 if failures else 0)
        log_path = out_dir / "jupyter.log"
        typer.echo(f"starting JupyterLab on {out_dir} (127.0.0.1 only; its log: {log_path})...")

        def ready(lab: nbserver.NotebookServer) -> None:
            typer.echo(f"JupyterLab: {lab.url(paths[0].name)}")
            typer.echo(
                "the notebooks open with their outputs and charts saved; "
                "Ctrl-C stops JupyterLab and its kernels"
            )

        try:
            nbserver.serve(out_dir, log_path, ready)
        except nbserver.NotebookServerError as exc:
            typer.secho(f"error: {exc}", err=True, fg=typer.colors.RED)
            raise typer.Exit(1) from None
        typer.echo("JupyterLab stopped")
        raise typer.Exit(1 if failures else 0)

    @app.command("compare")
    def compare_command(
        runs: Annotated[
            list[Path],
            typer.Argument(
                help="Results folders; each after the first is compared to the first. One "
                "folder alone is compared to its twin (RUN/twin/, from `lblab twin`).",
                show_default=False,
            ),
        ],
        out: Annotated[
            Path | None,
            typer.Option(
                help="Where to write index.html and compare.json "
                "(default: compare-<a>-vs-<b> next to the first run)."
            ),
        ] = None,
        metric: Annotated[
            list[str] | None,
            typer.Option(help="A metric to compare (repeatable; default: the headline metrics)."),
        ] = None,
    ) -> None:
        """What changed between runs, which differences are real, do the runs agree.

        Per strategy x scenario: each metric's change with its 95 % interval,
        beside both runs' validity checks of its phases. A cell whose offered
        load or capacity differs between the runs (load model, users or rate,
        request shapes, phase length, warm-up, the servers' quotas as they ran,
        strategy options, ...) is "not comparable", never significant. Then the
        agreement over the cells run under the same conditions: throughput
        within 10 % and 15 %, strategy pairs both runs resolve but in opposite
        directions, Kendall tau-b of the throughput rankings, and each run's
        winners (its winners.json).
        """
        from rich.console import Console

        from lblab.analysis.compare import compare, default_out, print_report, write_report

        report = compare(runs, metric or [])
        page = write_report(report, out or default_out(report))
        print_report(report, Console())
        typer.echo(f"compare: {page}")
