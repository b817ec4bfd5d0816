"""``prequal``: probe a few servers per query, pick by hot-cold lexicographic order (Prequal).

Probing (``probe_targets``, after each pick): ``r_probe`` probes per query, fractional
rates by a carried credit (``credit += r_probe``; send ``floor(credit)``, keep the rest:
0.5 probes one query in two), to distinct available backends drawn uniformly at random
without replacement (``rng.sample``; at most all of them). A server answers with its
requests in flight (RIF) and its recent median latency at about that RIF
(``lblab.loadreport.RifLatency``).

The pool (``on_probe``): each answer enters a pool of at most ``pool_size`` probes, one
per backend (a newer answer replaces the backend's older one: the paper's reuse budget
counts the backends in the pool, m/n, so it holds one probe per backend); past
``pool_size`` the oldest leaves. Its RIF also enters the window of the last
``rif_window`` answered RIFs. Each probe may be used ``b_reuse`` times:

    b = 1 + reuse_delta / ((1 - pool_size / n) * r_probe - 1)      (n available backends)

the paper's reuse budget with one removal per query (``r_remove = 1``), randomly rounded
to a whole number (``floor(b)``, plus 1 with probability ``b - floor(b)``) and bounded to
``[1, max_reuse]``; where the denominator is not positive (``n <= pool_size``, or too few
probes to refill the pool) the paper leaves it undefined and the budget is ``max_reuse``
(prequal-rs reads the paper the same way).

The pick (``pick``): probes older than ``max_age_s`` leave first (age = now - answer
time; a probe exactly ``max_age_s`` old stays). A probe is usable if its backend is
eligible for the request. With fewer than 2 usable probes: uniformly at random among
the eligible backends (no probe is used). Otherwise hot-cold lexicographic (HCL): a
probe is hot when its RIF is above the ``q_rif`` quantile of the RIF window,
``sorted(window)[floor(q_rif * (len - 1))]``; among the cold usable probes the lowest
latency wins (ties: lower RIF, then the newer answer, then the earlier in the pool); if
all are hot, the lowest RIF (ties: lower latency, then newer, then earlier). The used
probe counts one use and leaves at ``b_reuse`` uses; a winner tied with another
candidate on its key counts as a tie.

Removal: every query (random or HCL) then removes one probe from the pool, alternately
the worst and the oldest, starting with the worst. The worst is the one HCL would rank
last: the hot probe with the highest RIF (ties: higher latency, then older), or with
no hot probe the highest latency (ties: higher RIF, then older). The oldest is the
earliest answer (ties: earlier in the pool). An empty pool removes nothing and the
turn does not pass.

A backend that leaves, goes down, drains or is ejected loses its probe at the pool
change. Cost per pick O(pool_size + rif_window) (the window is kept sorted); per answer
O(rif_window).

Wydrowski, Kleinberg, Rumble, Archer, *Load is not what you should balance: Introducing
Prequal*, NSDI 2024 (defaults: r_probe 3, pool 16, max age 1 s, Q_RIF 0.84, delta 1).
"""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from mypy_extensions import mypyc_attr

from .base import BackendView, RequestView, eligible
from .configured import ConfiguredStrategy
from .options import check

MAX_R_PROBE: Final = 64.0
"""Most probes per query: more costs the servers more than any pick can gain."""


MAX_POOL_SIZE: Final = 1024


@mypyc_attr(native_class=False)
@dataclass(frozen=True, slots=True)
class PrequalConfig:
    r_probe: float = 3.0
    """Probes per query (>= 0; fractional: 0.5 is one probe every 2 queries)."""
    q_rif: float = 0.84
    """A probe is hot when its RIF is above this quantile of the RIF window."""
    pool_size: int = 16
    max_age_s: float = 1.0
    """Probes older than this leave the pool."""
    reuse_delta: float = 1.0
    """The paper's delta in the reuse budget (module docstring)."""
    max_reuse: int = 16
    """Most uses of one probe (and the budget where the paper's formula is undefined)."""
    rif_window: int = 64
    """How many of the last answered RIFs the hot/cold quantile is taken over."""

    def __post_init__(self) -> None:
        check(
            math.isfinite(self.r_probe) and 0 <= self.r_probe <= MAX_R_PROBE,
            f"r_probe must be in [0, {MAX_R_PROBE:g}], not {self.r_probe}",
        )
        check(0 <= self.q_rif <= 1, f"q_rif must be in [0, 1], not {self.q_rif}")
        check(
            1 <= self.pool_size <= MAX_POOL_SIZE,
            f"pool_size must be in 1..{MAX_POOL_SIZE}, not {self.pool_size}",
        )
        check(0 < self.max_age_s <= 3600, f"max_age_s must be in (0, 3600], not {self.max_age_s}")
        check(
            0 <= self.reuse_delta <= 1e6,
            f"reuse_delta must be in [0, 1e6], not {self.reuse_delta}",
        )
        check(
            1 <= self.max_reuse <= 1_000_000, f"max_reuse must be in 1..10^6, not {self.max_reuse}"
        )
        check(
            1 <= self.rif_window <= 1_000_000,
            f"rif_window must be in 1..10^6, not {self.rif_window}",
        )


class Probe:
    """One answered probe in the pool."""

    __slots__ = ("at", "backend", "budget", "latency_ms", "rif", "uses")

    def __init__(
        self, backend: BackendView, rif: int, latency_ms: float, at: float, budget: int
    ) -> None:
        self.backend = backend
        self.rif = rif
        self.latency_ms = latency_ms
        self.at = at
        """The driver's ``now`` when the answer arrived."""
        self.budget = budget
        self.uses = 0

    def __repr__(self) -> str:
        return (
            f"Probe({self.backend.id}, rif={self.rif}, latency_ms={self.latency_ms}, "
            f"at={self.at}, uses={self.uses}/{self.budget})"
        )


