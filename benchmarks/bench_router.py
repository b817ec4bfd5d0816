"""The balancer's per-request Python work alone, in-process: no sockets, no event loop.

``uv run python benchmarks/bench_router.py [--requests 200000] [--rounds 3] [--strategy rr]``

Drives the real ``Router`` (with the real ``Pool``, ``Lifecycle`` and strategy) the way
the connections do: a client's REQUEST_RESPONSE frame into ``Router.open_stream``, then
the backend's PAYLOAD, copied with the client's stream id, into ``Router.backend_frame``
(as ``BackendConnection.on_frame`` does), one request at a time. The ports are the
least that satisfies ``balancer/streams.py``'s protocols: sends are appended and cleared.
Beside it, the minimal router's per-request work (``benchmarks/frame_router.py``: pick
the next backend, remember the stream in a dict, rewrite the stream id, copy the frame;
then the way back) in the same rounds, so the ratio says what lblab's rules cost in
Python with warm caches. Microseconds per request, medians over interleaved rounds,
with no cyclic collection, as the balancer runs none under load.
On sockets at 1 in flight the same work costs more (each request runs on cold caches):
``bench_balancer.py`` measures that.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lblab.balancer.pool import BackendSpec, Pool
from lblab.balancer.router import Router
from lblab.balancer.strategies.registry import make_strategy
from lblab.balancer.streams import ProbeStream, Stream, StreamIds
from lblab.wire.codec import encode_frame
from lblab.wire.codes import U32
from lblab.wire.frames import Payload, RequestResponse

_pack_u32 = U32.pack_into
BACKENDS = ("s1", "s2", "s3")
REQUEST = bytearray(encode_frame(RequestResponse(stream_id=1, data=b"x" * 100)))
ANSWER = bytearray(encode_frame(Payload(stream_id=2, data=b"x" * 100, next=True, complete=True)))


class Client:
    """A client connection's surface for the router: sends are kept and cleared."""

    def __init__(self) -> None:
        self.address: str | None = "127.0.0.1"
        self.composite_metadata = False
        self.streams: dict[int, Stream] = {}
        self.sent: list[bytes | bytearray] = []

    def send(self, frame: bytes | bytearray) -> None:
        self.sent.append(frame)

    def send_error(self, sid: int, code: int, message: str) -> None:
        raise AssertionError(f"error {code:#x} on stream {sid}: {message}")

    def block(self, reason: object) -> None: ...

    def unblock(self, reason: object) -> None: ...


class Backend:
    """A backend connection's surface for the router."""

    def __init__(self, backend_id: str) -> None:
        self.backend_id = backend_id
        self.streams: dict[int, Stream] = {}
        self.probes: dict[int, ProbeStream] = {}
        self.ids = StreamIds(2)
        self.draining = False
        self.retired = False
        self.written: list[bytes | bytearray] = []

    def write(self, frame: bytes | bytearray, client: object) -> None:
        self.written.append(frame)

    def send(self, frame: bytes | bytearray) -> None:
        self.written.append(frame)

    def send_cancel(self, sid: int) -> None: ...

    def close(self) -> None: ...


class Directory:
    def __init__(self, backends: dict[str, Backend]) -> None:
        self.backends = backends

    def connection(self, backend_id: str) -> Backend | None:
        return self.backends.get(backend_id)

    def connection_missing(self, backend_id: str) -> None:
        raise AssertionError(f"{backend_id} has no connection")


def lblab_path(strategy: str, n: int) -> float:
    """Seconds for ``n`` requests through the real router, one at a time."""
    backends = {b: Backend(b) for b in BACKENDS}
    pool = Pool([BackendSpec(b, 1.0) for b in BACKENDS], make_strategy(strategy), now=0.0)
    router = Router(pool, Directory(backends), timeout_s=10.0)  # type: ignore[arg-type]
    client = Client()
    length = len(REQUEST) - 3
    answer_length = len(ANSWER)
    request_type, answer_type, answer_flags = 0x04, 0x0A, ANSWER[8] | (ANSWER[7] & 3) << 8
    open_stream, backend_frame = router.open_stream, router.backend_frame
    t0 = time.perf_counter()
    for i in range(n):
        now = i * 1e-4
        sid = 2 * i + 1
        _pack_u32(REQUEST, 3, sid)
        open_stream(client, REQUEST, 0, length, sid, request_type, 0, now)  # type: ignore[arg-type]
        stream = client.streams[sid]
        frame = ANSWER[:answer_length]
        _pack_u32(frame, 3, stream.client_sid)
        backend_frame(stream, frame, answer_type, answer_flags, now + 5e-5)
        client.sent.clear()
        stream.backend.written.clear()  # type: ignore[union-attr]
    elapsed = time.perf_counter() - t0
    if pool.outstanding or client.streams:
        raise AssertionError("requests left in flight: the benchmark drove the router wrongly")
    return elapsed


def minimal_path(strategy: str, n: int) -> float:
    """Seconds for ``n`` requests of ``benchmarks/frame_router.py``'s per-request work."""
    backends = [Backend(b) for b in BACKENDS]
    tables: dict[str, dict[int, tuple[Client, int]]] = {b.backend_id: {} for b in backends}
    next_sid = dict.fromkeys(tables, 2)
    turn = itertools.cycle(backends)
    client = Client()
    length = len(REQUEST)
    t0 = time.perf_counter()
    for i in range(n):
        sid = 2 * i + 1
        backend = next(turn)
        bsid = next_sid[backend.backend_id]
        next_sid[backend.backend_id] = bsid + 2
        tables[backend.backend_id][bsid] = (client, sid)
        frame = REQUEST[:length]
        _pack_u32(frame, 3, bsid)
        backend.written.append(frame)
        owner, client_sid = tables[backend.backend_id].pop(bsid)
        answer = ANSWER[:]
        _pack_u32(answer, 3, client_sid)
        owner.sent.append(answer)
        owner.sent.clear()
        backend.written.clear()
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--strategy", default="rr")
    args = parser.parse_args()
    if args.requests < 1 or args.rounds < 1:
        raise SystemExit("--requests and --rounds: give 1 or more")
    paths: dict[str, Callable[[str, int], float]] = {
        "lblab's router": lblab_path,
        "minimal router": minimal_path,
    }
    us: dict[str, list[float]] = {name: [] for name in paths}
    # The balancer runs no cyclic collection under load (``lblab.collector.settle`` raises
    # the young threshold to 10,000; its /metrics count none over bench_balancer.py's
    # cells). Driven from this loop, the same path triggered a young collection every
    # ~350 requests at CPython's default threshold (about 0.6 us a request, charged to
    # the router) and still some at 10,000, so the collector is off while rounds run.
    gc.collect()
    gc.disable()
    for _ in range(args.rounds):
        for name, path in paths.items():
            us[name].append(1e6 * path(args.strategy, args.requests) / args.requests)
    medians = {name: statistics.median(v) for name, v in us.items()}
    print(
        f"{args.requests:,} request-responses per round, {args.rounds} interleaved rounds, "
        f"strategy {args.strategy}; us per request (median, range):"
    )
    for name, values in us.items():
        print(f"  {name:<16} {medians[name]:6.2f}  ({min(values):.2f}-{max(values):.2f})")
    ratio = medians["lblab's router"] / medians["minimal router"]
    print(f"  lblab / minimal  {ratio:6.2f}x")


if __name__ == "__main__":
    main()
