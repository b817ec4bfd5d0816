"""A bare uvloop byte relay in Python: the floor of the balancer's runtime.

``python benchmarks/relay.py HOST:PORT [HOST:PORT ...]`` listens on a free loopback port,
prints its ``lblab-ready`` line (with ``"port": N``) and pins each client connection to one backend in
turn, as HAProxy's TCP mode does, copying bytes both ways with no parsing: no frames, no
stream ids, no per-request choice. What it costs per request is what Python on uvloop
costs before any balancing logic runs (``bench_balancer.py`` measures it beside lblab
and HAProxy).
"""

from __future__ import annotations

import asyncio
import itertools
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lblab.config import parse_hostport
from lblab.errors import ConfigError
from lblab.procs import announce_ready

BUFFER_BYTES = 256 * 1024


class Pipe(asyncio.BufferedProtocol):
    """One side of a relayed connection: what it reads, its peer writes."""

    def __init__(self) -> None:
        self.buf = bytearray(BUFFER_BYTES)
        self.view = memoryview(self.buf)
        self.peer: Pipe | None = None
        self.transport: asyncio.Transport | None = None
        self.early: list[bytes] = []
        """What arrived before the peer connected."""
        self.connecting: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def get_buffer(self, sizehint: int) -> memoryview:
        return self.view

    def buffer_updated(self, nbytes: int) -> None:
        peer = self.peer
        if peer is None or peer.transport is None:
            self.early.append(bytes(self.buf[:nbytes]))
        else:
            peer.transport.write(self.buf[:nbytes])

    def connection_lost(self, exc: Exception | None) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()

    def join(self, peer: Pipe) -> None:
        self.peer, peer.peer = peer, self
        assert peer.transport is not None
        for chunk in self.early:
            peer.transport.write(chunk)
        self.early = []


async def serve(backends: list[tuple[str, int]]) -> None:
    loop = asyncio.get_running_loop()
    turn = itertools.cycle(backends)

    class Front(Pipe):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)
            self.connecting = loop.create_task(self.connect(*next(turn)))

        async def connect(self, host: str, port: int) -> None:
            try:
                _, back = await loop.create_connection(Pipe, host, port)
            except OSError:
                if self.transport is not None:
                    self.transport.close()
                return
            self.join(back)

    await listen_forever(Front)


async def listen_forever(protocol: Callable[[], asyncio.BaseProtocol]) -> None:
    """Serve ``protocol`` on a free loopback port, announce it, and never return."""
    server = await asyncio.get_running_loop().create_server(protocol, "127.0.0.1", 0)
    announce_ready("reference", port=server.sockets[0].getsockname()[1])
    await asyncio.Event().wait()


def run(serve: Callable[[list[tuple[str, int]]], Awaitable[None]]) -> None:
    """``serve`` the backends named on the command line (``HOST:PORT ...``) on uvloop."""
    try:
        backends = [parse_hostport(a, "backend") for a in sys.argv[1:]]
    except ConfigError as exc:
        raise SystemExit(f"{exc}\nusage: {sys.argv[0]} HOST:PORT [HOST:PORT ...]") from None
    if not backends:
        raise SystemExit(f"usage: {sys.argv[0]} HOST:PORT [HOST:PORT ...]")
    uvloop.run(serve(backends))


if __name__ == "__main__":
    run(serve)
