"""``wrr-orca``: gRPC's client-side ``weighted_round_robin`` (gRFC A58) on server load reports.

Weights. From a backend's reports, ``weight = qps / (util + (eps / qps) * penalty)``
(``penalty`` = ``error_utilization_penalty``, default 1.0): requests served per second
per unit of CPU, with errors per second charged as extra utilisation so that a backend
that fails fast does not look capable. ``util`` is ``cpu_util`` (gRPC prefers the
application utilisation, which lblab's reports do not have); ``qps`` and ``eps`` come
from the same report. A report with ``util = 0`` or ``qps = 0`` is ignored, as gRPC's
"empty" reports are. lblab's reports travel two ways, so the strategy takes both (gRPC's
per-call and out-of-band reporting at once): ``util`` from the latest report carrying
``cpu_util`` (the agent's), ``qps`` and ``eps`` (0 when absent) from the latest carrying
``qps`` (a live server's response reports; the simulator's agent reports carry all
three). A weight counts as updated at the older of its two inputs' arrival times.

Usable weights (gRPC's ``endpointWeight.weight``), read at each scheduler rebuild:

- none before the first non-empty report (``non_empty_since``);
- none during ``blackout_period`` (10 s) after ``non_empty_since``: a weight is used
  only once reports have come for that long (0 turns the blackout off);
- none once the last update is ``weight_expiration_period`` (3 min) old; then
  ``non_empty_since`` is cleared, so fresh reports go through the blackout again;
- a backend that becomes available again (it was down, draining or ejected) starts from
  nothing, as a gRPC subchannel returning to READY.

Scheduling. Every ``weight_update_period`` (1 s; at least 0.1 s, gRPC's floor), and on
every pool change, the schedule is rebuilt over the available backends: those without a
usable weight get the mean of the usable ones; with fewer than two usable weights every
backend gets weight 1 (round robin, counted in ``rr_fallbacks``). Each weight is
multiplied by the pool's slow-start factor (static weights are not used, as in gRPC).
Picks are earliest-deadline-first (``edf.py``): period ``1 / weight``, first deadline
uniform in ``[0, period]`` from the strategy's rng (A58's EDF). gRPC's C++ and Go code
use a "static stride" scheduler instead, a lock-free approximation of the same EDF for
concurrent pickers (weights scaled to 16-bit integers); a sans-I/O strategy is picked
from one thread, so lblab uses the exact EDF A58 describes and shares it with
``least-request``. With equal weights the schedule is a round robin in an order drawn
at each rebuild. A request that excludes backends picks past them (each refusal is put
back as if picked). O(log n) per pick, O(n log n) per rebuild.

Source: gRFC A58 "weighted_round_robin LB policy" (grpc/proposal); grpc-go
``balancer/weightedroundrobin`` (``OnLoadReport``, ``weight``, ``newScheduler``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from mypy_extensions import mypyc_attr

from lblab.loadreport import LoadReport

from .base import BackendView, RequestView, eligible
from .configured import ConfiguredStrategy
from .edf import EdfScheduler
from .options import check

MIN_UPDATE_PERIOD_S: Final = 0.1
"""gRPC raises a smaller ``weight_update_period`` to 100 ms; lblab refuses it instead."""


@mypyc_attr(native_class=False)
@dataclass(frozen=True, slots=True)
class WrrOrcaConfig:
    blackout_period: float = 10.0
    """Seconds of reports before a backend's weight is used (0: at once)."""
    weight_expiration_period: float = 180.0
    """Seconds without an update after which a weight is dropped."""
    weight_update_period: float = 1.0
    """Seconds between scheduler rebuilds."""
    error_utilization_penalty: float = 1.0
    """Multiplier of the error rate ``eps / qps`` added to the utilisation."""

    def __post_init__(self) -> None:
        check(
            math.isfinite(self.blackout_period) and self.blackout_period >= 0,
            f"blackout_period={self.blackout_period}: must be >= 0 seconds",
        )
        check(
            math.isfinite(self.weight_expiration_period) and self.weight_expiration_period > 0,
            f"weight_expiration_period={self.weight_expiration_period}: must be > 0 seconds",
        )
        check(
            math.isfinite(self.weight_update_period)
            and self.weight_update_period >= MIN_UPDATE_PERIOD_S,
            f"weight_update_period={self.weight_update_period}: must be >= "
            f"{MIN_UPDATE_PERIOD_S} seconds (gRPC's floor)",
        )
        check(
            math.isfinite(self.error_utilization_penalty) and self.error_utilization_penalty >= 0,
            f"error_utilization_penalty={self.error_utilization_penalty}: must be >= 0",
        )


