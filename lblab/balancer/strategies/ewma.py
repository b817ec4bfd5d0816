"""Exponentially weighted moving averages driven by the caller's clock.

``w = exp(-dt / tau)``; ``value = w * value + (1 - w) * x`` (Finagle ``util/Ema.scala``,
rsocket-java ``Ewma``). The time constant ``tau`` is in the same unit as the ``now``
values given; a half-life ``h`` corresponds to ``tau = h / ln 2``. Samples arriving at
the same instant as the previous one (``dt = 0``) do not move the average: it is an
average over time, not over samples.
"""

from __future__ import annotations

import math


def decay(dt: float, tau: float) -> float:
    """The weight kept by the old value after ``dt``: ``exp(-dt / tau)``, 1 for ``dt <= 0``."""
    return math.exp(-dt / tau) if dt > 0 else 1.0


class TimeEwma:
    __slots__ = ("stamp", "tau", "value")

    def __init__(self, tau: float, initial: float | None = None, stamp: float = 0.0) -> None:
        self.tau = tau
        self.value = initial
        """None until the first sample when no initial value is given."""
        self.stamp = stamp

    def insert(self, x: float, now: float) -> float:
        if self.value is None:
            self.value = x
        else:
            w = decay(now - self.stamp, self.tau)
            self.value = w * self.value + (1.0 - w) * x
        self.stamp = now
        return self.value
