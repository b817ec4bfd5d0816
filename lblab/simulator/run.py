"""The simulated run: clients, links and servers in SimPy, the balancer's Pool in the middle.

Theory of operation. The balancer here is the real ``balancer.pool.Pool`` with a real
strategy from the registry, driven through the live router's request lifecycle
(``balancer/lifecycle.py``, by ``simulator/balancer.py``): the simulator is only a
driver, like the asyncio balancer node, and passes SimPy's ``env.now`` as ``now``. A
request's life:

    client send --client_delay--> balancer: pick, dispatch
      --server_delay--> server queue/workers (push report back, if the strategy wants it)
      --server_delay--> balancer: report (response metadata), the attempt's outcome
          REJECTED and tries left: pick again, excluding servers already tried
      --client_delay--> client: one row in the requests table

Probes (strategies with ``uses_probes``): after each pick the pool names the backends
to probe; each probe reaches its server after the server delay, takes ``probe_cost`` of
its CPU (``SimServer.charge``), is answered at once with the server's RIF (queued plus
in service) and its ``RifLatency`` estimate at that RIF (the record the live server
keeps, fed with each request's RIF at arrival and its queue plus service time), and the
answer reaches the pool one server delay later; a round trip over
``PROBE_TIMEOUT_S`` counts as timed out. The pool counts them per backend (``counters``).

Many balancers (``balancers`` = K): K independent balancers in front of the same
servers, as K client-side balancers or K balancer nodes would be. Each has its own
``Pool`` (in-flight counts, latency EWMAs, health, counters) and its own strategy
instance, whose random stream is ``rng_stream(seed, rep, "strategy")`` for ``b1`` (as
with one balancer) and ``"strategy:bK"`` for ``bK``. The load is split among them:
evenly spaced arrivals go to balancer (request index mod K); Poisson arrivals each to
a balancer drawn uniformly at random (stream ``"balancers"``), so that each balancer
sees a Poisson stream of rate / K as independent clients would (dealing a Poisson
stream round robin would give each balancer Erlang-K gaps, smoother than any client's);
closed users are dealt round robin (user u to balancer u mod K) and keep theirs. A
REJECTED request is replayed by its own balancer. Signals reach the balancers that
would get them live: a response report and a probe's answer only the balancer whose
request or probe it answers; a push report (a server pushes to every connection that
subscribed) and an agent report every balancer. A server's RIF and ``RifLatency``
record are its own, one for all balancers. The requests table's ``balancer`` column
names the balancer (``b1`` .. ``bK``); the pool counters are summed over balancers.

A deadline (from the client's send) ends a request as ``timeout``: the balancer
completes it in the pool at that moment and drops the late response; the server still
does the work, as a real one would. An answer that would reach the client after its
deadline is a timeout at the deadline for the client, and an outcome for the pool (the
balancer had it in time). Deadlines fall in send order, so one watchdog timer walks a FIFO of requests
instead of a timer per request.

Timeline events (``ServerEvent``, a live run's [[timeline]]) act on the servers and
on their balancers' connections as the live testbed's do: ``simulator/faults.py``. An
attempt a ``fail`` fails reaches its balancer as the server's own failure
(``application``, a server fault) and its client so; a ``spike`` warps the open and
trace arrivals' times (``loadtests/spikes.TimeWarp``, the live generator's code) and
starts more closed users for its length (``_spike``).

An agent samples every server each ``report_period``: utilisation (busy fraction of the
workers, the cpu table's ``cpu_percent``) and qps; strategies that use agent reports get
them ``report_delay`` later. All times in tables are ``EPOCH + env.now``.

The run stops when the last request has its answer: that instant is the simulated
duration (``sim_seconds``, the manifest's ``end``), whatever deadlines, samples or
server work of timed-out requests are still pending. With a ``duration`` the clients
send until then, as a live phase's users do, and the run ends when what they sent has
its answers.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import simpy

from lblab.balancer.aperture import BandedWindow, Subset, banded_windows, subset
from lblab.balancer.pool import COUNTER_NAMES, BackendCounters, BackendSpec, Pool
from lblab.balancer.probes import PROBE_TIMEOUT_S
from lblab.balancer.strategies.base import Interaction, RequestView, Strategy, decision_counts
from lblab.balancer.strategies.registry import make_strategy
from lblab.balancer_names import balancer_names
from lblab.errors import ConfigError
from lblab.experiment.spikes import Spike, TimeWarp
from lblab.json_fields import to_plain
from lblab.loadreport import LoadReport, ProbeAnswer, RifLatency
from lblab.simulator.balancer import Answer, SimBalancer, SimRequest
from lblab.simulator.clock import GRID, LATE, at, run_events
from lblab.simulator.config import EPOCH, SimConfig, rng_stream, stream_index
from lblab.simulator.faults import ServerFaults
from lblab.simulator.model import SimServer
from lblab.simulator.quota import CpuQuota
from lblab.simulator.record import ERROR_CODE, NO_BACKEND, NO_ERROR, RequestRows, SampleRows
from lblab.simulator.slot import slot_model
from lblab.simulator.workload import ClosedUsers, OpenArrivals, ShapeSampler, TraceArrivals

_NAN = float("nan")
_INF = float("inf")
_REJECTED = ERROR_CODE["rejected"]
_TIMEOUT = ERROR_CODE["timeout"]
_APPLICATION = ERROR_CODE["application"]
_RR = Interaction.REQUEST_RESPONSE


class _Request(SimRequest):
    """A client's request, and its current attempt at a server (a ``simulator.model.Job``).

    One attempt is at a server at a time (a refused one never queues; a timed-out one
    is never tried again), so the server books its ``arrived``, ``queue_s`` and
    ``service_s`` here: the row takes them only from the attempt that succeeded.
    ``done`` is the balancer's end of the request (``balancer/lifecycle.py``);
    ``replied`` is the client's, a client delay later.
    """

    __slots__ = (
        "arrived",
        "epoch",
        "failed",
        "id",
        "package_bytes",
        "queue_s",
        "replied",
        "rif",
        "service_s",
        "t_sent",
        "work_bytes",
    )

    def __init__(
        self,
        rid: int,
        t_sent: float,
        deadline: float,
        package: int,
        work: int,
        key: bytes | None,
        balancer: int,
    ):
        super().__init__(RequestView(rid, _RR, package, key), t_sent, deadline, balancer)
        self.id = rid
        self.t_sent = t_sent
        self.package_bytes = package
        self.work_bytes = work
        self.arrived = 0.0
        self.epoch = 0
        self.failed = False
        self.replied = False
        self.queue_s = _NAN
        self.service_s = _NAN
        self.rif = 0
        """Requests at the server when this attempt arrived (probing strategies only)."""


@dataclass(frozen=True, slots=True)
class SimResult:
    config: SimConfig
    requests: pa.Table
    picks: pa.Table
    cpu: pa.Table
    servers: tuple[str, ...]
    sim_seconds: float
    wall_seconds: float
    events: int
    counters: dict[str, Any]
    subsets: tuple[Subset, ...] = ()
    """Each balancer's aperture (``SimConfig.aperture``), ``b1`` first; empty: full mesh.
    Load-banded: the largest window each had."""
    decisions: dict[str, int] = field(default_factory=dict)
    """The strategies' own decision counters (``decision_counts``), summed over the
    balancers."""
    bands: tuple[dict[str, float], ...] = ()
    """Each load-banded balancer's window size: time-weighted ``mean``, ``largest``,
    ``last``."""

    @property
    def requests_per_wall_second(self) -> float:
        return self.requests.num_rows / max(self.wall_seconds, 1e-9)


class Simulation:
    """One replication of one strategy. ``run()`` returns the tables."""

    def __init__(self, config: SimConfig, strategy: Strategy | None = None) -> None:
        self.cfg = cfg = config
        rep = stream_index(cfg.replication)
        self.env = env = simpy.Environment()
        self._rng_arrivals = rng_stream(cfg.seed, rep, "arrivals")
        self._rng_keys = rng_stream(cfg.seed, rep, "keys")
        # A trace gives both in its order: each send's shape, and the gap to the next.
        arrivals = cfg.arrivals
        self._replay = (
            arrivals.replay(cfg.requests) if isinstance(arrivals, TraceArrivals) else None
        )
        self._shape = self._replay or ShapeSampler(cfg.cells, rng_stream(cfg.seed, rep, "shapes"))
        service_rng = rng_stream(cfg.seed, rep, "service")

        self.servers: list[SimServer] = []
        self._quotas: dict[int, CpuQuota] = {}  # the agent reads their CPU, not busy time
        self._delay: list[float] = []
        specs = []
        for group in cfg.servers:
            for _ in range(group.count):
                i = len(self.servers)
                sid = cfg.server_names[i]
                sleeps = None if group.sleep is None else rng_stream(cfg.seed, rep, f"sleep:{sid}")
                service, quota = slot_model(group, env, sleeps)
                if quota is not None:
                    self._quotas[i] = quota
                self.servers.append(
                    SimServer(
                        env,
                        i,
                        sid,
                        service,  # type: ignore[arg-type]  # duck-typed ServiceModel
                        group.workers,
                        group.speed,
                        group.capacity,
                        service_rng,
                        self._server_done,
                    )
                )
                self._delay.append(cfg.server_delay if group.delay is None else group.delay)
                if sid not in cfg.joins_later:
                    specs.append(BackendSpec(id=sid, weight=group.weight))
        self.names = tuple(s.id for s in self.servers)
        k = cfg.balancers
        self.balancer_names = balancer_names(k)
        self.subsets: tuple[Subset, ...] = ()
        """Each balancer's aperture, ``b1`` first (none: the full mesh)."""
        members: list[list[BackendSpec]] = [specs] * k
        self.windows: list[BandedWindow] = []
        """Each balancer's load-banded window (``aperture_load_band``), ``b1`` first."""
        weight_of = {s.id: s.weight for s in specs}
        if cfg.aperture is not None and cfg.aperture.load_band:
            self.windows = banded_windows(
                cfg.aperture,
                [s.id for s in specs],
                [s.weight for s in specs],
                k,
                lambda b: rng_stream(cfg.seed, rep, f"aperture:b{b + 1}"),
            )
            members = [[BackendSpec(i, weight_of[i]) for i in w.members] for w in self.windows]
        elif cfg.aperture is not None:
            self.subsets = tuple(
                cfg.aperture.subsets(
                    [s.id for s in specs],
                    [s.weight for s in specs],
                    k,
                    lambda b: rng_stream(cfg.seed, rep, f"aperture:b{b + 1}"),
                )
            )
            members = [[BackendSpec(m.id, m.weight) for m in sub.members] for sub in self.subsets]
        strategies: list[Strategy]
        if strategy is None:
            strategies = [
                make_strategy(
                    cfg.strategy,
                    dict(cfg.strategy_options),
                    rng=rng_stream(cfg.seed, rep, "strategy" if b == 0 else f"strategy:b{b + 1}"),
                    weights={s.id: s.weight for s in members[b]},
                )
                for b in range(k)
            ]
        elif k == 1:
            strategies = [strategy]
        else:
            raise ConfigError(
                f"balancers: a strategy object serves one balancer, not {k}; give none and "
                "each balancer builds its own from the config"
            )
        self.pools = [
            Pool(members[b], s, health=cfg.health, now=0.0) for b, s in enumerate(strategies)
        ]
        """One per balancer, in order (``b1`` first), over its aperture's servers if any."""
        self.picks = SampleRows("i")
        self.balancer: SimBalancer[_Request] = SimBalancer(
            self.pools,
            self.names,
            cfg.max_tries,
            self.picks,
            cfg.picks_every,
            self.windows,
            weight_of,
        )
        self._balancers = k
        self._rng_balancers = rng_stream(cfg.seed, rep, "balancers")
        self.faults = ServerFaults(
            env,
            self.servers,
            self._delay,
            self.balancer,
            [rng_stream(cfg.seed, rep, f"reconnect:b{b + 1}") for b in range(k)],
            cfg.drain_timeout,
            cfg.joins_later,
            self._route,
            self._reply,
            lambda: self._finished < self._requests,
            self._quotas,
            lambda name: rng_stream(cfg.seed, rep, f"fail:{name}"),
        )
        for event in cfg.timeline:
            if event.action == "capacity" and self.names.index(event.server) not in self._quotas:
                raise ConfigError(
                    f"timeline: capacity on {event.server} needs a CPU quota on its server "
                    "(cpu_quota) in the simulator"
                )
        self._warp = TimeWarp(cfg.spikes) if cfg.spikes else None
        self._base_send = 0.0
        """The next send in the schedule's own time (``_warp`` maps it to real time)."""
        self._retiring = 0
        """Closed users a spike's end retires as their requests come back."""
        poisson = isinstance(cfg.arrivals, OpenArrivals) and cfg.arrivals.poisson
        self._next_balancer = self._by_chance if k > 1 and poisson else self._by_index
        strategy = strategies[0]  # the same class for every balancer: the same signals
        self._response_reports = strategy.uses_response_reports
        self._push_reports = strategy.uses_push_reports
        self._agent_reports = strategy.uses_agent_reports
        self._probes = strategy.uses_probes
        self._rif_latency = [RifLatency() for _ in self.servers] if self._probes else []
        self._probe_cost = cfg.probe_cost

        self.rows = RequestRows()
        self.cpu = SampleRows("d")
        self._sent = 0
        self._finished = 0
        self._next_send = 0.0
        self._watch_armed = False
        self._keys = (
            [f"key-{i}".encode() for i in range(cfg.routing_keys)] if cfg.routing_keys else None
        )
        # The hot path reads these once per request: plain attributes, not cfg lookups.
        self._requests = cfg.requests
        self._deadline = cfg.deadline
        self._client_delay = cfg.client_delay
        self._closed = isinstance(cfg.arrivals, ClosedUsers)
        self._horizon = cfg.horizon

    # ---- clients -------------------------------------------------------------------

    def _start_clients(self) -> None:
        arrivals = self.cfg.arrivals
        if isinstance(arrivals, ClosedUsers):
            for user in range(min(arrivals.users, self._requests)):
                self._send(user % self._balancers)  # a user keeps its balancer
        else:
            self._send(self._next_balancer())
            self._next_arrival()

    def _by_index(self) -> int:
        """The balancer of the next open arrival: its index mod K (module docstring)."""
        return self._sent % self._balancers

    def _by_chance(self) -> int:
        """The balancer of the next Poisson arrival: uniform (module docstring)."""
        return self._rng_balancers.randrange(self._balancers)

    def _next_arrival(self) -> None:
        if self._sent < self._requests:
            # Absolute send times: evenly spaced sends land exactly on k / rate.
            arrivals = self._replay or self.cfg.arrivals
            gap = arrivals.gap(self._rng_arrivals)  # type: ignore[union-attr]
            if self._warp is None:
                self._next_send += gap
            else:
                self._base_send += gap
                self._next_send = self._warp.real(self._base_send)
            at(self.env, self._next_send - self.env._now, self._on_arrival_timer, None, LATE)

    def _on_arrival_timer(self, _: None) -> None:
        if self._sent < self._requests:  # not after the run's duration
            self._send(self._next_balancer())
            self._next_arrival()

    def _on_think_done(self, balancer: int) -> None:
        if self._sent < self._requests:
            self._send(balancer)

    def _send(self, balancer: int) -> None:
        now = self.env._now
        package, work = self._shape.single or self._shape()
        key = self._rng_keys.choice(self._keys) if self._keys else None
        deadline = self._deadline
        if deadline is not None:
            # The watchdog's exact instant (clock.snap, inlined: once per request).
            deadline = round((now + deadline) * GRID) / GRID
        req = _Request(
            self._sent, now, _INF if deadline is None else deadline, package, work, key, balancer
        )
        self._sent += 1
        if deadline is not None:
            self.balancer.watch(req)
            if not self._watch_armed:
                self._arm_watchdog()
        if self._client_delay:
            at(self.env, self._client_delay, self._at_balancer, req)
        else:
            self._route(req)

    def _client_done(self, req: _Request, ok: bool, error: int) -> None:
        if req.replied:
            return
        req.replied = True
        rows = self.rows  # the columns of RequestRows.FLOATS, LONGS and INTS, in order
        rows.floats.extend(
            (
                EPOCH + req.t_sent,
                (self.env._now - req.t_sent) * 1000.0,
                req.queue_s * 1000.0 if ok else _NAN,  # the attempt that succeeded
                req.service_s * 1000.0 if ok else _NAN,
            )
        )
        rows.longs.extend((req.id, req.package_bytes, req.work_bytes))
        rows.ints.extend((ok, error, req.server, req.dispatches, req.balancer))
        self._finished += 1
        req.view = None
        if self._retiring and self._closed:
            self._retiring -= 1
        elif self._closed and self._sent < self._requests:
            think = self.cfg.arrivals.think_time(self._rng_arrivals)  # type: ignore[union-attr]
            if think > 0:
                at(self.env, think, self._on_think_done, req.balancer, LATE)
            else:
                self._send(req.balancer)
        if self._finished == self._requests:
            # The run ends with its last answer: pending deadlines, samples and timers
            # after it would only move the clock (else a 4 s run reports 30 s).
            raise simpy.core.StopSimulation

    def _on_client_reply(self, reply: tuple[_Request, bool, int]) -> None:
        self._client_done(*reply)

    def _reply(self, req: _Request, ok: bool, error: int) -> None:
        delay = self._client_delay
        if not delay:
            self._client_done(req, ok, error)
            return
        wait = req.deadline - self.env._now
        if wait < delay:  # the client's deadline passes before the answer reaches it
            at(self.env, max(wait, 0.0), self._on_client_reply, (req, False, _TIMEOUT))
        else:
            at(self.env, delay, self._on_client_reply, (req, ok, error))

    def _spike(self, spike: Spike) -> None:
        """A closed model's spike begins: its users start (on balancers after the
        others'), and retire at its end (module docstring)."""
        users = self.cfg.arrivals.users  # type: ignore[union-attr]
        extra = spike.extra_users(users)
        for j in range(extra):
            if self._sent < self._requests:
                self._send((users + j) % self._balancers)
        at(self.env, spike.duration, self._spike_over, extra)

    def _spike_over(self, extra: int) -> None:
        self._retiring += extra

    def _stop_sending(self, _: None) -> None:
        """The run's duration is over: what was sent is all it sends (``requests`` was a
        cap); it ends when the last of them has its answer."""
        self._requests = self._sent
        if self._finished == self._sent:
            raise simpy.core.StopSimulation

    # ---- deadlines -----------------------------------------------------------------

    def _arm_watchdog(self) -> None:
        first = self.balancer.next_deadline(self._sent - self._finished)
        if first is None:
            self._watch_armed = False
        else:
            self._watch_armed = True
            at(self.env, max(first - self.env._now, 0.0), self._on_watchdog)

    def _on_watchdog(self, _: None) -> None:
        for req in self.balancer.expire(self.env._now):
            self._client_done(req, False, _TIMEOUT)
        self._arm_watchdog()

    # ---- balancer ------------------------------------------------------------------

    def _at_balancer(self, req: _Request) -> None:
        if not req.done:  # not timed out on the way
            self._route(req)

    def _route(self, req: _Request, unrouted: int = NO_BACKEND) -> None:
        """Dispatch ``req``; with no eligible backend the client gets ``unrouted`` (the
        balancer's own REJECTED, docs/DESIGN.md "Wire contract"; a replay after a lost
        connection: that loss)."""
        now = self.env._now
        view = self.balancer.route(req, now)
        if view is None:
            self._reply(req, False, unrouted)
            return
        i = req.server
        if self._probes:
            self._send_probes(req.balancer, now)
        delay = self._delay[i]
        if delay:
            req.arrived = now + delay
            at(self.env, delay, self._at_server, req)
        else:
            req.arrived = now
            self._server_arrive(self.servers[i], req)

    def _at_server(self, req: _Request) -> None:
        self._server_arrive(self.servers[req.server], req)

    def _server_arrive(self, server: SimServer, req: _Request) -> None:
        if not server.alive:
            return  # gone while it travelled: its balancer fails or replays it (``_on_lost``)
        if self._probes:
            req.rif = server.load
        if server.draining or not server.offer(req):
            self._refused[server.index] += 1
            req.retry_after_ms = server.retry_after_ms()
            self._to_balancer(server, req, False, None)
            return
        if self._push_reports:
            report = LoadReport(
                server=server.id,
                source="push",
                t=EPOCH + self.env._now,
                inflight=server.load,
                est_wait_ms=server.est_wait_ms(),
            )
            self._deliver_report(server.index, report, self._delay[server.index])

    def _server_done(self, server: SimServer, req: _Request) -> None:
        if req.failed:
            self._refused[server.index] += 1  # eps: refused or failed, as the live report
            delay = self._delay[server.index]
            if delay:
                at(self.env, delay, self._on_failed, req)
            else:
                self._on_failed(req)
            if server.draining and not server.load:
                self.faults.exit(server)
            return
        if self._probes:
            self._rif_latency[server.index].record(req.rif, (req.queue_s + req.service_s) * 1e3)
        report = None
        if self._response_reports:
            report = LoadReport(
                server=server.id,
                source="response",
                t=EPOCH + self.env._now,
                inflight=server.load,
                queue_ms=req.queue_s * 1000.0,
                service_ms=req.service_s * 1000.0,
                est_wait_ms=server.est_wait_ms(),
            )
        self._to_balancer(server, req, True, report)
        if server.draining and not server.load:
            self.faults.exit(server)

    def _to_balancer(
        self, server: SimServer, req: _Request, ok: bool, report: LoadReport | None
    ) -> None:
        delay = self._delay[server.index]
        if delay:
            at(self.env, delay, self._on_response_timer, (req, ok, report))
        else:
            self._on_response(req, ok, report)

    def _on_failed(self, req: _Request) -> None:
        if self.balancer.failed(req, self.env._now):
            self._reply(req, False, _APPLICATION)

    def _on_response_timer(self, response: tuple[_Request, bool, LoadReport | None]) -> None:
        self._on_response(*response)

    def _on_response(self, req: _Request, ok: bool, report: LoadReport | None) -> None:
        answer = self.balancer.answer(req, ok, report, self.env._now)
        if answer is Answer.OK:
            self._reply(req, True, NO_ERROR)
        elif answer is Answer.REPLAY:
            self._route(req)
        elif answer is Answer.REFUSED:
            self._reply(req, False, _REJECTED)

    # ---- probes --------------------------------------------------------------------

    def _send_probes(self, balancer: int, now: float) -> None:
        pool = self.pools[balancer]
        for view in pool.probe_targets(now):
            pool.probe_sent(view.id)
            i = self.balancer.index[view.id]
            delay = self._delay[i]
            if delay:
                at(self.env, delay, self._probe_at_server, (balancer, i, now))
            else:
                self._probe_at_server((balancer, i, now))

    def _probe_at_server(self, probe: tuple[int, int, float]) -> None:
        balancer, i, sent = probe
        server = self.servers[i]
        if not server.alive:
            at(self.env, self._delay[i], self._on_probe_lost, (balancer, i))
            return
        if server.paused:  # no answer: the prober gives it up at its deadline
            at(self.env, max(PROBE_TIMEOUT_S - 2 * self._delay[i], 0.0), self._on_probe_timeout,
               (balancer, i))  # fmt: skip
            return
        server.charge(self._probe_cost)
        rif = server.load
        estimate = self._rif_latency[i].estimate(rif)
        answer = (balancer, i, sent, ProbeAnswer(rif=rif, latency_ms=estimate))
        delay = self._delay[i]
        if delay:
            at(self.env, delay, self._on_probe_answer, answer)
        else:
            self._on_probe_answer(answer)

    def _on_probe_answer(self, answer: tuple[int, int, float, ProbeAnswer]) -> None:
        balancer, i, sent, probe = answer
        now = self.env._now
        pool = self.pools[balancer]
        if now - sent > PROBE_TIMEOUT_S:
            pool.probe_lost(self.names[i], timed_out=True)
        else:
            pool.probe_answer(self.names[i], probe, now)

    def _on_probe_lost(self, probe: tuple[int, int]) -> None:
        balancer, i = probe
        self.pools[balancer].probe_lost(self.names[i], timed_out=False)

    def _on_probe_timeout(self, probe: tuple[int, int]) -> None:
        balancer, i = probe
        self.pools[balancer].probe_lost(self.names[i], timed_out=True)

    # ---- agents, health clock -------------------------------------------------------

    def _deliver_report(self, index: int, report: LoadReport, delay: float) -> None:
        """A server's pushed report, to every balancer (each subscribed live)."""
        if delay:
            at(self.env, delay, self._on_report_timer, (index, report))
        else:
            self._on_report_timer((index, report))

    def _on_report_timer(self, delivery: tuple[int, LoadReport]) -> None:
        index, report = delivery
        name, now = self.names[index], self.env._now
        for pool in self.pools:
            pool.report(name, report, now)

    def _sample(self, _: None = None) -> None:
        now = self.env._now
        if now > self._horizon:  # checked here, once a period, not once an event
            raise ConfigError(
                f"the simulation passed {self._horizon:.3g} simulated seconds with "
                f"{self._requests - self._finished} of {self._requests} requests "
                f"unanswered; {self.cfg.horizon_rule()}: lower think or service times, "
                "or send fewer requests"
            )
        period = self.cfg.report_period
        cpu = self.cpu
        reports = []
        for s, (busy0, done0, refused0) in zip(self.servers, self._last_sample, strict=True):
            quota = self._quotas.get(s.index)
            busy = s.busy_time() if quota is None else quota.used(now)
            util = (busy - busy0) / (period * (s.workers if quota is None else quota.quota))
            if quota is None:  # a cgroup's share is not clipped: samples alias its periods
                util = min(util, 1.0)  # float noise: 1 + 5e-15
            qps = (s.completed - done0) / period
            refused = self._refused[s.index]
            self._last_sample[s.index] = (busy, s.completed, refused)
            cpu.t.append(EPOCH + now)
            cpu.server.append(s.index)
            cpu.value.append(100.0 * util)
            if self._agent_reports:
                reports.append(
                    LoadReport(
                        server=s.id,
                        source="agent",
                        t=EPOCH + now,
                        cpu_util=util,
                        qps=qps,
                        eps=(refused - refused0) / period,  # refused, or failed by a ``fail``
                        inflight=s.load,
                    )
                )
        if reports:
            delay = self.cfg.report_delay
            if delay:
                at(self.env, delay, self._apply_agent, reports)
            else:
                self._apply_agent(reports)
        if self._finished < self._requests:
            at(self.env, period, self._sample)

    def _apply_agent(self, reports: Sequence[LoadReport]) -> None:
        now = self.env._now
        for pool in self.pools:  # every balancer subscribes to every agent
            for r in reports:
                pool.report(r.server, r, now)

    def _tick(self, _: None) -> None:
        now = self.env._now
        for pool in self.pools:
            pool.tick(now)
        if self._finished < self._requests:
            at(self.env, self.cfg.tick_period, self._tick)

    # ---- run ---------------------------------------------------------------------

    def run(self) -> SimResult:
        wall0 = time.perf_counter()
        self._last_sample = [(0.0, 0, 0)] * len(self.servers)
        self._refused = [0] * len(self.servers)
        self._start_clients()
        at(self.env, self.cfg.report_period, self._sample)
        at(self.env, self.cfg.tick_period, self._tick)
        if self.cfg.duration is not None:
            at(self.env, self.cfg.duration, self._stop_sending)
        for event in self.cfg.timeline:
            at(self.env, event.at, self.faults.on_event, event)
        if self._closed:
            for spike in self.cfg.spikes:
                at(self.env, spike.at, self._spike, spike)
        env = self.env
        events = run_events(env)
        if self._finished != self._requests:
            raise RuntimeError(
                f"simulation ended with {self._requests - self._finished} requests unfinished"
            )
        wall = time.perf_counter() - wall0
        cfg = self.cfg
        key = {
            "run_id": cfg.run_id,
            "scenario": cfg.scenario,
            "strategy": cfg.strategy,
            "replication": cfg.replication,
        }
        return SimResult(
            config=cfg,
            requests=self.rows.table(key, self.names, self.balancer_names),
            picks=self.picks.table("picks", "inflight_at_pick", key, self.names),
            cpu=self.cpu.table("cpu", "cpu_percent", key, self.names),
            servers=self.names,
            sim_seconds=env.now,  # the last answer's time (the run stops there)
            wall_seconds=wall,
            events=events,
            counters=to_plain(_summed([pool.counters for pool in self.pools])),
            subsets=self._largest_windows() if self.windows else self.subsets,
            bands=tuple(
                {"mean": round(w.mean_size(env.now), 3), "largest": w.largest, "last": w.size}
                for w in self.windows
            ),
            decisions=_decisions([pool.strategy for pool in self.pools]),
        )

    def _largest_windows(self) -> tuple[Subset, ...]:
        """Each load-banded balancer's subset at its largest window: the servers it has
        had in its pool (Finagle keeps a session for ten smoothing windows, 150 s, after
        its node leaves the window, longer than most simulated runs)."""
        cfg, rep = self.cfg, stream_index(self.cfg.replication)
        ids = [s for s in self.names if s not in cfg.joins_later]
        return tuple(
            subset(
                "random",
                ids,
                [self.balancer.weights[i] for i in ids],
                b,
                len(self.windows),
                w.largest,
                rng_stream(cfg.seed, rep, f"aperture:b{b + 1}"),
            )
            for b, w in enumerate(self.windows)
        )


def _decisions(strategies: Sequence[Strategy]) -> dict[str, int]:
    """Each decision counter summed over the balancers' strategies (zeros kept)."""
    out: dict[str, int] = {}
    for strategy in strategies:
        for name, value in decision_counts(strategy).items():
            out[name] = out.get(name, 0) + value
    return out


def _summed(counters: Sequence[dict[str, BackendCounters]]) -> dict[str, BackendCounters]:
    """Each backend's counters summed over the balancers that have it (one balancer: its
    own; with an aperture, a backend is in some pools only), in the order first seen."""
    if len(counters) == 1:
        return counters[0]
    backends = list(dict.fromkeys(b for c in counters for b in c))
    return {
        backend: BackendCounters(
            **{
                name: sum(getattr(c[backend], name) for c in counters if backend in c)
                for name in COUNTER_NAMES
            }
        )
        for backend in backends
    }


def simulate(config: SimConfig) -> SimResult:
    return Simulation(config).run()
