"""Runtime slowdown of a server process: what the ``slow`` timeline event sets.

Mechanism: the harness writes ``{"factor": F, "add_ms": D}`` to ``control_path(pid)``
and sends the server SIGUSR1; the server's handler reads the file and from then on
every request's service takes ``F`` times its own time plus ``D`` ms, the extra slept
inside its slot as ``--delay-ms`` is (so later requests queue behind it, like a slow
machine). ``factor = 1, add_ms = 0`` restores normal speed. The signal says when, the
file says what: no port, no protocol, nothing for a server that never gets the signal.
A missing or bad file is logged and leaves the server as it was.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import tempfile
from dataclasses import dataclass
from pathlib import Path

from lblab.config import check_range

log = logging.getLogger(__name__)

MAX_FACTOR = 1000.0
MAX_ADD_MS = 3_600_000.0


@dataclass(frozen=True, slots=True)
class Slowdown:
    factor: float = 1.0
    add_ms: float = 0.0

    def __post_init__(self) -> None:
        check_range("slow.factor", self.factor, minimum=1.0, maximum=MAX_FACTOR)
        check_range("slow.add_ms", self.add_ms, minimum=0.0, maximum=MAX_ADD_MS)

    def extra_s(self, served_s: float) -> float:
        """Seconds to add to a request that took ``served_s`` at normal speed."""
        return (self.factor - 1.0) * served_s + self.add_ms / 1000.0


NORMAL = Slowdown()


def control_path(pid: int) -> Path:
    """Where the harness leaves the slowdown for server process ``pid``."""
    return Path(tempfile.gettempdir()) / f"lblab-slow-{pid}.json"


def request_slowdown(pid: int, slowdown: Slowdown) -> None:
    """Tell server ``pid`` to run at ``slowdown`` (atomic write, then SIGUSR1)."""
    path = control_path(pid)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"factor": slowdown.factor, "add_ms": slowdown.add_ms}))
    os.replace(tmp, path)
    os.kill(pid, signal.SIGUSR1)


def read_slowdown(pid: int, current: Slowdown) -> Slowdown:
    """The slowdown the harness asked for (the file is consumed), or ``current``."""
    path = control_path(pid)
    try:
        raw = json.loads(path.read_text())
        path.unlink(missing_ok=True)
        return Slowdown(float(raw.get("factor", 1.0)), float(raw.get("add_ms", 0.0)))
    except (OSError, ValueError, TypeError, AttributeError) as exc:
        log.warning("slowdown request in %s ignored: %s", path, exc)
        return current
