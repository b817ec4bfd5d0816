"""The ``lblab`` command line.

Each part of lblab contributes its own commands through ``<part>/cli.py:register(app)``;
this module only assembles them. Those modules keep heavy imports (pandas, locust,
asyncio servers) inside the command functions, so ``lblab --help`` and
``lblab server`` start fast.

A process that names its command (``lblab server ...``) registers only the part that
defines it: the servers, agents and balancers a run starts are lblab processes, and the
whole command tree (every part imported, every command converted by Typer) cost 40-90 ms
of CPU at each start, of 0.3-0.45 s. ``lblab.cli.app``, ``--help`` and an unknown command
get the whole tree.
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import typer

from lblab import __version__
from lblab.errors import ConfigError, WriteFailed

COMMAND_MODULES: dict[str, tuple[str, ...]] = {
    "lblab.servers.cli": ("server", "agent"),
    "lblab.balancer.cli": ("strategies", "balancer"),
    "lblab.app.cli": ("run", "simulate"),
    "lblab.loadtests.cli": ("locust-workers",),
    "lblab.loadtests.webui.command": ("ui",),
    "lblab.simulator.cli": ("validate", "calibrate", "twin", "reproduce"),
    "lblab.analysis.cli": ("report", "notebooks", "compare"),
    "lblab.infra.cli": ("testbed",),
    "lblab.strategy.cli": ("strategy",),
    "lblab.sweep.cli": ("sweep",),
    "lblab.scorecard.cli": ("scorecard",),
}
"""Each part's module and the top-level commands its ``register`` adds (a test holds
them to what it registers)."""

ROOT_FLAGS = frozenset({"-v", "--verbose"})
"""The root options that may come before a command name."""


def build_app(modules: Iterable[str] = COMMAND_MODULES) -> typer.Typer:
    """The ``lblab`` command tree with the commands of ``modules``."""
    app = typer.Typer(
        name="lblab",
        help=(
            "A research harness for load-balancing algorithms on RSocket.\n\n"
            "Start here: `lblab run --preset quick` runs a whole local experiment and "
            "writes results/<run>/ with a report. `lblab strategies` lists the algorithms."
        ),
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback()(_root)
    for name in modules:
        importlib.import_module(name).register(app)
    return app


def modules_for(argv: Sequence[str]) -> list[str]:
    """The part that defines the command ``argv`` names, or every part (no command,
    ``--help`` or another root option first, or a name no part defines)."""
    for arg in argv:
        if arg in ROOT_FLAGS:
            continue
        for module, commands in COMMAND_MODULES.items():
            if arg in commands:
                return [module]
        break
    return list(COMMAND_MODULES)


def __getattr__(name: str) -> Any:
    """``lblab.cli.app``: the whole command tree (the docs and tests read it), built on
    first use rather than by every process that imports this module."""
    if name == "app":
        app = globals()["app"] = build_app()
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _version(value: bool) -> None:
    if value:
        typer.echo(f"lblab {__version__}")
        raise typer.Exit()


def _root(
    version: bool = typer.Option(
        False, "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Log debug detail to stderr."),
) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
        stream=sys.stderr,
    )


def main() -> None:
    """Entry point: bad input becomes one line on stderr and exit code 2; results that
    could not be written (a full disk) one line and exit code 74.

    This is the only place that does so. Commands raise ``ConfigError`` for bad input,
    and the code that reads a file a person named (``lblab.config.load_toml``,
    ``load_json_object``, ``analysis.load``) converts what that file can raise
    (``UnicodeDecodeError``, ``IsADirectoryError``, TOML, JSON and Parquet errors) into a
    ``ConfigError`` right there, so any other exception stays a traceback: a bug. A flag
    the command line parser refuses (a usage error) gets the same one line.
    """
    # The whole tree when a test or the docs have built (or replaced) ``app``.
    app = globals().get("app") or build_app(modules_for(sys.argv[1:]))
    try:
        code = app(standalone_mode=False)
    except ConfigError as exc:
        _fail(str(exc), 2)
    except WriteFailed as exc:  # results that could not be written: path, why, what to do
        _fail(str(exc), WriteFailed.exit_code)
    except typer.TyperException as exc:  # the parser's (Typer's own click) exceptions
        code = getattr(exc, "exit_code", 1)
        if type(exc).__name__ == "NoArgsIsHelpError":  # the help is already shown
            sys.exit(code)
        ctx = getattr(exc, "ctx", None)
        hint = f" (see `{ctx.command_path} -h`)" if ctx is not None else ""
        _fail(exc.format_message() + hint, code)
    except typer.Abort:
        typer.echo("Aborted!", err=True)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


def _fail(message: str, code: int) -> None:
    text = " ".join(message.split())  # one line, whatever the message held
    typer.secho(f"error: {text}", err=True, fg=typer.colors.RED)
    sys.exit(code)
