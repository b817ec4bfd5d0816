"""The JSON-work server as a real process on loopback, driven by rsocket-py and raw frames.

rsocket-py (the field's client) checks compliance; a raw ``lblab.wire`` client checks
what rsocket-py hides: REQUEST_N and CANCEL, METADATA_PUSH, LEASE, SETUP errors.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from pathlib import Path

import orjson
import pytest
from rsocket.awaitable.awaitable_rsocket import AwaitableRSocket
from rsocket.exceptions import RSocketProtocolError
from rsocket.helpers import single_transport_provider
from rsocket.payload import Payload as RPayload
from rsocket.rsocket_client import RSocketClient
from rsocket.streams.stream_from_generator import StreamFromGenerator
from rsocket.transports.tcp import TransportTCP

from lblab.failures import SERVER_FAULT_PREFIX
from lblab.loadreport import LoadReport
from lblab.procs import Child, lblab_command, spawn, stop
from lblab.wire.codec import NEED_DATA, FrameDecoder, encode_frame
from lblab.wire.codes import ErrorCode
from lblab.wire.frames import (
    Cancel,
    Error,
    Frame,
    Keepalive,
    Lease,
    MetadataPush,
    Payload,
    RequestChannel,
    RequestFnf,
    RequestN,
    RequestResponse,
    RequestStream,
    Setup,
)
from lblab.wire.metadata import APPLICATION_JSON, COMPOSITE_METADATA, LOAD_REPORT, find_entry

MAX_INFLIGHT = 8
FRAME_TIMEOUT_S = 10.0


# ---------------------------------------------------------------- helpers


def start_server(log_dir: Path, *args: str) -> Child:
    return spawn(
        "server",
        lblab_command("server", "--id", "s1", "--port", "0", *args),
        ready_timeout=20,
        log_path=log_dir / "server.log",
    )


@contextlib.contextmanager
def running_server(log_dir: Path, *args: str) -> Iterator[Child]:
    child = start_server(log_dir, *args)
    try:
        yield child
    finally:
        stop(child, timeout=10)


def work(work_bytes: int, pad: int = 0, **extra: object) -> bytes:
    return json.dumps({"work_bytes": work_bytes, "pad": "x" * pad, **extra}).encode()


@contextlib.asynccontextmanager
async def rsocket_client(
    port: int, setup: dict[str, object] | None = None, **options: object
) -> AsyncIterator[RSocketClient]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    transport = TransportTCP(reader, writer, read_buffer_size=65536)
    client = RSocketClient(
        single_transport_provider(transport),
        data_encoding=APPLICATION_JSON,
        metadata_encoding=COMPOSITE_METADATA,
        setup_payload=RPayload(orjson.dumps(setup)) if setup is not None else None,
        **options,  # type: ignore[arg-type]
    )
    async with client:
        yield client


class WireClient:
    """A raw RSocket client on lblab.wire: send frames, await frames with a deadline."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.decoder = FrameDecoder()
        self.pending: deque[Frame] = deque()

    @classmethod
    async def connect(
        cls,
        port: int,
        *,
        reports: tuple[str, ...] = (),
        lease: bool = False,
        then: tuple[Frame, ...] = (),
    ) -> WireClient:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        client = cls(reader, writer)
        setup = Setup(
            keepalive_ms=30_000,
            max_lifetime_ms=90_000,
            metadata_mime=COMPOSITE_METADATA,
            data_mime=APPLICATION_JSON,
            data=orjson.dumps({"client": "lblab-balancer", "reports": list(reports)}),
            lease=lease,
        )
        client.send(setup, *then)  # SETUP and the first requests in one segment
        return client

    def send(self, *frames: Frame) -> None:
        self.writer.write(b"".join(encode_frame(f) for f in frames))

    async def next(self, timeout: float = FRAME_TIMEOUT_S) -> Frame:
        deadline = time.monotonic() + timeout
        while not self.pending:
            data = await asyncio.wait_for(self.reader.read(65536), deadline - time.monotonic())
            if not data:
                raise EOFError("the server closed the connection")
            self.decoder.receive_data(data)
            while (frame := self.decoder.next_frame()) is not NEED_DATA:
                self.pending.append(frame)  # type: ignore[arg-type]
        return self.pending.popleft()

    async def next_where(self, match: Callable[[Frame], bool]) -> Frame:
        """The next frame that matches, skipping LEASE and METADATA_PUSH frames only."""
        while True:
            frame = await self.next()
            if match(frame):
                return frame
            assert isinstance(frame, Lease | MetadataPush), f"unexpected {frame}"

    async def probe(self, sid: int, after: Sequence[Frame] = ()) -> dict[str, object]:
        """Round-trip a tiny request; everything the server sent before it comes first.
        ``after``: frames sent ahead of it in the same write, so the server reads them
        and the probe together, however long this process is off its CPU."""
        self.send(*after, RequestResponse(stream_id=sid, data=work(0)))
        frame = await self.next_where(lambda f: not isinstance(f, Lease | MetadataPush))
        assert isinstance(frame, Payload) and frame.stream_id == sid, f"before the probe: {frame}"
        return json.loads(frame.data)

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()


