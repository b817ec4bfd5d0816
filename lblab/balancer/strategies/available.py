"""The available backends in list order, kept by strategies that pick from them.

``pick`` gets the whole pool; scanning it for available backends on every pick would
make even round robin O(n). Strategies instead rebuild this list in ``on_pool_change``
(the pool calls it on every availability change) and pick from it in O(1). If a driver
hands ``pick`` a different pool list than the last one seen (a strategy used without
``on_pool_change``), ``ensure`` rebuilds first. Strategies still check ``eligible`` on
the backend they return, so a stale list can cost a retry, never a wrong pick.
"""

from __future__ import annotations

from collections.abc import Sequence

from .base import BackendView, RequestView, eligible


class AvailableList:
    __slots__ = ("indices", "items", "source")

    def __init__(self) -> None:
        self.items: list[BackendView] = []
        self.indices: list[int] = []
        """``items[k].index``, ascending, for bisecting by list position."""
        self.source: Sequence[BackendView] | None = None

    def sync(self, backends: Sequence[BackendView]) -> bool:
        """Rebuild from ``backends``; True if the set of available backends changed."""
        items = [b for b in backends if b.available]
        changed = items != self.items
        self.items = items
        self.indices = [b.index for b in items]
        self.source = backends
        return changed

    def ensure(self, backends: Sequence[BackendView]) -> None:
        if backends is not self.source:
            self.sync(backends)

    def first_eligible(self, start: int, request: RequestView) -> tuple[int, BackendView] | None:
        """The first eligible item at position ``start`` or after, wrapping; O(n) worst case."""
        items = self.items
        n = len(items)
        for step in range(n):
            pos = (start + step) % n
            b = items[pos]
            if eligible(b, request):
                return pos, b
        return None

    def eligible_items(self, request: RequestView) -> list[BackendView]:
        """All eligible items (O(n)); the slow path when a request excludes some backends."""
        return [b for b in self.items if eligible(b, request)]
