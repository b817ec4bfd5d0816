"""One request lifecycle, two drivers: the live router and the simulator's balancer.

The same script of events (requests arriving, backends answering ok or REJECTED, time
passing past deadlines, a backend's connection lost, drained or back) goes through the router (with fake connections and a fake
clock, as in ``test_router.py``) and through ``simulator.balancer.SimBalancer`` (as
``simulator/run.py`` drives it). Both run a real ``Pool`` with a real strategy, seeded
alike; the pool writes down every call the lifecycle makes. The two lists must be the
same, call for call: the same picks, dispatches and outcomes (latencies included), in
the same order. A driver that timed an attempt differently, replayed differently or
accounted an ending twice would differ here.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_router import Directory, FakeBackend, FakeClient, ok_payload

from lblab.balancer.lifecycle import Attempted, Deadlines, Lifecycle
from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.router import Router
from lblab.balancer.strategies.base import (
    MAX_ATTEMPTS,
    BackendView,
    Health,
    Outcome,
    RequestView,
    Strategy,
)
from lblab.balancer.strategies.registry import make_strategy
from lblab.simulator.balancer import Answer, SimBalancer, SimRequest
from lblab.simulator.record import SampleRows
from lblab.wire.codec import encode_frame
from lblab.wire.codes import ErrorCode
from lblab.wire.frames import Error, RequestResponse

TIMEOUT_S = 2.0
BACKENDS = ("b1", "b2", "b3")
WEIGHTS = {"b1": 3.0, "b2": 1.0, "b3": 1.0}
REQUEST = RequestResponse(stream_id=1, data=b'{"a":1}')
PACKAGE_BYTES = len(encode_frame(REQUEST)) - 3  # what the router's RequestView carries
STRATEGIES = (
    "r",
    "rr",
    "wrr",
    "lc",
    "least-time",
    "p2c",
    "peak-ewma",
    "rsocket-weighted",
    "least-request",
)
"""Every registered strategy that needs no signal besides the lifecycle's own (reports,
probes, leases, routing keys and client addresses reach the two drivers differently)."""


class RecordingPool(Pool):
    """The real pool, writing down each call a request's lifecycle makes."""

    def __init__(self, strategy: Strategy) -> None:
        specs = [BackendSpec(b, WEIGHTS[b]) for b in BACKENDS]
        super().__init__(specs, strategy, now=0.0)
        self.calls: list[tuple[object, ...]] = []

    def pick(self, request: RequestView, now: float) -> BackendView | None:
        view = super().pick(request, now)
        self.calls.append(("pick", *_request(request), now, view and view.id))
        return view

    def dispatch(self, view: BackendView, request: RequestView, now: float) -> None:
        self.calls.append(("dispatch", view.id, *_request(request), now))
        super().dispatch(view, request, now)

    def complete(
        self, view: BackendView, request: RequestView, outcome: Outcome, now: float
    ) -> None:
        # Rounded to the nanosecond: the drivers add their times in different orders.
        latency = round(outcome.latency_ms, 6)
        rounded = Outcome(outcome.ok, latency, outcome.error_kind, outcome.server_fault)
        self.calls.append(("complete", view.id, *_request(request), rounded, now))
        super().complete(view, request, outcome, now)


def _request(request: RequestView) -> tuple[object, ...]:
    return (request.request_id, request.attempt, tuple(sorted(request.exclude)))


def _pool(strategy: str) -> RecordingPool:
    return RecordingPool(make_strategy(strategy, rng=random.Random(7), weights=WEIGHTS))


class Connections(Directory):
    """The node's backends as the router sees them: a lost one has no connection."""

    def __init__(self, backends: dict[str, FakeBackend]) -> None:
        super().__init__(backends)
        self.lost: set[str] = set()

    def connection(self, backend_id: str) -> FakeBackend | None:
        return None if backend_id in self.lost else super().connection(backend_id)