def body(payload: RPayload | Payload) -> dict[str, object]:
    return json.loads(bytes(payload.data))


# ---------------------------------------------------------------- a plain server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Child]:
    with running_server(
        tmp_path_factory.mktemp("server"), "--max-inflight", str(MAX_INFLIGHT)
    ) as child:
        yield child


def test_ready_line_follows_the_contract(server: Child) -> None:
    ready = server.ready
    assert ready["role"] == "server" and ready["id"] == "s1"
    assert ready["port"] > 0 and ready["pid"] == server.pid
    assert ready["cpu_limit"] == "none" and ready["cgroup"] is None


def test_response_carries_the_contract_fields(server: Child) -> None:
    async def scenario() -> tuple[dict[str, object], object]:
        async with rsocket_client(server.ready["port"]) as client:
            reply = await client.request_response(RPayload(work(10_000, pad=100)))
            return body(reply), reply.metadata

    reply, metadata = asyncio.run(scenario())
    assert set(reply) == {
        "server", "work_bytes", "service_ms", "queue_ms", "server_ms", "inflight"
    }  # fmt: skip
    assert reply["server"] == "s1" and reply["work_bytes"] == 10_000
    assert reply["service_ms"] > 0 and reply["queue_ms"] >= 0 and reply["inflight"] == 0
    # Its whole time holds its queue and work, and the hand-back to the event loop.
    assert reply["server_ms"] >= reply["queue_ms"] + reply["service_ms"] - 0.002  # rounded
    assert not metadata  # no load report unless the SETUP asks for one


@pytest.mark.parametrize(
    ("request_body", "message"),
    [
        (b"{oops", "not valid JSON"),
        (b'{"pad": ""}', "work_bytes is missing"),
        (b'{"work_bytes": -5}', "work_bytes must be >= 0, got -5"),
        (b'{"work_bytes": "many"}', "work_bytes must be an integer"),
        (b'{"work_bytes": 100000000000}', "exceeds this server's cap"),
        (b"[" * 5000 + b"]" * 5000, "nests arrays or objects deeper than this server parses"),
    ],
)
def test_bad_requests_get_application_errors_and_the_server_keeps_serving(
    server: Child, request_body: bytes, message: str
) -> None:
    async def scenario() -> dict[str, object]:
        async with rsocket_client(server.ready["port"]) as client:
            with pytest.raises(RuntimeError) as info:  # rsocket-py's APPLICATION_ERROR
                await client.request_response(RPayload(request_body))
            assert message in str(info.value)
            assert SERVER_FAULT_PREFIX not in str(info.value)  # the client's error
            return body(await client.request_response(RPayload(work(100))))

    assert asyncio.run(scenario())["work_bytes"] == 100


