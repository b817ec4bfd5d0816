"""Pages of figures that a command regenerates: the markdown they share.

``docs/results/*.md`` are written by commands (``lblab validate --format markdown``,
``lblab reproduce ... --format markdown``, ``scripts/results-pages``), never typed: each
section opens with the command and its stamp (``lblab.stamp``), then its tables.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lblab.errors import ConfigError
from lblab.stamp import Stamp

GENERATED = "<!-- Generated: do not edit. Regenerate with the command below. -->"
FORMATS = ("table", "json", "markdown")
"""``--format`` of the commands that write a results section."""
FORMAT_HELP = "table, json, or markdown (a section of docs/results/, stamped)."


def check_format(fmt: str) -> None:
    """Refuse a ``--format`` not in ``FORMATS`` (before a minute's run, not after)."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format: {fmt!r} is not one of {', '.join(FORMATS)}")


def stamped(stamp: Stamp, command: str) -> str:
    """A section's opening: the generated mark, then which command, commit and machine
    made the tables below it (``stamp`` taken when the measurement started)."""
    return f"{GENERATED}\n\n{stamp.markdown(command)}\n"


def cell(value: Any) -> str:
    """A value as a markdown table cell: empty for None, a float to 4 significant digits
    (whole from 1000 on), ``|`` and newlines escaped."""
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.0f}" if abs(value) >= 1000 else f"{value:.4g}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def table(columns: Sequence[str], rows: Sequence[Mapping[str, Any] | Sequence[Any]]) -> list[str]:
    """The lines of a markdown table of ``rows`` (mappings read by column, or sequences in
    column order)."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        values = [row.get(c) for c in columns] if isinstance(row, Mapping) else list(row)
        lines.append("| " + " | ".join(cell(v) for v in values) + " |")
    return lines


def this_command() -> str:
    """The command line this process was started with, as ``lblab ...`` (for a stamp)."""
    return shlex.join(["lblab", *sys.argv[1:]])


def this_script() -> str:
    """The command line of this Python script, as ``uv run python benchmarks/NAME.py ...``
    (for a stamp)."""
    script = Path(sys.argv[0])
    return "uv run python " + shlex.join([f"{script.parent.name}/{script.name}", *sys.argv[1:]])
