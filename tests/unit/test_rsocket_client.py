"""The blocking RSocket client against real servers on loopback."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator

import pytest

from lblab.loadtests.rsocket_client import RSocketClient, classify_exception
from lblab.procs import Child, lblab_command, spawn, stop
from lblab.scenarios import request_body
from lblab.wire.codec import NEED_DATA, FrameDecoder, encode_frame
from lblab.wire.frames import Keepalive, Payload, RequestResponse, Setup
from lblab.wire.metadata import request_metadata

MD = request_metadata("work")


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[Child]:
    extra = getattr(request, "param", [])
    child = spawn("server", lblab_command("server", "--id", "s7", "--port", "0", *extra))
    yield child
    stop(child, timeout=5)


def client_for(child: Child) -> RSocketClient:
    return RSocketClient("127.0.0.1", int(child.ready["port"]))


def test_request_response_returns_the_servers_answer(server: Child) -> None:
    client = client_for(server)
    for package, work in ((100, 10_000), (10_000, 100_000), (1_000_000, 10_000)):
        response = client.request_response(request_body(package, work), MD, 10)
        body = json.loads(response.data)
        assert body["server"] == "s7" and body["work_bytes"] == work
    client.close()


def test_bad_body_is_an_application_error(server: Child) -> None:
    client = client_for(server)
    with pytest.raises(Exception) as info:
        client.request_response(b'{"pad": ""}', MD, 5)
    assert classify_exception(info.value) == ("application", "server")
    # The connection is still usable.
    assert json.loads(client.request_response(request_body(100, 10), MD, 5).data)["server"]


@pytest.mark.parametrize("server", [["--delay-ms", "400"]], indirect=True)
def test_deadline_is_a_timeout_and_the_late_answer_is_not_mistaken(server: Child) -> None:
    client = client_for(server)
    with pytest.raises(Exception) as info:
        client.request_response(request_body(100, 10), MD, 0.1)
    assert classify_exception(info.value) == ("timeout", "client")
    # Same connection: this answer must be the second request's, not the late first one.
    response = client.request_response(request_body(100, 12_345), MD, 5)
    assert json.loads(response.data)["work_bytes"] == 12_345


@pytest.mark.parametrize(
    "server", [["--delay-ms", "500", "--max-inflight", "1", "--workers", "1"]], indirect=True
)
def test_overload_is_rejected(server: Child) -> None:
    kinds: list[str | None] = []

    def one() -> None:
        try:
            client_for(server).request_response(request_body(100, 10), MD, 5)
            kinds.append(None)
        except Exception as exc:
            kinds.append(classify_exception(exc)[0])

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    # One holds the only slot for 500 ms; the other arrives meanwhile and is refused.
    assert sorted(kinds, key=str) == [None, "rejected"]


def test_refused_and_lost_connections_are_connection_errors(server: Child) -> None:
    client = client_for(server)
    client.request_response(request_body(100, 10), MD, 5)
    stop(server, timeout=5)
    with pytest.raises(Exception) as lost:
        client.request_response(request_body(100, 10), MD, 5)
    assert classify_exception(lost.value) == ("connection", "transport")
    with pytest.raises(Exception) as refused:
        client.request_response(request_body(100, 10), MD, 5)
    assert classify_exception(refused.value) == ("connection", "transport")


def test_setup_is_per_contract_and_keepalive_is_answered() -> None:
    """A scripted peer on a real socket: checks SETUP, sends KEEPALIVE(respond) first."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: dict[str, object] = {}

    def peer() -> None:
        conn, _ = listener.accept()
        decoder = FrameDecoder()

        def frame() -> object:
            while (f := decoder.next_frame()) is NEED_DATA:
                decoder.receive_data(conn.recv(65536))
            return f

        seen["setup"] = frame()
        request = frame()
        assert isinstance(request, RequestResponse)
        conn.sendall(encode_frame(Keepalive(respond=True, data=b"ping")))
        seen["keepalive"] = frame()
        conn.sendall(
            encode_frame(
                Payload(
                    stream_id=request.stream_id, data=b'{"server":"p"}', next=True, complete=True
                )
            )
        )
        conn.recv(1)
        conn.close()

    thread = threading.Thread(target=peer, daemon=True)
    thread.start()
    client = RSocketClient("127.0.0.1", listener.getsockname()[1])
    response = client.request_response(request_body(100, 10), MD, 5)
    client.close()
    thread.join(timeout=5)
    listener.close()
    assert json.loads(response.data) == {"server": "p"}
    setup = seen["setup"]
    assert isinstance(setup, Setup)
    assert setup.data_mime == "application/json"
    assert setup.metadata_mime == "message/x.rsocket.composite-metadata.v0"
    assert seen["keepalive"] == Keepalive(respond=False, data=b"ping")
