"""``rsocket-weighted``: rsocket-java's ``WeightedLoadbalanceStrategy``.

P2C: two distinct random available backends; the higher
``availability / (1 + L * (pending + 1))`` wins (the first drawn on equal weights,
counted as a tie; with exactly two available backends both are compared, as in Java).
Per backend, in milliseconds (rsocket-java ``BaseWeightedStats``):

- ``pending`` = the balancer's in-flight count.
- ``L``, the predicted latency: the frugal median of observed round trips; 0 for the
  first request; ``STARTUP_PENALTY + pending`` while requests are pending and there is
  no sample; when idle for over 500 x the inter-arrival EWMA (half-life 1 min, initial
  1 s) a 0 is inserted into the median to decay it; otherwise, if the instantaneous
  in-flight time (``duration + (now - stamp0) * pending``) exceeds ``median * pending``,
  that divided by ``pending``.
- Stretching: with ``lo``/``hi`` the frugal 50th/80th percentile estimates, ``hi =
  max(hi, 1.001 lo)`` and ``bw = max(hi - lo, 1)``: ``L > hi`` gives ``L *= (1 + (L -
  hi)/bw)^4``; ``L < lo`` gives ``L /= (1 + (lo - L)/bw)^4``.
- ``availability`` = EWMA (half-life 5 s, initial 1) of 1 per success and 0 per
  failure, refreshed with a 1 when no request was sent for ``5 / ln 2`` s.

O(1) per pick. Source: rsocket-java 1.1 ``io.rsocket.loadbalance``
(``WeightedLoadbalanceStrategy``, ``BaseWeightedStats``, ``Median``, ``FrugalQuantile``,
``Ewma``).
"""

from __future__ import annotations

import math
import random

from .base import BackendView, Outcome, RequestView
from .ewma import TimeEwma
from .p2c import TwoChoices
from .quantile import FrugalMedian, FrugalQuantile

EXP_FACTOR = 4.0
INACTIVITY_FACTOR = 500
STARTUP_PENALTY = float((2**63 - 1) >> 12)
INITIAL_INTER_ARRIVAL_MS = 1000.0
LN2 = math.log(2)
AVAILABILITY_REFRESH_MS = 5000.0 / LN2


class WeightedStats:
    """One backend's statistics; times in ms on the driver's clock."""

    __slots__ = (
        "availability",
        "duration",
        "higher",
        "inter_arrival",
        "lower",
        "median",
        "stamp",
        "stamp0",
    )

    def __init__(self, now_ms: float, rng: random.Random) -> None:
        self.lower = FrugalQuantile(0.5, rng)
        self.higher = FrugalQuantile(0.8, rng)
        self.median = FrugalMedian(rng)
        self.inter_arrival = TimeEwma(60_000.0 / LN2, INITIAL_INTER_ARRIVAL_MS, now_ms)
        self.availability = TimeEwma(5_000.0 / LN2, 1.0, now_ms)
        self.stamp = now_ms
        self.stamp0 = now_ms
        self.duration = 0.0

    def start(self, now_ms: float, pending_before: int) -> None:
        self.inter_arrival.insert(now_ms - self.stamp, now_ms)
        self.duration += max(0.0, now_ms - self.stamp0) * pending_before
        self.stamp = now_ms
        self.stamp0 = now_ms

    def stop(
        self, now_ms: float, sent_ms: float, pending_before: int, rtt: float, ok: bool
    ) -> None:
        self.duration += max(0.0, now_ms - self.stamp0) * pending_before - (now_ms - sent_ms)
        if pending_before <= 1:
            self.duration = 0.0  # nothing in flight: drop accumulated rounding
        self.stamp0 = now_ms
        self.median.insert(rtt)
        self.lower.insert(rtt)
        self.higher.insert(rtt)
        self.availability.insert(1.0 if ok else 0.0, now_ms)

    def predicted_latency(self, now_ms: float, pending: int) -> float:
        elapsed = max(now_ms - self.stamp, 1.0)
        prediction = self.median.estimate
        if prediction == 0.0:
            return 0.0 if pending == 0 else STARTUP_PENALTY + pending
        if pending == 0 and elapsed > INACTIVITY_FACTOR * (self.inter_arrival.value or 0.0):
            self.median.insert(0.0)
            return self.median.estimate
        instant = self.duration + (now_ms - self.stamp0) * pending
        if pending > 0 and prediction * pending < instant:
            return instant / pending
        return prediction

    def weight(self, now_ms: float, pending: int) -> float:
        if now_ms - self.stamp > AVAILABILITY_REFRESH_MS:
            self.availability.insert(1.0, now_ms)
        availability = self.availability.value or 0.0
        latency = self.predicted_latency(now_ms, pending)
        low = self.lower.estimate
        high = max(self.higher.estimate, low * 1.001)
        bandwidth = max(high - low, 1.0)
        if latency < low:
            latency /= (1 + (low - latency) / bandwidth) ** EXP_FACTOR
        elif latency > high:
            latency *= (1 + (latency - high) / bandwidth) ** EXP_FACTOR
        return availability / (1.0 + latency * (pending + 1))


class RSocketWeighted(TwoChoices):
    name = "rsocket-weighted"
    summary = (
        "rsocket-java WeightedLoadbalanceStrategy: P2C on availability / (1 + L (pending + 1))"
    )

    def _setup(self) -> None:
        self.stats: dict[str, WeightedStats] = {}
        self._sent_ms: dict[tuple[int, str], float] = {}

    def _stats(self, backend: BackendView, now_ms: float) -> WeightedStats:
        stats = self.stats.get(backend.id)
        if stats is None:
            stats = self.stats[backend.id] = WeightedStats(now_ms, self.rng)
        return stats

    def on_dispatch(self, backend: BackendView, request: RequestView, now: float) -> None:
        now_ms = now * 1000.0
        self._sent_ms[(request.request_id, backend.id)] = now_ms
        self._stats(backend, now_ms).start(now_ms, backend.inflight - 1)

    def on_complete(
        self, backend: BackendView, request: RequestView, outcome: Outcome, now: float
    ) -> None:
        now_ms = now * 1000.0
        sent_ms = self._sent_ms.pop((request.request_id, backend.id), now_ms - outcome.latency_ms)
        stats = self._stats(backend, now_ms)
        stats.stop(now_ms, sent_ms, backend.inflight + 1, outcome.latency_ms, outcome.ok)

    def order(
        self, a: BackendView, b: BackendView, request: RequestView
    ) -> tuple[BackendView, BackendView]:
        if len(self.avail.items) == 2 and not request.exclude:
            return (a, b) if a.index < b.index else (b, a)  # Java compares in list order
        return a, b

    def load(self, backend: BackendView, now: float) -> float:
        """Negated weight: the higher ``availability / (1 + L (pending + 1))`` wins."""
        now_ms = now * 1000.0
        return -self._stats(backend, now_ms).weight(now_ms, backend.inflight)
