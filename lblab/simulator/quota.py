"""A server held to a CPU quota the way a cgroup holds it: a budget per period.

Linux enforces ``cpu.max = QUOTA PERIOD`` per period: a group may run ``QUOTA`` of CPU
time in each ``PERIOD`` (100 ms by default) at full speed, and is stopped for the rest
of the period once the budget is spent. A server with 0.25 of a core therefore answers
a lone request as fast as an unlimited one, but under load runs 25 ms and stalls 75 ms:
its throughput is capped at ``quota / CPU per request`` and requests caught by a stall
wait up to ``(1 - quota) * period``. A plain slower server (speed 0.25) would get the
cap right but make every request four times slower at any load.

``CpuQuota`` wraps a server's service model, which then gives each request's CPU
demand; ``sample`` returns the wall time the request takes from now given the budget
left. The budget is the server's, spent in the order requests start: exact for one
worker (the lblab server's slot); with several workers running at once it serialises
their CPU, an approximation. ``run.Simulation`` installs one per server whose group has
a ``cpu_quota`` below 1.
"""

from __future__ import annotations

import math
import random
from collections import deque

from simpy import Environment

from lblab.simulator.service import ServiceModel

EPS = 1e-12


class CpuQuota:
    __slots__ = (
        "_done",
        "_left",
        "_period_index",
        "_runs",
        "_until",
        "base",
        "env",
        "period",
        "quota",
    )

    def __init__(self, base: ServiceModel, env: Environment, quota: float, period: float) -> None:
        self.base = base
        self.env = env
        self.quota = quota
        self.period = period
        self._period_index = -1
        self._left = 0.0
        self._until = 0.0
        """When the CPU the server has already been given is used up (serial budget)."""
        self._runs: deque[tuple[float, float]] = deque()
        """The (start, end) stretches of running still to come or under way."""
        self._done = 0.0
        """CPU seconds run in the stretches already over."""

    def used(self, now: float) -> float:
        """CPU seconds the server has run by ``now``: what its agent reads from the
        cgroup (share of the allowance = used in a period / (quota * period))."""
        runs = self._runs
        while runs and runs[0][1] <= now:
            a, b = runs.popleft()
            self._done += b - a
        if runs and runs[0][0] < now:
            return self._done + now - runs[0][0]
        return self._done

    @property
    def mean_s(self) -> float:
        """Mean wall time of a request when the quota binds (the server's own estimate)."""
        return self.base.mean_s / self.quota

    def sample(self, rng: random.Random, work_bytes: int, package_bytes: int) -> float:
        demand = self.base.sample(rng, work_bytes, package_bytes)
        t = max(self.env._now, self._until)
        index = self._period_of(t)
        while demand > EPS:
            if index != self._period_index:
                self._period_index, self._left = index, self.quota * self.period
            end = (index + 1) * self.period
            run = min(demand, self._left, end - t)
            if run > 0:
                runs = self._runs
                if runs and abs(runs[-1][1] - t) <= EPS:
                    runs[-1] = (runs[-1][0], t + run)
                else:
                    runs.append((t, t + run))
            t += run
            demand -= run
            self._left -= run
            if demand > EPS and (self._left <= EPS or t >= end - EPS):
                # budget spent (or period over): wait for the next period. The index
                # moves on with t: recomputed from t it can round back to this period
                # (at t = 256.02 s, t / 0.01 = 25601.999999999996), which never ends.
                t, index = end, index + 1
        self._until = t
        return t - self.env._now

    def _period_of(self, t: float) -> int:
        """The period ``t`` falls in; a time within rounding of a period's start is in it."""
        index = math.floor(t / self.period)
        return index + 1 if (index + 1) * self.period - t <= EPS else index

    def spec(self) -> str:
        return f"{self.base.spec()} under a CPU quota of {self.quota:g} per {self.period:g}s"
