"""Where and when a figure was measured: the commit, the date, the machine's cores and load,
and whether lblab's per-request path ran compiled (``lblab/compiled.py``).

Pages of figures that a command regenerates (``lblab validate --format markdown``) open
with this stamp, so a reader knows which code and which machine made them, and whether
the machine was busy (a load average above its cores).
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from lblab import compiled

_SOURCE = Path(__file__).resolve().parent


@dataclass(frozen=True, slots=True)
class Stamp:
    commit: str
    """The checkout's commit (short), ``+changes`` when its files differ from it;
    ``unknown`` outside a git checkout (an installed wheel)."""
    date: str
    """UTC, to the minute."""
    cores: int
    load: tuple[float, float, float]
    """The 1, 5 and 15 minute load averages when the stamp was taken."""
    code: str = ""
    """``compiled.status()`` of the process that took it: the processes it starts from
    the same tree run the same code."""

    def markdown(self, command: str) -> str:
        """One paragraph: the command, then the stamp."""
        busy = " (busy: more runnable processes than cores)" if self.load[0] > self.cores else ""
        load = " / ".join(f"{x:.1f}" for x in self.load)
        return (
            f"Produced by `{command}` at commit `{self.commit}` on {self.date}, "
            f"{self.cores} cores, load average {load}{busy}"
            + (f"; lblab's per-request path {self.code}." if self.code else ".")
        )


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(_SOURCE), *args],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def take() -> Stamp:
    """The stamp now (call it when the figures are measured, not when they are printed)."""
    commit = _git("rev-parse", "--short", "HEAD") or "unknown"
    if commit != "unknown" and _git("status", "--porcelain", "--untracked-files=no"):
        commit += "+changes"
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return Stamp(commit, now, os.cpu_count() or 1, os.getloadavg(), compiled.status())
