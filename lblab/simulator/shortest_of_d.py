"""JSQ(d): the shortest of d queues sampled at random, a validation-only policy.

The supermarket model of Mitzenmacher (2001) with any d; ``lblab validate`` uses it
for d = 3 (d = 2 runs the real ``p2c``). Queue length is the pool's in-flight count,
which with zero link delays is exactly the server's jobs queued plus in service. The
d backends are drawn without replacement among the eligible ones; on equal counts the
first drawn wins (the draw is random already). Not in the strategy registry: it is a
yardstick for the simulator, not something to run a balancer with.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from lblab.balancer.strategies.base import BackendView, RequestView
from lblab.balancer.strategies.configured import ConfiguredStrategy
from lblab.errors import ConfigError


class ShortestOfD(ConfiguredStrategy):
    name = "jsq-d"
    summary = "shortest in-flight count among d distinct random eligible backends"

    def __init__(self, d: int, rng: random.Random | None = None) -> None:
        if d < 1:
            raise ConfigError(f"jsq-d: d {d} must be at least 1")
        super().__init__(rng=rng)
        self.d = d

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        self._ensure(backends, now)
        items = self.avail.items if not request.exclude else self.avail.eligible_items(request)
        if not items:
            return None
        drawn = self.rng.sample(items, min(self.d, len(items)))
        best = drawn[0]
        for b in drawn[1:]:
            if b.inflight < best.inflight:
                best = b
        return best
