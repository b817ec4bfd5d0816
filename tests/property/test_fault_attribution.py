"""Fault attribution through a live balancer: a request's content is never the server's fault.

Two real ``lblab server`` processes behind a real ``lblab balancer --strategy rr``, one
client connection for the whole module. Hypothesis sends bodies of every shape: any
JSON value (NaN and Infinity literals included) at the top level or in any field,
objects with missing, extra and mistyped keys, numbers past every range (``1e400``,
4000- and 5000-digit integers, negative sizes), arrays and objects nested from 1 to
6000 deep, strings up to 200 kB, bodies in UTF-16, with a BOM or with a byte UTF-8
never has, raw bytes; with no, random or composite (routing key) request metadata; as
request-response, request-stream, request-channel and fire-and-forget. 300 examples,
about 6-12 s on two shared cores.

After every example: each answer is a payload or an APPLICATION_ERROR that is the
client's (no ``server fault: `` mark) and says what was wrong with the request; a body
known to be good is served and one known to be bad is refused; no backend had a fault
counted toward ejection or was ejected (GET /status: ``faults`` and ``ejections`` did
not move); and neither server logged a traceback or a failed work. Each example is
judged on what changed during it, so a failure is not blamed on the examples after it.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lblab.failures import SERVER_FAULT_PREFIX, classify_error
from lblab.procs import Child
from lblab.servers.work import MAX_WORK_BYTES
from lblab.wire.codes import ErrorCode
from lblab.wire.frames import (
    Cancel,
    Error,
    Frame,
    Keepalive,
    Payload,
    RequestChannel,
    RequestFnf,
    RequestResponse,
    RequestStream,
)
from lblab.wire.metadata import ROUTING_KEY, encode_composite, request_metadata
from tests.integration.balancer_testbed import (
    RawClient,
    client_setup,
    processes,
    start_balancer,
    start_server,
    status_of,
)

SERVERS = ("s1", "s2")
GOOD = b'{"work_bytes": 100, "pad": ""}'
REQUEST_WORDS = ("request body", "work_bytes", "items", "pad")
"""What a client error's message names: the body as a whole or the field at fault."""


@dataclass
class Live:
    balancer: Child
    logs: Path
    client: RawClient
    stream_ids: Iterator[int]

    def counts(self) -> dict[str, tuple[int, int]]:
        """Each backend's faults counted toward ejection, and its ejections."""
        rows = status_of(self.balancer)["backends"]
        return {row["id"]: (row["faults"], row["ejections"]) for row in rows}

    def log_sizes(self) -> dict[str, int]:
        return {name: (self.logs / f"{name}.log").stat().st_size for name in SERVERS}

    def exchange(self, frame: Frame) -> list[Frame]:
        """Send one request; its stream's frames up to its last (ERROR or COMPLETE)."""
        self.client.send(frame)
        answers: list[Frame] = []
        while True:
            reply = self.client.recv(timeout=10)
            assert reply is not None, "the balancer closed the client's connection"
            if isinstance(reply, Keepalive):
                if reply.respond:
                    self.client.send(Keepalive(respond=False, data=reply.data))
                continue
            assert reply.stream_id == frame.stream_id, (reply, frame)
            answers.append(reply)
            if isinstance(reply, Error) or (isinstance(reply, Payload) and reply.complete):
                return answers
            if isinstance(frame, RequestStream):  # one item tells; the rest is cancelled
                self.client.send(Cancel(stream_id=frame.stream_id))
                return answers


@pytest.fixture(scope="module")
def testbed(tmp_path_factory) -> Iterator[Live]:
    logs = tmp_path_factory.mktemp("fault-attribution")
    servers = [start_server(name, logs) for name in SERVERS]
    with processes(*servers) as kids:
        balancer = start_balancer(servers, logs, "--strategy", "rr")
        kids.append(balancer)
        client = RawClient(balancer.ready["port"])
        client.send(client_setup())
        yield Live(balancer, logs, client, itertools.count(1, 2))
        client.close()


# ---------------------------------------------------------------- bodies


def nested(depth: int, array: bool) -> str:
    if array:
        return "[" * depth + "]" * depth
    return '{"a": ' * depth + "0" + "}" * depth


ODD_NUMBERS = (
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-1e400",
    "1.0",
    "2e9",
    "-0",
    "9" * 4000,
    "-" + "9" * 4000,
    "9" * 5000,
    str(MAX_WORK_BYTES + 1),
    str(2**63),
)
small_ints = st.integers(-3, 2000)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers().filter(lambda i: not 2000 < i <= MAX_WORK_BYTES)  # no long work
    | st.floats()  # NaN and Infinity encode as the non-JSON literals
    | st.text(max_size=20),
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4)
    ),
    max_leaves=12,
)
values = st.one_of(
    small_ints.map(str),
    json_values.map(json.dumps),
    st.sampled_from(ODD_NUMBERS),
    st.builds(nested, st.integers(1, 6000), st.booleans()),
    st.integers(0, 200_000).map(lambda n: '"' + "x" * n + '"'),
)
"""JSON text of one value, as a client might put it in a field or send as the body."""


