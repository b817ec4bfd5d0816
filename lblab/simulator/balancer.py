"""The balancer side of a simulated run: K pools, each driven by the shared lifecycle.

``simulator/run.py`` calls these methods from SimPy's clock (the events a balancer
node sees: a request arrives, a server answers, a deadline passes, a server's
connection is lost or comes back); the lifecycle conformance test
(``tests/unit/test_lifecycle.py``) calls them from a script and compares the pool calls
with the live router's. Everything a request's life does to a pool goes through
``balancer/lifecycle.py``, as in the router.

Each balancer keeps, per server, its requests there in dispatch order (the router's
``BackendPort.streams``), so that a lost connection fails them in the router's order.
A lost server is down in the pool at once, so, unlike the router (whose pool and
connections may disagree for a moment), the simulator never picks a server it has no
connection to.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from enum import IntEnum
from typing import Generic, TypeVar

from lblab.balancer.aperture import BandedWindow
from lblab.balancer.lifecycle import Attempted, Deadlines, Lifecycle
from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.strategies.base import BackendView, Health, RequestView
from lblab.loadreport import LoadReport
from lblab.simulator.config import EPOCH
from lblab.simulator.record import SampleRows


class SimRequest(Attempted):
    """A simulated request as its balancer sees it; ``simulator/run.py`` adds the rest."""

    __slots__ = ("balancer", "dispatches", "retry_after_ms", "server")

    def __init__(self, request: RequestView, now: float, deadline: float, balancer: int) -> None:
        super().__init__(request, now, deadline)
        self.balancer = balancer
        """The index of the balancer that took it (its pool and strategy)."""
        self.dispatches = 0
        self.server = -1
        self.retry_after_ms: float | None = None
        """The Retry-After hint of the refusal of its current attempt, if any."""
        """The index of the server of the current (or last) attempt; -1: none yet."""


Request = TypeVar("Request", bound=SimRequest)


class Answer(IntEnum):
    """What the balancer does with a server's answer."""

    LATE = 0
    """The request ended before it (timed out): dropped."""
    OK = 1
    """Goes to the client."""
    REPLAY = 2
    """REJECTED, and another try is allowed: route it again."""
    REFUSED = 3
    """REJECTED with no try left: the REJECTED goes to the client."""


