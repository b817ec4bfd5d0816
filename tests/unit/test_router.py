"""The sans-I/O router driven with fake ports and a fake clock: every outcome is
accounted exactly once (``Pool.complete`` raises on a second completion or a completion
without a dispatch), with no sockets and no sleeps."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.router import NO_BACKEND_MESSAGE, STRATEGY_FAILED_MESSAGE, Router
from lblab.balancer.strategies.base import (
    MAX_ATTEMPTS,
    BackendView,
    BaseStrategy,
    Outcome,
    RequestView,
    eligible,
)
from lblab.balancer.streams import ProbeStream, Stream, StreamIds
from lblab.errors import RemoteProtocolError
from lblab.failures import SERVER_FAULT_PREFIX
from lblab.wire.codec import decode_frame_body, encode_frame
from lblab.wire.codes import ErrorCode
from lblab.wire.frames import (
    Cancel,
    Error,
    Payload,
    RequestChannel,
    RequestFnf,
    RequestN,
    RequestResponse,
    RequestStream,
)

TIMEOUT_S = 10.0


class FirstUp(BaseStrategy):
    """Picks the first eligible backend in list order; records every outcome."""

    name = "first-up"
    summary = "test strategy"

    def __init__(self) -> None:
        super().__init__()
        self.outcomes: list[tuple[str, int, Outcome]] = []

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        return next((b for b in backends if eligible(b, request)), None)

    def on_complete(
        self, backend: BackendView, request: RequestView, outcome: Outcome, now: float
    ) -> None:
        self.outcomes.append((backend.id, request.request_id, outcome))


class FakeClient:
    def __init__(self, address: str = "10.0.0.1") -> None:
        self.address: str | None = address
        self.composite_metadata = False
        self.streams: dict[int, Stream] = {}
        self.sent: list[object] = []
        self.blocked: set[object] = set()

    def send(self, frame: bytes | bytearray) -> None:
        self.sent.append(decode_frame_body(bytes(frame[3:])))

    def send_error(self, sid: int, code: int, message: str) -> None:
        self.sent.append(Error(stream_id=sid, error_code=code, message=message))

    def block(self, reason: object) -> None:
        self.blocked.add(reason)

    def unblock(self, reason: object) -> None:
        self.blocked.discard(reason)


class FakeBackend:
    def __init__(self, backend_id: str) -> None:
        self.backend_id = backend_id
        self.streams: dict[int, Stream] = {}
        self.probes: dict[int, ProbeStream] = {}
        self.ids = StreamIds()
        self.draining = False
        self.retired = False
        self.closed = False
        self.written: list[object] = []

    def write(self, frame: bytes | bytearray, client: object) -> None:
        self.written.append(decode_frame_body(bytes(frame[3:])))

    def send(self, frame: bytes | bytearray) -> None:
        self.write(frame, None)

    def send_cancel(self, sid: int) -> None:
        self.written.append(Cancel(stream_id=sid))

    def close(self) -> None:
        self.closed = True

    def answer(self, router: Router, frame: object, now: float) -> None:
        """A frame from this backend: found by its stream id, copied with the client's id,
        as ``BackendConnection.on_frame`` does."""
        raw = bytearray(encode_frame(frame))  # type: ignore[arg-type]
        sid = int.from_bytes(raw[3:7], "big")
        stream = self.streams.get(sid)
        if stream is None:
            return  # a late frame of an ended stream
        raw[3:7] = stream.client_sid.to_bytes(4, "big")
        router.backend_frame(stream, raw, raw[7] >> 2, ((raw[7] & 3) << 8) | raw[8], now)


class Directory:
    def __init__(self, backends: dict[str, FakeBackend]) -> None:
        self.backends = backends
        self.missing: list[str] = []

    def connection(self, backend_id: str) -> FakeBackend | None:
        return self.backends.get(backend_id)

    def connection_missing(self, backend_id: str) -> None:
        self.missing.append(backend_id)


class Bed:
    """A router over backends b1..bN, a fake clock and one client."""

    def __init__(self, n: int = 2) -> None:
        self.now = 100.0
        self.strategy = FirstUp()
        ids = [f"b{i}" for i in range(1, n + 1)]
        self.pool = Pool([BackendSpec(i, 1.0) for i in ids], self.strategy, now=self.now)
        self.backends = {i: FakeBackend(i) for i in ids}
        self.directory = Directory(self.backends)
        self.router = Router(self.pool, self.directory, timeout_s=TIMEOUT_S)
        self.client = FakeClient()

    def send(self, frame: object, client: FakeClient | None = None) -> None:
        """A frame from the client, as ``ClientConnection.on_frame`` hands it over."""
        client = client or self.client
        raw = bytearray(b"\0\0" + encode_frame(frame))  # type: ignore[arg-type]
        pos, length = 2, len(raw) - 5
        sid = int.from_bytes(raw[5:9], "big")
        frame_type, flags = raw[9] >> 2, ((raw[9] & 3) << 8) | raw[10]
        if 0x04 <= frame_type <= 0x07:
            self.router.open_stream(client, raw, pos, length, sid, frame_type, flags, self.now)
        else:
            self.router.client_frame(client, raw, pos, length, sid, frame_type, flags, self.now)

    def outcomes(self) -> list[tuple[str, bool, str | None]]:
        return [(b, o.ok, o.error_kind) for b, _, o in self.strategy.outcomes]

    def settled(self) -> None:
        """Nothing is in flight and no stream is left in any table."""
        assert self.pool.outstanding == 0
        assert not self.client.streams
        assert all(not b.streams for b in self.backends.values())


def ok_payload(sid: int) -> Payload:
    return Payload(stream_id=sid, data=b"{}", next=True, complete=True)


# ---------------------------------------------------------------- request-response


def test_a_response_reaches_the_client_and_is_accounted_once():
    bed = Bed()
    bed.send(RequestResponse(stream_id=1, data=b'{"a":1}'))
    b1 = bed.backends["b1"]
    assert b1.written == [RequestResponse(stream_id=1, data=b'{"a":1}')]
    assert bed.pool.outstanding == 1
    bed.now += 0.25
    b1.answer(bed.router, ok_payload(1), bed.now)
    assert bed.client.sent == [ok_payload(1)]
    assert bed.outcomes() == [("b1", True, None)]
    assert bed.strategy.outcomes[0][2].latency_ms == pytest.approx(250.0)
    bed.settled()
    b1.answer(bed.router, ok_payload(1), bed.now)  # late duplicate: dropped
    assert len(bed.client.sent) == 1


def test_backend_stream_ids_are_the_balancers_own():
    bed = Bed(n=1)
    for sid in (7, 9, 11):
        bed.send(RequestResponse(stream_id=sid))
    written = bed.backends["b1"].written
    assert [f.stream_id for f in written] == [1, 3, 5]  # type: ignore[attr-defined]
    bed.backends["b1"].answer(bed.router, ok_payload(3), bed.now)
    assert bed.client.sent == [ok_payload(9)]


def test_an_application_error_goes_to_the_client_and_counts_as_failed():
    bed = Bed()
    bed.send(RequestResponse(stream_id=1))
    error = Error(stream_id=1, error_code=ErrorCode.APPLICATION_ERROR, message="bad input")
    bed.backends["b1"].answer(bed.router, error, bed.now)
    assert bed.client.sent == [error]
    assert bed.outcomes() == [("b1", False, "application")]
    assert not bed.strategy.outcomes[0][2].server_fault
    bed.settled()


def test_a_server_fault_is_flagged_for_ejection():
    bed = Bed()
    bed.send(RequestResponse(stream_id=1))
    error = Error(
        stream_id=1, error_code=ErrorCode.APPLICATION_ERROR, message=SERVER_FAULT_PREFIX + "oom"
    )
    bed.backends["b1"].answer(bed.router, error, bed.now)
    assert bed.strategy.outcomes[0][2].server_fault
    assert bed.pool.counters["b1"].faults == 1
    bed.settled()


# ---------------------------------------------------------------- REJECTED and replay


def test_rejected_is_replayed_on_another_backend_with_the_same_bytes():
    bed = Bed()
    request = RequestResponse(stream_id=5, data=b'{"x":2}')
    bed.send(request)
    rejected = Error(stream_id=1, error_code=ErrorCode.REJECTED, message="busy")
    bed.backends["b1"].answer(bed.router, rejected, bed.now)
    assert bed.client.sent == []  # not passed on: replayed
    assert bed.backends["b2"].written == [RequestResponse(stream_id=1, data=b'{"x":2}')]
    assert bed.router.stats.replays == 1
    bed.backends["b2"].answer(bed.router, ok_payload(1), bed.now)
    assert bed.client.sent == [ok_payload(5)]
    assert bed.outcomes() == [("b1", False, "rejected"), ("b2", True, None)]
    bed.settled()


def test_each_attempt_is_timed_from_its_own_dispatch():
    # b1 refuses after 40 ms; b2 answers 250 ms after the replay. b2 is charged its own
    # 250 ms, not the 290 ms since the request arrived (as the simulator times attempts).
    bed = Bed()
    bed.send(RequestResponse(stream_id=1))
    bed.now += 0.04
    rejected = Error(stream_id=1, error_code=ErrorCode.REJECTED, message="busy")
    bed.backends["b1"].answer(bed.router, rejected, bed.now)
    bed.now += 0.25
    bed.backends["b2"].answer(bed.router, ok_payload(1), bed.now)
    latencies = [(b, o.latency_ms) for b, _, o in bed.strategy.outcomes]
    assert latencies == [("b1", pytest.approx(40.0)), ("b2", pytest.approx(250.0))]
    bed.settled()


def test_a_fragmented_request_is_replayed_whole():
    bed = Bed()
    bed.send(RequestResponse(stream_id=1, data=b"part1", follows=True))
    bed.send(Payload(stream_id=1, data=b"part2", next=True))
    rejected = Error(stream_id=1, error_code=ErrorCode.REJECTED, message="busy")
    bed.backends["b1"].answer(bed.router, rejected, bed.now)
    assert bed.backends["b2"].written == [
        RequestResponse(stream_id=1, data=b"part1", follows=True),
        Payload(stream_id=1, data=b"part2", next=True),
    ]
    bed.backends["b2"].answer(bed.router, ok_payload(1), bed.now)
    bed.settled()


def test_rejected_by_every_backend_reaches_the_client_once_each_accounted():
    bed = Bed(n=2)
    bed.send(RequestResponse(stream_id=1))
    rejected = Error(stream_id=1, error_code=ErrorCode.REJECTED, message="busy")
    bed.backends["b1"].answer(bed.router, rejected, bed.now)
    bed.backends["b2"].answer(bed.router, rejected, bed.now)  # no third backend
    assert bed.client.sent == [rejected]
    assert bed.outcomes() == [("b1", False, "rejected"), ("b2", False, "rejected")]
    bed.settled()


def test_replays_stop_after_max_attempts():
    bed = Bed(n=MAX_ATTEMPTS + 1)
    bed.send(RequestResponse(stream_id=1))
    rejected = Error(stream_id=1, error_code=ErrorCode.REJECTED, message="busy")
    for i in range(1, MAX_ATTEMPTS + 1):
        bed.backends[f"b{i}"].answer(bed.router, rejected, bed.now)
    assert bed.client.sent == [rejected]
    assert len(bed.outcomes()) == MAX_ATTEMPTS
    assert bed.backends[f"b{MAX_ATTEMPTS + 1}"].written == []
    bed.settled()


def test_rejected_after_a_response_frame_is_not_replayed():
    bed = Bed()
    bed.send(RequestStream(stream_id=1, initial_n=10))
    bed.backends["b1"].answer(bed.router, Payload(stream_id=1, data=b"1", next=True), bed.now)
    rejected = Error(stream_id=1, error_code=ErrorCode.REJECTED, message="late")
    bed.backends["b1"].answer(bed.router, rejected, bed.now)
    assert bed.backends["b2"].written == []
    assert bed.client.sent[-1] == rejected
    assert bed.outcomes() == [("b1", False, "rejected")]
    bed.settled()


def test_no_backend_available_is_refused_at_once():
    bed = Bed()
    for b in bed.backends:
        bed.pool.set_state(b, bed.pool.get(b).state.DOWN, bed.now)
    bed.send(RequestResponse(stream_id=3))
    assert bed.client.sent == [
        Error(stream_id=3, error_code=ErrorCode.REJECTED, message=NO_BACKEND_MESSAGE)
    ]
    assert bed.router.stats.rejected_no_backend == 1
    bed.settled()


def test_a_strategy_that_raises_refuses_that_request_only():
    """A strategy's bug in ``pick`` (once: ``dwrr`` on a report of qps 1e307) raised out
    of the frame walk and the balancer closed the client's connection with every stream
    on it. Now that request is refused with REJECTED saying why, counted, and the
    connection and the next requests go on."""
    bed = Bed()
    pick = bed.strategy.pick
    bed.strategy.pick = lambda *args: 1 / 0  # type: ignore[method-assign, assignment]
    bed.send(RequestResponse(stream_id=1))
    bed.strategy.pick = pick  # type: ignore[method-assign]
    bed.send(RequestResponse(stream_id=3))
    assert bed.client.sent == [
        Error(stream_id=1, error_code=ErrorCode.REJECTED, message=STRATEGY_FAILED_MESSAGE)
    ]
    assert bed.router.stats.strategy_errors == 1
    assert bed.router.stats.rejected_no_backend == 0
    assert len(bed.backends["b1"].written) == 1  # stream 3 went out
    assert not bed.router.pick_failed


def test_a_picked_backend_without_a_connection_is_marked_and_skipped():
    bed = Bed()
    del bed.backends["b1"]
    bed.send(RequestResponse(stream_id=1))
    assert bed.directory.missing == ["b1"]
    assert len(bed.backends["b2"].written) == 1


# ---------------------------------------------------------------- timeouts and cancels


def test_a_timeout_errors_the_client_cancels_the_backend_and_is_accounted_once():
    bed = Bed()
    bed.send(RequestResponse(stream_id=1))
    bed.router.expire(bed.now + TIMEOUT_S - 0.01)
    assert bed.client.sent == []
    bed.now += TIMEOUT_S
    bed.router.expire(bed.now)
    (error,) = bed.client.sent
    assert isinstance(error, Error) and error.message.startswith("balancer/timeout: ")
    assert bed.backends["b1"].written[-1] == Cancel(stream_id=1)
    assert bed.outcomes() == [("b1", False, "timeout")]
    bed.backends["b1"].answer(bed.router, ok_payload(1), bed.now)  # too late: dropped
    assert len(bed.client.sent) == 1
    bed.settled()


def test_an_answered_stream_does_not_time_out():
    bed = Bed()
    bed.send(RequestStream(stream_id=1, initial_n=5))
    bed.backends["b1"].answer(bed.router, Payload(stream_id=1, data=b"1", next=True), bed.now)
    bed.router.expire(bed.now + 2 * TIMEOUT_S)
    assert all(not isinstance(f, Error) for f in bed.client.sent)
    bed.backends["b1"].answer(
        bed.router, Payload(stream_id=1, data=b"2", next=True, complete=True), bed.now
    )
    bed.settled()


def test_a_client_cancel_goes_to_the_backend_and_is_not_the_backends_failure():
    bed = Bed()
    bed.send(RequestStream(stream_id=1, initial_n=5))
    bed.send(RequestN(stream_id=1, n=3))
    bed.send(Cancel(stream_id=1))
    assert bed.backends["b1"].written[1:] == [RequestN(stream_id=1, n=3), Cancel(stream_id=1)]
    assert bed.outcomes() == [("b1", True, None)]
    bed.settled()


def test_client_gone_cancels_every_stream_once():
    bed = Bed()
    for sid in (1, 3, 5):
        bed.send(RequestResponse(stream_id=sid))
    bed.router.client_gone(bed.client, bed.now)
    cancels = [f for b in bed.backends.values() for f in b.written if isinstance(f, Cancel)]
    assert len(cancels) == 3
    assert len(bed.outcomes()) == 3 and all(ok for _, ok, _ in bed.outcomes())
    bed.settled()
    bed.router.client_gone(bed.client, bed.now)  # twice: nothing more
    assert len(bed.outcomes()) == 3


# ---------------------------------------------------------------- backends gone or draining


def test_backend_gone_fails_its_streams_with_an_error_naming_it():
    bed = Bed()
    bed.send(RequestResponse(stream_id=1))
    bed.router.backend_lost(bed.backends["b1"], "reset by peer", bed.now)
    (error,) = bed.client.sent
    assert isinstance(error, Error)
    assert error.message.startswith("balancer/connection: backend b1 connection lost")
    assert bed.outcomes() == [("b1", False, "connection")]
    bed.settled()


def test_a_draining_backends_unanswered_requests_are_replayed_when_it_closes():
    bed = Bed()
    bed.send(RequestResponse(stream_id=1, data=b"q"))
    b1 = bed.backends["b1"]
    b1.draining = True
    bed.router.backend_lost(b1, "closed by the backend", bed.now)
    assert bed.client.sent == []
    assert bed.backends["b2"].written == [RequestResponse(stream_id=1, data=b"q")]
    bed.backends["b2"].answer(bed.router, ok_payload(1), bed.now)
    assert bed.client.sent == [ok_payload(1)]
    bed.settled()


def test_a_retired_connection_closes_when_its_last_stream_ends():
    bed = Bed()
    bed.send(RequestResponse(stream_id=1))
    b1 = bed.backends["b1"]
    b1.retired = True
    assert not b1.closed
    b1.answer(bed.router, ok_payload(1), bed.now)
    assert b1.closed


# ---------------------------------------------------------------- other interactions


def test_fire_and_forget_is_picked_but_never_in_flight():
    bed = Bed()
    bed.send(RequestFnf(stream_id=1, data=b"x"))
    assert bed.backends["b1"].written == [RequestFnf(stream_id=1, data=b"x")]
    assert bed.pool.counters["b1"].picks == 1
    assert bed.outcomes() == []
    bed.settled()


def test_a_channel_ends_when_both_directions_have_completed():
    bed = Bed()
    bed.send(RequestChannel(stream_id=1, initial_n=4, data=b"a"))
    b1 = bed.backends["b1"]
    b1.answer(bed.router, Payload(stream_id=1, data=b"r", next=True, complete=True), bed.now)
    assert bed.pool.outstanding == 1  # the client side is still open
    bed.send(Payload(stream_id=1, data=b"b", next=True, complete=True))
    assert bed.outcomes() == [("b1", True, None)]
    bed.settled()


def test_payload_after_the_request_side_completed_is_dropped():
    bed = Bed()
    bed.send(RequestResponse(stream_id=1))
    bed.send(Payload(stream_id=1, data=b"late", next=True))
    assert bed.backends["b1"].written == [RequestResponse(stream_id=1)]


def test_a_live_stream_id_reused_is_a_protocol_error():
    bed = Bed()
    bed.send(RequestResponse(stream_id=1))
    with pytest.raises(RemoteProtocolError, match="reused"):
        bed.send(RequestResponse(stream_id=1))


# ---------------------------------------------------------------- any sequence


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(
            ["request", "ok", "error", "rejected", "cancel", "tick", "lose", "drain", "gone"]
        ),
        st.integers(0, 7),
        st.integers(0, 2),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(EVENTS)
def test_any_sequence_of_events_accounts_every_dispatch_exactly_once(events):
    """Whatever happens in whatever order, the pool never sees a completion twice or one
    without a dispatch (it raises), in-flight equals the live streams, and once the
    client leaves and every deadline passes, nothing is in flight."""
    bed = Bed(n=3)
    client = bed.client
    next_sid = 1
    for kind, pick, which in events:
        backend = bed.backends[f"b{which + 1}"]
        live = sorted(client.streams)
        target = live[pick % len(live)] if live else None
        stream = client.streams.get(target) if target is not None else None
        bsid = stream.backend_sid if stream is not None and stream.backend is backend else None
        if kind == "request":
            bed.send(RequestResponse(stream_id=next_sid))
            next_sid += 2
        elif kind == "cancel" and target is not None:
            bed.send(Cancel(stream_id=target))
        elif kind == "tick":
            bed.now += TIMEOUT_S / 3
            bed.router.expire(bed.now)
        elif kind == "lose":
            bed.router.backend_lost(backend, "lost", bed.now)
        elif kind == "drain":
            backend.draining = True
        elif kind == "gone":
            bed.router.client_gone(client, bed.now)
        elif bsid is not None:
            frame = {
                "ok": ok_payload(bsid),
                "error": Error(stream_id=bsid, error_code=ErrorCode.APPLICATION_ERROR),
                "rejected": Error(stream_id=bsid, error_code=ErrorCode.REJECTED),
            }[kind]
            backend.answer(bed.router, frame, bed.now)
        live_streams = sum(1 for s in client.streams.values() if not s.done)
        assert bed.pool.outstanding == live_streams
    dispatched = sum(c.picks for c in bed.pool.counters.values())
    bed.router.client_gone(client, bed.now)
    bed.router.expire(bed.now + 2 * TIMEOUT_S)
    bed.settled()
    assert len(bed.strategy.outcomes) == dispatched
