"""Slow servers: a window held at a fixed time (the Linkerd "Beyond Round Robin"
fault), and a live run's ``slow`` timeline event (``Slowed``).

``SlowWindow`` wraps a server's service model: a request whose service starts in
``[start, end)`` (simulated seconds) takes ``seconds`` exactly, as in the post's
experiment where one backend's latency "was fixed to 2 seconds for 30 seconds"; any
other request samples the wrapped model. Requests already in service when the window
opens keep their time. ``SimServer.slow_window`` installs it; nothing else changes, so
runs without a window pay nothing.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from simpy import Environment

from lblab.simulator.service import ServiceModel


@dataclass(frozen=True, slots=True)
class SlowWindow:
    base: ServiceModel | SlowWindow
    env: Environment
    start: float
    end: float
    seconds: float

    @property
    def mean_s(self) -> float:
        return self.base.mean_s

    def sample(self, rng: random.Random, work_bytes: int, package_bytes: int) -> float:
        if self.start <= self.env._now < self.end:
            return self.seconds
        return self.base.sample(rng, work_bytes, package_bytes)

    def spec(self) -> str:
        return (
            f"{self.base.spec()} held at {self.seconds * 1000:g}ms "
            f"for t in [{self.start:g}s, {self.end:g}s)"
        )


@dataclass(frozen=True, slots=True)
class Slowed:
    """A live run's ``slow`` event (``servers/slowdown.py``): every request takes
    ``factor`` times its own time plus ``add_s``, from the event until it is undone."""

    base: ServiceModel | SlowWindow
    factor: float
    add_s: float

    @property
    def mean_s(self) -> float:
        return self.base.mean_s * self.factor + self.add_s

    def sample(self, rng: random.Random, work_bytes: int, package_bytes: int) -> float:
        return self.base.sample(rng, work_bytes, package_bytes) * self.factor + self.add_s

    def spec(self) -> str:
        return f"{self.base.spec()} x{self.factor:g} +{self.add_s * 1000:g}ms"
