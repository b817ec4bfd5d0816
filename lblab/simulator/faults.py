"""A live run's timeline on the simulated servers and their balancers' connections.

Each ``ServerEvent`` acts as the live testbed's action does: ``kill`` loses what the
server queued and served; each balancer learns it a server delay later, as a closed
connection: its requests there end as ``connection`` failures, the server goes down in
its pool, and it reconnects with the live balancer's jittered backoff (its own random
stream per balancer), up again at the first attempt that finds the server restarted.
Requests on their way to a killed server are dropped there (their balancer fails them),
and so are probes (lost, not timed out). ``drain`` is SIGTERM to a live server: it
refuses new requests (REJECTED: replayed elsewhere), finishes what it took, then exits
(at the latest ``drain_timeout`` later) with CONNECTION_CLOSE, so its balancers replay
what it never answered. ``pause`` is SIGSTOP: the server keeps what it has and queues
what arrives, silent; after ``HUNG_AFTER_S`` of silence its balancers eject it and hold
it down, after ``SILENT_LOST_S`` they close the connection (its requests fail) and
reconnect; ``resume`` lets it run on, and balancers that only held it down take it back
once they hear from it. ``restart`` takes requests again; ``slow`` scales every service
time from then on. ``remove`` takes the server out of every pool (its requests finish
there), then drains it, and no balancer reconnects to it; ``add`` puts it (back) in
every pool with its weight, restarting it if it was stopped; a server that joins later
(``joins_later``) is out of the pools until its ``add``. ``fail``, ``reject`` and
``cold`` change how the server serves (``SimServer.behave``, the live rules of
``servers/behaviour.py``; which attempts fail is drawn from the server's own stream),
``capacity`` sets its ``CpuQuota``'s quota from then on.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from simpy import Environment

from lblab.backoff import RECONNECT_BASE_S, RECONNECT_MAX_S, jittered_backoff
from lblab.balancer.health import HUNG_AFTER_S, SILENT_LOST_S
from lblab.balancer.pool import BackendSpec, Pool
from lblab.simulator.balancer import SimBalancer
from lblab.simulator.clock import at
from lblab.simulator.config import ServerEvent
from lblab.simulator.model import SimServer
from lblab.simulator.quota import CpuQuota
from lblab.simulator.record import ERROR_CODE

_CONNECTION = ERROR_CODE["connection"]


class ServerFaults:
    """The events of one simulated run (``Simulation`` schedules ``on_event``)."""

    def __init__(
        self,
        env: Environment,
        servers: Sequence[SimServer],
        delays: Sequence[float],
        balancer: SimBalancer[Any],
        rngs: Sequence[random.Random],
        drain_timeout: float,
        joins_later: Sequence[str],
        route: Callable[[Any, int], None],
        reply: Callable[[Any, bool, int], None],
        busy: Callable[[], bool],
        quotas: Mapping[int, CpuQuota] | None = None,
        fail_rngs: Callable[[str], random.Random] | None = None,
    ) -> None:
        self._env = env
        self._servers = servers
        self._names = balancer.names
        self._delay = delays
        self._balancer = balancer
        self._pools: Sequence[Pool] = balancer.pools
        self._balancers = len(balancer.pools)
        self._rng_reconnect = rngs
        """Each balancer's reconnect jitter (its own stream)."""
        self._drain_timeout = drain_timeout
        self._route = route
        """Dispatch a replayed request; the client gets the given error if none takes it."""
        self._reply = reply
        self._busy = busy
        """Are requests still unanswered (a reconnect loop runs only while they are)."""
        self._out = {i for i, name in enumerate(self._names) if name in joins_later}
        """Servers out of the pools (not added yet, or removed): no reconnects to them."""
        self._hung = [False] * len(servers)
        """Held down by its balancers for silence (``pause``), not yet answering again."""
        self._quotas = quotas or {}
        self._fail_rngs = fail_rngs or (lambda name: random.Random(f"fail:{name}"))

    def on_event(self, event: ServerEvent) -> None:
        i = self._names.index(event.server)
        server = self._servers[i]
        if event.action == "kill":
            if server.alive:
                server.kill()
                at(self._env, self._delay[i], self._on_lost, (i, False))
        elif event.action == "drain":
            self._drain(server)
        elif event.action == "restart":
            server.restart()
        elif event.action == "remove":
            if i not in self._out:  # out of every pool, then stopped as the live one is
                self._out.add(i)
                for pool in self._pools:
                    pool.remove(event.server, self._env._now)
                self._drain(server)
        elif event.action == "add":
            if i in self._out:
                self._out.discard(i)
                if not server.alive:
                    server.restart()
                for pool in self._pools:
                    pool.add(BackendSpec(event.server, event.weight), self._env._now)
        elif event.action == "pause":
            if server.alive and not server.paused:
                server.pause()
                silent = (i, server.epoch)
                at(self._env, self._delay[i] + HUNG_AFTER_S, self._on_silent, silent)
                at(self._env, self._delay[i] + SILENT_LOST_S, self._on_silent_too_long, silent)
        elif event.action == "resume":
            if server.paused:
                server.resume()
                at(self._env, self._delay[i], self._on_answering, i)
        elif event.action == "slow":
            server.slow(event.factor, event.add_ms / 1000.0)
        elif event.control is not None and event.control.cpu_quota is not None:
            self._quotas[i].quota = event.control.cpu_quota  # a next period's budget
            server.model_changed()
        elif event.control is not None:
            server.behave(event.control, self._fail_rngs(event.server))

    def _drain(self, server: SimServer) -> None:
        """SIGTERM: refuse new requests, exit once empty or at the drain deadline."""
        if server.alive and not server.draining:
            server.drain()
            if not server.load:
                self.exit(server)
            else:
                deadline = (server.index, server.epoch)
                at(self._env, self._drain_timeout, self._on_drain_deadline, deadline)

    def _on_silent(self, silent: tuple[int, int]) -> None:
        """A paused server has been silent for ``HUNG_AFTER_S``: every balancer holds it
        down as hung until it answers again."""
        i, epoch = silent
        server = self._servers[i]
        if server.paused and server.epoch == epoch:
            self._hung[i] = True
            for b in range(self._balancers):
                self._balancer.hung(b, i, self._env._now)

    def _on_silent_too_long(self, silent: tuple[int, int]) -> None:
        """Silent for ``SILENT_LOST_S``: the balancers close the connection (and fail what
        was in flight) and reconnect, in vain while the server stays paused."""
        i, epoch = silent
        server = self._servers[i]
        if server.paused and server.epoch == epoch:
            self._hung[i] = False
            self._on_lost((i, False))  # its backlog, served after a resume, finds no one

    def _on_answering(self, i: int) -> None:
        if self._hung[i]:
            self._hung[i] = False
            for b in range(self._balancers):
                self._balancer.connection_back(b, i, self._env._now)

    def _on_drain_deadline(self, drain: tuple[int, int]) -> None:
        i, epoch = drain
        server = self._servers[i]
        if server.draining and server.epoch == epoch:  # still the drain that set it
            self.exit(server)

    def exit(self, server: SimServer) -> None:
        """A draining server has finished (or its deadline passed): it says CONNECTION_CLOSE
        and exits; its balancers see the close a server delay later."""
        server.kill()
        at(self._env, self._delay[server.index], self._on_lost, (server.index, True))

    def _on_lost(self, lost: tuple[int, bool]) -> None:
        """Every balancer sees server ``i``'s connection close (module docstring)."""
        i, drained = lost
        now = self._env._now
        for b in range(self._balancers):
            failed = []
            for req, replayed in self._balancer.connection_lost(b, i, now, drained=drained):
                if replayed:
                    self._route(req, _CONNECTION)
                else:
                    failed.append(req)
            # The errors go out once the pool has the server down: a client that sends
            # again at once (no delay, no think time) must not be sent to it.
            for req in failed:
                self._reply(req, False, _CONNECTION)
            if i not in self._out:
                self._reconnect_later((b, i, 0))

    def _reconnect_later(self, attempt: tuple[int, int, int]) -> None:
        b, _, failures = attempt
        wait = jittered_backoff(failures, RECONNECT_BASE_S, RECONNECT_MAX_S, self._rng_reconnect[b])
        at(self._env, wait, self._on_reconnect, attempt)

    def _on_reconnect(self, attempt: tuple[int, int, int]) -> None:
        b, i, failures = attempt
        server = self._servers[i]
        if i in self._out:
            return  # taken out of the pool meanwhile: the balancer stops reconnecting
        if server.alive and not server.paused:
            self._balancer.connection_back(b, i, self._env._now)
        elif self._busy():
            self._reconnect_later((b, i, failures + 1))
