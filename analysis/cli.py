"""Commands of `analysis/` for the `lblab` command line: ``report`` and ``notebooks``."""

from __future__ import annotations

import shutil
import subprocess
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
        from analysis.load import open_run

        open_run(results_dir)  # a clear error before the charting imports
        from analysis.report import build_report

        path = build_report(results_dir)
        typer.echo(f"report: {path}")

    @app.command("notebooks")
    def notebooks_command(
        results_dir: ResultsArg,
        execute: Annotated[
            bool,
            typer.Option(
                "--execute", help="Run every notebook headless; exit 1 on any cell error."
            ),
        ] = False,
        out: Annotated[
            Path | None,
            typer.Option(help="Where to write the .ipynb files [RESULTS_DIR/notebooks]."),
        ] = None,
        open_: Annotated[
            bool,
            typer.Option(
                "--open/--no-open",
                help="Without --execute: start Jupyter on the notebooks if it is installed.",
            ),
        ] = True,
    ) -> None:
        """Write the analysis notebooks pointed at RESULTS_DIR (and optionally run them).

        Without --execute the .ipynb files are written and Jupyter is started on them
        when it is installed; otherwise the command prints how to open them.
        """
        _results_dir(results_dir)
        from analysis.load import check_run, open_run

        run = open_run(results_dir)  # a clear error before any kernel starts
        check_run(run)
        from analysis.nbrun import execute_notebooks, write_notebooks

        out_dir = out or run.path / "notebooks"
        if execute:
            paths, failures = execute_notebooks(run.path, out_dir)
            for path in paths:
                typer.echo(f"executed: {path}")
            for failure in failures:
                typer.secho(failure.describe(), err=True, fg=typer.colors.RED)
            raise typer.Exit(1 if failures else 0)
        paths = write_notebooks(run.path, out_dir)
        for path in paths:
            typer.echo(f"wrote: {path}")
        jupyter = shutil.which("jupyter-lab") or shutil.which("jupyter-notebook")
        if open_ and jupyter:
            typer.echo(f"starting {Path(jupyter).name} in {out_dir} (Ctrl-C to stop)")
            subprocess.run([jupyter, f"--notebook-dir={out_dir}"], check=False)
        else:
            typer.echo(
                f"open them with: jupyter lab {out_dir} (install with `uv pip install "
                f"jupyterlab`), or run them headless: lblab notebooks {results_dir} --execute"
            )

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
                "[compare-<a>-vs-<b> next to the first run]."
            ),
        ] = None,
        metric: Annotated[
            list[str] | None,
            typer.Option(help="A metric to compare (repeatable) [the headline metrics]."),
        ] = None,
    ) -> None:
        """What changed between runs, and which metric differences are significant."""
        from rich.console import Console

        from analysis.compare import compare, default_out, print_report, write_report

        report = compare(runs, metric or [])
        page = write_report(report, out or default_out(report))
        print_report(report, Console())
        typer.echo(f"compare: {page}")
