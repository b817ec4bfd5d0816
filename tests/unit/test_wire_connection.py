"""The sans-I/O connection (lblab.wire.connection) driven with bytes and a fake ``now``.

Every SETUP refusal, the SETUP deadline, KEEPALIVE answers and ours, the max lifetime,
the stream-0 rules, stream-id wrap and skip, the frame-position API the balancer uses,
and hostile bytes at every position (hypothesis): whatever arrives, the connection
returns events and never raises; a refusal always queues exactly one stream-0 ERROR.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lblab.errors import LocalProtocolError
from lblab.wire.codec import NEED_DATA, FrameDecoder, encode_frame
from lblab.wire.codes import HEADER, MAX_STREAM_ID, ErrorCode, FrameType
from lblab.wire.connection import (
    Connection,
    ConnectionFailed,
    Control,
    KeepaliveAnswered,
    LeaseReceived,
    MetadataPushed,
    PeerClosed,
    SetupAccepted,
    SetupPolicy,
    SetupRefused,
    StreamIds,
)
from lblab.wire.frames import (
    Cancel,
    Error,
    Keepalive,
    Lease,
    MetadataPush,
    Payload,
    RequestN,
    RequestResponse,
    Resume,
    ResumeOk,
    Setup,
)

JSON = "application/json"
COMPOSITE = "message/x.rsocket.composite-metadata.v0"
POLICY = SetupPolicy(who="the test server", setup_timeout_s=5.0, data_mimes=(JSON,))
SETUP = Setup(
    keepalive_ms=1000, max_lifetime_ms=4000, metadata_mime=COMPOSITE, data_mime=JSON, data=b"{}"
)


def raw_frame(stream_id: int, frame_type: int, flags: int, body: bytes = b"") -> bytes:
    frame = HEADER.pack(stream_id, frame_type << 10 | flags) + body
    return len(frame).to_bytes(3, "big") + frame


def events(conn: Connection, data: bytes = b"") -> list[object]:
    if data:
        conn.receive_data(data)
    out: list[object] = []
    while (event := conn.next_event()) is not NEED_DATA:
        out.append(event)
    return out


def sent_frames(conn: Connection) -> list[object]:
    decoder = FrameDecoder()
    decoder.receive_data(conn.data_to_send())
    out: list[object] = []
    while (frame := decoder.next_frame()) is not NEED_DATA:
        out.append(frame)
    return out


def accepted(policy: SetupPolicy = POLICY, now: float = 0.0) -> Connection:
    conn = Connection.accepting(policy, now)
    assert events(conn, encode_frame(SETUP)) == [SetupAccepted(setup=SETUP)]
    return conn


def assert_closed_with(conn: Connection, event: object, code: int, text: str) -> None:
    assert isinstance(event, ConnectionFailed), event
    assert event.code == code and text in event.message, event
    assert conn.closed
    [frame] = sent_frames(conn)
    assert frame == Error(stream_id=0, error_code=code, message=event.message)
    conn.receive_data(encode_frame(Cancel(stream_id=1)))  # dropped once closed
    assert conn.next_event() is NEED_DATA


# ---------------------------------------------------------------- SETUP acceptance


def setup_with(**changes: object) -> Setup:
    fields = {
        "keepalive_ms": 1000,
        "max_lifetime_ms": 4000,
        "metadata_mime": COMPOSITE,
        "data_mime": JSON,
    }
    return Setup(**{**fields, **changes})  # type: ignore[arg-type]


REFUSALS = {
    "major version": (setup_with(major=2, minor=3), ErrorCode.UNSUPPORTED_SETUP, "version 2.3"),
    "lease flag": (setup_with(lease=True), ErrorCode.UNSUPPORTED_SETUP, "no leases"),
    "resume token": (setup_with(resume_token=b"t"), ErrorCode.UNSUPPORTED_SETUP, "resumption"),
    "data MIME": (setup_with(data_mime="text/csv"), ErrorCode.UNSUPPORTED_SETUP, "'text/csv'"),
    "RESUME first": (
        Resume(token=b"t", last_received_server_position=0, first_available_client_position=0),
        ErrorCode.REJECTED_RESUME,
        "resum",
    ),
    "request first": (
        RequestResponse(stream_id=1, data=b"{}"),
        ErrorCode.INVALID_SETUP,
        "must be SETUP",
    ),
    "KEEPALIVE first": (Keepalive(respond=True), ErrorCode.INVALID_SETUP, "must be SETUP"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_every_setup_refusal(case):
    frame, code, text = REFUSALS[case]
    conn = Connection.accepting(POLICY, 0.0)
    [event] = events(conn, encode_frame(frame))
    assert isinstance(event, SetupRefused) == (code != ErrorCode.REJECTED_RESUME)
    assert_closed_with(conn, event, code, text)


def test_refusals_name_who_refuses():
    [event] = events(Connection.accepting(POLICY, 0.0), encode_frame(setup_with(major=0)))
    assert "the test server speaks 1.x" in event.message  # type: ignore[attr-defined]


def test_the_policy_is_data_a_lease_server_takes_the_lease_flag_and_any_mime():
    policy = SetupPolicy(who="s1", setup_timeout_s=1.0, lease=True)
    setup = setup_with(lease=True, data_mime="text/csv")
    conn = Connection.accepting(policy, 0.0)
    assert events(conn, encode_frame(setup)) == [SetupAccepted(setup=setup)]
    assert conn.open and conn.lifetime_s == 4.0


def test_the_first_frame_is_judged_from_its_header_before_its_body():
    conn = Connection.accepting(POLICY, 0.0)
    [event] = events(conn, raw_frame(1, FrameType.REQUEST_RESPONSE, 0)[:9])
    assert_closed_with(conn, event, ErrorCode.INVALID_SETUP, "must be SETUP")


def test_an_absurd_setup_length_is_refused_from_its_prefix():
    conn = Connection.accepting(POLICY, 0.0)
    [event] = events(conn, b"\xff\xff\xff")
    assert_closed_with(conn, event, ErrorCode.INVALID_SETUP, "announces 16777215 bytes")


def test_a_setup_over_the_policy_cap_is_refused():
    policy = SetupPolicy(who="x", setup_timeout_s=1.0, max_setup_bytes=64)
    conn = Connection.accepting(policy, 0.0)
    [event] = events(conn, encode_frame(setup_with(data=b"x" * 100)))
    assert_closed_with(conn, event, ErrorCode.INVALID_SETUP, "announces")


def test_a_malformed_setup_is_invalid_setup():
    conn = Connection.accepting(POLICY, 0.0)
    [event] = events(conn, raw_frame(0, FrameType.SETUP, 0, b"\x00\x01"))
    assert_closed_with(conn, event, ErrorCode.INVALID_SETUP, "truncated")


def test_a_setup_fed_one_byte_at_a_time_is_accepted_with_the_frames_after_it():
    data = encode_frame(SETUP) + encode_frame(RequestResponse(stream_id=1, data=b"a"))
    conn = Connection.accepting(POLICY, 0.0)
    seen: list[object] = []
    for i in range(len(data)):
        seen += events(conn, data[i : i + 1])
    assert seen == [SetupAccepted(setup=SETUP), RequestResponse(stream_id=1, data=b"a")]


def test_setup_deadline():
    conn = Connection.accepting(POLICY, 100.0)
    assert conn.next_tick_at == 105.0
    assert conn.tick(104.9) is None
    event = conn.tick(105.0)
    assert isinstance(event, SetupRefused)
    assert_closed_with(conn, event, ErrorCode.INVALID_SETUP, "no SETUP within 5 s")


def test_no_setup_deadline_once_accepted():
    conn = accepted(now=100.0)  # the SETUP read marks the connection active
    assert conn.tick(105.0) is None
    assert conn.open and conn.next_tick_at == 106.0


def test_policy_checks_itself():
    with pytest.raises(LocalProtocolError, match="setup_timeout_s"):
        SetupPolicy(who="x", setup_timeout_s=0)
    with pytest.raises(LocalProtocolError, match="max_setup_bytes"):
        SetupPolicy(who="x", setup_timeout_s=1, max_setup_bytes=3)


# ---------------------------------------------------------------- after SETUP


def test_keepalive_with_respond_is_echoed_without_it():
    conn = accepted()
    assert (
        events(conn, encode_frame(Keepalive(respond=True, last_received_position=9, data=b"d")))
        == []
    )
    assert sent_frames(conn) == [Keepalive(respond=False, last_received_position=9, data=b"d")]


def test_keepalive_answer_is_an_event_and_is_not_echoed():
    conn = Connection.connecting(SETUP, 0.0)
    assert sent_frames(conn) == [SETUP]
    assert events(conn, encode_frame(Keepalive(respond=False))) == [KeepaliveAnswered()]
    assert conn.data_to_send() == b""


STREAM_ZERO_FAILURES = {
    "KEEPALIVE without a position": (
        raw_frame(0, FrameType.KEEPALIVE, 0x80, b"ab"),
        ErrorCode.CONNECTION_ERROR,
        "63-bit",
    ),
    "KEEPALIVE position top bit": (
        raw_frame(0, FrameType.KEEPALIVE, 0x80, b"\x80" + bytes(7)),
        ErrorCode.CONNECTION_ERROR,
        "63-bit",
    ),
    "LEASE not negotiated": (
        encode_frame(Lease(ttl_ms=1, number_of_requests=1)),
        ErrorCode.CONNECTION_ERROR,
        "did not negotiate",
    ),
    "second SETUP": (encode_frame(SETUP), ErrorCode.CONNECTION_ERROR, "only be sent once"),
    "RESUME": (
        encode_frame(
            Resume(token=b"t", last_received_server_position=0, first_available_client_position=0)
        ),
        ErrorCode.REJECTED_RESUME,
        "resumption",
    ),
    "RESUME_OK": (
        encode_frame(ResumeOk(last_received_client_position=0)),
        ErrorCode.CONNECTION_ERROR,
        "unexpected frame type 0x0e",
    ),
    "ERROR without a code": (
        raw_frame(0, FrameType.ERROR, 0, b"ab"),
        ErrorCode.CONNECTION_ERROR,
        "too short",
    ),
    "request on stream 0": (
        raw_frame(0, FrameType.REQUEST_RESPONSE, 0),
        ErrorCode.CONNECTION_ERROR,
        "unexpected frame type 0x04 on stream 0",
    ),
    "unknown type": (raw_frame(0, 0x30, 0), ErrorCode.CONNECTION_ERROR, "0x30"),
    "frame over the cap": (
        raw_frame(1, FrameType.PAYLOAD, 0x20, b"x" * 70_000),
        ErrorCode.CONNECTION_ERROR,
        "exceeds the limit of 65536",
    ),
    "frame shorter than a header": (
        b"\x00\x00\x02ab",
        ErrorCode.CONNECTION_ERROR,
        "shorter than the 6-byte header",
    ),
    "malformed stream frame": (
        raw_frame(1, FrameType.REQUEST_N, 0, bytes(4)),
        ErrorCode.CONNECTION_ERROR,
        "REQUEST_N",
    ),
}


@pytest.mark.parametrize("case", list(STREAM_ZERO_FAILURES))
def test_connection_rule_failures(case):
    data, code, text = STREAM_ZERO_FAILURES[case]
    conn = Connection.accepting(POLICY, 0.0, max_frame_length=65536)
    events(conn, encode_frame(SETUP))
    [event] = events(conn, data)
    assert_closed_with(conn, event, code, text)


def test_ignorable_frames_are_dropped():
    conn = accepted()
    assert events(conn, raw_frame(0, 0x30, 0x200) + raw_frame(0, FrameType.EXT, 0x200)) == []
    assert events(conn, raw_frame(3, 0x30, 0x200)) == []
    assert conn.open and conn.data_to_send() == b""


def test_stream_frames_come_out_as_frames():
    conn = accepted()
    frames = [
        RequestResponse(stream_id=1, data=b"x", metadata=b"m"),
        RequestN(stream_id=1, n=5),
        Payload(stream_id=1, data=b"p", next=True),
        Cancel(stream_id=1),
        Error(stream_id=1, error_code=ErrorCode.CANCELED, message="c"),
    ]
    assert events(conn, b"".join(encode_frame(f) for f in frames)) == frames


def test_peer_error_and_push_and_lease_are_events():
    lease_setup = setup_with(lease=True)
    conn = Connection.connecting(lease_setup, 0.0)
    data = (
        encode_frame(Lease(ttl_ms=3000, number_of_requests=7))
        + encode_frame(MetadataPush(metadata=b"report"))
        + encode_frame(Error(stream_id=0, error_code=ErrorCode.CONNECTION_CLOSE, message="bye"))
    )
    assert events(conn, data) == [
        LeaseReceived(ttl_ms=3000, number_of_requests=7),
        MetadataPushed(metadata=b"report"),
        PeerClosed(code=ErrorCode.CONNECTION_CLOSE, message="bye"),
    ]


def test_metadata_push_without_its_flag_is_taken():
    """rsocket-js 0.0.27 sends METADATA_PUSH with no flags; its body is metadata either
    way, so it is taken (as rsocket-java does) instead of closing the connection."""
    conn = Connection.connecting(setup_with(), 0.0)
    data = raw_frame(0, FrameType.METADATA_PUSH, 0, b"report") + encode_frame(
        Payload(stream_id=1, data=b"p", next=True)
    )
    assert events(conn, data) == [
        MetadataPushed(metadata=b"report"),
        Payload(stream_id=1, data=b"p", next=True),
    ]


def test_close_queues_one_error_and_only_once():
    conn = accepted()
    first = conn.close(ErrorCode.CONNECTION_CLOSE, "shutting down")
    assert not isinstance(first, SetupRefused)
    assert conn.close(ErrorCode.CONNECTION_ERROR, "again") is first
    assert sent_frames(conn) == [
        Error(stream_id=0, error_code=ErrorCode.CONNECTION_CLOSE, message="shutting down")
    ]


def test_peer_gone_drops_what_was_queued():
    conn = Connection.connecting(SETUP, 0.0)
    conn.peer_gone()
    assert conn.closed and conn.data_to_send() == b""
    assert conn.tick(100.0) is None


# ---------------------------------------------------------------- time


def test_client_sends_keepalive_when_due():
    conn = Connection.connecting(SETUP, 10.0)
    conn.data_to_send()
    assert conn.next_tick_at == 11.0
    assert conn.tick(10.5) is None and conn.data_to_send() == b""
    conn.active = True
    assert conn.tick(11.0) is None
    assert sent_frames(conn) == [Keepalive(respond=True)]
    assert conn.next_tick_at == 12.0


def test_lifetime_expiry():
    conn = accepted(now=0.0)  # the peer's lifetime is 4 s
    assert conn.tick(1.0) is None  # the SETUP read counts as heard at the first tick
    assert conn.last_received == 1.0 and conn.next_tick_at == 2.0
    assert conn.tick(4.9) is None
    assert conn.next_tick_at == 5.0
    event = conn.tick(5.0)
    assert_closed_with(conn, event, ErrorCode.CONNECTION_ERROR, "beyond the max lifetime of 4 s")


def test_any_read_keeps_a_connection_alive():
    conn = accepted(now=0.0)
    for t in range(1, 40):
        conn.receive_data(b"")
        assert conn.tick(float(t)) is None
    assert conn.open


def test_client_judges_the_server_by_its_own_max_lifetime():
    conn = Connection.connecting(SETUP, 0.0)
    for t in (1.0, 2.0, 3.0):
        assert conn.tick(t) is None
    assert isinstance(conn.tick(4.0), ConnectionFailed)


# ---------------------------------------------------------------- stream ids


def test_client_ids_are_odd_server_ids_even():
    assert [Connection.connecting(SETUP, 0).next_stream_id() for _ in range(1)] == [1]
    client = Connection.connecting(SETUP, 0)
    assert [client.next_stream_id() for _ in range(3)] == [1, 3, 5]
    server = accepted()
    assert [server.next_stream_id() for _ in range(3)] == [2, 4, 6]


@pytest.mark.parametrize(("first", "wrapped"), [(MAX_STREAM_ID - 2, 1), (MAX_STREAM_ID - 3, 2)])
def test_stream_ids_wrap_within_31_bits(first, wrapped):
    ids = StreamIds(first)
    assert [ids.allocate() for _ in range(3)] == [first, first + 2, wrapped]


def test_stream_ids_skip_live_ids_also_across_the_wrap():
    ids = StreamIds(MAX_STREAM_ID)
    assert ids.allocate({MAX_STREAM_ID, 1, 3}) == 5
    assert ids.allocate({7}) == 9


def test_stream_ids_check_the_first():
    for first in (0, MAX_STREAM_ID + 1):
        with pytest.raises(LocalProtocolError):
            StreamIds(first)


# ---------------------------------------------------------------- frame positions (balancer)


def test_control_frame_on_a_buffer_allocates_no_event():
    conn = Connection.accepting(POLICY, 0.0)
    buf = bytearray(encode_frame(SETUP))
    assert not conn.check_prefix(buf, 0, 9)
    assert conn.control_frame(buf, 0, len(buf) - 3, 0, FrameType.SETUP, 0) is Control.SETUP_ACCEPTED
    assert conn.setup == SETUP
    ka = bytearray(b"junk" + encode_frame(Keepalive(respond=True, data=b"z")))
    assert conn.control_frame(ka, 4, len(ka) - 7, 0, FrameType.KEEPALIVE, 0x80) is Control.NONE
    assert sent_frames(conn) == [Keepalive(respond=False, data=b"z")]
    assert ka[4:] == encode_frame(Keepalive(respond=True, data=b"z"))  # the buffer is untouched
    push = bytearray(encode_frame(MetadataPush(metadata=b"mm")))
    flags = 0x100
    verdict = conn.control_frame(push, 0, len(push) - 3, 0, FrameType.METADATA_PUSH, flags)
    assert verdict is Control.METADATA_PUSH and push[9:] == b"mm"


def test_control_frame_refuses_a_stream_frame():
    conn = accepted()
    buf = bytearray(encode_frame(Cancel(stream_id=1)))
    assert conn.control_frame(buf, 0, 6, 1, FrameType.CANCEL, 0) is Control.FAILED


def test_check_prefix_refuses_junk_from_the_header():
    conn = Connection.accepting(POLICY, 0.0)
    assert conn.check_prefix(b"\x00\x00\x10\x00\x00\x00\x01\x10\x00", 0, 9)
    assert conn.failure is not None and "must be SETUP" in conn.failure.message


# ---------------------------------------------------------------- hostile bytes


def drive(conn: Connection, data: bytes, cuts: list[int]) -> list[object]:
    """Feed ``data`` split at ``cuts``; return every event. Raises nothing but bugs."""
    seen: list[object] = []
    start = 0
    for cut in [*sorted(cuts), len(data)]:
        seen += events(conn, data[start:cut])
        start = max(start, cut)
    return seen


def check_outcome(conn: Connection, seen: list[object]) -> None:
    failures = [e for e in seen if isinstance(e, ConnectionFailed)]
    assert len(failures) <= 1
    out = sent_frames(conn)
    if failures:
        assert seen[-1] is failures[0] and conn.closed
        assert out[-1] == Error(
            stream_id=0, error_code=failures[0].code, message=failures[0].message
        )


VALID_AFTER_SETUP = b"".join(
    encode_frame(f)
    for f in (
        RequestResponse(stream_id=1, data=b"{}", metadata=b"abc"),
        Keepalive(respond=True, data=b"d"),
        RequestN(stream_id=1, n=3),
        Payload(stream_id=1, data=b"x", next=True),
        MetadataPush(metadata=b"mm"),
        Cancel(stream_id=1),
    )
)


@settings(max_examples=300, deadline=None)
@given(data=st.binary(max_size=200), cuts=st.lists(st.integers(0, 200), max_size=4))
def test_random_bytes_never_raise(data, cuts):
    for conn in (Connection.accepting(POLICY, 0.0), Connection.connecting(SETUP, 0.0)):
        conn.data_to_send()
        check_outcome(conn, drive(conn, data, cuts))


@settings(max_examples=300, deadline=None)
@given(
    at=st.integers(0, len(encode_frame(SETUP)) + len(VALID_AFTER_SETUP) - 1),
    value=st.integers(0, 255),
    cuts=st.lists(st.integers(0, 200), max_size=3),
)
def test_a_byte_changed_at_any_position_never_raises(at, value, cuts):
    data = bytearray(encode_frame(SETUP) + VALID_AFTER_SETUP)
    data[at] = value
    conn = Connection.accepting(POLICY, 0.0)
    check_outcome(conn, drive(conn, bytes(data), cuts))


@pytest.mark.parametrize("cut", range(len(encode_frame(SETUP)) + len(VALID_AFTER_SETUP)))
def test_the_stream_cut_short_at_every_position_waits_for_more(cut):
    data = encode_frame(SETUP) + VALID_AFTER_SETUP
    conn = Connection.accepting(POLICY, 0.0)
    seen = events(conn, data[:cut])
    assert not any(isinstance(e, ConnectionFailed) for e in seen)
    seen += events(conn, data[cut:])
    assert len([e for e in seen if not isinstance(e, SetupAccepted)]) == 5  # KEEPALIVE answered
    assert sent_frames(conn) == [Keepalive(respond=False, data=b"d")]


# ---------------------------------------------------------------- a client and a server, linked


def test_a_client_and_a_server_linked_in_memory():
    """The h11 ``ConnectionPair`` check: two connections talk through bytes only."""
    client = Connection.connecting(SETUP, 0.0)
    server = Connection.accepting(POLICY, 0.0)
    assert events(server, client.data_to_send()) == [SetupAccepted(setup=SETUP)]
    for t in (0.5, 1.0, 2.0, 3.0, 4.5):  # the client keeps alive, the server answers
        assert client.tick(t) is None and server.tick(t) is None
        to_server = client.data_to_send()
        assert events(server, to_server) == []
        reply = server.data_to_send()
        answered = events(client, reply)
        assert answered == ([KeepaliveAnswered()] if to_server else [])
    sid = client.next_stream_id()
    client.send(RequestResponse(stream_id=sid, data=b"q"))
    assert events(server, client.data_to_send()) == [RequestResponse(stream_id=sid, data=b"q")]
    server.send(Payload(stream_id=sid, data=b"a", next=True, complete=True))
    assert events(client, server.data_to_send()) == [
        Payload(stream_id=sid, data=b"a", next=True, complete=True)
    ]
    server.close(ErrorCode.CONNECTION_CLOSE, "draining")
    assert events(client, server.data_to_send()) == [
        PeerClosed(code=ErrorCode.CONNECTION_CLOSE, message="draining")
    ]