def test_request_stream_sends_the_requested_items(server: Child) -> None:
    async def scenario() -> list[RPayload]:
        async with rsocket_client(server.ready["port"]) as client:
            return await AwaitableRSocket(client).request_stream(RPayload(work(1000, items=5)))

    items = [body(p) for p in asyncio.run(scenario())]
    assert [item["item"] for item in items] == [1, 2, 3, 4, 5]
    assert all(item["work_bytes"] == 1000 for item in items)


def test_request_stream_honours_request_n_and_cancel(server: Child) -> None:
    async def scenario() -> None:
        client = await WireClient.connect(server.ready["port"])
        client.send(RequestStream(stream_id=1, initial_n=2, data=work(1000, items=10)))
        for expected in (1, 2):
            frame = await client.next()
            assert isinstance(frame, Payload) and frame.stream_id == 1 and not frame.complete
            assert body(frame)["item"] == expected
        # One worker serves FIFO: a third item produced without credit would come first.
        assert (await client.probe(3))["inflight"] == 1  # the stream still holds its slot
        client.send(RequestN(stream_id=1, n=1))
        frame = await client.next()
        assert isinstance(frame, Payload) and body(frame)["item"] == 3
        client.send(Cancel(stream_id=1))
        assert (await client.probe(5))["inflight"] == 0  # cancelled: slot released, no item 4
        await client.close()

    asyncio.run(scenario())


def test_fire_and_forget_does_the_work_without_an_answer(server: Child) -> None:
    async def scenario() -> dict[str, object]:
        client = await WireClient.connect(server.ready["port"])
        fnf = (
            RequestFnf(stream_id=1, data=b"{bad json"),  # dropped, logged at most
            RequestFnf(stream_id=3, data=work(1_000_000)),
        )
        reply = await client.probe(5, after=fnf)
        await client.close()
        return reply

    reply = asyncio.run(scenario())
    # The probe queued behind the 1 MB of work (~30 ms on a free core) on the one worker.
    # All three frames go in one write: sent one by one, a busy machine could hold this
    # process off its CPU between them until the work was nearly done.
    assert reply["queue_ms"] > 5


def test_request_channel_answers_each_inbound_item(server: Child) -> None:
    async def scenario() -> list[Frame]:
        client = await WireClient.connect(server.ready["port"])
        client.send(RequestChannel(stream_id=1, initial_n=10, data=work(100)))
        grant = await client.next_where(lambda f: isinstance(f, RequestN))
        assert isinstance(grant, RequestN) and grant.stream_id == 1 and grant.n >= 2
        client.send(
            Payload(stream_id=1, data=work(200), next=True),
            Payload(stream_id=1, data=work(300), next=True, complete=True),
        )
        frames = [await client.next() for _ in range(4)]
        await client.close()
        return frames

    *answers, end = asyncio.run(scenario())
    assert [body(f)["work_bytes"] for f in answers] == [100, 200, 300]  # type: ignore[arg-type]
    assert isinstance(end, Payload) and end.complete and not end.next


def test_request_channel_through_rsocket_py(server: Child) -> None:
    def items():  # type: ignore[no-untyped-def]
        yield RPayload(work(20)), False
        yield RPayload(work(30)), True

    async def scenario() -> list[RPayload]:
        async with rsocket_client(server.ready["port"]) as client:
            return await AwaitableRSocket(client).request_channel(
                RPayload(work(10)), StreamFromGenerator(items)
            )

    assert [body(p)["work_bytes"] for p in asyncio.run(scenario())] == [10, 20, 30]


def test_fragmented_requests_are_reassembled(server: Child) -> None:
    async def scenario() -> dict[str, object]:
        async with rsocket_client(server.ready["port"], fragment_size_bytes=1024) as client:
            return body(await client.request_response(RPayload(work(5000, pad=50_000))))

    assert asyncio.run(scenario())["work_bytes"] == 5000


