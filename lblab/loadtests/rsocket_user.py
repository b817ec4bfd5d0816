"""Locust users that speak RSocket: the client wrapper, an abstract user, thin users.

Three layers, as Locust's own gRPC/XML-RPC examples: ``LocustRSocketClient`` wraps
``RSocketClient`` and fires ``events.request`` exactly once per call (errors recorded,
never raised out of a task); ``RSocketUser`` (abstract) builds it from ``host`` and the
phase's ``LoadSpec``; ``ClosedLoopUser`` is the closed load model, ``OpenLoopUser`` the
open and trace models (a fixed schedule of sends).

Event fields: ``request_type="request_response"``, ``name`` = the cell (``sp+sr``...),
``response_time`` in ms (``perf_counter``; from the due time in the open model),
``response_length`` = response data bytes, ``exception`` = ``None`` or the client's typed
error, ``context`` = strategy, run_id, replication, server, error_kind, error_origin, t_sent and sizes.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Iterator
from typing import Any

import gevent
import gevent.event
import orjson
from gevent.pool import Group
from locust import User, between, constant, task
from locust.exception import StopTest, StopUser
from locust.runners import MasterRunner, WorkerRunner

from lblab.balancer_names import balancer_names
from lblab.config import parse_hostport
from lblab.errors import ConfigError
from lblab.experiment.spikes import TimeWarp
from lblab.loadtests.loadspec import LoadSpec
from lblab.loadtests.openloop import due_times
from lblab.loadtests.rsocket_client import RSocketClient, classify_exception
from lblab.scenarios import Cell, request_body
from lblab.traces import schedule
from lblab.wire.metadata import request_metadata

WORK_METADATA = request_metadata("work")
GENERATOR_DONE = "lblab_generator_done"
"""A worker's message to its master: its generator's schedule is sent and answered."""
LOAD_STARTED = "lblab_load_started"
"""A worker's message to its master: its first request of the phase is on its way."""


TIMER_LEAD_S = 0.0005
"""How early the open model's sender asks to wake before a send is due. gevent's loop
waits in epoll, whose timeout is whole milliseconds: a timer wakes 0-1 ms late (0.69 ms
at the median, measured here), so every send left that late. Asking half a millisecond
early centres the wake on the due time; a send that is then early waits for nothing and
its latency counts from when it left (``request``), so no latency is understated."""

REPORT_NOW = "lblab_report_now"
"""A master's message to its workers: send the stats you hold (``quit_after_reports``)."""
REPORT_WAIT_S = 5.0


def end_load_after(environment: Any, seconds: float) -> None:
    """Quit the test ``seconds`` from now, as Locust's ``-t`` would (users finish the
    request in flight)."""
    gevent.spawn_later(seconds, quit_after_reports, environment)


def quit_after_reports(environment: Any) -> None:
    """Quit the test; a master first has every worker send the stats it holds (at most
    ``REPORT_WAIT_S``). Locust's own quit asks the workers to stop and waits 0.5 s for
    their last report, which a busy machine missed: Locust's count of a 2 s phase was 0
    (its workers report every 3 s)."""
    runner = environment.runner
    if isinstance(runner, MasterRunner) and runner.clients.all:
        waiting = {c.id for c in runner.clients.all}
        reported = gevent.event.Event()

        def on_report(client_id: str, **_: Any) -> None:
            waiting.discard(client_id)
            if not waiting:
                reported.set()

        environment.events.worker_report.add_listener(on_report)
        runner.send_message(REPORT_NOW)
        reported.wait(REPORT_WAIT_S)
        environment.events.worker_report.remove_listener(on_report)
    runner.quit()


def report_when_asked(environment: Any) -> None:
    """A worker's part in ``quit_after_reports``."""
    environment.runner.register_message(
        REPORT_NOW, lambda environment, msg, **_: environment.runner._send_stats()
    )


class _LoadClock:
    """The closed model's phase lasts ``spec.duration`` from its first request, not from
    Locust's ``-t`` timer: that starts before the users connect, and the load measured
    from its first request fell short of the phase by the connection time (2.984 of 3 s
    on a busy machine). ``-t`` stays as the safety net. A worker tells its master, whose
    clock ends the test. Only under a run time (the master's: a worker is not told it):
    ``lblab ui``'s swarms run until stopped."""

    phase = ""  # the records folder of the phase this process has started the clock for

    def first_send(self, environment: Any, spec: LoadSpec) -> None:
        if self.phase == spec.records_dir:
            return
        self.phase = spec.records_dir
        if isinstance(environment.runner, WorkerRunner):
            environment.runner.send_message(LOAD_STARTED)
        elif environment.parsed_options.run_time:
            end_load_after(environment, spec.duration)


_load_clock = _LoadClock()


