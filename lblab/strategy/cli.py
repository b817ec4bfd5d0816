"""``lblab strategy``: check a strategy of your own against the contract, or start one."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

strategy_app = typer.Typer(
    help="Your own strategy: `lblab strategy new NAME` writes a skeleton and its test; "
    "`lblab strategy check FILE.py:Class` holds it to the contract the balancer and the "
    "simulator rely on. Then give FILE.py:Class to -s wherever lblab takes a strategy.",
    no_args_is_help=True,
)


@strategy_app.command("check")
def check_command(
    spec: Annotated[
        str,
        typer.Argument(
            help="A strategy: path/to/file.py:Class, package.module:Class or a name, with "
            "options in brackets if it takes any ('lc[tie=random]')."
        ),
    ],
    examples: Annotated[
        int, typer.Option(min=1, max=10_000, help="Event sequences the property test tries.")
    ] = 60,
) -> None:
    """Drive the strategy on the simulator's clock and check its contract: never an
    unavailable or excluded backend, the same picks for a seed, no clock, no global
    random, no sleep or I/O, through pool changes, ties spread; and its pick cost beside
    p2c's. One line a check; exit 1 if any fails."""
    from lblab.balancer.strategies.options import split_options
    from lblab.strategy.conformance import check, report_lines

    ref, options = split_options(spec, "SPEC")
    findings = check(ref, options or None, examples=examples)
    for line in report_lines(findings):
        typer.echo(line)
    failed = [f for f in findings if not f.ok]
    typer.echo(f"{len(findings) - len(failed)} passed, {len(failed)} failed")
    if failed:
        raise typer.Exit(1)


@strategy_app.command("new")
def new_command(
    name: Annotated[str, typer.Argument(help="The strategy's name, e.g. least-of-3.")],
    folder: Annotated[
        Path, typer.Option("--dir", help="Where to write NAME.py and test_NAME.py.")
    ] = Path("."),
    force: Annotated[bool, typer.Option(help="Overwrite files that exist.")] = False,
) -> None:
    """Write a commented skeleton strategy and a test for it (pytest), ready to run."""
    from lblab.strategy.skeleton import write_skeleton

    for path in write_skeleton(name, folder, force=force):
        typer.echo(f"wrote {path}")


def register(app: typer.Typer) -> None:
    """Add this part's commands to ``app``."""
    app.add_typer(strategy_app, name="strategy")
