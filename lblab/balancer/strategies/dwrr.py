"""``dwrr``: dynamic weighted round robin from agent reports (capability per unit CPU).

Every ``interval`` seconds (default 0.5, measured on the driver's ``now`` at pick time):

1. ``raw_i = qps_i / max(util_i, eps)`` from backend i's latest agent report: requests
   served per second per unit of CPU (the capability score of Envoy's client-side WRR
   and the SRE book). ``qps_i`` is the report's ``qps`` when the agent sends one, else
   the rate of successful completions the balancer itself saw from i since the last
   recomputation. ``util_i`` is the reported ``cpu_util`` (fraction of allowance).
2. ``s_i = alpha * raw_i + (1 - alpha) * s_i`` (EWMA across recomputations; the first
   value is taken as is).
3. ``w_i = clamp(round(100 * s_i / max(s)), 1, 100)``: integers 1..100.
4. Backends with no agent report yet get the mean weight of those that have one; with
   no reports at all every weight is 1 (plain round robin).

Picks are smooth WRR (``smooth.py``) on ``w_i * slow_start_i``, a documented full scan.
Edge cases: ``util = 0`` counts as ``eps``; a backend with ``qps = 0`` scores 0 and
gets weight 1 (it still receives traffic, so its score can recover); ``max(s) = 0``
gives every reported backend weight 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from mypy_extensions import mypyc_attr

from lblab.loadreport import LoadReport

from .base import BackendView, Outcome, RequestView
from .configured import ConfiguredStrategy
from .options import check
from .smooth import SmoothWeights


@mypyc_attr(native_class=False)
@dataclass(frozen=True, slots=True)
class DynamicWrrConfig:
    interval: float = 0.5
    """Seconds between weight recomputations."""
    eps: float = 0.01
    """Floor of the CPU utilisation in the denominator."""
    alpha: float = 0.5
    """EWMA weight of the newest score."""

    def __post_init__(self) -> None:
        check(self.interval > 0, f"interval={self.interval}: must be > 0 seconds")
        check(0 < self.eps <= 1, f"eps={self.eps}: must be in (0, 1]")
        check(0 < self.alpha <= 1, f"alpha={self.alpha}: must be in (0, 1]")


MAX_WEIGHT: Final = 100


@mypyc_attr(allow_interpreted_subclasses=True)
class DynamicWeightedRoundRobin(ConfiguredStrategy[DynamicWrrConfig]):
    name = "dwrr"
    listed = (1, 6)
    summary = "smooth WRR on w = qps / max(cpu util, eps) from agents, EWMA, 1..100, every 0.5 s"
    Config = DynamicWrrConfig
    uses_agent_reports = True
    full_scan = True

    def _setup(self) -> None:
        self.smooth = SmoothWeights()
        self.scores: dict[str, float] = {}
        self.dynamic_weights: dict[str, int] = {}
        """The integer weights in force, by backend id (for status and tests)."""
        self._reports: dict[str, LoadReport] = {}
        self._served: dict[str, int] = {}
        self._next_at: float | None = None
        self._last_at: float | None = None

    def on_report(self, backend: BackendView, report: LoadReport, now: float) -> None:
        if report.source == "agent" and report.cpu_util is not None:
            self._reports[backend.id] = report

    def on_complete(
        self, backend: BackendView, request: RequestView, outcome: Outcome, now: float
    ) -> None:
        if outcome.ok:
            self._served[backend.id] = self._served.get(backend.id, 0) + 1

    def _rebuild(self, backends: Sequence[BackendView], now: float) -> None:
        items = self.avail.items
        self.smooth.reset(items, self._weights_for(items))

    def _weights_for(self, items: Sequence[BackendView]) -> list[float]:
        known = [self.dynamic_weights[b.id] for b in items if b.id in self.dynamic_weights]
        default = round(sum(known) / len(known)) if known else 1
        return [self.dynamic_weights.get(b.id, default) * b.slow_start for b in items]

    def recompute(self, now: float) -> None:
        """Fold the latest reports into the scores and refresh the integer weights."""
        elapsed = None if self._last_at is None else now - self._last_at
        self._last_at = now
        cfg = self.config
        for backend_id, report in self._reports.items():
            if report.qps is not None:
                qps = report.qps
            elif elapsed:
                qps = self._served.get(backend_id, 0) / elapsed
            else:
                continue
            raw = qps / max(report.cpu_util or 0.0, cfg.eps)
            if not math.isfinite(raw):  # reports are bounded (loadreport.MAX_MEASURE): defence
                continue
            old = self.scores.get(backend_id)
            self.scores[backend_id] = (
                raw if old is None else cfg.alpha * raw + (1 - cfg.alpha) * old
            )
        self._served.clear()
        top = max(self.scores.values(), default=0.0)
        self.dynamic_weights = {
            backend_id: min(MAX_WEIGHT, max(1, round(MAX_WEIGHT * s / top))) if top > 0 else 1
            for backend_id, s in self.scores.items()
        }
        self.smooth.set_weights(self._weights_for(self.avail.items))

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        self._ensure(backends, now)
        if self._next_at is None or now >= self._next_at:
            self._next_at = now + self.config.interval
            self.recompute(now)
        return self.smooth.pick(request)
