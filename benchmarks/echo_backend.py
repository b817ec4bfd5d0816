"""A tiny rsocket-py echo backend for the balancer's benchmark and integration tests.

``python benchmarks/echo_backend.py --id e1 --port 0 [--delay-ms D] [--fragment-size N]``
prints ``lblab-ready {...}`` and serves every interaction model over rsocket-py 0.4.20
(a real, independent RSocket implementation, so the balancer is tested against a peer
it did not write):

- request-response: echoes the data; the response metadata is the backend id. Data
  ``stats`` answers JSON counters instead (requests, fnf, metadata_push, rejected).
- request-stream: data ``N`` (digits) gives N items ``<id>:<i>``, honouring REQUEST_N.
- request-channel: echoes each inbound payload; completes when the requester does.
- fire-and-forget and metadata-push: counted.
- SIGTERM: drain, like ``lblab server``: new requests get REJECTED, in-flight ones
  finish, then the process exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reactivestreams.subscriber import DefaultSubscriber
from rsocket.error_codes import ErrorCode
from rsocket.exceptions import RSocketProtocolError
from rsocket.payload import Payload
from rsocket.request_handler import BaseRequestHandler
from rsocket.rsocket_server import RSocketServer
from rsocket.streams.stream_from_async_generator import StreamFromAsyncGenerator
from rsocket.transports.tcp import TransportTCP

from lblab.procs import announce_ready

READ_BUFFER_BYTES = 65536
"""rsocket-py reads 1024 bytes at a time by default; 64 KiB is 2.4x faster for 1 MB (docs/FIELD-NOTES.md, "rsocket-py 0.4.20 pitfalls")."""


class EchoState:
    def __init__(self, server_id: str, delay_s: float) -> None:
        self.id = server_id
        self.delay_s = delay_s
        self.draining = False
        self.inflight = 0
        self.counts = {"requests": 0, "fnf": 0, "metadata_push": 0, "rejected": 0, "streams": 0}
        self.idle = asyncio.Event()
        self.idle.set()

    def admit(self) -> None:
        if self.draining:
            self.counts["rejected"] += 1
            raise RSocketProtocolError(ErrorCode.REJECTED, f"{self.id} is draining")
        self.inflight += 1
        self.idle.clear()

    def done(self) -> None:
        self.inflight -= 1
        if not self.inflight:
            self.idle.set()


def handler_factory(state: EchoState) -> type[BaseRequestHandler]:
    class Handler(BaseRequestHandler):
        async def request_response(self, payload: Payload) -> asyncio.Future[Payload]:
            future: asyncio.Future[Payload] = asyncio.get_running_loop().create_future()
            if payload.data == b"stats":
                future.set_result(
                    Payload(json.dumps({**state.counts, "inflight": state.inflight}).encode())
                )
                return future
            state.admit()
            state.counts["requests"] += 1
            response = Payload(payload.data, state.id.encode())
            if state.delay_s:

                def answer() -> None:
                    state.done()
                    if not future.done():
                        future.set_result(response)

                asyncio.get_running_loop().call_later(state.delay_s, answer)
            else:
                state.done()
                future.set_result(response)
            return future

        async def request_stream(self, payload: Payload) -> StreamFromAsyncGenerator:
            state.admit()
            state.counts["streams"] += 1
            n = int(payload.data) if payload.data and payload.data.isdigit() else 3

            async def items():  # type: ignore[no-untyped-def]
                # rsocket-py stops pulling after the item flagged complete, so the
                # generator never finishes by itself: account it done before that item.
                ended = False
                try:
                    for i in range(n):
                        if i == n - 1:
                            ended = True
                            state.done()
                        yield Payload(f"{state.id}:{i}".encode()), i == n - 1
                finally:
                    if not ended:
                        state.done()

            return StreamFromAsyncGenerator(items)

        async def request_channel(self, payload: Payload):  # type: ignore[no-untyped-def]
            state.admit()
            state.counts["streams"] += 1
            queue: asyncio.Queue[Payload | None] = asyncio.Queue()
            queue.put_nowait(payload)

            class Inbound(DefaultSubscriber):
                def on_subscribe(self, subscription):  # type: ignore[no-untyped-def]
                    super().on_subscribe(subscription)
                    subscription.request(1 << 20)

                def on_next(self, value, is_complete=False):  # type: ignore[no-untyped-def]
                    queue.put_nowait(value)
                    if is_complete:
                        queue.put_nowait(None)

                def on_complete(self) -> None:
                    queue.put_nowait(None)

                def on_error(self, exception: Exception) -> None:
                    queue.put_nowait(None)

            async def echo():  # type: ignore[no-untyped-def]
                ended = False
                try:
                    while (item := await queue.get()) is not None:
                        yield Payload(item.data, state.id.encode()), False
                    ended = True
                    state.done()
                    yield Payload(b"end", state.id.encode()), True
                finally:
                    if not ended:
                        state.done()

            return StreamFromAsyncGenerator(echo), Inbound()

        async def request_fire_and_forget(self, payload: Payload) -> None:
            state.counts["fnf"] += 1

        async def on_metadata_push(self, payload: Payload) -> None:
            state.counts["metadata_push"] += 1

    return Handler


async def serve(args: argparse.Namespace) -> None:
    state = EchoState(args.id, args.delay_ms / 1000.0)
    handler = handler_factory(state)
    connections: list[RSocketServer] = []

    def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(
            RSocketServer(
                TransportTCP(reader, writer, read_buffer_size=READ_BUFFER_BYTES),
                handler_factory=handler,
                fragment_size_bytes=args.fragment_size,
            )
        )

    server = await asyncio.start_server(session, args.host, args.port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    announce_ready(
        "server", id=args.id, port=server.sockets[0].getsockname()[1], cpu_limit="none", cgroup=None
    )
    await stop.wait()
    state.draining = True
    server.close()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(state.idle.wait(), 10)
    for conn in connections:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(conn.close(), 1)  # rsocket-py's close can wait on a dead peer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--id", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--fragment-size", type=int, default=None)
    args = parser.parse_args()
    import uvloop

    uvloop.run(serve(args))


if __name__ == "__main__":
    main()
