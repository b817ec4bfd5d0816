"""Runtime changes to a server process: what the ``slow``, ``fail``, ``reject``, ``cold``
and ``capacity`` timeline events set.

Mechanism: the harness writes a ``Control`` as JSON to ``control_path(pid)`` and sends
the server SIGUSR1; the server's handler reads the file and applies each change it
holds (``servers/server.py``). The signal says when, the file says what: no port, no
protocol, nothing for a server that never gets the signal. A request written while an
earlier one is still unread is merged into it (the later change of a field wins), so
two events at the same moment both arrive. A missing or bad file is logged and leaves
the server as it was.

- ``slow``: from then on every request's service takes ``factor`` times its own time
  plus ``add_ms`` ms, the extra slept inside its slot as ``--delay-ms`` is (so later
  requests queue behind it, like a slow machine). ``factor = 1, add_ms = 0`` restores
  normal speed.
- ``fail``, ``reject``, ``cold``: ``servers/behaviour.py`` (rate 0, limit 0, factor 1:
  off).
- ``cpu_quota``: the server's CPU limit changes to that share (its cgroup's quota, or
  its duty cycle's share: ``CpuLimit.set_share``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from lblab.config import check_range
from lblab.errors import ConfigError
from lblab.servers.behaviour import ColdStart, Failing, RateLimit

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

    def extra_s(self, served_s: float, stretch: float = 1.0) -> float:
        """Seconds to add to a request that took ``served_s`` at normal speed, with its
        time also multiplied by ``stretch`` (a cold start's factor)."""
        return (self.factor * stretch - 1.0) * served_s + self.add_ms / 1000.0


NORMAL = Slowdown()


@dataclass(frozen=True, slots=True, kw_only=True)
class Control:
    """One request to a server: each field given changes, None leaves it as it is."""

    slow: Slowdown | None = None
    fail: Failing | None = None
    reject: RateLimit | None = None
    cold: ColdStart | None = None
    cpu_quota: float | None = None

    def __post_init__(self) -> None:
        if self.cpu_quota is not None:
            check_range("capacity.cpu_quota", self.cpu_quota, minimum=0.01, maximum=4096)

    def merged(self, later: Control) -> Control:
        """This request with ``later``'s changes over it."""
        given = {k: getattr(later, k) for k in _FIELDS if getattr(later, k) is not None}
        return replace(self, **given)

    def to_json(self) -> str:
        out: dict[str, Any] = {}
        for name, parts in _PARTS.items():
            value = getattr(self, name)
            if value is not None:
                out[name] = {p: getattr(value, p) for p in parts}
        if self.cpu_quota is not None:
            out["cpu_quota"] = self.cpu_quota
        return json.dumps(out)

    @classmethod
    def from_json(cls, text: str) -> Control:
        """Raises ``ValueError`` (``ConfigError`` among them) for a bad request."""
        raw = json.loads(text)
        if not isinstance(raw, dict) or set(raw) - set(_FIELDS):
            raise ValueError(f"not a control request: {text[:80]!r}")
        given: dict[str, Any] = {}
        for name, kind in _KINDS.items():
            if name in raw:
                given[name] = kind(**{p: float(raw[name][p]) for p in _PARTS[name]})
        if "cpu_quota" in raw:
            given["cpu_quota"] = float(raw["cpu_quota"])
        return cls(**given)


_KINDS: dict[str, Any] = {
    "slow": Slowdown,
    "fail": Failing,
    "reject": RateLimit,
    "cold": ColdStart,
}
_PARTS = {
    "slow": ("factor", "add_ms"),
    "fail": ("rate", "delay_ms"),
    "reject": ("limit", "burst"),
    "cold": ("factor", "duration_s"),
}
_FIELDS = (*_KINDS, "cpu_quota")


def control_path(pid: int) -> Path:
    """Where the harness leaves its requests for server process ``pid``."""
    return Path(tempfile.gettempdir()) / f"lblab-slow-{pid}.json"


def request_control(pid: int, control: Control) -> None:
    """Send server ``pid`` ``control`` (merged into an unread one; atomic write, then
    SIGUSR1)."""
    path = control_path(pid)
    with contextlib.suppress(OSError, ValueError):  # none unread (or unreadable): this alone
        control = Control.from_json(path.read_text()).merged(control)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(control.to_json())
    os.replace(tmp, path)
    os.kill(pid, signal.SIGUSR1)


def request_slowdown(pid: int, slowdown: Slowdown) -> None:
    """Tell server ``pid`` to run at ``slowdown``."""
    request_control(pid, Control(slow=slowdown))


def read_control(pid: int) -> Control | None:
    """The request the harness left for this process (the file is consumed), or None."""
    path = control_path(pid)
    try:
        text = path.read_text()
        path.unlink(missing_ok=True)
        return Control.from_json(text)
    except FileNotFoundError:
        return None  # a merged request was read at the signal before this one
    except (OSError, ValueError, TypeError, KeyError, AttributeError, ConfigError) as exc:
        log.warning("control request in %s ignored: %s", path, exc)
        return None