@dataclass(slots=True)
class BackendWeight:
    """One backend's report inputs and weight (gRPC's ``endpointWeight``)."""

    util: float | None = None
    util_at: float = 0.0
    qps: float | None = None
    eps: float = 0.0
    qps_at: float = 0.0
    weight: float = 0.0
    last_updated: float | None = None
    non_empty_since: float | None = None


@mypyc_attr(allow_interpreted_subclasses=True)
class WeightedRoundRobinOrca(ConfiguredStrategy[WrrOrcaConfig]):
    name = "wrr-orca"
    listed = (4, 3)
    decisions = (
        ("rr_fallbacks", "Schedules built as round robin: fewer than two usable weights."),
    )
    summary = "gRPC weighted_round_robin: EDF on qps / (util + eps/qps * penalty), 10 s blackout"
    Config = WrrOrcaConfig
    uses_agent_reports = True
    uses_response_reports = True

    def _setup(self) -> None:
        self.records: dict[str, BackendWeight] = {}
        self.weights_in_force: dict[str, float] = {}
        """The schedule's weights by backend id, before slow start (for status and tests)."""
        self.rr_fallbacks = 0
        """Rebuilds with fewer than two usable weights (gRPC's ``rr_fallback`` metric)."""
        self._ready: set[str] = set()
        self._edf = EdfScheduler()
        self._schedule_weights: list[float] = []
        self._next_at: float | None = None

    def on_report(self, backend: BackendView, report: LoadReport, now: float) -> None:
        rec = self.records.setdefault(backend.id, BackendWeight())
        if report.cpu_util is not None:
            rec.util, rec.util_at = report.cpu_util, now
        if report.qps is not None:
            rec.qps, rec.eps, rec.qps_at = report.qps, report.eps or 0.0, now
        util, qps = rec.util, rec.qps
        if not util or not qps:  # None or 0: an empty report changes nothing
            return
        rec.weight = qps / (util + rec.eps / qps * self.config.error_utilization_penalty)
        rec.last_updated = min(rec.util_at, rec.qps_at)
        if rec.non_empty_since is None:
            rec.non_empty_since = now

    def usable_weight(self, backend_id: str, now: float) -> float:
        """The weight the scheduler may use now, or 0 (gRPC ``endpointWeight.weight``)."""
        rec = self.records.get(backend_id)
        if rec is None or rec.last_updated is None:
            return 0.0
        cfg = self.config
        if now - rec.last_updated >= cfg.weight_expiration_period:
            rec.non_empty_since = None
            return 0.0
        blackout = cfg.blackout_period
        if blackout > 0 and (rec.non_empty_since is None or now - rec.non_empty_since < blackout):
            return 0.0
        return rec.weight

    def _rebuild(self, backends: Sequence[BackendView], now: float) -> None:
        ready = {b.id for b in self.avail.items}
        for backend_id in ready - self._ready:
            self.records.pop(backend_id, None)  # back to READY: weights start over
        self._ready = ready
        self._next_at = None  # rebuild the schedule at the next pick

    def _reschedule(self, now: float) -> None:
        items = self.avail.items
        weights = [self.usable_weight(b.id, now) for b in items]
        usable = [w for w in weights if w > 0]
        if len(usable) < 2:
            self.rr_fallbacks += 1
            weights = [1.0] * len(items)
        else:
            mean = sum(usable) / len(usable)
            weights = [w if w > 0 else mean for w in weights]
        self.weights_in_force = {b.id: w for b, w in zip(items, weights, strict=True)}
        self._schedule_weights = [w * b.slow_start for b, w in zip(items, weights, strict=True)]
        self._edf = EdfScheduler.with_random_start(self._schedule_weights, self.rng)

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        self._ensure(backends, now)
        if self._next_at is None or now >= self._next_at:
            self._next_at = now + self.config.weight_update_period
            self._reschedule(now)
        items = self.avail.items
        pos = self._edf.next_accepted(
            self._schedule_weights.__getitem__, lambda p: eligible(items[p], request)
        )
        return None if pos is None else items[pos]
