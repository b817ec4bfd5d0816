"""What Ingram's Node.js testbed really did, for the simulator to re-run it.

Read from the code the report links (github.com/VoxelrSam/LoadBalancer, files
``Balancer/Balancer.js``, ``Balancer/handler.js``, ``Server/users.js``,
``metrics/Metrics.js``):

- **Estimates.** A server's estimate is ``queue.length * delay``. In a response header
  (``serverload``) that counts the requests still queued after the answered one; in
  the POST it sends when a request arrives (``/stats``, for dynamicImmediate and
  dynamicHybrid) it counts the queue *with* the new request but *without* the one in
  service, so an idle server and a server busy with one request both report one delay.
- **Types.** The header value reaches the balancer as a string (``"2250"``), the POST
  body as a number. The pick, ``if (!server || serverLoad[server] > serverLoad[index])``,
  therefore compares two header values as strings, lexicographically: ``"10000" <
  "250"``, so a server with forty queued requests can look less loaded than one with
  one. Between a string and a number (the initial 0s, the POSTed values) JavaScript
  compares numerically. ``dynamic`` runs on header strings alone, ``dynamicImmediate``
  on numbers alone, ``dynamicHybrid`` on a mix. No estimate changes when the balancer
  dispatches, so ``dynamic`` herds until a response comes back.
- **Timing.** Client, balancer and the five servers share one Node.js process: every
  hop is an HTTP call on loopback (about 1 ms), the POST too. ``setTimeout(delay)``
  fires a little late (the noBalancing totals give +1.06 ms per request at 100 and
  +0.74 ms at 500), and ``await sleep(25)`` between sends does too (the lc and rr
  totals fit 25.3 ms). Both jitter by about a millisecond, which is what decides, for
  ``dynamic``, whether a send lands just before or just after a response.

``AsCoded*`` are the three dynamic pickers with these semantics, for the reproduction
only: lblab's own ``dynamic*`` strategies keep the intended numeric comparison.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from lblab.balancer.strategies.base import BackendView, RequestView, eligible
from lblab.balancer.strategies.configured import ConfiguredStrategy
from lblab.loadreport import LoadReport
from lblab.simulator.service import Fixed
from lblab.simulator.workload import OpenArrivals

HOP_S = 0.001
"""One-way HTTP hop on loopback inside one Node.js process (requests, responses, POSTs)."""
TIMER_LATE_S = 0.0008
"""Mean lateness of the servers' ``setTimeout(delay)`` (noBalancing: 0.74-1.06 ms)."""
SEND_GAP_S = 0.0253
"""Mean gap of the client's ``await sleep(25)`` loop (fits the lc and rr totals)."""
JITTER_S = 0.0005
"""Half-width of the uniform jitter on both timers."""


@dataclass(frozen=True, slots=True)
class NodeTimer(Fixed):
    """A fixed service time run by ``setTimeout``: ``seconds + late``, +- ``jitter``."""

    late: float = TIMER_LATE_S
    jitter: float = JITTER_S

    @property
    def mean_s(self) -> float:
        return self.seconds + self.late

    def sample(self, rng: random.Random, work_bytes: int, package_bytes: int) -> float:
        return self.seconds + self.late + rng.uniform(-self.jitter, self.jitter)

    def spec(self) -> str:
        return (
            f"fixed:{self.seconds * 1000:g}ms (+{self.late * 1000:g}ms +-{self.jitter * 1000:g}ms)"
        )


@dataclass(frozen=True, slots=True)
class SleepLoop(OpenArrivals):
    """Evenly spaced sends whose gaps jitter uniformly by +- ``jitter`` seconds."""

    jitter: float = JITTER_S

    def gap(self, rng: random.Random) -> float:
        return 1.0 / self.rate + rng.uniform(-self.jitter, self.jitter)


def js_greater(a: int | str, b: int | str) -> bool:
    """JavaScript's ``a > b`` for the numbers and numeric strings the balancer holds."""
    if isinstance(a, str) and isinstance(b, str):
        return a > b  # both strings: code-unit order, "10000" < "250"
    return float(a) > float(b)


class AsCodedDynamic(ConfiguredStrategy):
    """Ingram's ``dynamic``: header estimates (strings), the JavaScript pick.

    ``delays_ms`` are the servers' fixed delays in list order (what each server
    multiplies its queue length by). ``post_delay_s`` holds a POSTed estimate back
    that much longer than the simulated hop (0: it arrives with the hop).
    """

    name = "ingram-dynamic"
    summary = "Ingram's dynamic as coded (string header estimates)"
    full_scan = True
    uses_response_reports: ClassVar[bool] = True
    uses_push_reports: ClassVar[bool] = False

    def __init__(self, delays_ms: Sequence[int], post_delay_s: float = 0.0) -> None:
        self.delays_ms = tuple(delays_ms)
        self.post_delay_s = post_delay_s
        super().__init__()

    def _setup(self) -> None:
        self.loads: list[int | str] = [0] * len(self.delays_ms)
        self._posts: list[tuple[float, int, int]] = []

    def on_report(self, backend: BackendView, report: LoadReport, now: float) -> None:
        inflight = report.inflight or 0
        delay = self.delays_ms[backend.index]
        if self._posts:
            self._apply_posts(now)  # POSTs that landed before this report, in order
        if report.source == "response" and self.uses_response_reports:
            # handler.js: serverLoad = response.headers['serverload'], a string
            self.loads[backend.index] = str(delay * inflight)
        elif report.source == "push" and self.uses_push_reports:
            # users.js: queue.length * delay after the push, before an idle server
            # takes the request off the queue: the one in service is not counted
            value = delay * max(inflight - 1, 1)
            if self.post_delay_s > 0:
                self._posts.append((now + self.post_delay_s, backend.index, value))
            else:
                self.loads[backend.index] = value

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        self._ensure(backends, now)
        if self._posts:
            self._apply_posts(now)
        best: BackendView | None = None
        for b in self.avail.items:
            if eligible(b, request) and (
                best is None or js_greater(self.loads[best.index], self.loads[b.index])
            ):
                best = b
        return best

    def _apply_posts(self, now: float) -> None:
        due = [p for p in self._posts if p[0] <= now]
        if due:
            self._posts = [p for p in self._posts if p[0] > now]
            for _, index, value in sorted(due):
                self.loads[index] = value


class AsCodedImmediate(AsCodedDynamic):
    """Ingram's ``dynamicImmediate``: POSTed estimates (numbers) only."""

    name = "ingram-dynamic-immediate"
    summary = "Ingram's dynamicImmediate as coded (POSTed numeric estimates)"
    uses_response_reports = False
    uses_push_reports = True


class AsCodedHybrid(AsCodedDynamic):
    """Ingram's ``dynamicHybrid``: both, latest wins, strings and numbers mixed."""

    name = "ingram-dynamic-hybrid"
    summary = "Ingram's dynamicHybrid as coded (header strings and POSTed numbers)"
    uses_response_reports = True
    uses_push_reports = True


AS_CODED: dict[str, type[AsCodedDynamic]] = {
    "dynamic": AsCodedDynamic,
    "dynamic-immediate": AsCodedImmediate,
    "dynamic-hybrid": AsCodedHybrid,
}
