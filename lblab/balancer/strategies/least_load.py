"""The frame of the "least load wins" strategies: a lazy min-heap of per-backend keys.

A subclass defines ``load_key(backend)`` (a comparable value, smaller is better) and
calls ``refresh(backend)`` whenever an input of that key changes (dispatch, completion,
report). Ties at the least load go by the config's ``tie`` where it has one
(``random``: uniform among the tied, from ``self.rng``, O(k log n) for k tied; ``first``:
the first in list order, O(log n)); a strategy whose config has none (the dynamic three,
by their definition) takes the first. A pick whose least load is shared counts in
``ties``. O(log n) per update (``minheap.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from mypy_extensions import mypyc_attr

from .base import BackendView, Outcome, RequestView, eligible
from .configured import C, ConfiguredStrategy
from .minheap import LazyMinHeap

LeastTieRule = Literal["random", "first"]
"""Ties at the least load: uniform among the tied (``random``), or the first in list order."""


@mypyc_attr(allow_interpreted_subclasses=True)
class LeastLoadStrategy(ConfiguredStrategy[C]):
    refresh_on_dispatch = True
    refresh_on_complete = True

    def _setup(self) -> None:
        self.heap = LazyMinHeap()
        self._tie_first: bool = getattr(self.config, "tie", "first") == "first"
        """The config's tie rule, read once (a pick asks it)."""

    def takes_first_on_ties(self) -> bool:
        return self._tie_first

    def load_key(self, backend: BackendView) -> Any:
        raise NotImplementedError

    def refresh(self, backend: BackendView) -> None:
        if self._current(backend) and self.heap.key(backend.index) is not None:
            self.heap.update(backend.index, self.load_key(backend))

    def _rebuild(self, backends: Sequence[BackendView], now: float) -> None:
        self.heap.clear()
        for b in self.avail.items:
            self.heap.update(b.index, self.load_key(b))

    def on_dispatch(self, backend: BackendView, request: RequestView, now: float) -> None:
        if self.refresh_on_dispatch:
            self.refresh(backend)

    def on_complete(
        self, backend: BackendView, request: RequestView, outcome: Outcome, now: float
    ) -> None:
        if self.refresh_on_complete:
            self.refresh(backend)

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        self._ensure(backends, now)
        by_index = self.by_index

        def accept(index: int) -> bool:
            return eligible(by_index[index], request)

        if not self._tie_first:
            group = self.heap.least_group(accept)
            if not group:
                return None
            if len(group) == 1:
                return by_index[group[0]]
            self.ties += 1
            return by_index[group[self.rng.randrange(len(group))]]
        found = self.heap.minimum(accept)
        if found is None:
            return None
        index, tied = found
        if tied:
            self.ties += 1
        return by_index[index]
