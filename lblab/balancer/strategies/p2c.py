"""``p2c``: power of two choices on in-flight requests (Envoy and Finagle's default).

Draw two distinct available backends uniformly at random; the one with fewer requests
in flight wins; on equal counts the first drawn wins (it is random already) and the
pick counts as a tie. The draw is ``i = randrange(n)``, ``j = randrange(n - 1)``,
``j += 1 if j >= i``: two distinct indices without bias (Finagle ``P2CPick``). With one
available backend it is picked. O(1) per pick; a replay that excludes backends draws
among the eligible ones (O(n), rare).

``weighted = true`` is Finagle's ``WeightedP2CPick`` (aperture's pick over its
window's weights, ``aperture/WeightedP2CPick.scala``, ``ProbabilityDistribution``): ``a``
drawn with probability ``w_a / sum w`` over the available backends (static weights:
with an aperture, each member's share of its window), ``b`` likewise, redrawn up to 5
times while it is ``a`` (``tryPickSecond``; still ``a`` after that, ``a`` wins); then
the lower ``inflight / w`` wins, or the lower ``inflight`` when the two weights are
within 1e-4 (``approxEqual``), equal loads to ``a`` (a tie). The draw is the inverse of
the cumulative weights (``bisect`` on ``rng.random() * sum w``), rebuilt on each pool
change; Finagle draws from an alias table, the same distribution by another sequence.
O(log n) per pick; a replay with exclusions draws among the eligible (O(n)).

Mitzenmacher, *The Power of Two Choices in Randomized Load Balancing*, 2001.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, TypeVar

from mypy_extensions import mypyc_attr

from .available import AvailableList
from .base import BackendView, RequestView
from .configured import C, ConfiguredStrategy

SECOND_DRAWS: Final = 5
"""``ProbabilityDistribution.maxIter``: draws of the second backend while it is the first."""
SAME_WEIGHT: Final = 1e-4
"""``WeightedP2CPick.approxEqual``: weights this close compare by load alone."""

T = TypeVar("T")


def two_distinct(items: Sequence[T], rng: random.Random) -> tuple[T, T]:
    """Two distinct elements of ``items`` (len >= 2), uniformly, in draw order."""
    n = len(items)
    i = rng.randrange(n)
    j = rng.randrange(n - 1)
    if j >= i:
        j += 1
    return items[i], items[j]


def draw_two(
    avail: AvailableList, request: RequestView, rng: random.Random
) -> tuple[BackendView, BackendView | None] | None:
    """Two distinct eligible backends in draw order; ``(b, None)`` if only b is eligible.

    O(1) from the available list; a request with exclusions, or a draw that hit a
    backend gone unavailable behind the list's back, draws among the eligible (O(n)).
    """
    items: Sequence[BackendView] = avail.items
    if not request.exclude and len(items) >= 2:
        a, b = two_distinct(items, rng)
        if a.available and b.available:
            return a, b
    items = avail.eligible_items(request)
    if len(items) < 2:
        return (items[0], None) if items else None
    return two_distinct(items, rng)


@mypyc_attr(allow_interpreted_subclasses=True)
class TwoChoices(ConfiguredStrategy[C]):
    """The P2C distributor (Finagle's ``P2CPick``): draw two, the lower ``load`` wins.

    Subclasses supply only the load metric (and, if their source compares in another
    order, ``order``). Equal loads go to the first of the pair and count as a tie.
    """

    def load(self, backend: BackendView, now: float) -> float:
        raise NotImplementedError(f"{type(self).__name__} must define load")

    def order(
        self, a: BackendView, b: BackendView, request: RequestView
    ) -> tuple[BackendView, BackendView]:
        """The pair in comparison order; draw order by default."""
        return a, b

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        self._ensure(backends, now)
        drawn = draw_two(self.avail, request, self.rng)
        if drawn is None:
            return None
        a, b = drawn
        if b is None:
            return a
        a, b = self.order(a, b, request)
        load_a = self.load(a, now)
        load_b = self.load(b, now)
        if load_b < load_a:
            return b
        if load_a == load_b:
            self.ties += 1
        return a


@mypyc_attr(native_class=False)
@dataclass(frozen=True, slots=True)
class P2CConfig:
    weighted: bool = False
    """Finagle's ``WeightedP2CPick``: draws by weight, compares in flight over weight."""


@mypyc_attr(allow_interpreted_subclasses=True)
class PowerOfTwoChoices(TwoChoices[P2CConfig]):
    name = "p2c"
    listed = (2, 8)
    summary = (
        "two distinct random available backends; the one with fewer in flight wins "
        "(weighted: Finagle's weighted pick)"
    )
    Config = P2CConfig

    def _setup(self) -> None:
        self._weighted = self.config.weighted
        self._cumulative: list[float] = []
        self._drawable: list[BackendView] = []

    def _rebuild(self, backends: Sequence[BackendView], now: float) -> None:
        if self._weighted:
            self._drawable, self._cumulative = self._table(self.avail.items)

    def _table(self, items: Sequence[BackendView]) -> tuple[list[BackendView], list[float]]:
        """``items`` and their cumulative static weights, for ``_draw``."""
        cumulative = []
        total = 0.0
        for view in items:
            total += self.weight(view)
            cumulative.append(total)
        return list(items), cumulative

    def _draw(self, items: list[BackendView], cumulative: list[float]) -> int:
        """An index into ``items``, with probability proportional to its weight."""
        i = bisect.bisect_right(cumulative, self.rng.random() * cumulative[-1])
        return min(i, len(items) - 1)  # a draw of exactly the total: the last one

    def load(self, backend: BackendView, now: float) -> float:
        return backend.inflight

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        if not self._weighted:
            return super().pick(backends, request, now)
        self._ensure(backends, now)
        items = self._drawable
        if not request.exclude and len(items) >= 2:
            a, b = self._pair(items, self._cumulative)
            if a.available and b.available:
                return self._better(a, b)
        # Exclusions, or a draw that hit a backend gone unavailable behind the list's back.
        items, cumulative = self._table(self.avail.eligible_items(request))
        if len(items) < 2:
            return items[0] if items else None
        a, b = self._pair(items, cumulative)
        return self._better(a, b)

    def _pair(
        self, items: list[BackendView], cumulative: list[float]
    ) -> tuple[BackendView, BackendView]:
        """``a`` by weight, then ``b`` by weight, redrawn while it is ``a`` (5 times)."""
        ia = self._draw(items, cumulative)
        ib = ia
        tries = 0
        while ib == ia and tries < SECOND_DRAWS:
            ib = self._draw(items, cumulative)
            tries += 1
        return items[ia], items[ib]

    def _better(self, a: BackendView, b: BackendView) -> BackendView:
        """``WeightedP2CPick.pick(a, aw, b, bw)``, both available: the lower load."""
        wa, wb = self.weight(a), self.weight(b)
        if abs(wa - wb) < SAME_WEIGHT:
            load_a, load_b = float(a.inflight), float(b.inflight)
        else:
            load_a, load_b = a.inflight / wa, b.inflight / wb
        if load_b < load_a:
            return b
        if load_a == load_b and a is not b:
            self.ties += 1
        return a