class SimBalancer(Generic[Request]):
    """The balancers of a simulated run, one ``Pool`` and ``Lifecycle`` each, and the
    deadlines of all their requests (one FIFO: deadlines fall in send order)."""

    __slots__ = (
        "at_server",
        "deadlines",
        "index",
        "lifecycles",
        "names",
        "picks",
        "picks_every",
        "picks_seen",
        "pools",
        "weights",
        "windows",
    )

    def __init__(
        self,
        pools: Sequence[Pool],
        names: Sequence[str],
        max_attempts: int,
        picks: SampleRows,
        picks_every: int,
        windows: Sequence[BandedWindow] = (),
        weights: Mapping[str, float] | None = None,
    ) -> None:
        self.pools = list(pools)
        self.windows = list(windows) or None
        """Each balancer's load-banded aperture (``aperture_load_band``), or None: after
        every dispatch and every outcome the pool's outstanding count goes to its band,
        and a server that joins the window joins the pool, one that leaves it leaves."""
        self.weights = dict(weights or {})
        self.lifecycles = [Lifecycle(pool, max_attempts) for pool in self.pools]
        self.names = tuple(names)
        """Every server, in order, whether in the pools now or not (added, removed)."""
        self.index = {name: i for i, name in enumerate(self.names)}
        self.at_server: list[list[dict[int, Request]]] = [
            [{} for _ in self.names] for _ in self.pools
        ]
        """Per balancer and server: its requests there by request id, in dispatch order."""
        self.deadlines: Deadlines[Request] = Deadlines()
        self.picks = picks
        """Every ``picks_every``-th pick's (time, server, in flight at pick); 0: none."""
        self.picks_every = picks_every
        self.picks_seen = 0

    def watch(self, req: Request) -> None:
        """Time ``req`` out at its deadline (``expire``)."""
        self.deadlines.add(req)

    def route(self, req: Request, now: float) -> BackendView | None:
        """Pick a server for ``req`` and dispatch it there; None when none is eligible
        (the request has then ended: the balancer answers REJECTED itself)."""
        b = req.balancer
        lifecycle = self.lifecycles[b]
        view = lifecycle.pick(req, now)
        if view is None:
            lifecycle.end(req, False, "rejected", now)  # no dispatch: nothing to account
            return None
        i = req.server = self.index[view.id]
        every = self.picks_every
        if every:
            self.picks_seen += 1
            if self.picks_seen % every == 0:
                picks = self.picks
                picks.t.append(EPOCH + now)
                picks.server.append(i)
                picks.value.append(view.inflight)
        lifecycle.dispatched(req, view, now)
        self.at_server[b][i][req.request.request_id] = req
        req.dispatches += 1
        if self.windows is not None:
            self._resize(b, now)
        return view

    def _resize(self, b: int, now: float) -> None:
        """Balancer ``b``'s outstanding count changed: its window may grow or shrink."""
        assert self.windows is not None
        pool = self.pools[b]
        joined, left = self.windows[b].observe(pool.outstanding, now)
        if joined is not None:
            pool.add(BackendSpec(joined, self.weights.get(joined, 1.0)), now)
        elif left is not None:
            pool.remove(left, now)  # its requests in flight finish there

    def answer(self, req: Request, ok: bool, report: LoadReport | None, now: float) -> Answer:
        """A server's answer to ``req`` (ok, or REJECTED), with its load report if any."""
        view = req.view
        if req.done or view is None:
            return Answer.LATE
        b = req.balancer
        del self.at_server[b][req.server][req.request.request_id]
        lifecycle = self.lifecycles[b]
        if report is not None:
            lifecycle.pool.report(view.id, report, now)
        if ok:
            lifecycle.answered(req, now)
            lifecycle.end(req, True, None, now)
            answer = Answer.OK
        else:
            hint = req.retry_after_ms
            if lifecycle.replay(req, now, hint):
                answer = Answer.REPLAY
            else:
                lifecycle.end(req, False, "rejected", now, retry_after_ms=hint)
                answer = Answer.REFUSED
        if self.windows is not None:
            self._resize(b, now)
        return answer

    def failed(self, req: Request, now: float) -> bool:
        """A server answered ``req`` with its own failure (``fail``: an APPLICATION_ERROR
        marked as a server fault, counted toward its ejection); False if it was late."""
        if req.done or req.view is None:
            return False
        del self.at_server[req.balancer][req.server][req.request.request_id]
        self.lifecycles[req.balancer].end(req, False, "application", now, server_fault=True)
        if self.windows is not None:
            self._resize(req.balancer, now)
        return True

    def expire(self, now: float) -> Iterator[Request]:
        """End every request whose deadline has passed, as a timeout; yields each."""
        for req in self.deadlines.due(now):
            dispatched = req.view is not None
            if dispatched:
                del self.at_server[req.balancer][req.server][req.request.request_id]
            self.lifecycles[req.balancer].end(req, False, "timeout", now)
            if self.windows is not None and dispatched:
                self._resize(req.balancer, now)
            yield req

    def connection_lost(
        self, balancer: int, server: int, now: float, *, drained: bool = False
    ) -> Iterator[tuple[Request, bool]]:
        """Balancer ``balancer`` lost its connection to ``server``, in the node's order.

        Killed: every request it had there ends as a ``connection`` failure. Drained
        (the server said CONNECTION_CLOSE first: it finished what it accepted), the
        pool hears it is draining, and a request not answered was never processed: it is
        replayed when the lifecycle allows, else it fails. Yields ``(request,
        replayed)`` one at a time, and the caller routes a replayed request before it
        asks for the next (the router re-dispatches each as it walks its streams); when
        the walk ends the pool marks the server down."""
        pool = self.pools[balancer]
        backend = self.names[server]
        member = backend in pool  # a removed one's close changes no pool
        if drained and member:
            pool.set_state(backend, Health.DRAINING, now)
        at = self.at_server[balancer][server]
        lost = list(at.values())
        at.clear()
        lifecycle = self.lifecycles[balancer]
        for req in lost:
            if drained and lifecycle.replay(req, now):
                yield req, True
            else:
                lifecycle.end(req, False, "connection", now)
                yield req, False
        if member:
            pool.set_state(backend, Health.DOWN, now)

    def hung(self, balancer: int, server: int, now: float) -> None:
        """Balancer ``balancer`` has heard nothing from ``server`` for ``HUNG_AFTER_S``:
        ejected and held down until it answers (``BalancerNode.backend_hung``)."""
        pool = self.pools[balancer]
        backend = self.names[server]
        if backend not in pool:
            return
        pool.set_state(backend, Health.EJECTED, now)
        pool.set_state(backend, Health.DOWN, now)

    def connection_back(self, balancer: int, server: int, now: float) -> None:
        """Balancer ``balancer`` reconnected to ``server``, or a hung one answers again:
        it is up in that pool again."""
        pool = self.pools[balancer]
        if self.names[server] in pool:
            pool.set_state(self.names[server], Health.UP, now)

    def next_deadline(self, live: int) -> float | None:
        """The earliest deadline of a request still open; ``live``: requests not ended."""
        self.deadlines.sweep(live)
        return self.deadlines.first()
