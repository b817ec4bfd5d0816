"""A minimal, fast HTTP/1.1 echo server: the HTTP twin of ``echo_server.py``.

``python benchmarks/http_echo_server.py --port 0`` answers every request at once with
``200 OK`` and the request's own body (``Content-Length``, keep-alive, pipelined
requests answered in order) and does no work, so a benchmark of an HTTP client (Locust's
``FastHttpUser`` in ``bench_loadgen.py``) measures the client, not the server. With
``--delay-ms D`` it answers each request D ms after it arrived instead (a timer on its
event loop, as an lblab server's sleep), with a ``Server-Timing: total;dur=MS`` header
giving its own time for it, arrival on the event loop to the answer's write: what an
lblab server's ``server_ms`` is, so ``bench_instrument.py`` can take it out of an HTTP
load generator's latency (vegeta records the headers). Bodies
come only with ``Content-Length`` (no chunked encoding: the benchmark never sends it);
a request head over ``MAX_HEAD`` bytes or a body over ``MAX_BODY`` is refused (431, 413)
and the connection closed.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time

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
TIMED_HEAD = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nServer-Timing: total;dur=%.3f\r\n\r\n"


class HttpEchoProtocol(asyncio.Protocol):
    def __init__(self, delay_s: float = 0.0) -> None:
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.delay_s = delay_s

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
            if self.delay_s:
                # Timers of one delay fire in the order they were set: answers stay in order.
                body = bytes(buffer[end + 4 : total])
                loop = asyncio.get_running_loop()
                loop.call_later(self.delay_s, self.answer_late, body, time.perf_counter())
            else:
                out += (RESPONSE_HEAD % length, buffer[end + 4 : total])
            del buffer[:total]
        if end < 0 and len(buffer) >= MAX_HEAD:
            self.refuse(out, HEAD_TOO_LARGE)
        elif out:
            self.transport.write(b"".join(out))

    def answer_late(self, body: bytes, arrived: float) -> None:
        """Answer ``body``'s request that arrived at ``arrived``, saying how long it took."""
        assert self.transport is not None
        if not self.transport.is_closing():
            took_ms = 1000 * (time.perf_counter() - arrived)
            self.transport.write(TIMED_HEAD % (len(body), took_ms) + body)

    def refuse(self, out: list[bytes | bytearray], response: bytes) -> None:
        """Answer what came before, then ``response``, and close the connection."""
        assert self.transport is not None
        self.transport.write(b"".join([*out, response]))
        self.transport.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument(
        "--delay-ms", type=float, default=0.0, help="answer each request this long after it came"
    )
    args = parser.parse_args()
    if args.delay_ms < 0:
        parser.error(f"--delay-ms {args.delay_ms}: give 0 (answer at once) or more")
    import uvloop

    delay_s = args.delay_ms / 1000
    uvloop.run(serve(lambda: HttpEchoProtocol(delay_s), args.host, args.port, "http-echo"))


if __name__ == "__main__":
    main()