class LiveDriver:
    """The router, its backends' connections and one client."""

    def __init__(self, strategy: str) -> None:
        self.pool = _pool(strategy)
        self.backends = {b: FakeBackend(b) for b in BACKENDS}
        self.connections = Connections(self.backends)
        self.router = Router(self.pool, self.connections, timeout_s=TIMEOUT_S)
        self.client = FakeClient()
        self.sids: dict[int, int] = {}
        """Request id -> the client's stream id."""

    def arrive(self, rid: int, now: float) -> None:
        sid = 2 * rid - 1
        self.sids[rid] = sid
        raw = bytearray(encode_frame(RequestResponse(stream_id=sid, data=REQUEST.data)))
        frame_type, flags = raw[7] >> 2, ((raw[7] & 3) << 8) | raw[8]
        self.router.open_stream(self.client, raw, 0, len(raw) - 3, sid, frame_type, flags, now)

    def answer(self, rid: int, ok: bool, now: float) -> None:
        stream = self.client.streams[self.sids[rid]]
        backend = stream.backend
        assert isinstance(backend, FakeBackend)
        bsid = stream.backend_sid
        frame = (
            ok_payload(bsid)
            if ok
            else Error(stream_id=bsid, error_code=ErrorCode.REJECTED, message="full")
        )
        backend.answer(self.router, frame, now)

    def expire(self, now: float) -> None:
        self.router.expire(now)

    def lose(self, backend: str, now: float) -> None:
        """The connection closes: the router fails its streams, then the node marks the
        backend down (``BackendConnection.connection_lost``, ``Backend.mark_down``)."""
        self.connections.lost.add(backend)
        self.router.backend_lost(self.backends[backend], "killed", now)
        self.pool.set_state(backend, Health.DOWN, now)

    def drain(self, backend: str, now: float) -> None:
        """The backend says CONNECTION_CLOSE (the node marks it draining), then closes:
        the router replays what it never answered."""
        self.pool.set_state(backend, Health.DRAINING, now)
        self.backends[backend].draining = True
        self.lose(backend, now)

    def back(self, backend: str, now: float) -> None:
        self.connections.lost.discard(backend)
        self.backends[backend].draining = False
        self.pool.set_state(backend, Health.UP, now)

    def live(self) -> list[int]:
        by_sid = {sid: rid for rid, sid in self.sids.items()}
        return sorted(by_sid[sid] for sid in self.client.streams)


class SimDriver:
    """The simulator's balancer, as ``simulator/run.py`` drives it (no delays)."""

    def __init__(self, strategy: str) -> None:
        self.pool = _pool(strategy)
        self.balancer: SimBalancer[SimRequest] = SimBalancer(
            [self.pool], BACKENDS, MAX_ATTEMPTS, SampleRows("i"), 0
        )
        self.requests: dict[int, SimRequest] = {}

    def arrive(self, rid: int, now: float) -> None:
        view = RequestView(rid, package_bytes=PACKAGE_BYTES, client_address="10.0.0.1")
        req = self.requests[rid] = SimRequest(view, now, now + TIMEOUT_S, 0)
        self.balancer.watch(req)
        self.balancer.route(req, now)

    def answer(self, rid: int, ok: bool, now: float) -> None:
        req = self.requests[rid]
        if self.balancer.answer(req, ok, None, now) is Answer.REPLAY:
            self.balancer.route(req, now)

    def expire(self, now: float) -> None:
        for _ in self.balancer.expire(now):
            pass

    def lose(self, backend: str, now: float, drained: bool = False) -> None:
        lost = self.balancer.connection_lost(0, BACKENDS.index(backend), now, drained=drained)
        for req, replayed in lost:
            if replayed:
                self.balancer.route(req, now)

    def drain(self, backend: str, now: float) -> None:
        self.lose(backend, now, drained=True)

    def back(self, backend: str, now: float) -> None:
        self.balancer.connection_back(0, BACKENDS.index(backend), now)

    def live(self) -> list[int]:
        return sorted(rid for rid, req in self.requests.items() if not req.done)


@dataclass(frozen=True)
class Step:
    """One event of a script: ``kind`` at ``dt`` seconds after the previous one;
    ``pick`` chooses which live request an answer is for (its index, modulo)."""

    kind: str  # "arrive" | "ok" | "reject" | "wait" | "lose" | "drain" | "back"
    dt: float = 0.0
    pick: int = 0


def run_script(strategy: str, steps: Sequence[Step]) -> tuple[LiveDriver, SimDriver]:
    """Feed ``steps`` to both drivers; after each, both have the same requests open."""
    live, sim = LiveDriver(strategy), SimDriver(strategy)
    now, rid = 0.0, 0
    for step in steps:
        now += step.dt
        open_ = live.live()
        if step.kind == "arrive":
            rid += 1
            for driver in (live, sim):
                driver.arrive(rid, now)
        elif step.kind in ("ok", "reject") and open_:
            target = open_[step.pick % len(open_)]
            for driver in (live, sim):
                driver.answer(target, step.kind == "ok", now)
        elif step.kind == "wait":
            for driver in (live, sim):
                driver.expire(now)
        elif step.kind in ("lose", "drain", "back"):
            backend = BACKENDS[step.pick % len(BACKENDS)]
            for driver in (live, sim):
                getattr(driver, step.kind)(backend, now)
        assert live.live() == sim.live(), f"after {step}"
    return live, sim


