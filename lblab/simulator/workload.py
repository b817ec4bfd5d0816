"""What the simulated clients send, and when.

Request shapes are the shared scenario matrix (``lblab/scenarios.py``:
``sp+sr`` ... ``lp+lr``, ``variation`` drawing one of the nine cells per request); a
reproduction may pass its own cells (Martins: 66 KB / 1 MB / 17 MB objects).

Arrivals are open (``rate`` requests per second, evenly spaced or Poisson; latency
counts from the intended send time), closed (``users`` each waiting ``think``
seconds after a response before sending again), or a trace replayed (``TraceArrivals``:
send times and shapes from ``lblab.traces.Schedule``, the code the live generator uses).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

from lblab.errors import ConfigError
from lblab.scenarios import builtin_scenario
from lblab.traces import Schedule, TraceWindow, schedule

Cell = tuple[int, int]
"""``(package_bytes, work_bytes)``."""


def scenario_cells(name: str) -> tuple[Cell, ...]:
    """The request shapes of a named scenario (the shared matrix in ``lblab.scenarios``)."""
    return tuple((c.package_bytes, c.work_bytes) for c in builtin_scenario(name).cells)


class ShapeSampler:
    """Draws ``(package_bytes, work_bytes)`` per request, uniformly over the cells."""

    __slots__ = ("_cells", "_choice", "single")

    def __init__(self, cells: tuple[Cell, ...], rng: random.Random) -> None:
        if not cells:
            raise ConfigError("workload: at least one request shape is needed")
        self._cells = cells
        self.single = cells[0] if len(cells) == 1 else None
        """The only shape, if there is one (callers may skip the call: it draws nothing)."""
        self._choice = rng.choice

    def __call__(self) -> Cell:
        return self.single or self._choice(self._cells)


@dataclass(frozen=True, slots=True)
class OpenArrivals:
    rate: float
    """Requests per second."""
    poisson: bool = True

    def __post_init__(self) -> None:
        if self.rate <= 0:
            raise ConfigError(f"rate: {self.rate} must be > 0 requests per second")

    def gap(self, rng: random.Random) -> float:
        return rng.expovariate(self.rate) if self.poisson else 1.0 / self.rate


@dataclass(frozen=True, slots=True)
class ClosedUsers:
    users: int
    think: float
    """Mean think time in seconds."""
    exponential_think: bool = False

    def __post_init__(self) -> None:
        if self.users < 1:
            raise ConfigError(f"users: {self.users} must be at least 1")
        if self.think < 0:
            raise ConfigError(f"think: {self.think} must be 0 or more seconds")

    def think_time(self, rng: random.Random) -> float:
        if self.exponential_think and self.think > 0:
            return rng.expovariate(1.0 / self.think)
        return self.think


@dataclass(frozen=True, slots=True)
class TraceArrivals:
    """A trace's window replayed, time-scaled to a mean of ``rate`` requests per second
    (0: the trace's own pace). Latency counts from the intended send time."""

    window: TraceWindow
    rate: float = 0.0

    def __post_init__(self) -> None:
        self.schedule  # noqa: B018  # read and scaled now: a bad trace is a ConfigError here

    @property
    def schedule(self) -> Schedule:
        return schedule(self.window, self.rate)

    def replay(self, requests: int) -> TraceReplay:
        """A walk through the first ``requests`` sends."""
        return TraceReplay(self.schedule, requests)


class TraceReplay:
    """One run's walk through a trace: ``gap`` gives the time to the next send and a
    call the next request's shape, each in the schedule's order, so the simulation uses
    it as it uses ``OpenArrivals`` and ``ShapeSampler``."""

    __slots__ = ("_dues", "_last", "_shapes", "single")

    def __init__(self, schedule: Schedule, requests: int) -> None:
        self._dues: Iterator[float] = (due for due, _, _ in schedule.sends(most=requests))
        self._shapes: Iterator[Cell] = ((p, w) for _, p, w in schedule.sends(most=requests))
        self._last = next(self._dues)
        self.single = None  # every request has its own shape

    def gap(self, rng: random.Random) -> float:
        due = next(self._dues)
        gap, self._last = due - self._last, due
        return gap

    def __call__(self) -> Cell:
        return next(self._shapes)


Arrivals = OpenArrivals | ClosedUsers | TraceArrivals
