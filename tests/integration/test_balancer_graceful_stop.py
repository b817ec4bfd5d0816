"""A graceful stop through the live balancer: new work refused, old work finished or cut
with an answer a client can read (docs/DESIGN.md, "Reliability rules").

Real ``lblab server`` processes behind a real ``lblab balancer``; the client speaks raw
frames through ``lblab.wire`` (``RawClient``), so every frame the balancer sends, and
the order and time it arrives, is seen. One backend in the second test is a recording
RSocket peer in this process (``lblab.wire_asyncio``), so what reaches a backend when
its streams are cut (CANCEL, then CONNECTION_CLOSE) is seen too.

After SIGTERM the client port refuses connections; the 50 requests sent then are each
answered REJECTED ``balancer/rejected: the balancer is stopping ...`` at once; requests
already in flight finish within ``--drain-timeout``, or are cut when it runs out with a
CANCELED ``balancer/connection: ...`` ERROR each; then a stream-0 CONNECTION_CLOSE and
the close; the balancer exits 0. No request goes unanswered.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest
from balancer_testbed import (
    RawClient,
    client_setup,
    processes,
    start_balancer,
    start_server,
    status_of,
    wait_for,
)

from lblab.admission import Admission
from lblab.failures import classify_error
from lblab.procs import Child, lblab_command, spawn
from lblab.wire.codes import ErrorCode
from lblab.wire.connection import Event, SetupPolicy
from lblab.wire.frames import Cancel, Error, Frame, Payload, RequestResponse
from lblab.wire.metadata import APPLICATION_JSON
from lblab.wire_asyncio import AcceptedConnection

pytestmark = pytest.mark.slow

WORK = b'{"work_bytes": 200, "pad": ""}'
NEW_REQUESTS = 50
PROMPT_S = 0.5
"""A refusal arrives within this of the request (it takes well under 10 ms; the margin
is for a busy 2-core machine)."""
EXIT_MARGIN_S = 1.5
"""The balancer exits within its grace (or the work, when shorter) plus this."""


@dataclass
class Seen:
    """Every frame the client received until the balancer closed, with arrival times."""

    answers: dict[int, list[tuple[Frame, float]]] = field(default_factory=dict)
    connection: list[Frame] = field(default_factory=list)
    """Stream-0 frames, in order."""
    closed_at: float = 0.0


def read_until_closed(client: RawClient, timeout: float) -> Seen:
    seen = Seen()
    deadline = time.monotonic() + timeout
    while (frame := client.recv(deadline - time.monotonic())) is not None:
        sid = frame.stream_id  # type: ignore[union-attr]
        if sid == 0:
            seen.connection.append(frame)
        else:
            seen.answers.setdefault(sid, []).append((frame, time.monotonic()))
    seen.closed_at = time.monotonic()
    return seen


def refused(port: int) -> bool:
    """Whether a connection to ``port`` is refused (the listening socket is closed)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


def stop_signal(child: Child) -> float:
    os.kill(child.pid, signal.SIGTERM)
    return time.monotonic()


def requests(first_sid: int, count: int) -> list[RequestResponse]:
    return [RequestResponse(stream_id=first_sid + 2 * i, data=WORK) for i in range(count)]


def check_refusals(seen: Seen, sids: list[int], sent_at: float) -> None:
    """Each request sent after the stop has exactly one answer: a prompt REJECTED that
    says the balancer is stopping."""
    for sid in sids:
        ((frame, t),) = seen.answers[sid]
        assert isinstance(frame, Error), frame
        assert frame.error_code == ErrorCode.REJECTED
        assert frame.message.startswith("balancer/rejected: the balancer is stopping")
        assert classify_error(frame.error_code, frame.message) == ("rejected", "balancer")
        assert t - sent_at < PROMPT_S


def check_closing(seen: Seen) -> None:
    """The last frame before the close is a stream-0 CONNECTION_CLOSE."""
    (closing,) = seen.connection
    assert isinstance(closing, Error)
    assert closing.error_code == ErrorCode.CONNECTION_CLOSE
    assert "stopping" in closing.message


def test_a_stop_refuses_new_requests_and_lets_those_in_flight_finish(tmp_path: Path) -> None:
    delay_s = 1.5
    servers = [
        start_server(f"s{i}", tmp_path, "--delay-ms", str(delay_s * 1000), "--workers", "8")
        for i in (1, 2)
    ]
    with processes(*servers) as kids:
        balancer = start_balancer(servers, tmp_path, "--drain-timeout", "5s")
        kids.append(balancer)
        port = balancer.ready["port"]
        client = RawClient(port)
        client.send(client_setup())
        old = requests(1, 8)
        client.send(*old)
        wait_for(lambda: status_of(balancer)["outstanding"] == len(old), 5, "8 in flight")
        late = RawClient(port)  # connected before the stop; its SETUP comes after
        t_stop = stop_signal(balancer)
        wait_for(lambda: refused(port), 2, "the client port to refuse connections")
        new = requests(old[-1].stream_id + 2, NEW_REQUESTS)
        t_new = time.monotonic()
        client.send(*new)

        late.send(client_setup())
        refusal = late.recv()
        assert isinstance(refusal, Error) and refusal.stream_id == 0
        assert refusal.error_code == ErrorCode.REJECTED_SETUP
        assert "stopping" in refusal.message
        assert late.closed()
        # The admin API answers during the grace.
        wait_for(
            lambda: status_of(balancer)["rejected_stopping"] == NEW_REQUESTS,
            2,
            "the refusals counted",
        )

        seen = read_until_closed(client, delay_s + 5)
        assert balancer.popen.wait(timeout=5) == 0
        t_exit = time.monotonic()

        check_refusals(seen, [r.stream_id for r in new], t_new)
        for request in old:
            ((frame, _),) = seen.answers[request.stream_id]
            assert isinstance(frame, Payload), frame
            assert orjson.loads(frame.data)["server"] in ("s1", "s2")
        assert set(seen.answers) == {r.stream_id for r in old + new}
        check_closing(seen)
        assert t_exit - t_stop < delay_s + EXIT_MARGIN_S