STEPS = st.lists(
    st.builds(
        Step,
        kind=st.sampled_from(
            ["arrive", "arrive", "ok", "ok", "reject", "wait", "lose", "drain", "back"]
        ),
        dt=st.sampled_from([0.0, 0.001, 0.0135, 0.25, 1.0, 2.5]),
        pick=st.integers(0, 50),
    ),
    max_size=80,
)


@pytest.mark.parametrize("strategy", STRATEGIES)
@settings(max_examples=60, deadline=None)
@given(steps=STEPS)
def test_both_drivers_make_the_same_pool_calls(strategy: str, steps: list[Step]) -> None:
    live, sim = run_script(strategy, steps)
    assert live.pool.calls == sim.pool.calls
    assert live.pool.outstanding == sim.pool.outstanding == len(sim.live())
    assert live.pool.counters == sim.pool.counters


def test_a_script_through_both_drivers_gives_these_calls() -> None:
    """Arrivals, a refusal replayed elsewhere, answers, a refusal with no try left, a
    timeout: the calls written out, so that a change to the lifecycle shows here."""
    steps = [
        Step("arrive"),  # 1 -> b1
        Step("arrive", dt=0.01),  # 2 -> b2
        Step("reject", dt=0.01, pick=0),  # b1 refuses 1: replayed on b2 (b1 excluded)
        Step("ok", dt=0.02, pick=1),  # b2 answers 2
        Step("reject", dt=0.01, pick=0),  # b2 refuses 1's second try: third try, b3
        Step("wait", dt=2.5),  # 1's deadline (arrival + 2 s) has passed: timeout at b3
    ]
    live, sim = run_script("rr", steps)
    assert live.pool.calls == sim.pool.calls

    def rejected(ms: float) -> Outcome:
        return Outcome(False, ms, "rejected")

    assert sim.pool.calls == [
        ("pick", 1, 0, (), 0.0, "b1"),
        ("dispatch", "b1", 1, 0, (), 0.0),
        ("pick", 2, 0, (), 0.01, "b2"),
        ("dispatch", "b2", 2, 0, (), 0.01),
        ("complete", "b1", 1, 0, (), rejected(20.0), 0.02),
        ("pick", 1, 1, ("b1",), 0.02, "b3"),
        ("dispatch", "b3", 1, 1, ("b1",), 0.02),
        ("complete", "b2", 2, 0, (), Outcome(True, 30.0), 0.04),
        ("complete", "b3", 1, 1, ("b1",), rejected(30.0), 0.05),
        ("pick", 1, 2, ("b1", "b3"), 0.05, "b2"),
        ("dispatch", "b2", 1, 2, ("b1", "b3"), 0.05),
        (
            "complete",
            "b2",
            1,
            2,
            ("b1", "b3"),
            Outcome(False, 2500.0, "timeout"),
            2.55,
        ),
    ]
    assert not sim.live() and not live.live()


def test_a_lost_connection_fails_its_requests_in_dispatch_order_on_both_drivers() -> None:
    steps = [
        Step("arrive"),  # 1 -> b1
        Step("arrive"),  # 2 -> b2
        Step("arrive"),  # 3 -> b3
        Step("arrive"),  # 4 -> b1
        Step("reject", dt=0.01, pick=1),  # b2 refuses 2: replayed on b3, after 3
        Step("lose", dt=0.01, pick=2),  # b3's connection closes: 3, then 2, fail
        Step("arrive", dt=0.01),  # 5: b3 is down, rr goes on to b1
        Step("back", dt=0.01, pick=2),
        Step("arrive", dt=0.01),  # 6
    ]
    live, sim = run_script("rr", steps)
    assert live.pool.calls == sim.pool.calls
    failed = [
        c[2] for c in sim.pool.calls if c[0] == "complete" and c[5].error_kind == "connection"
    ]
    assert failed == [3, 2]
    dispatched = [(c[2], c[1]) for c in sim.pool.calls if c[0] == "dispatch"]
    assert dispatched[-2] == (5, "b1")  # not b3 while its connection is down


