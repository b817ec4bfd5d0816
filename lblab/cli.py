"""The ``lblab`` command line.

Each part of lblab contributes its own commands through ``<part>/cli.py:register(app)``;
this module only assembles them. Those modules keep heavy imports (pandas, locust,
asyncio servers) inside the command functions, so ``lblab --help`` and
``lblab server`` start fast.
"""

from __future__ import annotations

import importlib
import logging
import sys

import typer

from lblab import __version__
from lblab.errors import ConfigError, WriteFailed

COMMAND_MODULES = (
    "lblab.servers.cli",
    "lblab.balancer.cli",
    "lblab.loadtests.cli",
    "lblab.loadtests.webui.command",
    "lblab.simulator.cli",
    "lblab.analysis.cli",
    "lblab.infra.cli",
    "lblab.sweep.cli",
)

app = typer.Typer(
    name="lblab",
    help=(
        "A research harness for load-balancing algorithms on RSocket.\n\n"
        "Start here: `lblab run --preset quick` runs a whole local experiment and writes "
        "results/<run>/ with a report. `lblab strategies` lists the algorithms."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"lblab {__version__}")
        raise typer.Exit()


@app.callback()
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


for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app)


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