def test_load_report_in_response_metadata_when_setup_asks(server: Child) -> None:
    async def scenario() -> RPayload:
        setup = {"client": "lblab-balancer", "reports": ["response"]}
        async with rsocket_client(server.ready["port"], setup) as client:
            return await client.request_response(RPayload(work(10_000)))

    reply = asyncio.run(scenario())
    entry = find_entry(bytes(reply.metadata), LOAD_REPORT)
    assert entry is not None
    report = LoadReport.from_json(entry)
    assert report.source == "response" and report.server == "s1"
    assert report.service_ms == body(reply)["service_ms"]
    assert report.inflight == 0 and report.est_wait_ms == 0
    assert abs(report.t - time.time()) < 60


def test_push_report_on_arrival_when_setup_asks(server: Child) -> None:
    async def scenario() -> tuple[Frame, Frame]:
        client = await WireClient.connect(server.ready["port"], reports=("push",))
        client.send(RequestResponse(stream_id=1, data=work(1000)))
        frames = await client.next(), await client.next()
        await client.close()
        return frames

    push, answer = asyncio.run(scenario())
    assert isinstance(push, MetadataPush)
    report = LoadReport.from_json(find_entry(push.metadata, LOAD_REPORT) or b"")
    assert report.source == "push" and report.inflight == 1
    assert isinstance(answer, Payload) and answer.metadata is None  # "response" not asked


def test_lease_sized_to_capacity_and_enforced(server: Child) -> None:
    burst = tuple(
        RequestResponse(stream_id=2 * i + 1, data=work(100)) for i in range(MAX_INFLIGHT + 2)
    )

    async def scenario() -> tuple[Frame, list[Frame]]:
        client = await WireClient.connect(server.ready["port"], lease=True, then=burst)
        lease = await client.next()
        answers = [await client.next_where(lambda f: isinstance(f, Payload | Error)) for _ in burst]
        await client.close()
        return lease, answers

    lease, answers = asyncio.run(scenario())
    assert isinstance(lease, Lease) and lease.number_of_requests == MAX_INFLIGHT
    assert lease.ttl_ms > 0
    rejected = [f for f in answers if isinstance(f, Error)]
    assert len(rejected) == 2 and all(f.error_code == ErrorCode.REJECTED for f in rejected)
    assert all("lease exhausted" in f.message for f in rejected)
    assert sum(isinstance(f, Payload) for f in answers) == MAX_INFLIGHT


def test_rsocket_py_honouring_leases_gets_served(server: Child) -> None:
    async def scenario() -> dict[str, object]:
        async with rsocket_client(server.ready["port"], honor_lease=True) as client:
            return body(await asyncio.wait_for(client.request_response(RPayload(work(10))), 10))

    assert asyncio.run(scenario())["work_bytes"] == 10


def test_a_bad_first_frame_closes_only_that_connection(server: Child) -> None:
    async def scenario() -> Frame:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.ready["port"])
        client = WireClient(reader, writer)
        client.send(RequestResponse(stream_id=1, data=work(10)))
        error = await client.next()
        with pytest.raises(EOFError):
            await client.next()
        good = await WireClient.connect(server.ready["port"])
        assert (await good.probe(1))["server"] == "s1"
        await good.close()
        return error

    error = asyncio.run(scenario())
    assert isinstance(error, Error) and error.stream_id == 0
    assert error.error_code == ErrorCode.INVALID_SETUP and "must be SETUP" in error.message


def test_a_client_that_vanishes_mid_request_leaves_no_load_behind(server: Child) -> None:
    async def scenario() -> dict[str, object]:
        gone = await WireClient.connect(
            server.ready["port"],
            then=tuple(RequestResponse(stream_id=2 * i + 1, data=work(300_000)) for i in range(3)),
        )
        await gone.close()
        client = await WireClient.connect(server.ready["port"])
        reply = await client.probe(1)  # FIFO: runs after whatever of the three still ran
        await client.close()
        return reply

    assert asyncio.run(scenario())["inflight"] == 0
    assert server.alive()


def test_keepalive_is_answered(server: Child) -> None:
    async def scenario() -> Frame:
        client = await WireClient.connect(server.ready["port"])
        client.send(Keepalive(respond=True, data=b"ping"))
        frame = await client.next()
        await client.close()
        return frame

    frame = asyncio.run(scenario())
    assert isinstance(frame, Keepalive) and not frame.respond and frame.data == b"ping"


