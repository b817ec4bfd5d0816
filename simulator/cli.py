"""Commands of `simulator/` for the `lblab` command line."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this part's commands to ``app``."""
