"""Commands of `balancer/` for the `lblab` command line."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this part's commands to ``app``."""
    from lblab.balancer.command import balancer_command
    from lblab.balancer.strategies.listing import strategies_command

    app.command("strategies")(strategies_command)
    app.command("balancer")(balancer_command)
