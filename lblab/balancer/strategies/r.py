"""``r``: uniform random among the available backends.

Each pick draws ``k = rng.randrange(n)`` over the n available backends (in list order)
and returns the k-th; O(1). A request that excludes backends (a replay) draws among the
eligible ones instead (O(n), rare). The thesis baseline "R".
"""

from __future__ import annotations

from collections.abc import Sequence

from mypy_extensions import mypyc_attr

from .base import BackendView, RequestView
from .configured import ConfiguredStrategy


@mypyc_attr(allow_interpreted_subclasses=True)
class Random(ConfiguredStrategy):
    name = "r"
    listed = (1, 1)
    summary = "uniform random among available backends"

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        self._ensure(backends, now)
        items = self.avail.items
        if not items:
            return None
        if not request.exclude:
            b = items[self.rng.randrange(len(items))]
            if b.available:
                return b
        candidates = self.avail.eligible_items(request)
        return candidates[self.rng.randrange(len(candidates))] if candidates else None
