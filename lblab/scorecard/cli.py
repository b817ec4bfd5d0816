"""The ``lblab scorecard`` command: the library of hard cases x strategies."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from lblab.config import parse_assignments, parse_duration, parse_names
from lblab.errors import EXIT_INTERRUPTED, ConfigError
from lblab.pages import FORMAT_HELP, check_format, stamped, this_command
from lblab.stamp import take


def show(out: Path, fmt: str, opening: str) -> None:
    """The scorecard in ``out`` on standard output: a table a testbed, its JSON, or the
    page of docs/results/ (``opening``: its stamp)."""
    from lblab.analysis.scorecard import (
        SHORT,
        markdown_page,
        overview_rows,
        policy_words,
        read_scorecard,
    )

    card = read_scorecard(out)
    if fmt == "json":
        sys.stdout.write((out / "scorecard.json").read_text())
    elif fmt == "markdown":
        sys.stdout.write(markdown_page(card, opening))
    else:
        from rich.console import Console
        from rich.table import Table

        for testbed in card.get("testbeds") or []:
            columns, rows = overview_rows(card, testbed)
            shown = Table(
                title=f"scorecard ({SHORT.get(testbed, testbed)}): rank and headline figure"
            )
            for column in columns:
                shown.add_column(column)
            for row in rows:
                shown.add_row(*(str(v) for v in row))
            Console().print(shown)
        said = policy_words(card)
        if said:
            Console().print(said, markup=False)


def pool_policy(given: list[str]) -> dict[str, Any]:
    """``--health`` NAME=VALUE items as a ``[health]`` layer, checked as the file's table is
    (a number stays a number, so the runs' configs say what a file would)."""
    from lblab.balancer.health_options import HEALTH_OPTIONS, health_config

    layer: dict[str, Any] = {}
    for item in given:
        for name, value in parse_assignments(
            item, "--health", "success_rate_stdev_factor=1.9"
        ).items():
            if name not in HEALTH_OPTIONS:
                raise ConfigError(
                    f"--health: {name!r} is not a health option; they are "
                    f"{', '.join(HEALTH_OPTIONS)}"
                )
            if name in layer:
                raise ConfigError(f"--health: {name!r} is given twice")
            layer[name] = _number_or_text(value)
    try:
        health_config(layer)
    except ConfigError as exc:
        raise ConfigError(f"--health {str(exc).removeprefix('health.')}") from None
    return layer


def _number_or_text(value: str) -> Any:
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            continue
    return value


def register(app: typer.Typer) -> None:
    """Add this part's commands to ``app``."""

    @app.command("scorecard")
    def scorecard(
        list_: bool = typer.Option(
            False, "--list", help="Print the library, one case a line (its name first), and exit."
        ),
        scenarios: str | None = typer.Option(
            None,
            "--scenarios",
            help="Cases to run, a comma list of library names or case files "
            "(path/to/case.toml with a scorecard table); default: the whole library.",
        ),
        strategy: Annotated[
            list[str] | None,
            typer.Option(
                "-s",
                "--strategy",
                "--strategies",
                help="Strategies (repeatable or a comma list; your own as file.py:Class); "
                "default: every registered strategy (on the simulated testbed, those it can "
                "simulate).",
            ),
        ] = None,
        testbed: str = typer.Option(
            "simulated",
            "--testbed",
            help="simulated (default), local (live processes here), or both: simulated,local.",
        ),
        budget: str = typer.Option(
            "0s",
            "--budget",
            help="Seconds of phases for the whole scorecard (e.g. 10m), shared by its runs; "
            "past it no case adds a block beyond its own minimum (3 in the library). 0: no "
            "budget.",
        ),
        health: Annotated[
            list[str] | None,
            typer.Option(
                "--health",
                help="A health option (a key of the file's health table) for every case's "
                "balancers, NAME=VALUE (repeatable, "
                "or a comma list; `lblab balancer --help` has them, e.g. "
                "success_rate_stdev_factor=1.9 for Envoy's success-rate ejection): the card "
                "of that pool policy, beside the default one.",
            ),
        ] = None,
        seed: int = typer.Option(1, "--seed", help="Base seed of every case's run."),
        out: str | None = typer.Option(
            None,
            "--out",
            help="Folder (default results/scorecard-<time>); run again with the same --out "
            "to finish what a stopped scorecard left.",
        ),
        reports: bool = typer.Option(
            False, "--reports", help="Also write each case's HTML report (slower)."
        ),
        fmt: str = typer.Option("table", "--format", help=FORMAT_HELP),
    ) -> None:
        """Every strategy against the field's named hard cases, with paired intervals.

        Each case (`--list`) is an experiment file of lblab/scorecard/scenarios/ run as
        `lblab run --config` runs it, judged on its headline metric. Writes OUT/<testbed>/
        <case>/ (a run folder each), scorecard.json and scorecard.html.

        Exit codes: 0 ok, 1 a phase failed, 2 bad input, 130 interrupted (run the same
        command again to continue).
        """
        from lblab.scorecard.library import library, select

        check_format(fmt)
        if list_:
            for case in library():
                sys.stdout.write(
                    f"{case.name}: {case.title} ({case.source}); judged on {case.headline}\n"
                )
            return
        from rich.console import Console

        from lblab.scorecard.run import TESTBED_KINDS, Plan, run_scorecard

        testbeds = parse_names(testbed)
        unknown = [t for t in testbeds if t not in TESTBED_KINDS]
        if unknown or not testbeds or len(set(testbeds)) != len(testbeds):
            raise ConfigError(f"--testbed {testbed!r}: give simulated, local, or simulated,local")
        budget_s = parse_duration(budget, "--budget")
        cases = select(parse_names(scenarios) if scenarios else None)
        strategies = [n for s in strategy or [] for n in parse_names(s)]
        left_out: list[str] = []
        if not strategies:
            from lblab.strategy_names import STRATEGY_NAMES

            strategies = list(STRATEGY_NAMES)
            if "simulated" in testbeds:
                from lblab.simulator.simulated_testbed import unsimulated

                left_out = [why for s in strategies if (why := unsimulated(s))]
                strategies = [s for s in strategies if not unsimulated(s)]
        if out is None:
            import time

            out = f"results/scorecard-{time.strftime('%Y%m%d-%H%M%S')}"
        from lblab.balancer.strategies.options import split_options
        from lblab.balancer.strategies.registry import resolve

        names = [resolve(split_options(s, "--strategies")[0]) for s in strategies]
        if len(set(names)) != len(names):
            raise ConfigError(f"--strategies: {', '.join(strategies)} names a strategy twice")
        plan = Plan(
            health=pool_policy(health or []),
            cases=cases,
            strategies=strategies,
            names=names,
            testbeds=testbeds,
            out=Path(out),
            seed=seed,
            budget_s=budget_s,
            reports=reports,
        )
        console = Console(stderr=True)
        for why in left_out:
            console.print(f"left out: {why}", style="yellow")
        stamp = take()
        code = run_scorecard(plan, console)
        if code != EXIT_INTERRUPTED:
            show(plan.out, fmt, stamped(stamp, this_command()))
        raise typer.Exit(code)
