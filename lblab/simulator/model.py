"""A simulated server: ``workers`` identical workers in front of one FIFO queue.

Theory of operation. Everything is a callback on the clock (``simulator.clock.at``),
not a process per request: a request that finds a free worker schedules its completion
at once; otherwise it waits in a ``deque`` and the completing worker starts it. That is
one heap entry per request at the server, which is what lets a million requests run in
minutes (a generator process per request costs about 3x as much). The server keeps no
object of its own per request: it works on the driver's, any object with ``Job``'s
attributes.

The server keeps the books its agent and its response metadata report: busy-worker
time integrated over time (utilisation = busy fraction of the workers, the simulated
``cpu_util``), completions (``qps``), and per request its queue wait and service time.

A probe (``charge``) is answered at once, never queued, but its CPU is taken from the
work: while every worker is busy, the probe's cost is added to the service time of the
next request to start; on a server with a free worker it costs only idle time.

A live run's timeline acts on the server: ``kill`` loses what it queued and served (each
attempt carries the server's ``epoch`` when it started, so a completion of a killed
server's attempt is dropped), ``drain`` marks it refusing new work (the driver refuses
and ends it), ``pause`` freezes it (the attempts in service keep their remaining time,
arrivals queue) until ``resume``, ``restart`` takes requests again, ``slow`` scales
every service time from then on (``simulator.slowdown.Slowed``). ``behave`` applies a
``fail``, ``reject`` or ``cold`` by the live server's rules (``servers/behaviour.py``): a
refused arrival past the rate limit (after the capacity check, as live), a failing
attempt that holds its worker for the failure's delay instead of its service (``failed``
set: not counted as completed), a cold factor on the service time at its start.
"""

from __future__ import annotations

import random
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from simpy import Environment

from lblab.failures import whole_ms
from lblab.servers.behaviour import NO_FAILURES, ColdStart, Failing, TokenBucket
from lblab.servers.slowdown import Control
from lblab.simulator.clock import at
from lblab.simulator.service import ServiceModel
from lblab.simulator.slowdown import Slowed, SlowWindow


class Job(Protocol):
    """What a server reads and writes of one attempt of a request (the driver's object)."""

    work_bytes: int
    package_bytes: int
    arrived: float
    """When the attempt reached the server (set by the driver before ``offer``)."""
    queue_s: float
    """Set by the server when the attempt starts: its wait in the queue."""
    service_s: float
    """Set by the server when the attempt starts: its service time."""
    epoch: int
    """Set by the server when the attempt starts: its lives so far (``kill``)."""
    failed: bool
    """Set by the server when the attempt starts: it fails (``fail``) instead of serving."""


