"""Frugal streaming quantile estimators (one value of state each), as rsocket-java uses.

``FrugalQuantile(q)``: on a sample above the estimate, with probability q, step up; on
one below, with probability 1 - q, step down; the step grows while moving in one
direction and resets on a turn. ``FrugalMedian`` is the q = 0.5 form that steps on
every sample (rsocket-java ``Median``: "considers more data points").

Source: Ma, Muthukrishnan, Sandler, *Frugal Streaming for Estimating Quantiles*, 2013;
rsocket-java ``io.rsocket.loadbalance.FrugalQuantile`` and ``Median``.
"""

from __future__ import annotations

import random


class FrugalQuantile:
    __slots__ = ("estimate", "quantile", "rng", "sign", "step")

    def __init__(self, quantile: float, rng: random.Random) -> None:
        self.quantile = quantile
        self.rng = rng
        self.estimate = 0.0
        self.step = 1.0
        self.sign = 0

    def insert(self, x: float) -> None:
        if self.sign == 0:
            self.estimate = x
            self.sign = 1
            return
        v = self.rng.random()
        if x > self.estimate and v > 1 - self.quantile:
            self._higher(x)
        elif x < self.estimate and v > self.quantile:
            self._lower(x)

    def _higher(self, x: float) -> None:
        self.step += self.sign
        estimate = self.estimate + (self.step if self.step > 0 else 1.0)
        if estimate > x:
            self.step += x - estimate
            estimate = x
        if self.sign < 0:
            self.step = 1.0
        self.sign = 1
        self.estimate = estimate

    def _lower(self, x: float) -> None:
        self.step -= self.sign
        estimate = self.estimate - (self.step if self.step > 0 else 1.0)
        if estimate < x:
            self.step += estimate - x
            estimate = x
        if self.sign > 0:
            self.step = 1.0
        self.sign = -1
        self.estimate = estimate


class FrugalMedian(FrugalQuantile):
    def __init__(self, rng: random.Random) -> None:
        super().__init__(0.5, rng)

    def insert(self, x: float) -> None:
        if self.sign == 0:
            self.estimate = x
            self.sign = 1
        elif x > self.estimate:
            self._higher(x)
        elif x < self.estimate:
            self._lower(x)
