"""Per-client budgets at the router (``balancer/budgets.py``), driven with the router's
fake ports: one client's unfinished fragmented requests or open streams never cost
another client a request, and every request is still accounted exactly once."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lblab.balancer.router import Router
from lblab.wire.codes import ErrorCode
from lblab.wire.frames import Cancel, Error, Payload, RequestResponse
from tests.unit.test_router import TIMEOUT_S, Bed, FakeClient, ok_payload

CHUNK = b"x" * 97
FRAGMENT_BYTES = 3 + 6 + len(CHUNK)
"""What one fragment of ``CHUNK`` holds: length prefix, header, data."""


def budgeted(n: int = 1, **limits: int) -> Bed:
    bed = Bed(n)
    bed.router = Router(bed.pool, bed.directory, timeout_s=TIMEOUT_S, **limits)
    return bed


def first(sid: int) -> RequestResponse:
    return RequestResponse(stream_id=sid, data=CHUNK, follows=True)


def more(sid: int, last: bool = False) -> Payload:
    return Payload(stream_id=sid, data=CHUNK, next=True, follows=not last)


def errors(client: FakeClient) -> list[Error]:
    return [f for f in client.sent if isinstance(f, Error)]


def test_a_request_beyond_the_open_streams_budget_is_rejected_and_names_it():
    bed = budgeted(client_streams=2)
    bed.send(RequestResponse(stream_id=1, data=b"{}"))
    bed.send(RequestResponse(stream_id=3, data=b"{}"))
    bed.send(RequestResponse(stream_id=5, data=b"{}"))
    (refused,) = errors(bed.client)
    assert refused.stream_id == 5 and refused.error_code == ErrorCode.REJECTED
    assert "--client-max-streams 2" in refused.message
    assert len(bed.backends["b1"].written) == 2  # the third never reached a backend
    assert bed.router.stats.refused_client_streams == 1
    other = FakeClient("10.0.0.2")  # the budget is per client
    bed.send(RequestResponse(stream_id=1, data=b"{}"), other)
    assert not errors(other)
    bed.backends["b1"].answer(bed.router, ok_payload(1), bed.now)
    bed.send(RequestResponse(stream_id=7, data=b"{}"))  # room again
    assert len(errors(bed.client)) == 1


def test_the_fragment_past_a_clients_held_bytes_cancels_its_request_only():
    bed = budgeted(client_held_bytes=2 * FRAGMENT_BYTES)
    bed.send(first(1))
    bed.send(more(1))
    bed.send(more(1))  # the third fragment would pass the budget
    backend = bed.backends["b1"]
    assert backend.written[-1] == Cancel(stream_id=1)  # the server drops what it held
    (refused,) = errors(bed.client)
    assert refused.error_code == ErrorCode.REJECTED
    assert "--client-max-held-bytes" in refused.message
    sent = len(backend.written)
    bed.send(more(1))
    bed.send(more(1, last=True))  # the rest is swallowed, nothing forwarded
    assert len(backend.written) == sent
    assert bed.router.stats.refused_client_held_bytes == 1
    assert bed.outcomes() == [("b1", True, None)]  # not the backend's failure
    bed.settled()
    assert not bed.router.budgets.per_client and not bed.router.budgets.on_backend


def test_the_last_fragment_gives_the_bytes_back():
    bed = budgeted(client_held_bytes=2 * FRAGMENT_BYTES)
    for sid in (1, 3, 5):  # each request holds one fragment, then completes
        bed.send(first(sid))
        bed.send(more(sid, last=True))
    assert not errors(bed.client)
    assert bed.router.budgets.per_client == {}
    for sid in (1, 3, 5):
        bed.backends["b1"].answer(bed.router, ok_payload(sid), bed.now)
    bed.settled()


def test_a_full_backend_connection_evicts_the_largest_holder_not_the_newcomer():
    bed = budgeted(client_held_bytes=100 * FRAGMENT_BYTES, backend_held_bytes=6 * FRAGMENT_BYTES)
    hog = FakeClient("10.0.0.9")
    bed.send(first(1), hog)
    bed.send(more(1), hog)
    bed.send(first(3), hog)
    for _ in range(3):
        bed.send(more(3), hog)  # the hog holds the whole connection: 2 + 4 fragments
    assert bed.router.budgets.held_on(bed.backends["b1"]) == 6 * FRAGMENT_BYTES
    bed.send(first(1))  # a well-behaved client within its fair share (3 fragments)
    bed.send(more(1))
    bed.send(more(1, last=True))
    assert not errors(bed.client)
    (evicted,) = errors(hog)  # the hog's largest request (stream 3) made the room
    assert evicted.stream_id == 3 and evicted.error_code == ErrorCode.REJECTED
    assert "fair share" in evicted.message
    assert bed.router.stats.evicted_fair_share == 1
    bsid = bed.client.streams[1].backend_sid
    bed.backends["b1"].answer(bed.router, ok_payload(bsid), bed.now)
    assert ok_payload(1) in bed.client.sent


def test_a_client_over_its_fair_share_of_a_full_connection_is_refused():
    bed = budgeted(client_held_bytes=100 * FRAGMENT_BYTES, backend_held_bytes=4 * FRAGMENT_BYTES)
    other = FakeClient("10.0.0.2")
    bed.send(first(1), other)
    bed.send(more(1), other)  # other holds 2 = its share of 4 between two
    bed.send(first(1))
    bed.send(more(1))  # this client holds 2: the connection is full
    bed.send(more(1))  # a third would pass this client's share
    (refused,) = errors(bed.client)
    assert "fair share of" in refused.message
    assert bed.router.stats.refused_fair_share == 1
    assert not errors(other)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 2), st.sampled_from(["more", "last", "gone"])),
        max_size=60,
    )
)
def test_no_client_or_connection_ever_holds_past_its_budget(events):
    """Any interleaving of three clients' fragments, finishes and disconnects: the budgets
    hold at every step, and when every client is gone nothing is held or in flight."""
    client_budget, backend_budget = 5 * FRAGMENT_BYTES, 8 * FRAGMENT_BYTES
    bed = budgeted(2, client_held_bytes=client_budget, backend_held_bytes=backend_budget)
    clients = [FakeClient(f"10.0.0.{i}") for i in range(3)]
    next_sid = [1, 1, 1]
    open_sid: list[dict[int, int]] = [{}, {}, {}]  # per client: slot -> live stream id
    budgets = bed.router.budgets
    for who, slot, what in events:
        client = clients[who]
        if what == "gone":
            bed.router.client_gone(client, bed.now)
            open_sid[who].clear()
        elif slot not in open_sid[who]:
            sid = next_sid[who]
            next_sid[who] += 2
            open_sid[who][slot] = sid
            bed.send(first(sid), client)
        else:
            sid = open_sid[who][slot]
            bed.send(more(sid, last=what == "last"), client)
            if what == "last":
                del open_sid[who][slot]
        assert all(held <= client_budget for held in budgets.per_client.values())
        assert all(held <= backend_budget for held in budgets.on_backend_total.values())
        assert sum(s.held for c in clients for s in c.streams.values()) == sum(
            budgets.per_client.values()
        )
    for client in clients:
        bed.router.client_gone(client, bed.now)
    assert budgets.per_client == {} and budgets.on_backend == {}
    assert bed.pool.outstanding == 0