@st.composite
def objects(draw: st.DrawFn) -> str:
    keys = draw(st.lists(st.sampled_from(["work_bytes", "pad", "items"]), unique=True))
    keys += draw(st.lists(st.text(max_size=10), max_size=2))
    return "{" + ", ".join(f"{json.dumps(k)}: {draw(values)}" for k in keys) + "}"


def good_body(work_bytes: int, pad: str, items: int | None) -> bytes:
    fields: dict[str, object] = {"work_bytes": work_bytes, "pad": pad}
    if items is not None:
        fields["items"] = items
    return json.dumps(fields).encode()


good_bodies = st.builds(
    good_body, st.integers(0, 2000), st.text(max_size=50), st.none() | st.integers(1, 4)
)
BAD_BODIES = [
    b"",
    nested(5000, True).encode(),
    nested(5000, False).encode(),
    b'{"work_bytes": ' + nested(5000, True).encode() + b"}",
    b'{"work_bytes": 10, "pad": ' + nested(5000, False).encode() + b"}",
    b'{"work_bytes": 10, "items": ' + nested(990, True).encode() + b"}",
    b'{"work_bytes": NaN}',
    b'{"work_bytes": 1e400}',
    b'{"work_bytes": ' + b"9" * 5000 + b"}",
    b'{"work_bytes": -' + b"9" * 4000 + b"}",
    b'{"work_bytes": "100"}',
    b'{"work_bytes": 100, "items": 0.5}',
    b'{"work_bytes": -1}',
    b'{"work_bytes": 100, "pad": 1}',
    b'{"work_bytes": 100, "pad": "", "extra": 1}',
    b'{"work_bytes": 100, "pad": "\xff"}',
    json.dumps({"work_bytes": 100}).encode("utf-16"),
    b"[]",
    b"null",
]


@st.composite
def bodies(draw: st.DrawFn) -> tuple[bytes, bool | None]:
    """A body and whether it must be served (True), refused (False) or either (None)."""
    kind = draw(st.sampled_from(["good", "bad", "object", "value", "bytes"]))
    if kind == "good":
        return draw(good_bodies), True
    if kind == "bad":
        return draw(st.sampled_from(BAD_BODIES)), False
    if kind == "bytes":
        return draw(st.binary(max_size=200)), None
    text = draw(objects() if kind == "object" else values)
    encoding = draw(st.sampled_from(["utf-8", "utf-8", "utf-8-sig", "utf-16", "utf-8+ff"]))
    if encoding == "utf-8+ff":  # a byte that never occurs in UTF-8
        return text.encode() + b"\xff", False
    return text.encode(encoding), False if encoding == "utf-16" else None


metadata = st.one_of(
    st.none(),
    st.binary(max_size=64),
    st.just(request_metadata(routing_key="user-7")),
    st.binary(max_size=32).map(lambda key: encode_composite([(ROUTING_KEY, key)])),
)
interactions = st.sampled_from(["response", "stream", "channel", "fnf"])


def request(interaction: str, sid: int, body: bytes, meta: bytes | None) -> Frame:
    match interaction:
        case "response":
            return RequestResponse(stream_id=sid, data=body, metadata=meta)
        case "stream":
            return RequestStream(stream_id=sid, initial_n=1, data=body, metadata=meta)
        case "channel":
            return RequestChannel(
                stream_id=sid, initial_n=1, data=body, metadata=meta, complete=True
            )
    return RequestFnf(stream_id=sid, data=body, metadata=meta)


# ---------------------------------------------------------------- the property


def check_client_error(frame: Error) -> None:
    assert frame.error_code == ErrorCode.APPLICATION_ERROR, frame
    assert not frame.message.startswith(SERVER_FAULT_PREFIX), frame.message
    assert classify_error(frame.error_code, frame.message) == ("application", "server")
    assert any(word in frame.message for word in REQUEST_WORDS), frame.message
    assert len(frame.message) < 300, frame.message


@settings(
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@pytest.mark.slow
@given(bodies(), metadata, interactions)
def test_no_body_is_the_servers_fault(testbed, body_and_verdict, meta, interaction):
    body, served = body_and_verdict
    counts, log_sizes = testbed.counts(), testbed.log_sizes()
    frame = request(interaction, next(testbed.stream_ids), body, meta)
    if interaction == "fnf":
        testbed.client.send(frame)
        # Each server runs its work FIFO in one slot: once a request-response has been
        # answered by both (rr alternates), the fire-and-forget has been worked.
        for _ in SERVERS:
            probe = RequestResponse(stream_id=next(testbed.stream_ids), data=GOOD)
            (answer,) = testbed.exchange(probe)
            assert isinstance(answer, Payload), answer
    else:
        answers = testbed.exchange(frame)
        last = answers[-1]
        if isinstance(last, Error):
            check_client_error(last)
        if served is not None:
            assert isinstance(last, Payload) is served, (body[:200], answers)
    assert testbed.counts() == counts, "a backend was moved toward ejection"
    for name, size in log_sizes.items():
        with (testbed.logs / f"{name}.log").open() as log:
            log.seek(size)
            logged = log.read()
        assert "Traceback" not in logged and "work failed" not in logged, logged[-2000:]
