"""``rr``: round robin, the next available backend in list order.

After picking the backend at list position i, the next pick is the first available
backend at a position after i, wrapping around. Pool changes keep that rule: the cursor
is a list position, not an offset into the available list, so a backend going down or
coming back does not restart the cycle. O(1) per pick (a replay that excludes backends
walks forward past them). The thesis baseline "RR".
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from mypy_extensions import mypyc_attr

from .base import BackendView, RequestView
from .configured import ConfiguredStrategy


@mypyc_attr(allow_interpreted_subclasses=True)
class RoundRobin(ConfiguredStrategy):
    name = "rr"
    listed = (1, 2)
    summary = "next available backend in list order"

    def _setup(self) -> None:
        self._last = -1
        """List index of the last backend picked."""
        self._pos = 0
        """Position in the available list where the next search starts."""

    def _rebuild(self, backends: Sequence[BackendView], now: float) -> None:
        self._pos = bisect_right(self.avail.indices, self._last)

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        self._ensure(backends, now)
        found = self.avail.first_eligible(self._pos, request)
        if found is None:
            return None
        pos, b = found
        self._pos = pos + 1
        self._last = b.index
        return b
