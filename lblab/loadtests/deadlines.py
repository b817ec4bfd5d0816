"""Request deadlines under gevent with one timer per process instead of one per request.

A gevent socket with a timeout starts a ``gevent.Timeout`` (a libev timer and a Python
object around it) for every wait. The load generator's client waits once or twice per
request, so every request paid for arming and cancelling a timer: ten gevent users
against ``benchmarks/echo_server.py`` used 14.2-16.7 us of CPU per request with it and
11.3-13.1 without (three interleaved runs, 2026-11-27).

Here a client's socket has no timeout; each request says when it must end (``enter``),
and one timer for the whole hub fires at the earliest deadline of the requests waiting
then. When it fires it raises ``TimeoutError`` (what a socket timeout raises) in every
greenlet whose deadline has passed, and arms itself for the next. It runs in the hub, as
gevent's own ``Timeout`` does, so the greenlet it raises in is always suspended in a wait
inside its request (``enter`` .. ``leave``), never anywhere else. In a run with one
request timeout for all, a new deadline is never earlier than the armed one, so the
timer is armed again only when it fires or when it had nothing to wait for.
"""

from __future__ import annotations

import math
import time
import weakref
from typing import Any

import gevent

_watches: weakref.WeakKeyDictionary[Any, DeadlineWatch] = weakref.WeakKeyDictionary()


def deadline_watch() -> DeadlineWatch:
    """The watch of this thread's gevent hub (one per hub, made on first use)."""
    hub = gevent.get_hub()
    watch = _watches.get(hub)
    if watch is None:
        watch = _watches[hub] = DeadlineWatch(hub)
    return watch


class DeadlineWatch:
    """The greenlets waiting on a request, their deadlines (``time.monotonic()``), and
    the one timer that ends the overdue ones."""

    def __init__(self, hub: Any) -> None:
        self._loop = hub.loop
        self._waiting: dict[Any, float] = {}
        self._timer: Any = None
        self._due = math.inf
        """When the armed timer fires (inf: not armed)."""

    @property
    def waiting(self) -> int:
        """Greenlets inside a request now."""
        return len(self._waiting)

    def enter(self, deadline: float) -> None:
        """The current greenlet waits on a request that must end by ``deadline``."""
        self._waiting[gevent.getcurrent()] = deadline
        if deadline < self._due:
            self._arm(deadline)

    def leave(self) -> None:
        """The current greenlet's request is over (answered, failed or timed out)."""
        self._waiting.pop(gevent.getcurrent(), None)

    def _arm(self, due: float) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._due = due
        self._loop.update_now()
        # ref=False: a pending deadline alone does not keep the hub's loop running.
        self._timer = self._loop.timer(max(due - time.monotonic(), 0.0), 0.0, ref=False)
        self._timer.start(self._fire)

    def _fire(self) -> None:
        now = time.monotonic()
        self._timer, self._due = None, math.inf
        overdue = [g for g, deadline in self._waiting.items() if deadline <= now]
        for g in overdue:
            del self._waiting[g]
        if self._waiting:
            self._arm(min(self._waiting.values()))
        for g in overdue:
            if not g.dead:  # (a request always leaves; this keeps the hub safe if not)
                # Runs g until it waits again; it may enter a new request meanwhile.
                g.throw(TimeoutError("no response before the deadline"))
