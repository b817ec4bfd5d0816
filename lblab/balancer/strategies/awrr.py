"""``awrr``: Cheetah's automatic weighted round robin from agent CPU load.

Every ``interval`` seconds (default 0.1, the paper's 100 ms) if a report arrived or the
pool changed, each available backend i gets

    N_i = round(10 * L_avg / ((1 - a) * L_i + a * L_avg)), clamped to [2, 30]

buckets, where ``L_i`` is its latest agent ``cpu_util`` and ``L_avg`` the mean over the
available backends that reported; ``a`` (option ``a``) tunes the speed of convergence,
default 0.5 as in the paper (``a = 1`` gives equal weights). ``round`` is half away
from zero, as C's ``round``. A balanced pool gives every backend 10 buckets; an
underutilised one gets more ("in practice limited to 3N"), an overloaded one fewer
("lower bounded by 2"). Edge rules: ``L_i = 0`` gives 30 (idle backends take the most),
a backend with no report yet counts as average (10 buckets), and ``L_avg = 0`` gives
every backend 30. The bucket array (backend i repeated ``N_i`` times) is shuffled with
the strategy's rng and walked round robin. O(1) per pick; the rebuild is O(30 n), once
per interval at most.

Source: T. Barbette et al., *Cheetah*, IEEE/ACM ToN 2021, Sect. IV-B ("Load balancing
mechanisms"), formula and a = 0.5 as printed (../shared/papers/003_9c5fbd34c61d91d8.txt).
The authors' FastClick code (``include/click/loadbalancer.hh``, ``atc``) differs: it
truncates, defaults ``AWRR_ALPHA`` to 0, averages over all servers and reshuffles on
every tick; ``a=0`` here gives its weights up to the rounding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from mypy_extensions import mypyc_attr

from lblab.loadreport import LoadReport

from .base import BackendView, RequestView, eligible
from .configured import ConfiguredStrategy
from .options import check


@mypyc_attr(native_class=False)
@dataclass(frozen=True, slots=True)
class AwrrConfig:
    interval: float = 0.1
    a: float = 0.5

    def __post_init__(self) -> None:
        check(self.interval > 0, f"interval={self.interval}: must be > 0 seconds")
        check(0 <= self.a <= 1, f"a={self.a}: must be in [0, 1]")


MIN_BUCKETS: Final = 2
MAX_BUCKETS: Final = 30


def bucket_count(load: float, load_avg: float, a: float) -> int:
    """Cheetah's buckets for one backend, with the edge rules of the module docstring."""
    if load <= 0 or load_avg <= 0:
        return MAX_BUCKETS
    denominator = (1 - a) * load + a * load_avg
    if denominator > 0:
        ratio = 10 * load_avg / denominator  # the paper's form: its halves round as in C
    else:  # subnormal loads (5e-324): both products round to 0; divide through by L_avg
        ratio = 10 / ((1 - a) * (load / load_avg) + a)
    if not math.isfinite(ratio):  # a = 0 and a load too small beside L_avg to register
        return MAX_BUCKETS
    raw = math.floor(ratio + 0.5)  # C round, x >= 0
    return min(MAX_BUCKETS, max(MIN_BUCKETS, raw))


@mypyc_attr(allow_interpreted_subclasses=True)
class AutomaticWeightedRoundRobin(ConfiguredStrategy[AwrrConfig]):
    name = "awrr"
    listed = (2, 7)
    summary = "Cheetah AWRR: buckets = round(10 L_avg / ((1-a) L_i + a L_avg)) in [2, 30], shuffled"
    Config = AwrrConfig
    uses_agent_reports = True

    def _setup(self) -> None:
        self.loads: dict[str, float] = {}
        self.buckets: dict[str, int] = {}
        self._array: list[BackendView] = []
        self._pos = 0
        self._dirty = True
        self._next_at: float | None = None

    def on_report(self, backend: BackendView, report: LoadReport, now: float) -> None:
        if report.source == "agent" and report.cpu_util is not None:
            self.loads[backend.id] = report.cpu_util
            self._dirty = True

    def _rebuild(self, backends: Sequence[BackendView], now: float) -> None:
        self._dirty = True
        self._next_at = None

    def _build(self) -> None:
        items = self.avail.items
        reported = [self.loads[b.id] for b in items if b.id in self.loads]
        avg = sum(reported) / len(reported) if reported else 0.0
        a = self.config.a
        self.buckets = {b.id: bucket_count(self.loads.get(b.id, avg), avg, a) for b in items}
        array = [b for b in items for _ in range(self.buckets[b.id])]
        self.rng.shuffle(array)
        self._array = array
        self._pos = 0
        self._dirty = False

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        self._ensure(backends, now)
        if self._next_at is None or now >= self._next_at:
            self._next_at = now + self.config.interval
            if self._dirty:
                self._build()
        array = self._array
        n = len(array)
        for step in range(n):
            b = array[(self._pos + step) % n]
            if eligible(b, request):
                self._pos = (self._pos + step + 1) % n
                return b
        return None
