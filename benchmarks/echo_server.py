"""A minimal, fast RSocket responder for measuring the load generator itself.

``python benchmarks/echo_server.py --port 0`` answers every REQUEST_RESPONSE at once with the
work contract's response shape (``{"server": ID, "work_bytes": 0, ...}``) and does no
work, so a benchmark of the client measures the client, not the server (an rsocket-py
server tops out near 2.3k req/s sequential; docs/FIELD-NOTES.md, "Speeds"). ``--reject-every N`` answers
every Nth request with REJECTED and ``--hold-every N`` never answers every Nth request,
so tests can exercise the client's error and deadline paths against a real socket.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable

from lblab.errors import RemoteProtocolError
from lblab.procs import announce_ready
from lblab.wire.codec import NEED_DATA, FrameDecoder, encode_frame
from lblab.wire.codes import ErrorCode
from lblab.wire.frames import Error, Keepalive, Payload, RequestResponse


class EchoProtocol(asyncio.Protocol):
    def __init__(self, server_id: str, reject_every: int, hold_every: int) -> None:
        self.decoder = FrameDecoder()
        self.reply = json.dumps(
            {
                "server": server_id,
                "work_bytes": 0,
                "service_ms": 0.0,
                "queue_ms": 0.0,
                "inflight": 0,
            }
        ).encode()
        self.reject_every, self.hold_every = reject_every, hold_every
        self.seen = 0
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        out = []
        try:
            self.decoder.receive_data(data)
            while (frame := self.decoder.next_frame()) is not NEED_DATA:
                if isinstance(frame, RequestResponse):
                    self.seen += 1
                    if self.hold_every and self.seen % self.hold_every == 0:
                        continue
                    if self.reject_every and self.seen % self.reject_every == 0:
                        out.append(
                            encode_frame(
                                Error(
                                    stream_id=frame.stream_id,
                                    error_code=ErrorCode.REJECTED,
                                    message="echo: rejected on purpose",
                                )
                            )
                        )
                        continue
                    out.append(
                        encode_frame(
                            Payload(
                                stream_id=frame.stream_id, data=self.reply, next=True, complete=True
                            )
                        )
                    )
                elif isinstance(frame, Keepalive) and frame.respond:
                    out.append(encode_frame(Keepalive(respond=False, data=frame.data)))
        except RemoteProtocolError as exc:
            out.append(
                encode_frame(Error(stream_id=0, error_code=exc.error_code, message=str(exc)))
            )
            self.transport.write(b"".join(out))
            self.transport.close()
            return
        if out:
            self.transport.write(b"".join(out))


async def serve(
    protocol: Callable[[], asyncio.Protocol], host: str, port: int, name: str, **ready: str
) -> None:
    """Serve ``protocol`` on ``host:port`` until killed, after announcing the bound port
    as ``name`` (``lblab.procs.announce_ready``); ``http_echo_server.py`` serves this way too."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(protocol, host, port)
    announce_ready(name, **ready, port=server.sockets[0].getsockname()[1])
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--id", default="echo")
    parser.add_argument("--reject-every", type=int, default=0)
    parser.add_argument("--hold-every", type=int, default=0)
    args = parser.parse_args()
    import uvloop

    uvloop.run(
        serve(
            lambda: EchoProtocol(args.id, args.reject_every, args.hold_every),
            args.host,
            args.port,
            "echo",
            id=args.id,
        )
    )


if __name__ == "__main__":
    main()
