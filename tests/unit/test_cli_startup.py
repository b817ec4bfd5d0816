"""The ``lblab`` command line stays light: every server, agent and balancer process of a
run imports it, so a heavy import there delays every start (measured: a ``twin``
registration that imported pandas made ``lblab server`` take 9 s to start on a busy
2-core machine, and timeline ``add`` events fired late). A process registers only the
part its command names, and the whole tree otherwise: the map it does so by must be what
each part registers."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer
import typer.main

from lblab import cli

HEAVY = ("pandas", "numpy", "pyarrow", "matplotlib", "simpy", "locust", "gevent", "rsocket")


def test_assembling_every_command_imports_nothing_heavy() -> None:
    code = (
        "import sys, lblab.cli; lblab.cli.app; "
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.strip() == "", f"lblab.cli pulls in {out.stdout.strip()}"


@pytest.mark.parametrize("module", list(cli.COMMAND_MODULES))
def test_each_part_registers_exactly_the_commands_the_map_gives_it(module: str) -> None:
    group = typer.main.get_command(cli.build_app([module]))
    assert isinstance(group, typer.main.TyperGroup)
    assert sorted(group.commands) == sorted(cli.COMMAND_MODULES[module])


def test_the_whole_tree_has_every_command_of_the_map_once() -> None:
    group = typer.main.get_command(cli.build_app())
    assert isinstance(group, typer.main.TyperGroup)
    every = [c for commands in cli.COMMAND_MODULES.values() for c in commands]
    assert len(every) == len(set(every))
    assert sorted(group.commands) == sorted(every)


@pytest.mark.parametrize(
    ("argv", "parts"),
    [
        (["server", "--id", "s1"], ["lblab.servers.cli"]),
        (["-v", "balancer", "--port", "0"], ["lblab.balancer.cli"]),
        (["reproduce", "thesis"], ["lblab.simulator.cli"]),
        ([], list(cli.COMMAND_MODULES)),
        (["--help"], list(cli.COMMAND_MODULES)),
        (["--version"], list(cli.COMMAND_MODULES)),
        (["serve"], list(cli.COMMAND_MODULES)),  # a typo: the tree's "did you mean"
    ],
)
def test_a_process_registers_the_part_its_command_names(argv: list[str], parts: list[str]) -> None:
    assert cli.modules_for(argv) == parts


def test_app_is_the_whole_tree_built_once() -> None:
    assert cli.app is cli.app
    group = typer.main.get_command(cli.app)
    assert isinstance(group, typer.main.TyperGroup)
    assert "server" in group.commands and "sweep" in group.commands
