"""The least a per-request RSocket frame router does, in Python on uvloop.

``python benchmarks/frame_router.py HOST:PORT [HOST:PORT ...]`` connects once to each
backend (with its own SETUP), listens on a free loopback port, prints
its ``lblab-ready`` line (with ``"port": N``), and for each client request frame picks the next backend in
turn, rewrites the stream id, remembers (client, client stream id) under the backend's
stream id, and writes the frame at once; each answer frame goes back the same way. It
walks frames with lblab's own ``FrameProtocol``. Nothing else: no checks, no lifecycle,
no deadlines, no replay copy, no write batching, no fragments, keepalives or errors.
``bench_balancer.py`` measures it beside lblab's balancer, a bare relay and HAProxy:
the gap between it and lblab is what lblab's per-request rules cost.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from relay import listen_forever, run

from lblab.balancer.framing import FrameProtocol
from lblab.errors import RemoteProtocolError
from lblab.wire.codec import encode_frame
from lblab.wire.codes import U32
from lblab.wire.frames import Setup
from lblab.wire.metadata import APPLICATION_JSON, COMPOSITE_METADATA

MAX_FRAME_BYTES = 16 * 1024 * 1024
_pack_u32 = U32.pack_into


class Backend(FrameProtocol):
    """One backend connection: its stream table and next stream id."""

    def __init__(self) -> None:
        super().__init__(MAX_FRAME_BYTES)
        self.streams: dict[int, tuple[Client, int]] = {}
        self.next_sid = 1

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        setup = Setup(
            keepalive_ms=30_000,
            max_lifetime_ms=120_000,
            metadata_mime=COMPOSITE_METADATA,
            data_mime=APPLICATION_JSON,
        )
        transport.write(encode_frame(setup))  # type: ignore[attr-defined]

    def on_frame(self, pos: int, length: int, stream_id: int, frame_type: int, flags: int) -> bool:
        entry = self.streams.pop(stream_id, None)
        if entry is not None:
            client, client_sid = entry
            frame = self.buf[pos : pos + 3 + length]
            _pack_u32(frame, 3, client_sid)
            client.transport.write(frame)  # type: ignore[union-attr]
        return True

    def protocol_error(self, exc: RemoteProtocolError) -> None:
        raise exc


class Client(FrameProtocol):
    """One client connection: each request frame to the next backend in turn."""

    turn: itertools.cycle[Backend]

    def __init__(self) -> None:
        super().__init__(MAX_FRAME_BYTES)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def on_frame(self, pos: int, length: int, stream_id: int, frame_type: int, flags: int) -> bool:
        if stream_id == 0:  # SETUP, KEEPALIVE: this router keeps its own
            return True
        backend = next(self.turn)
        sid = backend.next_sid
        backend.next_sid = sid + 2
        backend.streams[sid] = (self, stream_id)
        frame = self.buf[pos : pos + 3 + length]
        _pack_u32(frame, 3, sid)
        backend.transport.write(frame)  # type: ignore[union-attr]
        return True

    def protocol_error(self, exc: RemoteProtocolError) -> None:
        raise exc


async def serve(addresses: list[tuple[str, int]]) -> None:
    loop = asyncio.get_running_loop()
    backends = [(await loop.create_connection(Backend, h, p))[1] for h, p in addresses]
    Client.turn = itertools.cycle(backends)
    await listen_forever(Client)


if __name__ == "__main__":
    run(serve)
