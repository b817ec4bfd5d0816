"""The ``spike`` timeline event: the offered load times ``factor`` for ``duration``.

Open and trace models: a schedule's send times are stretched by a time warp. The
schedule is drawn as always (``openloop.due_times``, ``traces.Schedule``) in *base*
time u, and each send goes out at the real time t with ``base(t) = u``, where base
time runs ``factor`` times faster than real time inside a spike and at the same pace
outside one:

    base(t) = t + sum over spikes of (factor - 1) * |[start, start + duration] & [0, t]|

So within a spike the rate is ``factor`` times the schedule's (a Poisson schedule stays
Poisson, of that rate: a time change of a Poisson process), and outside it the
schedule goes on where the spike left it. The live generator (``rsocket_user``) and the
simulator's arrivals (``simulator/run.py``) both map their schedules through
``TimeWarp.real``, so a spike sends the same requests at the same times in both.

Closed model: ``users * (factor - 1)`` more users send during the spike
(``extra_users``), each starting at its start and stopping after its request in flight
at its end.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from lblab.errors import ConfigError

MAX_SPIKE_FACTOR = 100.0


@dataclass(frozen=True, slots=True)
class Spike:
    at: float
    """Seconds into the phase (the timeline's ``at``)."""
    duration: float
    factor: float

    @property
    def end(self) -> float:
        return self.at + self.duration

    def extra_users(self, users: int) -> int:
        """Closed model: the users this spike adds to ``users``."""
        return math.ceil(users * self.factor - 1e-9) - users


def check_spikes(spikes: Sequence[Spike], where: str = "timeline") -> None:
    """Spikes of one phase may not overlap (one factor at a time)."""
    ordered = sorted(spikes, key=lambda s: s.at)
    for a, b in itertools.pairwise(ordered):
        if b.at < a.end:
            raise ConfigError(
                f"{where}: the spike at {b.at:g}s starts before the one at {a.at:g}s ends "
                f"({a.end:g}s); spikes of a scenario may not overlap"
            )


class TimeWarp:
    """``real(u)``: the real time of base time ``u``; ``base(t)`` its inverse (module
    docstring). Pure; O(spikes) a call."""

    __slots__ = ("_spikes",)

    def __init__(self, spikes: Sequence[Spike]) -> None:
        check_spikes(spikes)
        self._spikes = tuple(sorted(spikes, key=lambda s: s.at))

    def base(self, t: float) -> float:
        u = t
        for s in self._spikes:
            if t > s.at:
                u += (s.factor - 1.0) * (min(t, s.end) - s.at)
        return u

    def real(self, u: float) -> float:
        t_done = u_done = 0.0  # the last spike's end, in real and base time
        for s in self._spikes:
            u_start = u_done + (s.at - t_done)
            if u <= u_start:
                break
            u_end = u_start + s.factor * s.duration
            if u <= u_end:
                return s.at + (u - u_start) / s.factor
            t_done, u_done = s.end, u_end
        return t_done + (u - u_done)