class SimServer:
    __slots__ = (
        "_area",
        "_cold",
        "_done",
        "_env",
        "_epoch",
        "_fail_rng",
        "_failing",
        "_frozen",
        "_held",
        "_last_t",
        "_limiter",
        "_mean_s",
        "_model",
        "_normal",
        "_rng",
        "_scale",
        "_serving",
        "_stolen",
        "alive",
        "busy",
        "capacity",
        "completed",
        "draining",
        "id",
        "index",
        "paused",
        "queue",
        "workers",
    )

    def __init__(
        self,
        env: Environment,
        index: int,
        server_id: str,
        model: ServiceModel,
        workers: int,
        speed: float,
        capacity: int | None,
        rng: random.Random,
        done: Callable[[SimServer, Any], None],
    ) -> None:
        self._env = env
        self.index = index
        self.id = server_id
        self._model: ServiceModel | SlowWindow | Slowed = model
        self._normal: ServiceModel | SlowWindow = model
        self._scale = 1.0 / speed
        self._mean_s = model.mean_s / speed
        self.workers = workers
        self.capacity = capacity
        self._rng = rng
        self._done = done
        self.queue: deque[Job] = deque()
        self.busy = 0
        self.completed = 0
        self._area = 0.0
        self._last_t = 0.0
        self._stolen = 0.0
        """CPU seconds probes took from the work, added to the next service time."""
        self.alive = True
        self.draining = False
        """Refuses new requests and exits once empty (the driver's ``drain``)."""
        self.paused = False
        """SIGSTOP: nothing runs; arrivals queue (``pause``)."""
        self._epoch = 0
        self._serving: dict[Job, float] = {}
        """In-service attempts and when each finishes (what a pause freezes)."""
        self._frozen: list[tuple[Job, float]] = []
        self._held = 0
        """Workers a pause holds (busy, but taking no CPU: not in ``busy``)."""
        self._failing: Failing = NO_FAILURES
        self._fail_rng = rng
        self._limiter: TokenBucket | None = None
        self._cold: ColdStart | None = None

    @property
    def load(self) -> int:
        """Requests at the server: queued plus in service."""
        return self.busy + self._held + len(self.queue)

    def est_wait_ms(self) -> float:
        """The server's estimate of the work ahead of a new request (mean service based)."""
        return self.load * self._mean_s * 1000.0 / self.workers

    def slow_window(self, start: float, end: float, seconds: float) -> None:
        """Serve requests that start in ``[start, end)`` in ``seconds`` (``simulator.slowdown``)."""
        self._model = self._normal = SlowWindow(self._normal, self._env, start, end, seconds)

    def slow(self, factor: float, add_s: float) -> None:
        """From now on every request takes ``factor`` times its time plus ``add_s``
        (1 and 0: normal speed again)."""
        slowed = factor != 1.0 or add_s != 0.0
        self._model = Slowed(self._normal, factor, add_s) if slowed else self._normal
        self._mean_s = self._model.mean_s * self._scale

    def behave(self, control: Control, fail_rng: random.Random) -> None:
        """A ``fail``, ``reject`` or ``cold`` from now on (the module docstring);
        ``fail_rng`` draws which attempts fail."""
        now = self._env._now
        if control.fail is not None:
            self._failing, self._fail_rng = control.fail, fail_rng
        if control.reject is not None:
            self._limiter = control.reject.bucket(now)
        if control.cold is not None:
            self._cold = None if control.cold.factor == 1.0 else control.cold.starting(now)

    def model_changed(self) -> None:
        """The service model's mean moved (a quota changed): re-read it."""
        self._mean_s = self._model.mean_s * self._scale

    @property
    def epoch(self) -> int:
        """Changes at every kill and pause: a completion timer of an earlier epoch is void."""
        return self._epoch

    def pause(self) -> None:
        """SIGSTOP: the attempts in service stop where they are (their remaining time is
        kept), and arrivals queue; the workers take no CPU meanwhile."""
        now = self._env._now
        self._area += self.busy * (now - self._last_t)
        self._last_t = now
        self._held, self.busy = self.busy, 0
        self._frozen = [(job, due - now) for job, due in self._serving.items()]
        self._serving.clear()
        self.paused = True
        self._epoch += 1

    def resume(self) -> None:
        """SIGCONT: the frozen attempts run on for what they had left, then the queue."""
        if not self.paused:
            return
        env = self._env
        now = env._now
        self._last_t = now
        self.busy, self._held = self._held, 0
        self.paused = False
        for job, left in self._frozen:
            job.epoch = self._epoch
            self._serving[job] = now + left
            at(env, left, self._finish, job)
        self._frozen = []
        while self.queue and self.busy < self.workers:
            self._start(self.queue.popleft())

    def drain(self) -> None:
        """SIGTERM: refuse new requests from now on, finish the ones taken."""
        self.draining = True

    def kill(self) -> None:
        """The process dies: what it queued and served is lost (the balancer fails it)."""
        now = self._env._now
        self._area += self.busy * (now - self._last_t)
        self._last_t = now
        self.busy = self._held = 0
        self.queue.clear()
        self._serving.clear()
        self._frozen = []
        self._stolen = 0.0
        self.alive = False
        self.draining = self.paused = False
        self._epoch += 1

    def restart(self) -> None:
        """A new process, empty, takes requests again."""
        self.alive = True

    def offer(self, job: Job) -> bool:
        """Queue or start ``job``; False (and nothing done) if the server is at capacity
        or over its rate limit."""
        limiter = self._limiter
        if limiter is not None and not self._full() and not limiter.take(self._env._now):
            return False
        if self.paused:
            if self._full():
                return False
            self.queue.append(job)
            return True
        if self.busy < self.workers:
            if self.capacity is not None and self.busy >= self.capacity:
                return False
            self._start(job)
        elif self.capacity is not None and self.busy + len(self.queue) >= self.capacity:
            return False
        else:
            self.queue.append(job)
        return True

    def retry_after_ms(self) -> float | None:
        """The Retry-After hint of a refusal just made: its rate limit's wait for the next
        token (``TokenBucket.wait_s``, in whole ms as the live server sends it), None
        when it was not the rate limit that refused (draining, or at capacity)."""
        limiter = self._limiter
        if limiter is None or self.draining or self._full():
            return None
        return float(whole_ms(limiter.wait_s()))

    def _full(self) -> bool:
        """At capacity: ``offer`` refuses before the rate limit is asked."""
        return self.capacity is not None and self.load >= self.capacity

    def charge(self, seconds: float) -> None:
        """A probe's CPU cost (the module docstring)."""
        if self.busy >= self.workers:
            self._stolen += seconds

    def busy_time(self) -> float:
        """Worker-seconds spent busy since time 0 (integral of busy workers)."""
        now = self._env._now
        return self._area + self.busy * (now - self._last_t)

    # _start and _finish run once per request each: the busy-time integral is inlined.

    def _start(self, job: Job) -> None:
        env = self._env
        now = env._now
        self._area += self.busy * (now - self._last_t)
        self._last_t = now
        self.busy += 1
        job.queue_s = now - job.arrived
        failing = self._failing
        job.failed = failing is not NO_FAILURES and failing.fails(self._fail_rng)
        if job.failed:
            s = failing.delay_ms / 1000.0
        else:
            s = self._model.sample(self._rng, job.work_bytes, job.package_bytes) * self._scale
            if self._cold is not None:
                s *= self._cold.factor_at(now)
        if self._stolen:
            s += self._stolen
            self._stolen = 0.0
        job.service_s = s
        job.epoch = self._epoch
        self._serving[job] = now + s
        at(env, s, self._finish, job)

    def _finish(self, job: Job) -> None:
        if job.epoch != self._epoch:
            return  # its timer is void: the process was killed, or paused, since
        del self._serving[job]
        now = self._env._now
        self._area += self.busy * (now - self._last_t)
        self._last_t = now
        self.busy -= 1
        if not job.failed:
            self.completed += 1
        if self.queue:
            self._start(self.queue.popleft())
        self._done(self, job)
