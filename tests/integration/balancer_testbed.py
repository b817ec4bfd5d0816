"""Helpers for the balancer's integration tests: real processes on loopback, rsocket-py clients.

Every process binds port 0 and is found through its ``lblab-ready`` line; every wait
has a deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

from rsocket.helpers import single_transport_provider
from rsocket.payload import Payload
from rsocket.rsocket_client import RSocketClient
from rsocket.transports.tcp import TransportTCP

from lblab.procs import Child, lblab_command, spawn, stop
from lblab.servers.slowdown import Control, control_path, request_control
from lblab.wire.codec import NEED_DATA, FrameDecoder, encode_frame
from lblab.wire.codes import HEADER, ErrorCode
from lblab.wire.frames import Error, Frame, RequestResponse, Setup
from lblab.wire.metadata import APPLICATION_JSON, COMPOSITE_METADATA

ROOT = Path(__file__).resolve().parents[2]
ECHO_BACKEND = ROOT / "benchmarks" / "echo_backend.py"
WORK = b'{"work_bytes": 100, "pad": ""}'
"""A small request to ``lblab server``."""


def start_echo(name: str, log_dir: Path, *extra: str) -> Child:
    argv = [sys.executable, str(ECHO_BACKEND), "--id", name, "--port", "0", *extra]
    return spawn(name, argv, log_path=log_dir / f"{name}.log")


def start_server(name: str, log_dir: Path, *extra: str) -> Child:
    port = () if "--port" in extra else ("--port", "0")
    argv = lblab_command("server", "--id", name, *port, *extra)
    return spawn(name, argv, log_path=log_dir / f"{name}.log")


def start_balancer(
    backends: Sequence[Child],
    log_dir: Path,
    *extra: str,
    name: str = "balancer",
    env: dict[str, str] | None = None,
) -> Child:
    args = ["balancer", "--port", "0", "--admin-port", "0", "--agent-port", "0"]
    for b in backends:
        args += ["--backend", f"{b.ready['id']}=127.0.0.1:{b.ready['port']}"]
    return spawn(name, lblab_command(*args, *extra), log_path=log_dir / f"{name}.log", env=env)


@contextlib.contextmanager
def processes(*children: Child) -> Iterator[list[Child]]:
    """Stop every child (SIGTERM, then SIGKILL) when the block ends."""
    kids = list(children)
    try:
        yield kids
    finally:
        for child in reversed(kids):
            stop(child, timeout=5)


def three_servers(log_dir: Path) -> list[Child]:
    """The strategies' testbed: s1 slowed by 30 ms a request, s2 and s3 at full speed."""
    return [
        start_server("s1", log_dir, "--delay-ms", "30"),
        start_server("s2", log_dir),
        start_server("s3", log_dir),
    ]


async def served_counts(port: int, n: int, concurrency: int) -> Counter[str]:
    """``n`` requests through the balancer at ``port``, ``concurrency`` at a time, on one
    connection; how many each server answered."""
    counts: Counter[str] = Counter()
    async with rsocket_client(port) as client:
        remaining = n

        async def worker() -> None:
            nonlocal remaining
            while remaining > 0:
                remaining -= 1
                reply = await asyncio.wait_for(client.request_response(Payload(WORK)), 10)
                counts[json.loads(reply.data)["server"]] += 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return counts


@contextlib.contextmanager
def balancer_over_servers(
    log_dir: Path, *servers: tuple[str, ...], strategy: str = "rr"
) -> Iterator[tuple[str, int]]:
    """``lblab server`` processes (each given as its id, then its extra flags) behind
    one ``lblab balancer`` on loopback; yields the balancer's address, stops them all."""
    with processes() as kids:
        kids += [start_server(sid, log_dir, *extra) for sid, *extra in servers]
        kids.append(start_balancer(list(kids), log_dir, "--strategy", strategy))
        yield "127.0.0.1", int(kids[-1].ready["port"])


@contextlib.asynccontextmanager
async def rsocket_client(
    port: int,
    *,
    fragment_size: int | None = None,
    metadata_mime: str = COMPOSITE_METADATA,
    data_mime: str = APPLICATION_JSON,
) -> AsyncIterator[RSocketClient]:
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 5)
    transport = TransportTCP(reader, writer, read_buffer_size=65536)
    async with RSocketClient(
        single_transport_provider(transport),
        data_encoding=data_mime,
        metadata_encoding=metadata_mime,
        fragment_size_bytes=fragment_size,
    ) as client:
        yield client


