"""Scheduling on SimPy's clock at exact, reproducible instants.

Simulated times are snapped to a 1 ns grid and pushed on the environment's queue as
absolute times. Without it, float sums drift (``0.025 * 12 != 0.1 + 0.2``), and
whether a completion and an arrival at "the same" instant are simultaneous would
depend on rounding: Ingram's deterministic rows moved by 8 % on that alone.

At one instant, events run by priority: completions and responses (SimPy's
``NORMAL``) before new client sends (``LATE``), so a server that finishes at ``t`` is
free for a request sent at ``t``, as in the reference calculation of Ingram's setup.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heappush
from typing import Any

from simpy import Environment
from simpy.core import StopSimulation
from simpy.events import NORMAL, Event

GRID = 1e9
"""Ticks per simulated second (1 ns)."""
LATE = 2
"""Priority after SimPy's NORMAL (1): client sends at an instant come last."""


def snap(t: float) -> float:
    """``t`` on the grid: the exact time an event scheduled for ``t`` runs at."""
    return round(t * GRID) / GRID


class At(Event):
    """A triggered event that runs ``callback(event)`` ``delay`` seconds from now."""

    def __init__(
        self,
        env: Environment,
        delay: float,
        value: Any,
        callback: Callable[[Any], None],
        priority: int = NORMAL,
    ) -> None:
        # Inlined Event.__init__ plus Environment.schedule, as SimPy's own Timeout does,
        # but with the absolute time snapped to the grid.
        self.env = env
        self.callbacks = [callback]
        self._value = value
        self._ok = True
        heappush(  # type: ignore[misc]  # SimPy's queue is untyped
            env._queue,
            (round((env._now + delay) * GRID) / GRID, priority, next(env._eid), self),  # snap()
        )


def run_events(env: Environment) -> int:
    """Process events until the queue is empty or a callback stops the run; how many ran.

    SimPy's ``Environment.step`` as a loop, without its call and ``try`` per event (about
    3 % of a simulated request): the same order, the same ``env.now``, and a failed
    event nobody defused raises as it does in ``step``. A ``StopSimulation`` from a
    callback ends the run; the event that raised it is counted.
    """
    queue = env._queue  # type: ignore[attr-defined]  # SimPy's queue is untyped
    events = 0
    try:
        while queue:
            env._now, _, _, event = heappop(queue)
            events += 1
            callbacks, event.callbacks = event.callbacks, None  # type: ignore[assignment]
            for callback in callbacks:
                callback(event)
            if not event._ok and not hasattr(event, "_defused"):
                exc = type(event._value)(*event._value.args)
                exc.__cause__ = event._value
                raise exc
    except StopSimulation:
        pass
    return events
