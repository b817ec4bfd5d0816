"""``peak-ewma``: Finagle's P2C over a peak-sensitive latency EWMA.

Per backend: ``cost`` (ms) and the time it was last touched. On each completion with
round-trip ``rtt`` (the balancer-observed latency of any outcome, as Finagle records):
``w = exp(-dt / tau)``; if ``rtt > cost`` then ``cost = rtt`` (jump to peaks) else
``cost = cost * w + rtt * (1 - w)`` (recover cautiously). Reading a cost first decays
it toward 0 (an observation of 0, which also moves the stamp). Load is
``cost * (inflight + 1)``, or ``PENALTY + inflight`` for a backend with no sample
(``cost == 0``) and requests in flight. Two distinct random available backends are
drawn; the lower load wins, equal loads go to the first drawn (counted as a tie).
``tau`` defaults to 10 s (Finagle ``decayTime``). O(1) per pick.

PENALTY is 1e12 ms rather than Finagle's ``Double.MaxValue / 2`` so that adding the
in-flight count still orders two penalised backends.

Source: Finagle ``PeakEwma.scala``, ``P2CPeakEwma.scala``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from mypy_extensions import mypyc_attr

from .base import BackendView, Outcome, RequestView
from .ewma import decay
from .options import check
from .p2c import TwoChoices


@mypyc_attr(native_class=False)
@dataclass(frozen=True, slots=True)
class PeakEwmaConfig:
    tau: float = 10.0
    """Decay time constant in seconds."""

    def __post_init__(self) -> None:
        check(math.isfinite(self.tau) and self.tau > 0, f"tau={self.tau}: must be > 0 seconds")


PENALTY_MS: Final = 1e12


class PeakCost:
    """Finagle's ``PeakEwma`` metric for one backend."""

    __slots__ = ("cost", "stamp", "tau")

    def __init__(self, tau: float, now: float) -> None:
        self.tau = tau
        self.cost = 0.0
        self.stamp = now

    def observe(self, rtt: float, now: float) -> None:
        w = decay(now - self.stamp, self.tau)
        if rtt > self.cost:
            self.cost = rtt
        else:
            self.cost = self.cost * w + rtt * (1.0 - w)
        self.stamp = max(self.stamp, now)

    def load(self, inflight: int, now: float) -> float:
        self.observe(0.0, now)
        if self.cost == 0.0 and inflight != 0:
            return PENALTY_MS + inflight
        return self.cost * (inflight + 1)


@mypyc_attr(allow_interpreted_subclasses=True)
class PeakEwma(TwoChoices[PeakEwmaConfig]):
    name = "peak-ewma"
    listed = (3, 1)
    summary = "Finagle P2C on peak EWMA cost * (inflight + 1), tau 10 s, decays on read"
    Config = PeakEwmaConfig

    def _setup(self) -> None:
        self.costs: dict[str, PeakCost] = {}

    def _cost(self, backend: BackendView, now: float) -> PeakCost:
        cost = self.costs.get(backend.id)
        if cost is None:
            cost = self.costs[backend.id] = PeakCost(self.config.tau, now)
        return cost

    def on_complete(
        self, backend: BackendView, request: RequestView, outcome: Outcome, now: float
    ) -> None:
        self._cost(backend, now).observe(outcome.latency_ms, now)

    def load(self, backend: BackendView, now: float) -> float:
        return self._cost(backend, now).load(backend.inflight, now)
