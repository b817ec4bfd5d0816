"""``p2c``: power of two choices on in-flight requests (Envoy and Finagle's default).

Draw two distinct available backends uniformly at random; the one with fewer requests
in flight wins; on equal counts the first drawn wins (it is random already) and the
pick counts as a tie. The draw is ``i = randrange(n)``, ``j = randrange(n - 1)``,
``j += 1 if j >= i``: two distinct indices without bias (Finagle ``P2CPick``). With one
available backend it is picked. O(1) per pick; a replay that excludes backends draws
among the eligible ones (O(n), rare).

Mitzenmacher, *The Power of Two Choices in Randomized Load Balancing*, 2001.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypeVar

from mypy_extensions import mypyc_attr

from .available import AvailableList
from .base import BackendView, RequestView
from .configured import C, ConfiguredStrategy

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


@mypyc_attr(allow_interpreted_subclasses=True)
class PowerOfTwoChoices(TwoChoices):
    name = "p2c"
    listed = (2, 8)
    summary = "two distinct random available backends; the one with fewer in flight wins"

    def load(self, backend: BackendView, now: float) -> float:
        return backend.inflight
