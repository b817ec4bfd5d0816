"""``least-request``: Envoy's ``LEAST_REQUEST`` load balancer.

Two regimes, chosen at each pool change (Envoy's ``EdfLoadBalancerBase::refresh``):

- **All static weights equal and no backend in slow start** (or at most one available
  backend): draw ``choice_count`` backends uniformly *with replacement*
  (``random() % n`` each, Envoy's ``unweightedHostPickNChoices``); the one with the
  fewest requests in flight wins; a later draw replaces the candidate only when it has
  strictly fewer, so the first drawn wins ties. (``p2c`` differs here: Finagle draws two
  *distinct* backends.) A pick counts in ``ties`` when another drawn backend had as few
  in flight as the winner. O(``choice_count``) per pick. With ``selection_method =
  "full_scan"`` (Envoy's ``FULL_SCAN``, ``unweightedHostPickFullScan``) it looks at every
  eligible backend instead, in list order, and takes the one with the fewest in flight;
  ties are broken by reservoir sampling, as Envoy does: the k-th backend found tied for
  the least replaces the candidate when ``rng.randrange(k) == 0``, so each of the tied
  is taken with probability 1/k. O(n) per pick. ``choice_count`` is then unused.
- **Unequal weights, or a backend in slow start**: EDF scheduling (``edf.py``) on
  ``w_i = weight_i * slow_start_i / (inflight_i + 1) ^ active_request_bias``. A picked
  backend goes back into the schedule with its weight *at pick time* (in flight not
  counting the request being picked), so a busy backend's next deadline is pushed out.
  ``active_request_bias = 0`` is plain weighted round robin (EDF on the static weights);
  1 (the default) divides by ``inflight + 1``; larger values punish load harder. The
  schedule is rebuilt on every pool change, from the state after ``seed % 429,496,729``
  picks (Envoy's ``createWithPicks``; ``seed`` is drawn once from the strategy's rng,
  as Envoy's ``seed_``), so balancers with different seeds do not pick in lockstep.
  O(log n) per pick, O(n log n) per rebuild.

Edge cases: no eligible backend gives None; one gives it. A request that excludes
backends (a REJECTED replay), or a draw that hit a backend gone unavailable behind the
list's back, draws among the eligible ones (O(n)); in the EDF regime ineligible entries
are picked past and put back, as Envoy retries host selection. Envoy's 2025 runtime
flag that uses EDF whenever ``active_request_bias`` is set explicitly
(``least_request_lb_active_request_bias_forces_weighted``) is not modelled; neither is
Envoy's ``count_pending_requests`` (lblab's balancer has no pending queue).

Source: Envoy ``source/extensions/load_balancing_policies/least_request/least_request_lb.cc``
(``hostWeight``, ``unweightedHostPickNChoices``, ``unweightedHostPickFullScan``),
``least_request.proto`` (``choice_count`` default 2, at least 2; ``active_request_bias``
default 1.0; ``selection_method`` default ``N_CHOICES``) and
``source/common/upstream/edf_scheduler.h``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

from mypy_extensions import mypyc_attr

from .base import BackendView, RequestView, eligible
from .configured import ConfiguredStrategy
from .edf import MAX_PRE_PICKS, EdfScheduler
from .options import check

MAX_CHOICES: Final = 1000
"""A bound on ``choice_count`` (Envoy's is uint32): the draws are made on every pick."""
SelectionMethod = Literal["n_choices", "full_scan"]
"""Envoy's ``selection_method``: ``choice_count`` random draws, or every backend."""


@mypyc_attr(native_class=False)
@dataclass(frozen=True, slots=True)
class LeastRequestConfig:
    choice_count: int = 2
    """Backends drawn per pick when all weights are equal."""
    active_request_bias: float = 1.0
    """Exponent of ``(inflight + 1)`` that divides the weight in the EDF regime."""
    selection_method: "SelectionMethod" = "n_choices"
    """Equal weights: ``n_choices`` draws ``choice_count``; ``full_scan`` looks at all."""

    def __post_init__(self) -> None:
        check(
            2 <= self.choice_count <= MAX_CHOICES,
            f"choice_count={self.choice_count}: must be in 2..{MAX_CHOICES}",
        )
        check(
            math.isfinite(self.active_request_bias) and self.active_request_bias >= 0,
            f"active_request_bias={self.active_request_bias}: must be a number >= 0",
        )


@mypyc_attr(allow_interpreted_subclasses=True)
class LeastRequest(ConfiguredStrategy[LeastRequestConfig]):
    name = "least-request"
    listed = (4, 2)
    summary = "Envoy: fewest in flight of 2 random draws; unequal weights: EDF, w / (inflight + 1)"
    Config = LeastRequestConfig

    def _setup(self) -> None:
        self.seed = self.rng.getrandbits(32)
        """Envoy's per-balancer ``seed_``: the pre-picks of every rebuilt schedule."""
        self.edf: EdfScheduler | None = None
        """The EDF schedule over ``avail.items``; None in the equal-weights regime."""

    def host_weight(self, backend: BackendView) -> float:
        """``weight * slow_start / (inflight + 1) ^ active_request_bias`` (Envoy ``hostWeight``)."""
        weight = self.effective_weight(backend)
        bias = self.config.active_request_bias
        if bias == 1.0:
            return weight / (backend.inflight + 1)
        if bias != 0.0:
            return weight / (backend.inflight + 1) ** bias
        return weight

    def _rebuild(self, backends: Sequence[BackendView], now: float) -> None:
        items = self.avail.items
        weighted = len(items) > 1 and (
            len({self.weight(b) for b in items}) > 1 or any(b.slow_start < 1.0 for b in items)
        )
        self.edf = (
            EdfScheduler.with_picks([self.host_weight(b) for b in items], self.seed % MAX_PRE_PICKS)
            if weighted
            else None
        )

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        self._ensure(backends, now)
        items = self.avail.items
        if self.edf is not None:
            pos = self.edf.next_accepted(
                lambda p: self.host_weight(items[p]), lambda p: eligible(items[p], request)
            )
            return None if pos is None else items[pos]
        if self.config.selection_method == "full_scan":
            return self._full_scan(self.avail.eligible_items(request))
        if not request.exclude and items:
            drawn = self._draw(items)
            if all(b.available for b in drawn):
                return self._least(drawn)
        candidates = self.avail.eligible_items(request)
        if len(candidates) < 2:
            return candidates[0] if candidates else None
        return self._least(self._draw(candidates))

    def _draw(self, items: Sequence[BackendView]) -> list[BackendView]:
        n = len(items)
        randrange = self.rng.randrange
        return [items[randrange(n)] for _ in range(self.config.choice_count)]

    def _full_scan(self, candidates: Sequence[BackendView]) -> BackendView | None:
        """Envoy's ``unweightedHostPickFullScan``: the fewest in flight, ties by reservoir."""
        best: BackendView | None = None
        tied = 0
        randrange = self.rng.randrange
        for b in candidates:
            if best is None or b.inflight < best.inflight:
                best = b
                tied = 1
            elif b.inflight == best.inflight:
                tied += 1
                if randrange(tied) == 0:
                    best = b
        if tied > 1:
            self.ties += 1
        return best

    def _least(self, drawn: list[BackendView]) -> BackendView:
        best = drawn[0]
        for b in drawn[1:]:
            if b.inflight < best.inflight:
                best = b
        if any(b is not best and b.inflight == best.inflight for b in drawn):
            self.ties += 1
        return best
