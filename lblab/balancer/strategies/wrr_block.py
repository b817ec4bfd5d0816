"""``wrr-block``: the thesis WRR: ``w_i`` consecutive picks of each backend in turn.

Walk the available backends in list order; each gets ``round(w_i)`` (at least 1)
consecutive picks before the next. Weights 5,1,1 give A A A A A B C: long runs, the
difference from the smooth ``wrr`` that the thesis implementation had. Slow start is
not applied (weights are whole picks). A pool change keeps the position: the current
backend, if still available, finishes its block. O(1) per pick.

Subclasses (``dwrr-latency``) recompute the weights in ``_cycle_weights`` each time the
walk wraps around to the start: the end of a cycle.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from mypy_extensions import mypyc_attr

from .base import BackendView, RequestView, eligible
from .configured import ConfiguredStrategy


@mypyc_attr(allow_interpreted_subclasses=True)
class BlockWeightedRoundRobin(ConfiguredStrategy):
    name = "wrr-block"
    listed = (1, 4)
    summary = "thesis WRR: w consecutive picks per backend, in list order"

    def _setup(self) -> None:
        self._blocks: dict[str, int] = {}
        """Backend id -> picks per turn, fixed for one cycle."""
        self._pos = 0
        self._left = 0
        """Picks left in the current backend's block."""
        self._holder: BackendView | None = None

    def _cycle_weights(self, now: float) -> dict[str, int]:
        """Picks per turn for the next cycle, by backend id."""
        return {b.id: max(1, round(self.weight(b))) for b in self.avail.items}

    def _rebuild(self, backends: Sequence[BackendView], now: float) -> None:
        holder = self._holder
        if holder is None or not self._current(holder):
            self._holder, self._left, self._pos = None, 0, 0
        else:
            # Resume after the holder's list position; a holder that went away loses
            # the rest of its block.
            self._pos = bisect_right(self.avail.indices, holder.index)
            if not holder.available:
                self._left = 0
        self._blocks = self._cycle_weights(now)

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        self._ensure(backends, now)
        items = self.avail.items
        if not items:
            return None
        holder = self._holder
        if self._left > 0 and holder is not None and eligible(holder, request):
            self._left -= 1
            return holder
        for _ in range(len(items) + 1):
            if self._pos >= len(items):
                self._pos = 0
                self._blocks = self._cycle_weights(now)
            b = items[self._pos]
            self._pos += 1
            if eligible(b, request):
                self._holder = b
                self._left = self._blocks.get(b.id, 1) - 1
                return b
        return None
