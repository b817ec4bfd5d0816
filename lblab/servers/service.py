"""Service slots: where a server's work runs, off the event loop.

``--workers N`` is the number of concurrent service slots: a thread pool of N threads
fed FIFO, so with ``--workers 1`` requests are served strictly one after another in
arrival order (Ingram's single-worker FIFO servers). The slots are threads, so Python
CPU work is serialised by the GIL: a server never burns more than about one CPU, which
is what a CPU-quota server of at most one CPU needs, and N > 1 only overlaps the parts
that release the GIL (``--delay-ms`` sleeps, I/O).

``--delay-ms D`` adds a fixed service time per request as a sleep inside the slot, not
CPU, so Martins' (10/500/900 ms) and Ingram's (250/500/100/200/700 ms) servers can be run
live: the slot stays busy for D ms, later requests queue behind it. With
``--delay-dist exp`` each request sleeps an exponential time of mean D instead (the
simulator's ``exp:D`` service), drawn from a stream seeded by the server's id, so a
server's sequence of draws is the same in every run. ``slowdown``
(``servers/slowdown.py``, set at runtime by the ``slow`` timeline event) stretches each
request's time in its slot the same way, and so does ``cold`` (the ``cold`` event, by
its factor at the request's start). Under ``failing`` (the ``fail`` event) a request
that draws a failure (its own stream, also seeded by the id) holds its slot for the
failure's delay, does no work and raises ``InjectedFault``
(``servers/behaviour.py``).

Timing per request: ``queue_ms`` from arrival (taken on the event loop when the frame
was read) to the moment a slot takes it; ``service_ms`` from then to the end of the work,
the delay and any duty-cycle throttling (a cgroup throttles inside the work too).
"""

from __future__ import annotations

import random
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from lblab.servers.behaviour import NO_FAILURES, ColdStart, Failing
from lblab.servers.cpulimit import DutyCycle
from lblab.servers.slowdown import NORMAL, Slowdown
from lblab.servers.work import DocumentCache, do_work

DELAY_DISTS = ("fixed", "exp")
"""How ``--delay-ms`` is spent per request: always D, or exponential with mean D."""


class InjectedFault(Exception):
    """A failure the ``fail`` timeline event asked for: the server's own, by design."""


@dataclass(frozen=True, slots=True)
class WorkResult:
    work_bytes: int
    items: int
    queue_ms: float
    service_ms: float


class WorkService:
    __slots__ = (
        "_cache",
        "_delay_s",
        "_draws",
        "_duty_cycle",
        "_fail_draws",
        "_pool",
        "cold",
        "failing",
        "slowdown",
        "workers",
    )

    def __init__(
        self,
        workers: int,
        delay_ms: float,
        duty_cycle: DutyCycle | None,
        delay_dist: str = "fixed",
        seed: str = "",
    ) -> None:
        self.workers = workers
        self._delay_s = delay_ms / 1000.0
        self._draws = random.Random(seed) if delay_dist == "exp" else None
        self._duty_cycle = duty_cycle
        self._cache = DocumentCache()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="work")
        self.slowdown: Slowdown = NORMAL
        self.failing: Failing = NO_FAILURES
        self._fail_draws = random.Random(f"{seed}:fail")
        self.cold: ColdStart | None = None
        """Its ``started`` on ``time.perf_counter``'s clock."""

    @property
    def delay_ms(self) -> float:
        """The slept part of every request's service time (``--delay-ms``; its mean
        with ``--delay-dist exp``)."""
        return self._delay_s * 1000.0

    def next_delay_s(self) -> float:
        """The sleep of the next request (one Random shared by the slots: a draw is
        atomic under the GIL)."""
        draws = self._draws
        return self._delay_s if draws is None else draws.expovariate(1 / self._delay_s)

    def submit(self, body: bytes, arrived: float) -> Future[WorkResult]:
        """Queue one request's work; ``arrived`` is its ``time.perf_counter()`` at arrival.

        The future fails with ``BadRequest`` for a bad body; any other exception is the
        server's own failure. Cancelling it before a slot takes it skips the work.
        """
        return self._pool.submit(self._run, body, arrived)

    def _run(self, body: bytes, arrived: float) -> WorkResult:
        start = time.perf_counter()
        failing = self.failing
        if failing is not NO_FAILURES and failing.fails(self._fail_draws):
            time.sleep(failing.delay_ms / 1000.0)
            raise InjectedFault(f"injected failure (fail rate {failing.rate:g})")
        cold = self.cold
        stretch = 1.0 if cold is None else cold.factor_at(start)
        if self._duty_cycle is not None:
            self._duty_cycle.wait()
        request = do_work(body, self._cache)
        if self._delay_s:
            time.sleep(self.next_delay_s())
        slowdown = self.slowdown
        if slowdown is not NORMAL or stretch != 1.0:
            time.sleep(slowdown.extra_s(time.perf_counter() - start, stretch))
        if self._duty_cycle is not None:
            self._duty_cycle.wait()
        end = time.perf_counter()
        return WorkResult(
            request.work_bytes, request.items, (start - arrived) * 1e3, (end - start) * 1e3
        )

    def shutdown(self) -> None:
        """Drop queued work; running work finishes in its thread."""
        self._pool.shutdown(wait=False, cancel_futures=True)
