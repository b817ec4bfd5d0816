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

Failure-aware (``failure_penalty_ms`` > 0; Linkerd's load biaser, linkerd2-proxy #4537):
a REJECTED or a server-fault APPLICATION_ERROR observes the effective round trip of
``penalty.penalised_rtt_ms`` (the penalty, or a longer Retry-After hint of a REJECTED up
to ``max_retry_after_s``) in place of its measured latency, through the same peak rule,
so it jumps the cost at once and decays with ``tau``. 0 (the default) is Finagle's.

Source: Finagle ``PeakEwma.scala``, ``P2CPeakEwma.scala``; linkerd2-proxy
``linkerd/load-biaser/src/lib.rs``.
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
from .penalty import penalised_rtt_ms


@mypyc_attr(native_class=False)
@dataclass(frozen=True, slots=True)
class PeakEwmaConfig:
    tau: float = 10.0
    """Decay time constant in seconds."""
    failure_penalty_ms: float = 0.0
    """Round trip a penalised failure observes (``penalty.penalised_rtt_ms``); 0: off."""
    max_retry_after_s: float = 300.0
    """Longest Retry-After hint honoured (Linkerd's ``DEFAULT_RETRY_AFTER_MAX_DURATION``)."""

    def __post_init__(self) -> None:
        check(math.isfinite(self.tau) and self.tau > 0, f"tau={self.tau}: must be > 0 seconds")
        check(
            math.isfinite(self.failure_penalty_ms) and 0 <= self.failure_penalty_ms <= PENALTY_MS,
            f"failure_penalty_ms={self.failure_penalty_ms}: must be 0 (off) to {PENALTY_MS:g} ms",
        )
        check(
            math.isfinite(self.max_retry_after_s) and self.max_retry_after_s >= 0,
            f"max_retry_after_s={self.max_retry_after_s}: must be 0 (no hint honoured) or "
            "more seconds",
        )


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
        self.failure_penalty_ms = self.config.failure_penalty_ms
        self.max_retry_after_ms = self.config.max_retry_after_s * 1000.0

    def _cost(self, backend: BackendView, now: float) -> PeakCost:
        cost = self.costs.get(backend.id)
        if cost is None:
            cost = self.costs[backend.id] = PeakCost(self.config.tau, now)
        return cost

    def on_complete(
        self, backend: BackendView, request: RequestView, outcome: Outcome, now: float
    ) -> None:
        rtt = outcome.latency_ms
        if not outcome.ok:
            penalised = penalised_rtt_ms(outcome, self.failure_penalty_ms, self.max_retry_after_ms)
            if penalised is not None:
                rtt = penalised
        self._cost(backend, now).observe(rtt, now)

    def load(self, backend: BackendView, now: float) -> float:
        return self._cost(backend, now).load(backend.inflight, now)