def admin(child: Child, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """One admin HTTP request to the balancer; (status, parsed body)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        f"http://127.0.0.1:{child.ready['admin_port']}{path}", data=data, method=method
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            raw = resp.read()
            status = resp.status
    except urllib.error.HTTPError as exc:
        raw, status = exc.read(), exc.code
    text = raw.decode()
    return status, (json.loads(text) if text.startswith(("{", "[")) else text)


def metric(child: Child, name: str, labels: str = "") -> float:
    """A sample of ``lblab_balancer_<name>`` (with ``labels``, e.g. ``backend="s1"``) in
    the balancer's ``/metrics``."""
    code, text = admin(child, "GET", "/metrics")
    assert code == 200, text
    sample = f"lblab_balancer_{name}{{{labels}}} " if labels else f"lblab_balancer_{name} "
    line = next((x for x in text.splitlines() if x.startswith(sample)), None)
    assert line is not None, f"no {sample.strip()} in /metrics"
    return float(line.split()[-1])


def status_of(child: Child) -> dict[str, Any]:
    code, body = admin(child, "GET", "/status")
    assert code == 200, body
    return body


def tell(server: Child, control: Control) -> None:
    """Send ``control`` and wait (up to 2 s) until the server has read it."""
    request_control(server.pid, control)
    deadline = time.monotonic() + 2.0
    while control_path(server.pid).exists():
        assert time.monotonic() < deadline, "the server did not read its control file"
        time.sleep(0.01)


def wait_for(predicate: Any, timeout: float, what: str, interval: float = 0.05) -> Any:
    """Poll ``predicate`` until it returns a truthy value or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


# ---------------------------------------------------------------- raw frames


def client_setup(**overrides: Any) -> Setup:
    fields: dict[str, Any] = {
        "keepalive_ms": 10_000,
        "max_lifetime_ms": 60_000,
        "metadata_mime": COMPOSITE_METADATA,
        "data_mime": APPLICATION_JSON,
    }
    fields.update(overrides)
    return Setup(**fields)


def raw_frame(stream_id: int, frame_type: int, flags: int, body: bytes = b"") -> bytes:
    """A frame built byte by byte, flags as given (for frames the codec would not write)."""
    frame = HEADER.pack(stream_id, frame_type << 10 | flags) + body
    return len(frame).to_bytes(3, "big") + frame


def assert_a_refusal_ends_in_a_fin(port: int) -> None:
    """A client may send its first request right behind its SETUP. When the SETUP is
    refused, closing with that request unread made the kernel answer with a TCP reset;
    rsocket-js 1.0 dies on the ECONNRESET unhandled. The ERROR comes first, then a FIN."""
    refused = encode_frame(client_setup(resume_token=b"t"))
    request = encode_frame(RequestResponse(stream_id=1, data=b"x" * 1_000_000))
    for _ in range(3):
        data, ending = how_a_refusal_ends(port, refused, request)
        decoder = FrameDecoder()
        decoder.receive_data(data)
        frame = decoder.next_frame()
        assert isinstance(frame, Error) and frame.error_code == ErrorCode.UNSUPPORTED_SETUP, frame
        assert ending == "fin"


def how_a_refusal_ends(port: int, first: bytes, then: bytes) -> tuple[bytes, str]:
    """Send ``first`` (refused by the peer) with ``then`` right behind it, from another
    thread so that a reset cannot block the send; read until the connection ends.

    What was read and how it ended: ``"fin"`` (an orderly close) or ``"reset"`` (the
    peer closed with our bytes unread, and the kernel answered with a TCP reset)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)

    def send() -> None:
        with contextlib.suppress(OSError):  # the peer may close before all of it is sent
            sock.sendall(first + then)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
        ending = "fin"
    except ConnectionResetError:
        ending = "reset"
    finally:
        sender.join(5)
        sock.close()
    return data, ending


class RawClient:
    """A blocking socket speaking frames through ``lblab.wire`` (for bad-input tests)."""

    def __init__(self, port: int, rcvbuf: int | None = None) -> None:
        self.sock = socket.socket()
        if rcvbuf is not None:  # before connect, so the TCP window is small from the start
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(5)
        self.sock.connect(("127.0.0.1", port))
        self.decoder = FrameDecoder()

    def send(self, *frames: Frame) -> None:
        self.sock.sendall(b"".join(encode_frame(f) for f in frames))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self, timeout: float = 5.0) -> Frame | None:
        """The next frame, or None once the peer closed the connection."""
        deadline = time.monotonic() + timeout
        while True:
            frame = self.decoder.next_frame()
            if frame is not NEED_DATA:
                return frame  # type: ignore[return-value]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError("no frame from the balancer in time")
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            self.decoder.receive_data(chunk)

    def closed(self, timeout: float = 5.0) -> bool:
        """True once the peer closes (frames before that are skipped)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.recv(deadline - time.monotonic()) is None:
                return True
        return False

    def close(self) -> None:
        self.sock.close()