def test_a_drained_connection_replays_what_it_never_answered_on_both_drivers() -> None:
    steps = [
        Step("arrive"),  # 1 -> b1
        Step("arrive"),  # 2 -> b2
        Step("arrive"),  # 3 -> b3
        Step("arrive"),  # 4 -> b1
        Step("drain", dt=0.01, pick=0),  # b1 closes: 1 and 4 replayed elsewhere
    ]
    live, sim = run_script("rr", steps)
    assert live.pool.calls == sim.pool.calls
    tail = [(c[0], c[1], c[2]) for c in sim.pool.calls[-6:]]
    assert tail == [
        ("complete", "b1", 1),
        ("pick", 1, 1),
        ("dispatch", "b2", 1),
        ("complete", "b1", 4),
        ("pick", 4, 1),
        ("dispatch", "b3", 4),
    ]
    assert sorted(sim.live()) == [1, 2, 3, 4]


def test_each_attempt_is_timed_from_its_own_dispatch() -> None:
    """The second backend is charged for its own 5 ms, not the 40 ms since arrival."""
    steps = [Step("arrive"), Step("reject", dt=0.035), Step("ok", dt=0.005)]
    live, sim = run_script("rr", steps)
    outcomes = [c[5] for c in sim.pool.calls if c[0] == "complete"]
    assert outcomes == [
        Outcome(False, 35.0, "rejected"),
        Outcome(True, 5.0),
    ]
    assert live.pool.calls == sim.pool.calls


# ---------------------------------------------------------------- the lifecycle alone


def dispatched_at_0(counted: bool = True) -> tuple[RecordingPool, Lifecycle, Attempted]:
    """Request 1, picked and dispatched at time 0 on an rr pool that records its calls."""
    pool = _pool("rr")
    lifecycle = Lifecycle(pool)
    life = Attempted(RequestView(1), 0.0, TIMEOUT_S, counted=counted)
    view = lifecycle.pick(life, 0.0)
    assert view is not None
    lifecycle.dispatched(life, view, 0.0)
    return pool, lifecycle, life


def test_end_accounts_once_and_a_cancel_is_not_a_failure() -> None:
    pool, lifecycle, life = dispatched_at_0()
    assert lifecycle.end(life, False, "canceled", 0.5)
    assert not lifecycle.end(life, False, "timeout", 0.6)  # ended already: nothing
    assert not lifecycle.replay(life, 0.7)
    assert [c[5] for c in pool.calls if c[0] == "complete"] == [Outcome(True, 500.0, None)]
    assert pool.outstanding == 0


def test_a_request_not_counted_is_picked_but_never_in_flight() -> None:
    pool, lifecycle, life = dispatched_at_0(counted=False)
    assert not lifecycle.replay(life, 0.1)
    assert lifecycle.end(life, True, None, 0.1)
    assert [c[0] for c in pool.calls] == ["pick"]


def test_an_answered_request_is_not_replayed_and_keeps_its_first_answer_time() -> None:
    pool, lifecycle, life = dispatched_at_0()
    lifecycle.answered(life, 0.2)
    lifecycle.answered(life, 0.9)  # a later frame of the answer
    assert not lifecycle.replay(life, 1.0)
    lifecycle.end(life, True, None, 1.0)
    assert [c[5] for c in pool.calls if c[0] == "complete"] == [Outcome(True, 200.0)]


def test_deadlines_yield_in_order_what_they_end() -> None:
    deadlines: Deadlines[Attempted] = Deadlines()
    rr = [Attempted(RequestView(i), 0.0, float(i)) for i in range(1, 4)]
    stream = Attempted(RequestView(4), 0.0, 4.0, deadline_to_end=False)
    for life in (*rr, stream):
        deadlines.add(life)
    rr[1].done = True  # ended before its deadline
    stream.latency_ms = 1.0  # a stream that has answered runs as long as its client wants
    assert [life.request.request_id for life in deadlines.due(3.0)] == [1, 3]
    assert len(deadlines) == 1
    assert list(deadlines.due(10.0)) == []
    assert len(deadlines) == 0


def test_deadlines_sweep_ended_requests_out_of_a_long_queue() -> None:
    deadlines: Deadlines[Attempted] = Deadlines()
    lives = [Attempted(RequestView(i), 0.0, 30.0) for i in range(10_000)]
    for life in lives:
        deadlines.add(life)
    for life in lives[:9_000]:
        life.done = True
    lives[0].done = False  # an open request at the front keeps the rest from the head sweep
    deadlines.sweep(live=1_001)
    assert len(deadlines) == 1_001
    assert deadlines.first() == 30.0
