"""A minimal, fast HTTP/1.1 echo server: the HTTP twin of ``echo_server.py``.

``python benchmarks/http_echo_server.py --port 0`` answers every request at once with
``200 OK`` and the request's own body (``Content-Length``, keep-alive, pipelined
requests answered in order) and does no work, so a benchmark of an HTTP client (Locust's
``FastHttpUser`` in ``bench_loadgen.py``) measures the client, not the server. Bodies
come only with ``Content-Length`` (no chunked encoding: the benchmark never sends it);
a request head over ``MAX_HEAD`` bytes or a body over ``MAX_BODY`` is refused (431, 413)
and the connection closed.
"""

from __future__ import annotations

import argparse
import asyncio
import re

from echo_server import serve

MAX_HEAD = 16 * 1024
"""Largest request head (line and headers) we buffer: 16 KiB, nginx's largest default
header buffers are 4 x 8 KiB and this server only ever sees a few short headers."""
MAX_BODY = 1024 * 1024
"""Largest request body we buffer: the benchmark sends 100 B."""
CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)", re.IGNORECASE)
RESPONSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n"
HEAD_TOO_LARGE = b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\n\r\n"
BODY_TOO_LARGE = b"HTTP/1.1 413 Content Too Large\r\nContent-Length: 0\r\n\r\n"


class HttpEchoProtocol(asyncio.Protocol):
    def __init__(self) -> None:
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        assert self.transport is not None
        buffer = self.buffer
        buffer += data
        out: list[bytes | bytearray] = []
        while (end := buffer.find(b"\r\n\r\n", 0, MAX_HEAD)) >= 0:
            found = CONTENT_LENGTH.search(buffer, 0, end)
            length = int(found[1]) if found else 0
            if length > MAX_BODY:
                self.refuse(out, BODY_TOO_LARGE)
                return
            total = end + 4 + length
            if len(buffer) < total:
                break
            out += (RESPONSE_HEAD % length, buffer[end + 4 : total])
            del buffer[:total]
        if end < 0 and len(buffer) >= MAX_HEAD:
            self.refuse(out, HEAD_TOO_LARGE)
        elif out:
            self.transport.write(b"".join(out))

    def refuse(self, out: list[bytes | bytearray], response: bytes) -> None:
        """Answer what came before, then ``response``, and close the connection."""
        assert self.transport is not None
        self.transport.write(b"".join([*out, response]))
        self.transport.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    import uvloop

    uvloop.run(serve(HttpEchoProtocol, args.host, args.port, "http-echo"))


if __name__ == "__main__":
    main()
