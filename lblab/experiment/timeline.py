"""Scenario timeline events: failures, slowdowns and scaling at given times within a phase.

``at`` counts from the moment the phase's Locust starts its users (warm-up included),
not from its launch, which takes 1-3 s on a busy machine. The runner's phase loop calls
``Timeline.fire_due(elapsed)`` on every tick; each event fires once, and what happened
(with epoch times ``t`` and ``t_done``, so the analysis can mark it on charts) goes into
the manifest.

Faults that last: ``slow`` (the server's service time times ``factor`` plus ``add_ms``,
``servers/slowdown.py``), ``pause`` (SIGSTOP: a hung backend, alive and connected but
silent, which the balancer finds by its missing KEEPALIVE answers and ejects) and
``resume`` (SIGCONT). A ``slow`` or ``pause`` with ``duration`` schedules its own undo
(``slow`` back to normal, ``resume``) that many seconds later, logged like any event;
whatever is still slow or paused when the phase ends is undone by the testbed's
``restore`` before the next phase.

Behaviour (``servers/behaviour.py``): ``fail`` (a share of requests answered with a
server fault), ``reject`` (a token-bucket rate limit, REJECTED above it), ``cold`` (service
times eased from ``factor`` to normal over ``duration``) and ``capacity`` (a new CPU
quota) reach the server as ``slow`` does (``servers/slowdown.py``: ``Control``); ``fail``
and ``reject`` with a ``duration`` undo themselves as ``slow`` does. ``spike`` changes
nothing here: the phase's load generator has it in its schedule (``LoadSpec.spikes``,
``experiment/spikes.py``); it is logged like any event, so the manifest and the report
show it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Protocol

from lblab.experiment.runconfig import ServerSpec, TimelineEvent
from lblab.servers.slowdown import Control


class PoolActions(Protocol):
    def kill(self, sid: str) -> None: ...
    def restart(self, sid: str) -> None: ...
    def drain(self, sid: str) -> None: ...
    def add(self, sid: str, spec: ServerSpec | None = None, weight: float = 1.0) -> None: ...
    def remove(self, sid: str) -> None: ...
    def slow(self, sid: str, factor: float, add_ms: float) -> None: ...
    def pause(self, sid: str) -> None: ...
    def resume(self, sid: str) -> None: ...
    def control(self, sid: str, control: Control) -> None: ...


UNDONE: dict[str, dict[str, Any]] = {
    "slow": {"factor": 1.0, "add_ms": 0.0},
    "fail": {"rate": 0.0},
    "reject": {"limit": 0.0},
}
"""What each timed change is set back to after its ``duration`` (``pause``: ``resume``)."""
LOGGED = {
    "slow": ("factor", "add_ms"),
    "fail": ("rate", "delay_ms"),
    "reject": ("limit", "burst"),
    "cold": ("factor",),
    "capacity": ("cpu_quota",),
    "spike": ("factor",),
}
"""The keys of each action the manifest's event entry carries (with ``duration``)."""


def undo(event: TimelineEvent) -> TimelineEvent | None:
    """The event that ends a ``slow``, ``pause``, ``fail`` or ``reject`` after its
    ``duration``, if it has one."""
    if event.duration is None or event.action not in ("pause", *UNDONE):
        return None
    at = event.at + event.duration
    if event.action == "pause":
        return replace(event, at=at, action="resume", duration=None)
    return replace(event, at=at, duration=None, **UNDONE[event.action])


def log_entry(event: TimelineEvent, t: float) -> dict[str, Any]:
    """The manifest's entry of ``event``, fired at epoch ``t`` (before its outcome)."""
    entry: dict[str, Any] = {"at": event.at, "t": t, "action": event.action, "server": event.server}
    entry.update({k: getattr(event, k) for k in LOGGED.get(event.action, ())})
    if event.duration is not None:
        entry["duration"] = event.duration
    return entry


def planned_log(events: Sequence[TimelineEvent], origin: float) -> list[dict[str, Any]]:
    """The log a phase's ``events`` leave when each takes effect at its time, counted
    from ``origin``, undos included: a simulated phase's, whose clock has no delays."""
    out = []
    for event in events:
        for each in (event, undo(event)):
            if each is not None:
                entry = log_entry(each, origin + each.at)
                out.append({**entry, "ok": True, "t_done": entry["t"]})
    return sorted(out, key=lambda e: e["t"])


class Timeline:
    def __init__(self, events: list[TimelineEvent], pool: PoolActions) -> None:
        self._pending = sorted(events, key=lambda e: e.at)
        self._pool = pool
        self.log: list[dict[str, Any]] = []

    def fire_due(self, elapsed: float) -> None:
        while self._pending and self._pending[0].at <= elapsed:
            event = self._pending.pop(0)
            entry = log_entry(event, time.time())
            try:
                match event.action:
                    case "kill":
                        self._pool.kill(event.server)
                    case "restart":
                        self._pool.restart(event.server)
                    case "drain":
                        self._pool.drain(event.server)
                    case "add":
                        self._pool.add(event.server, event.spec, event.weight)
                    case "remove":
                        self._pool.remove(event.server)
                    case "slow":
                        self._pool.slow(event.server, event.factor, event.add_ms)
                    case "pause":
                        self._pool.pause(event.server)
                    case "resume":
                        self._pool.resume(event.server)
                    case "fail" | "reject" | "cold" | "capacity":
                        control = event.control()
                        assert control is not None
                        self._pool.control(event.server, control)
                entry["ok"] = True
                then = undo(event)
                if then is not None:
                    self._pending.append(then)
                    self._pending.sort(key=lambda e: e.at)
            except Exception as exc:  # recorded in the manifest; the phase goes on
                entry.update(ok=False, error=f"{type(exc).__name__}: {exc}")
            # An add waits for a new server and agent to be ready (1-3 s): ``t`` is when
            # the action began, ``t_done`` when it took effect (the pool changed).
            entry["t_done"] = time.time()
            self.log.append(entry)