# ---------------------------------------------------------------- service slots


def test_workers_serve_slow_requests_concurrently_and_reject_beyond_max_inflight(
    tmp_path: Path,
) -> None:
    args = ("--workers", "4", "--delay-ms", "400", "--max-inflight", "4")

    async def scenario(port: int) -> tuple[float, list[object], float]:
        async with rsocket_client(port) as client:
            start = time.perf_counter()
            futures = [client.request_response(RPayload(work(1000))) for _ in range(4)]
            with pytest.raises(RSocketProtocolError) as info:
                await client.request_response(RPayload(work(1000)))
            assert info.value.error_code.value == ErrorCode.REJECTED
            assert "max-inflight of 4" in (info.value.data or "")
            rejected_after = time.perf_counter() - start
            replies = await asyncio.gather(*futures)
            return time.perf_counter() - start, [body(r) for r in replies], rejected_after

    with running_server(tmp_path, *args) as child:
        elapsed, replies, rejected_after = asyncio.run(scenario(child.ready["port"]))
    assert rejected_after < 0.3  # REJECTED at once, not after the slow ones
    assert all(r["service_ms"] >= 400 for r in replies)  # type: ignore[index]
    assert 0.4 <= elapsed < 1.0  # four 400 ms requests overlapped: ~0.4 s, not 1.6 s


def test_delay_with_one_worker_serves_fifo(tmp_path: Path) -> None:
    async def scenario(port: int) -> list[dict[str, object]]:
        client = await WireClient.connect(port)
        client.send(*(RequestResponse(stream_id=2 * i + 1, data=work(10)) for i in range(4)))
        frames = [await client.next() for _ in range(4)]
        await client.close()
        assert [f.stream_id for f in frames] == [1, 3, 5, 7]  # answered in arrival order
        return [body(f) for f in frames]  # type: ignore[arg-type]

    with running_server(tmp_path, "--workers", "1", "--delay-ms", "100") as child:
        replies = asyncio.run(scenario(child.ready["port"]))
    for k, reply in enumerate(replies):
        assert reply["service_ms"] >= 100
        assert reply["queue_ms"] == pytest.approx(100 * k, abs=60)


# ---------------------------------------------------------------- drain


def test_sigterm_drains_in_flight_rejects_new_and_exits_0(tmp_path: Path) -> None:
    child = start_server(tmp_path, "--workers", "2", "--delay-ms", "600")

    async def scenario() -> list[Frame]:
        port = child.ready["port"]
        watcher = await WireClient.connect(port, lease=True)  # draining grants a lease of 0
        assert isinstance(await watcher.next(), Lease)
        client = await WireClient.connect(port, reports=("push",))
        client.send(
            RequestResponse(stream_id=1, data=work(100)),
            RequestResponse(stream_id=3, data=work(100)),
        )
        for _ in range(2):  # a push report per arrival: both are in the server
            assert isinstance(await client.next(), MetadataPush)
        child.popen.terminate()
        while not (
            isinstance(lease := await watcher.next(), Lease) and lease.number_of_requests == 0
        ):
            pass
        client.send(RequestResponse(stream_id=5, data=work(100)))
        frames = []
        with contextlib.suppress(EOFError):
            while True:
                frames.append(await client.next())
        await client.close()
        await watcher.close()
        return frames

    try:
        frames = asyncio.run(scenario())
        assert child.popen.wait(timeout=10) == 0
    finally:
        stop(child, timeout=5)
    by_stream = {f.stream_id: f for f in frames}
    rejected = by_stream[5]
    assert isinstance(rejected, Error) and rejected.error_code == ErrorCode.REJECTED
    assert "draining" in rejected.message
    assert isinstance(by_stream[1], Payload) and isinstance(by_stream[3], Payload)  # finished
    closing = [f for f in frames if isinstance(f, Error) and f.stream_id == 0]
    assert [f.error_code for f in closing] == [ErrorCode.CONNECTION_CLOSE]