# ---------------------------------------------------------------- a recording backend


class Recorder(AcceptedConnection):
    """A backend that takes requests and never answers them, recording what arrives."""

    def __init__(self, frames: list[Frame | str], loop: asyncio.AbstractEventLoop) -> None:
        policy = SetupPolicy(
            who="the recording backend", setup_timeout_s=5, data_mimes=(APPLICATION_JSON,)
        )
        super().__init__(policy, Admission(4, 4, "the recording backend"), loop)
        self.frames = frames

    def on_frame(self, frame: Event | Frame) -> None:
        if isinstance(frame, RequestResponse | Cancel):
            self.frames.append(frame)

    def on_lost(self) -> None:
        closed = self.rsocket.peer_closed
        self.frames.append(f"closed after 0x{closed.code:x}" if closed else "closed bare")


@dataclass
class Recording:
    port: int
    frames: list[Frame | str]


@contextlib.contextmanager
def recording_backend() -> Iterator[Recording]:
    """A ``Recorder`` server on its own event loop in a thread."""
    loop = asyncio.new_event_loop()
    frames: list[Frame | str] = []
    server = loop.run_until_complete(
        loop.create_server(lambda: Recorder(frames, loop), "127.0.0.1", 0)
    )
    thread = threading.Thread(target=loop.run_forever, name="recorder", daemon=True)
    thread.start()
    try:
        yield Recording(server.sockets[0].getsockname()[1], frames)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        server.close()
        loop.close()


def test_what_outlasts_the_grace_gets_a_readable_error_and_its_backend_a_cancel(
    tmp_path: Path,
) -> None:
    grace_s = 0.5
    # s1's work outlasts the grace; its own drain is short, as the cut work runs out there.
    server = start_server(
        "s1", tmp_path, "--delay-ms", "2500", "--workers", "8", "--drain-timeout", "0.5"
    )
    with recording_backend() as recorder, processes(server) as kids:
        balancer = spawn(
            "balancer",
            lblab_command(
                "balancer",
                *("--port", "0", "--admin-port", "0", "--strategy", "rr"),
                *("--backend", f"s1=127.0.0.1:{server.ready['port']}"),
                *("--backend", f"r1=127.0.0.1:{recorder.port}"),
                *("--drain-timeout", f"{grace_s * 1000:g}ms"),
            ),
            log_path=tmp_path / "balancer.log",
        )
        kids.append(balancer)
        wait_for(
            lambda: all(b["state"] == "up" for b in status_of(balancer)["backends"]),
            5,
            "both backends up",
        )
        port = balancer.ready["port"]
        client = RawClient(port)
        client.send(client_setup())
        old = requests(1, 6)
        client.send(*old)
        wait_for(lambda: status_of(balancer)["outstanding"] == len(old), 5, "6 in flight")
        t_stop = stop_signal(balancer)
        wait_for(lambda: refused(port), 2, "the client port to refuse connections")
        new = requests(old[-1].stream_id + 2, NEW_REQUESTS)
        t_new = time.monotonic()
        client.send(*new)

        seen = read_until_closed(client, grace_s + 5)
        assert balancer.popen.wait(timeout=5) == 0
        t_exit = time.monotonic()

        check_refusals(seen, [r.stream_id for r in new], t_new)
        cut_backends = set()
        for request in old:
            ((frame, t),) = seen.answers[request.stream_id]
            assert isinstance(frame, Error), frame
            assert frame.error_code == ErrorCode.CANCELED
            assert frame.message.startswith(
                "balancer/connection: the balancer stopped with the request in flight at backend"
            )
            assert "may or may not have run" in frame.message
            cut_backends.add(frame.message.split("at backend ")[1].split()[0])
            assert grace_s - 0.1 < t - t_stop < grace_s + EXIT_MARGIN_S
        assert cut_backends == {"s1", "r1"}
        assert set(seen.answers) == {r.stream_id for r in old + new}
        check_closing(seen)
        assert t_exit - t_stop < grace_s + EXIT_MARGIN_S

        # The recording backend took half the requests, got a CANCEL for each, then
        # the connection's CONNECTION_CLOSE and the close.
        wait_for(lambda: recorder.frames and isinstance(recorder.frames[-1], str), 2, "r1 closed")
        taken = [f.stream_id for f in recorder.frames if isinstance(f, RequestResponse)]
        cancelled = [f.stream_id for f in recorder.frames if isinstance(f, Cancel)]
        assert len(taken) == len(old) // 2
        assert cancelled == taken
        assert recorder.frames[-1] == f"closed after 0x{ErrorCode.CONNECTION_CLOSE:x}"
