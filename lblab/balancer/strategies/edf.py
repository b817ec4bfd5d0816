"""Earliest-deadline-first (EDF) scheduling over weights, the shared core of ``least-request``
(Envoy, unequal weights) and ``wrr-orca`` (gRPC's ``weighted_round_robin``).

Each entry (a position in the strategy's list of backends) is a job with period
``1 / weight``. A pick pops the entry with the earliest deadline, moves the scheduler's
clock to that deadline and puts the entry back at ``clock + 1 / weight``, the weight
asked for again at that moment (Envoy's least request scales it by the backend's
active requests then). Equal deadlines go to the entry inserted first (FIFO, Envoy's
``order_offset_``). With constant weights, over any run of picks each entry's count is
within 1 of ``picks * w_i / sum(w)``. O(log n) per pick (a binary heap).

The schedules differ only in where they start:

- ``with_picks`` (Envoy ``EdfScheduler::createWithPicks``, 2024): the state after
  ``picks`` picks from a fresh schedule (every entry added at clock 0), built in
  O(n log n): each entry is first given ``floor(picks * w'_i / W')`` picks at once
  (``w'_i = w_i + 1e-13``, Envoy's epsilon so that weights that are multiples of each
  other do not tie by rounding; ``W' = sum(w')``), the rest (fewer than n) are done one
  by one. ``picks`` is taken modulo 429,496,729 (``UINT_MAX / 10``), as Envoy.
- ``with_random_start`` (gRFC A58): entry i's first deadline is drawn uniformly in
  ``[0, 1 / w_i]``, so that clients do not pick in lockstep.

Source: Envoy ``source/common/upstream/edf_scheduler.h``; gRPC proposal A58
("Earliest Deadline First (EDF) Scheduler").
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Sequence
from typing import Final

MAX_PRE_PICKS: Final = 429_496_729
"""Envoy's bound on the emulated picks of ``createWithPicks`` (``UINT_MAX / 10``)."""
WEIGHT_EPSILON: Final = 1e-13
"""Envoy adds it to every weight while emulating picks (envoyproxy/envoy#31592)."""


class EdfScheduler:
    __slots__ = ("_clock", "_heap", "_order")

    def __init__(self, entries: Sequence[tuple[float, int]] = (), clock: float = 0.0) -> None:
        """``entries`` are ``(deadline, position)``; their order breaks equal deadlines."""
        self._heap = [(deadline, order, pos) for order, (deadline, pos) in enumerate(entries)]
        heapq.heapify(self._heap)
        self._clock = clock
        self._order = len(self._heap)

    @classmethod
    def with_picks(cls, weights: Sequence[float], picks: int) -> EdfScheduler:
        """Envoy's ``createWithPicks``: the schedule as if ``picks`` picks had been made."""
        if not weights:
            return cls()
        picks %= MAX_PRE_PICKS
        aug = [w + WEIGHT_EPSILON for w in weights]
        total = sum(aug, 0.0)
        entries = []
        done = 0
        clock = 0.0
        for pos, w in enumerate(aug):
            floor = int(w * picks / total)
            if floor > 0 and floor / w >= picks / total:
                floor -= 1  # floating point disagreed with the floor (Envoy does the same)
            entries.append(((floor + 1) / w, pos))
            clock = max(clock, floor / w)
            done += floor
        scheduler = cls(entries, clock)
        for _ in range(picks - done):
            scheduler.pick_and_add(weights.__getitem__)
        return scheduler

    @classmethod
    def with_random_start(cls, weights: Sequence[float], rng: random.Random) -> EdfScheduler:
        """gRFC A58: each entry's first deadline uniform in ``[0, 1 / weight]``."""
        return cls([(rng.random() / w, pos) for pos, w in enumerate(weights)])

    def __len__(self) -> int:
        return len(self._heap)

    def pick_and_add(self, weight: Callable[[int], float]) -> int:
        """Pop the earliest deadline and put it back one period (``1 / weight(pos)``) later."""
        deadline, _, pos = heapq.heappop(self._heap)
        self._clock = deadline
        heapq.heappush(self._heap, (deadline + 1.0 / weight(pos), self._order, pos))
        self._order += 1
        return pos

    def next_accepted(
        self, weight: Callable[[int], float], accept: Callable[[int], bool]
    ) -> int | None:
        """The next pick that ``accept`` takes; None only when it takes no entry.

        A refused entry is put back as if picked (Envoy retries host selection with
        further picks), so it cannot block the schedule. A heavy refused entry can come
        first again and again: after as many picks as there are entries, the accepted
        entry with the earliest deadline is taken directly (a scan, rare).
        """
        for _ in range(len(self._heap)):
            pos = self.pick_and_add(weight)
            if accept(pos):
                return pos
        accepted = [entry for entry in self._heap if accept(entry[2])]
        if not accepted:
            return None
        deadline, order, pos = min(accepted)
        self._heap.remove((deadline, order, pos))
        heapq.heapify(self._heap)
        self._clock = deadline
        heapq.heappush(self._heap, (deadline + 1.0 / weight(pos), self._order, pos))
        self._order += 1
        return pos
