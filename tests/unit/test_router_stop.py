"""The router while the balancer stops, driven like ``test_router.py`` (fake ports, fake
clock): after ``stop`` every new request is REJECTED and never reaches a backend, the
open streams go on to their end, and ``cut`` ends what is left with a CANCELED ERROR to
the client and a CANCEL to the backend, each accounted exactly once."""

from __future__ import annotations

from test_router import Bed, ok_payload

from lblab.balancer.router import STOPPING_MESSAGE
from lblab.failures import classify_error
from lblab.wire.codes import ErrorCode
from lblab.wire.frames import (
    Cancel,
    Error,
    Payload,
    RequestChannel,
    RequestFnf,
    RequestResponse,
    RequestStream,
)


def test_a_stopping_router_refuses_new_requests_and_lets_open_ones_finish():
    bed = Bed()
    bed.send(RequestResponse(stream_id=1, data=b"old"))
    bed.router.stop()
    bed.send(RequestResponse(stream_id=3, data=b"new"))
    assert bed.client.sent == [
        Error(stream_id=3, error_code=ErrorCode.REJECTED, message=STOPPING_MESSAGE)
    ]
    assert classify_error(ErrorCode.REJECTED, STOPPING_MESSAGE) == ("rejected", "balancer")
    assert bed.backends["b1"].written == [RequestResponse(stream_id=1, data=b"old")]
    assert bed.pool.counters["b1"].picks == 1  # the refused one was never picked
    bed.backends["b1"].answer(bed.router, ok_payload(1), bed.now)
    assert bed.client.sent[-1] == ok_payload(1)
    assert bed.outcomes() == [("b1", True, None)]
    assert bed.router.stats.rejected_stopping == 1
    assert bed.router.stats.rejected_no_backend == 0
    bed.settled()


def test_a_request_in_flight_that_is_rejected_while_stopping_is_still_replayed():
    bed = Bed()
    bed.send(RequestResponse(stream_id=1, data=b"q"))
    bed.router.stop()
    rejected = Error(stream_id=1, error_code=ErrorCode.REJECTED, message="busy")
    bed.backends["b1"].answer(bed.router, rejected, bed.now)
    assert bed.backends["b2"].written == [RequestResponse(stream_id=1, data=b"q")]
    bed.backends["b2"].answer(bed.router, ok_payload(1), bed.now)
    assert bed.client.sent == [ok_payload(1)]
    bed.settled()


def test_while_stopping_fire_and_forget_is_dropped_and_a_fragmented_request_swallowed():
    bed = Bed()
    bed.router.stop()
    bed.send(RequestFnf(stream_id=1, data=b"x"))
    assert bed.client.sent == []
    bed.send(RequestResponse(stream_id=3, data=b"part1", follows=True))
    bed.send(Payload(stream_id=3, data=b"part2", next=True, follows=True))
    bed.send(Payload(stream_id=3, data=b"part3", next=True))
    assert bed.client.sent == [
        Error(stream_id=3, error_code=ErrorCode.REJECTED, message=STOPPING_MESSAGE)
    ]
    assert all(not b.written for b in bed.backends.values())
    assert bed.router.stats.rejected_stopping == 2
    bed.settled()


def test_cut_ends_each_open_stream_with_canceled_and_cancels_it_at_the_backend():
    bed = Bed(n=1)
    b1 = bed.backends["b1"]
    bed.send(RequestResponse(stream_id=1))
    bed.send(RequestStream(stream_id=3, initial_n=5))
    b1.answer(bed.router, Payload(stream_id=3, data=b"item", next=True), bed.now)
    bed.send(RequestChannel(stream_id=5, initial_n=1, data=b"a"))
    bed.send(RequestFnf(stream_id=7, data=b"part1", follows=True))
    bed.router.stop()
    bed.send(RequestResponse(stream_id=9, follows=True))  # refused, fragments pending
    bed.router.cut(bed.client, 0.5, bed.now)

    errors = {f.stream_id: f for f in bed.client.sent if isinstance(f, Error)}
    assert errors[9].error_code == ErrorCode.REJECTED
    cut = [errors[sid] for sid in (1, 3, 5)]
    assert sorted(errors) == [1, 3, 5, 9]  # no ERROR for fire-and-forget: it has no answer
    for error in cut:
        assert error.error_code == ErrorCode.CANCELED
        assert error.message.startswith(
            "balancer/connection: the balancer stopped with the request in flight at backend "
            "b1 when its 0.5 s grace ran out"
        )
        assert classify_error(error.error_code, error.message) == ("connection", "transport")
    assert [f for f in b1.written if isinstance(f, Cancel)] == [
        Cancel(stream_id=sid) for sid in (1, 3, 5, 7)
    ]
    assert bed.outcomes() == [("b1", True, None)] * 3  # not the backend's failure
    assert bed.router.stats.cut_at_stop == 4
    bed.settled()
    b1.answer(bed.router, ok_payload(1), bed.now)  # too late: dropped
    assert len(bed.client.sent) == 5