@mypyc_attr(allow_interpreted_subclasses=True)
class Prequal(ConfiguredStrategy[PrequalConfig]):
    name = "prequal"
    listed = (4, 1)
    decisions = (
        ("fallbacks", "Picks made at random: fewer than two eligible probes in the pool."),
    )
    summary = (
        "probe r_probe random servers a query; pick the cold probed server with the lowest "
        "latency, or the lowest RIF when all are hot"
    )
    Config = PrequalConfig
    uses_probes = True

    def _setup(self) -> None:
        self.pool: list[Probe] = []
        """Answered probes, in arrival order."""
        self.window: deque[int] = deque()
        self.sorted_window: list[int] = []
        self.credit = 0.0
        self.remove_worst_next = True
        self.fallbacks = 0
        """Picks made at random because fewer than 2 probes were usable."""

    # ------------------------------------------------------------ probing

    def probe_targets(self, backends: Sequence[BackendView], now: float) -> list[BackendView]:
        self._ensure(backends, now)
        self.credit += self.config.r_probe
        wanted = int(self.credit)
        if wanted == 0:
            return []
        self.credit -= wanted
        items = self.avail.items
        return self.rng.sample(items, min(wanted, len(items)))

    def on_probe(self, backend: BackendView, rif: int, latency_ms: float, now: float) -> None:
        if not self._current(backend) or not backend.available:
            return
        self._remember_rif(rif)
        pool = [p for p in self.pool if p.backend is not backend]
        pool.append(Probe(backend, rif, latency_ms, now, self._budget()))
        if len(pool) > self.config.pool_size:
            del pool[self._oldest(pool)]
        self.pool = pool

    def _remember_rif(self, rif: int) -> None:
        window, ordered = self.window, self.sorted_window
        if len(window) == self.config.rif_window:
            del ordered[bisect.bisect_left(ordered, window.popleft())]
        window.append(rif)
        bisect.insort(ordered, rif)

    def _budget(self) -> int:
        cfg = self.config
        n = len(self.avail.items)
        denominator = (1.0 - cfg.pool_size / n) * cfg.r_probe - 1.0 if n else 0.0
        if denominator <= 0:
            return cfg.max_reuse
        b = min(max(1.0 + cfg.reuse_delta / denominator, 1.0), float(cfg.max_reuse))
        whole = math.floor(b)
        if b > whole and self.rng.random() < b - whole:
            whole += 1
        return whole

    def threshold(self) -> int | None:
        """The RIF above which a probe is hot (None before any answer)."""
        ordered = self.sorted_window
        if not ordered:
            return None
        return ordered[math.floor(self.config.q_rif * (len(ordered) - 1))]

    # ------------------------------------------------------------ picking

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        self._ensure(backends, now)
        oldest_kept = now - self.config.max_age_s
        if any(p.at < oldest_kept for p in self.pool):
            self.pool = [p for p in self.pool if p.at >= oldest_kept]
        threshold = self.threshold()
        usable = [p for p in self.pool if eligible(p.backend, request)]
        if len(usable) < 2:
            self.fallbacks += 1
            items = self.avail.eligible_items(request)
            choice = self.rng.choice(items) if items else None
        else:
            choice = self._hcl(usable, threshold)
        self._remove_one(threshold)
        return choice

    def _hcl(self, usable: list[Probe], threshold: int | None) -> BackendView:
        cold = [p for p in usable if threshold is None or p.rif <= threshold]
        keys: list[tuple[float, float, float]]
        if cold:
            keys = [(p.latency_ms, p.rif, -p.at) for p in cold]
            candidates = cold
        else:
            keys = [(p.rif, p.latency_ms, -p.at) for p in usable]
            candidates = usable
        best = min(range(len(keys)), key=keys.__getitem__)
        if _tied_on_load(keys, best):
            self.ties += 1
        probe = candidates[best]
        probe.uses += 1
        if probe.uses >= probe.budget:
            self.pool.remove(probe)
        return probe.backend

    def _remove_one(self, threshold: int | None) -> None:
        pool = self.pool
        if not pool:
            return
        if self.remove_worst_next:
            del pool[self._worst(pool, threshold)]
        else:
            del pool[self._oldest(pool)]
        self.remove_worst_next = not self.remove_worst_next

    @staticmethod
    def _oldest(pool: list[Probe]) -> int:
        return min(range(len(pool)), key=lambda i: pool[i].at)

    @staticmethod
    def _worst(pool: list[Probe], threshold: int | None) -> int:
        hot = [i for i, p in enumerate(pool) if threshold is not None and p.rif > threshold]
        if hot:
            return max(hot, key=lambda i: (pool[i].rif, pool[i].latency_ms, -pool[i].at))
        return max(range(len(pool)), key=lambda i: (pool[i].latency_ms, pool[i].rif, -pool[i].at))

    # ------------------------------------------------------------ pool changes

    def _rebuild(self, backends: Sequence[BackendView], now: float) -> None:
        self.pool = [p for p in self.pool if self._current(p.backend) and p.backend.available]


def _tied_on_load(keys: list[tuple[float, float, float]], best: int) -> bool:
    """Does another candidate share the winner's load key (its first two fields)?"""
    load = keys[best][:2]
    return any(k[:2] == load for i, k in enumerate(keys) if i != best)
