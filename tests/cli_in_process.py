"""``cli``: the ``lblab`` entry point run in the test's own process.

The command-line tests try hundreds of arguments; a real ``lblab`` process costs about
0.3 s of CPU to start (Python, Typer's command tree), this about a millisecond. It runs
``lblab.cli.main`` itself, so the exit code and the one-line error are the real ones, on
one command tree built once (Typer builds it anew on every call, ~50 ms). Where a
command would start its long work (a server, a run, Jupyter, a study), a stub raises
``Reached`` instead: the arguments were taken. A few cases of each test module still
run ``lblab`` as a real process, for what only a process shows.
"""

from __future__ import annotations

import importlib
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import typer

import lblab.cli


class Reached(BaseException):
    """A stub stands where the command would start its long work: the values were taken."""


STUBS = (
    ("lblab.servers.server", "run_server"),
    ("lblab.servers.agent", "run_agent"),
    ("lblab.balancer.serve", "run"),
    ("lblab.loadtests.remote_workers", "keep_workers"),
    ("lblab.loadtests.webui.session", "serve"),
    ("lblab.infra.netns_testbed", "up"),
    ("lblab.simulator.validate", "run_validation"),
    ("lblab.simulator.reproduce.ingram", "reproduce_ingram"),
    ("lblab.simulator.reproduce.martins", "reproduce_martins"),
    ("lblab.simulator.reproduce.linkerd", "reproduce_linkerd"),
    ("lblab.simulator.reproduce.prequal", "reproduce_claims"),
    ("lblab.simulator.reproduce.parallel", "run_calls"),
    ("lblab.analysis.nbserver", "serve"),
)
CLASS_STUBS = (("lblab.app.service", "Experiment", "run"),)

_command: Any = None


class Outcome(NamedTuple):
    code: int | str
    out: str
    err: str


@pytest.fixture
def cli(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> Iterator[Any]:
    """``cli(*argv)``: run the entry point in this process (in ``tmp_path``), return its
    exit and output; ``{tmp}`` and ``{port}`` (a free one) in ``argv`` are filled in."""
    global _command
    if _command is None:
        _command = typer.main.get_command(lblab.cli.app)

    def reached(*args: Any, **kwargs: Any) -> None:
        raise Reached

    for module, name in STUBS:
        monkeypatch.setattr(importlib.import_module(module), name, reached)
    for module, cls, name in CLASS_STUBS:
        monkeypatch.setattr(getattr(importlib.import_module(module), cls), name, reached)
    monkeypatch.setattr(lblab.cli, "app", _command)
    monkeypatch.chdir(tmp_path)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = str(sock.getsockname()[1])

    def run(*argv: str) -> Outcome:
        args = [a.replace("{tmp}", str(tmp_path)).replace("{port}", port) for a in argv]
        monkeypatch.setattr(sys, "argv", ["lblab", *args])
        capsys.readouterr()
        try:
            lblab.cli.main()
            code: int | str = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except Reached:
            code = "reached"
        out, err = capsys.readouterr()
        return Outcome(code, out, err)

    yield run