def parse_host(host: str | None) -> tuple[str, int]:
    """``rsocket://HOST:PORT`` or ``HOST:PORT`` -> (host, port)."""
    if not host:
        raise ConfigError("no host: pass --host rsocket://HOST:PORT (the balancer's address)")
    return parse_hostport(host.removeprefix("rsocket://").removeprefix("tcp://"), "host")


def spec_of(environment: Any) -> LoadSpec:
    text = (
        getattr(environment.parsed_options, "lblab_spec", "") if environment.parsed_options else ""
    )
    if not text:
        raise ConfigError("no load spec: pass --lblab-spec JSON (the runner does this)")
    return LoadSpec.from_json(text)


class LocustRSocketClient:
    """Fires one Locust request event per request; never raises request errors."""

    def __init__(
        self, environment: Any, host: str, port: int, spec: LoadSpec, balancer: str = "b1"
    ) -> None:
        self._fire = environment.events.request.fire
        self._spec = spec
        self._client = RSocketClient(host, port)
        self._base_context = {
            "strategy": spec.strategy,
            "run_id": spec.run_id,
            "replication": spec.replication,
            "balancer": balancer,
        }

    def request(self, cell: Cell, due: tuple[float, float] | None = None) -> None:
        """One request-response of ``cell``. ``due`` = (epoch, perf_counter) of the
        intended send time in the open model; latency then counts from it."""
        body = request_body(cell.package_bytes, cell.work_bytes)
        t_sent, start = due if due is not None else (time.time(), time.perf_counter())
        # Open model: how late the send is against its due time (a saturated generator
        # sends late; the run's checks warn on it); negative: early, by at most
        # ``TIMER_LEAD_S``, and then its latency counts from now, when it leaves.
        send_lag_ms = None
        if due is not None:
            now = time.perf_counter()
            send_lag_ms, start = (now - start) * 1000.0, max(start, now)
        exception: BaseException | None = None
        server = service_ms = queue_ms = server_ms = None
        length = 0
        try:
            response = self._client.request_response(
                body, WORK_METADATA, self._spec.request_timeout
            )
            length = len(response.data)
            answer = orjson.loads(response.data)
            server = answer.get("server")
            service_ms, queue_ms = answer.get("service_ms"), answer.get("queue_ms")
            server_ms = answer.get("server_ms")
        except Exception as exc:  # recorded in the event, as Locust expects of clients
            exception = exc
        elapsed_ms = (time.perf_counter() - start) * 1000.0
        kind, origin = classify_exception(exception)
        self._fire(
            request_type="request_response",
            name=cell.name,
            response_time=elapsed_ms,
            response_length=length,
            response=None,
            exception=exception,
            context={
                **self._base_context,
                "server": server,
                "service_ms": service_ms,
                "send_lag_ms": send_lag_ms,
                "queue_ms": queue_ms,
                "server_ms": server_ms,
                "error_kind": kind,
                "error_origin": origin,
                "t_sent": t_sent,
                "package_bytes": cell.package_bytes,
                "work_bytes": cell.work_bytes,
            },
        )

    def close(self) -> None:
        self._client.close()


_users_started = itertools.count()
"""Users this process has started: the closed model spreads them over the balancers."""
_phase_start: dict[str, float] = {}
"""When the first user of each phase (by records folder) started: a spike's clock."""


class RSocketUser(User):
    """Abstract: a user with an RSocket client toward ``host`` (or toward one of the
    spec's ``balancers``) and the phase's spec."""

    abstract = True

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        try:
            self.address = parse_host(self.host)
            self.spec = spec_of(environment)
            names = balancer_names(max(1, len(self.spec.balancers)))
            addresses = [parse_hostport(a, "balancers") for a in self.spec.balancers]
            self.balancers = list(zip(names, addresses or [self.address], strict=True))
        except ConfigError as exc:
            raise StopTest(str(exc)) from exc
        self.index = getattr(environment.runner, "worker_index", 0) or 0
        # One stream of draws per user, reproducible from the run's seed.
        self.rng = random.Random(f"{self.spec.seed}:{self.index}:{id(self)}")
        self.chooser = self.spec.scenario.chooser(self.rng)

    def new_client(self, k: int = 0) -> LocustRSocketClient:
        """A client toward balancer ``k`` (0-based, modulo their number)."""
        name, (host, port) = self.balancers[k % len(self.balancers)]
        return LocustRSocketClient(self.environment, host, port, self.spec, name)


