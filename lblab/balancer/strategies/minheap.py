"""A min-heap of backend loads with lazy invalidation, for the least-load strategies.

Each backend (by list ``index``) has one current key. ``update`` pushes a new entry and
leaves the old one in place; an entry whose key is no longer the backend's current key
is stale and dropped when it reaches the top. The heap is compacted when stale entries
outnumber live ones two to one, so memory stays O(n) and every operation is amortized
O(log n). Ties are broken by list index (the tuple ``(key, index)``), which gives "first
in list order" for free.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any, Final

_GONE: Final = object()


class LazyMinHeap:
    __slots__ = ("_heap", "_key")

    def __init__(self) -> None:
        self._heap: list[tuple[Any, int]] = []
        self._key: dict[int, Any] = {}

    def __len__(self) -> int:
        return len(self._key)

    def clear(self) -> None:
        self._heap.clear()
        self._key.clear()

    def key(self, index: int) -> Any:
        return self._key.get(index)

    def update(self, index: int, key: Any) -> None:
        if self._key.get(index) == key and index in self._key:
            return
        self._key[index] = key
        heapq.heappush(self._heap, (key, index))
        if len(self._heap) > 2 * len(self._key) + 64:
            self._heap = [(k, i) for i, k in self._key.items()]
            heapq.heapify(self._heap)

    def discard(self, index: int) -> None:
        self._key.pop(index, None)

    def _pop_valid(self) -> tuple[Any, int] | None:
        heap, current = self._heap, self._key
        while heap:
            key, index = heapq.heappop(heap)
            if index in current and current[index] == key:
                return key, index
        return None

    def minimum(self, accept: Callable[[int], bool]) -> tuple[int, bool] | None:
        """``(index, tied)`` of the least key among accepted backends, or None.

        ``tied`` is True when the next live entry has the same key (a tie on load). Entries
        rejected by ``accept`` (excluded for this request) are set aside and pushed back.
        """
        heap, current = self._heap, self._key
        while heap and current.get(heap[0][1], _GONE) != heap[0][0]:
            heapq.heappop(heap)  # stale top
        if not heap:
            return None
        key, index = heap[0]
        if accept(index):
            # Fast path: any other entry with the same key has an equal-keyed child of
            # the top on its path (heap order), so the children decide a tie unless
            # one of them is a stale entry with that key.
            for child in heap[1:3]:
                if child[0] == key:
                    if child[1] != index and current.get(child[1], _GONE) == key:
                        return index, True
                    break  # a stale or duplicate entry with that key: ask the slow path
            else:
                return index, False
        aside: list[tuple[Any, int]] = []
        found: tuple[Any, int] | None = None
        seen: set[int] = set()
        while (entry := self._pop_valid()) is not None:
            if entry[1] in seen:  # a duplicate of a key that went away and came back
                continue
            seen.add(entry[1])
            aside.append(entry)
            if found is None:
                if accept(entry[1]):
                    found = entry
            else:
                break
        # Another entry than ``found`` with its key: told apart by index (unique in
        # ``aside``), not by ``is``, which compiled code cannot keep for tuples.
        tied = (
            found is not None
            and len(aside) >= 2
            and aside[-1][0] == found[0]
            and aside[-1][1] != found[1]
        )
        for entry in aside:
            heapq.heappush(self._heap, entry)
        return None if found is None else (found[1], tied)

    def least_group(self, accept: Callable[[int], bool]) -> list[int]:
        """Indices of all accepted backends sharing the least key, ascending.

        Costs O(k log n) for k tied backends: the price of tie rules other than "first".
        """
        aside: list[tuple[Any, int]] = []
        group: list[int] = []
        least: Any = None
        seen: set[int] = set()
        while (entry := self._pop_valid()) is not None:
            if entry[1] in seen:
                continue
            seen.add(entry[1])
            aside.append(entry)
            if group and entry[0] != least:
                break
            if accept(entry[1]):
                if not group:
                    least = entry[0]
                group.append(entry[1])
        for entry in aside:
            heapq.heappush(self._heap, entry)
        return sorted(group)
