"""``lblab reproduce thesis``: the thesis's conclusions checked on the live local testbed.

Runs the ``thesis-claims`` preset through the ordinary runner (``lblab run``, as a child
process: the same testbed, checks and tables as any run), then judges every claim of
``analysis.thesis.claims`` on the run's tables. ``--from DIR`` judges an existing run
without running anything. Output: a terminal table, or JSON with ``--format json``; in
both cases ``thesis-claims.md`` and ``thesis-claims.json`` are written into the run dir.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from lblab.errors import ConfigError
from lblab.pages import FORMAT_HELP, check_format, stamped, this_command
from lblab.stamp import take

if TYPE_CHECKING:  # the command line imports this module; the manifest brings numpy
    from lblab.manifest import Manifest

PRESET = "thesis-claims"
MARKDOWN, JSON_FILE = "thesis-claims.md", "thesis-claims.json"
START_S = 120.0
"""Backstop beyond the phases' own deadlines: testbed start, stop and table writing."""
VERDICT_STYLE = {"supported": "green", "contradicted": "red", "inconclusive": "yellow"}


def _deadline(preset: str, config: Path | None) -> float:
    """Seconds the run may take: every phase's own deadline (the runner's) plus start-up."""
    from lblab.config import load_toml
    from lblab.experiment import runconfig
    from lblab.experiment.plan import plan
    from lblab.experiment.presets import load_preset
    from lblab.experiment.testbed import PHASE_SLACK_S

    cfg = runconfig.resolve(load_preset(preset), load_toml(config) if config else None, {})
    per_phase = cfg.warmup + cfg.duration + cfg.request_timeout + PHASE_SLACK_S
    return START_S + per_phase * len(plan(cfg))


def run_live(preset: str, config: Path | None, run_dir: Path) -> None:
    """``lblab run`` the preset into ``run_dir``; its progress goes to stderr."""
    from lblab.procs import lblab_command

    args = ["run", "--preset", preset, "--out", str(run_dir), "--no-report"]
    if config is not None:
        args += ["--config", str(config)]
    deadline = _deadline(preset, config)
    try:
        code = subprocess.run(
            lblab_command(*args), stdout=sys.stderr, timeout=deadline, check=False
        ).returncode
    except subprocess.TimeoutExpired:
        raise ConfigError(
            f"the run did not finish within {deadline:.0f} s; judge what it wrote with "
            f"`lblab reproduce thesis --from {run_dir}`"
        ) from None
    if code == 2:
        raise typer.Exit(2)  # the child said what was wrong
    if code == 130:
        typer.echo(f"interrupted; continue with: lblab run --resume --out {run_dir}", err=True)
        raise typer.Exit(130)
    if code != 0:
        typer.echo(f"lblab run exited {code} (a phase failed); judging what it measured", err=True)


def _title(manifest: Manifest, run_dir: Path) -> str:
    host = manifest.host
    load = host.get("load_average") or []
    facts = f"{host.get('cpus', '?')} cores" + (f", load average {load[0]:.1f}" if load else "")
    return f"Thesis claims (Bilusyak 2023) on {run_dir.name} ({facts} at the start)"


def _print(title: str, rows: list[dict[str, str]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_lines=True)
    for column in rows[0]:
        table.add_column(
            column,
            justify="right" if column in ("figure", "n") else "left",
            ratio=3 if column in ("claim", "why") else None,
        )
    for row in rows:
        style = VERDICT_STYLE.get(row["verdict"], "")
        table.add_row(*(f"[{style}]{v}[/]" if k == "verdict" and style else v
                        for k, v in row.items()))  # fmt: skip
    Console(width=200).print(table)


def thesis(
    from_dir: Annotated[
        Path | None,
        typer.Option("--from", help="Judge this finished run (results dir); runs nothing."),
    ] = None,
    preset: Annotated[str, typer.Option(help="Preset to run.")] = PRESET,
    config: Annotated[
        Path | None, typer.Option(help="TOML layered on the preset, as `lblab run --config`.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option(help="Run directory (default results/thesis-claims-<time>).")
    ] = None,
    fmt: Annotated[str, typer.Option("--format", help=FORMAT_HELP)] = "table",
) -> None:
    """The thesis's conclusions, each checked live with a 95 % interval (17 min quiet, ~50 busy, on 2 cores)."""
    from lblab.analysis.load import open_run
    from lblab.analysis.thesis import judge_all, load_run, markdown

    check_format(fmt)
    stamp = take()
    if from_dir is not None:
        if config is not None or out is not None:
            raise ConfigError("--from judges an existing run: drop --config and --out")
        run_dir = from_dir
    else:
        run_dir = out or Path(f"results/{preset}-{time.strftime('%Y%m%d-%H%M%S')}")
        run_live(preset, config, run_dir)
    manifest = open_run(run_dir).manifest
    judgements = judge_all(load_run(run_dir))
    title = _title(manifest, run_dir)
    data = {"run": str(run_dir), "title": title, "claims": [j.as_dict() for j in judgements]}
    try:
        (run_dir / MARKDOWN).write_text(markdown(judgements, title))
        tmp = run_dir / f".{JSON_FILE}.tmp"
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        os.replace(tmp, run_dir / JSON_FILE)
    except OSError as exc:
        raise ConfigError(
            f"cannot write the claims into {run_dir}: {exc.strerror or exc}"
        ) from None
    if fmt == "json":
        typer.echo(json.dumps(data, indent=2))
    elif fmt == "markdown":
        typer.echo(stamped(stamp, this_command()))
        typer.echo(markdown(judgements, title, level=3))
    else:
        _print(title, [j.table_row() for j in judgements])
        typer.echo(f"written: {run_dir / MARKDOWN}, {run_dir / JSON_FILE}")