class ClosedLoopUser(RSocketUser):
    """Sends a request, waits for it, thinks (``think_time`` seconds, uniform), repeats.

    With the spec's ``spikes`` this process starts ``users`` plus the most a spike adds
    (``loadgen.command_line``); the n-th user past ``users`` sends only while a spike
    that adds more than n runs, from the moment the process's first user started
    (``experiment/spikes.py``; the runner allows one Locust process then)."""

    def wait_time(self) -> float:  # type: ignore[override]
        lo, hi = self.spec.think_time
        return (between(lo, hi) if hi > 0 else constant(0))(self)

    def on_start(self) -> None:
        # Process i's n-th user: balancer (n + i) mod K, so the users of all processes
        # spread evenly even when each process has fewer users than there are balancers.
        self.rank = next(_users_started)
        _phase_start.setdefault(self.spec.records_dir, time.monotonic())
        self.client = self.new_client(self.rank + self.index)

    def idle_for(self) -> float:
        """Seconds until this user may send (0: now): a spike's user waits for its spike."""
        spec = self.spec
        extra = self.rank - spec.users
        if not spec.spikes or extra < 0:
            return 0.0
        now = time.monotonic() - _phase_start[spec.records_dir]
        mine = [s for s in spec.spikes if extra < s.extra_users(spec.users) and now < s.end]
        if not mine:
            return spec.duration + spec.request_timeout  # no spike of its own is left
        return max(0.0, min(s.at for s in mine) - now)

    def on_stop(self) -> None:
        self.client.close()

    @task
    def work(self) -> None:
        idle = self.idle_for()
        if idle > 0:
            gevent.sleep(idle)
            return
        _load_clock.first_send(self.environment, self.spec)
        self.client.request(self.chooser.next())


class OpenLoopUser(RSocketUser):
    """Sends on a fixed schedule whatever the responses do: ``openloop.due_times`` with
    the scenario's cells (open model), or a trace's sends (``traces.Schedule``).

    One generator per Locust process; with several (workers), each takes ``rate /
    generators`` and a phase offset, or of a trace the sends k = index, index +
    generators, ... Each due request runs in its own greenlet on an idle connection from
    a pool (one request in flight per connection), so a slow answer never delays the
    next send. When the schedule is done and answered, a single process quits; a worker
    tells its master (``GENERATOR_DONE``), which ends the test when all have.
    """

    fixed_count = 1

    def planned(self, index: int) -> Iterator[tuple[float, Cell]]:
        """This generator's sends: (seconds from the start, the request's shape), the
        schedule's times warped by the spec's spikes (``experiment/spikes.py``)."""
        if not self.spec.spikes:
            return self._scheduled(index, self.spec.duration)
        warp = TimeWarp(self.spec.spikes)
        base = self._scheduled(index, warp.base(self.spec.duration))
        return ((warp.real(due), cell) for due, cell in base)

    def _scheduled(self, index: int, duration: float) -> Iterator[tuple[float, Cell]]:
        """The schedule's sends up to ``duration`` (when no count ends it first)."""
        spec = self.spec
        trace = spec.scenario.trace
        if trace is not None:
            name = spec.scenario.name  # Locust's label: one per scenario, not per shape
            sends = schedule(trace, spec.rate).sends(
                until=duration if spec.count is None else None,
                most=spec.count,
                first=index,
                step=spec.generators,
            )
            return ((due, Cell(name, package, work)) for due, package, work in sends)
        share = spec.rate / spec.generators
        count = None
        if spec.count is not None:
            count = spec.count // spec.generators + (index < spec.count % spec.generators)
        dues = due_times(
            share,
            spec.arrival,
            self.rng,
            duration=duration if count is None else None,
            count=count,
            offset=(index / spec.generators) / share if spec.arrival == "constant" else 0.0,
        )
        return ((due, self.chooser.next()) for due in dues)

    @task
    def run_schedule(self) -> None:
        spec = self.spec
        runner = self.environment.runner
        index = getattr(runner, "worker_index", 0) or 0
        try:
            planned = self.planned(index)
        except ConfigError as exc:  # a trace this loader host cannot read
            raise StopTest(str(exc)) from exc
        # Idle connections per balancer; send n of generator i goes to balancer
        # (n + i) mod K, so the generators' sends spread evenly over the balancers.
        idle: list[list[LocustRSocketClient]] = [[] for _ in self.balancers]
        group = Group()

        def send(k: int, cell: Cell, due: tuple[float, float]) -> None:
            client = idle[k].pop() if idle[k] else self.new_client(k)
            try:
                client.request(cell, due)
            finally:
                idle[k].append(client)

        t0_epoch, t0_perf = time.time(), time.perf_counter()
        for n, (offset, cell) in enumerate(planned):
            delay = t0_perf + offset - time.perf_counter() - TIMER_LEAD_S
            if delay > 0:
                gevent.sleep(delay)
            k = (n + index) % len(self.balancers)
            group.spawn(send, k, cell, (t0_epoch + offset, t0_perf + offset))
        group.join(timeout=spec.request_timeout + 5)
        for clients in idle:
            for client in clients:
                client.close()
        if isinstance(runner, WorkerRunner):
            # A worker that quit would have its generator handed to another worker by the
            # master, which would send that share of the schedule again: it tells the
            # master instead, which ends the test when every generator is done.
            runner.send_message(GENERATOR_DONE)
        else:
            gevent.spawn(runner.quit)
        raise StopUser()
