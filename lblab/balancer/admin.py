"""The balancer's admin HTTP API (``--admin-host``, ``--admin-port``): metrics, status, changes.

A deliberately small HTTP/1.1 server (one request per connection, ``Connection: close``)
on asyncio streams, off the forwarding path:

- ``GET /metrics``: Prometheus text format, per backend: in-flight, picks, errors,
  ejections, ties, probes (sent, answered, timed out, failed), completed, latency EWMA;
  node totals (clients, replays, timeouts...).
- ``GET /status``: JSON ``{"strategy", "options", "backends": [...], "clients", ...}``.
- ``PUT /strategy`` with ``{"name": "lc", "options": {...}}``: swap the strategy (fresh state).
- ``POST /backends`` with ``{"id": "s4", "address": "127.0.0.1:7004", "weight": 1}``: add one.
- ``DELETE /backends/<id>``: remove one (its in-flight requests finish; new ones go elsewhere).

With ``--admin-token`` (or ``LBLAB_ADMIN_TOKEN``) every change (PUT, POST, DELETE) must
send ``Authorization: Bearer <token>``; reads stay open so Prometheus can scrape.
Errors are JSON ``{"error": "..."}``: 400 bad input, 401 no or wrong token, 404 unknown
path or backend, 405 wrong method, 408 request not complete within ``READ_TIMEOUT_S``,
411 chunked body, 413 body too big, 431 head too big; 503 when ``MAX_CONNECTIONS`` are
already open. A request can cost at most ``READ_TIMEOUT_S`` and ``MAX_HEADER_BYTES`` +
``MAX_BODY_BYTES`` of memory, so the admin port cannot starve the forwarding path.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import orjson

from lblab import collector, exposition
from lblab.balancer import input_checks
from lblab.balancer.node_counters import NODE_COUNTER_HELP
from lblab.balancer.pool import COUNTER_HELP
from lblab.config import check_weight, parse_hostport
from lblab.errors import ConfigError
from lblab.wire.auth import TokenCheck
from lblab.wire_asyncio import within

if TYPE_CHECKING:
    from lblab.balancer.node import BalancerNode, NodeSnapshot

log = logging.getLogger("lblab.balancer.admin")

MAX_HEADER_BYTES = 16 * 1024
MAX_HEADER_LINES = 64
MAX_BODY_BYTES = 64 * 1024
"""Admin requests are tiny JSON documents; anything bigger is refused (413)."""
READ_TIMEOUT_S = 5.0
WRITE_TIMEOUT_S = 5.0
LINGER_S = 1.0
LINGER_BYTES = 1024 * 1024
MAX_CONNECTIONS = 32
"""Admin connections served at once; more get 503 at once (a scraper needs one)."""
MAX_BACKENDS = 1000
JSON = "application/json"

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    411: "Length Required",
    413: "Payload Too Large",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
_TOKEN_CHARS = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""An HTTP token (RFC 9110): methods and header names."""
_VERSION = re.compile(r"HTTP/1\.[01]")
_SINGLE_HEADERS = frozenset({"content-length", "authorization", "transfer-encoding"})
_PORT_NAMES = {"port": "client (--port)", "agent_port": "agent", "admin_port": "admin"}


class HttpError(Exception):
    def __init__(self, status: int, message: str, headers: tuple[tuple[str, str], ...] = ()):
        super().__init__(message)
        self.status = status
        self.headers = headers


class _PeerGone(Exception):
    """The client closed before sending anything: nobody to answer."""


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()


async def start_admin(node: BalancerNode, host: str, port: int) -> asyncio.Server:
    active = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal active
        active += 1
        response: Response | None
        try:
            if active > MAX_CONNECTIONS:
                response = _error(503, "too many admin connections at once; retry soon")
            else:
                response = await _respond(node, reader, writer)
            if response is not None:
                await _send(writer, response)
                await _linger(reader, writer)
        finally:
            active -= 1
            writer.close()

    return await asyncio.start_server(handle, host, port, limit=MAX_HEADER_BYTES)


async def _respond(
    node: BalancerNode, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> Response | None:
    """Read one request and answer it; every failure becomes a status, never an escape."""
    try:
        try:
            request = await within(READ_TIMEOUT_S, read_request(reader, writer))
        except TimeoutError:
            raise HttpError(
                408, f"the request was not complete within {READ_TIMEOUT_S:g} s"
            ) from None
        return await route(node, request)
    except HttpError as exc:
        return _error(exc.status, str(exc), exc.headers)
    except ConfigError as exc:
        return _error(400, str(exc))
    except (_PeerGone, ConnectionError):
        return None
    except Exception:  # a task boundary: the admin must never take the balancer down
        log.exception("admin request failed")
        return _error(500, "internal error in the admin API; see the balancer's log")


async def _send(writer: asyncio.StreamWriter, response: Response) -> None:
    head = [f"HTTP/1.1 {response.status} {_REASONS.get(response.status, '')}"]
    head += [f"{name}: {value}" for name, value in response.headers]
    head += [
        f"Content-Type: {response.content_type}",
        f"Content-Length: {len(response.body)}",
        "Connection: close",
    ]
    with contextlib.suppress(ConnectionError, TimeoutError):
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("ascii") + response.body)
        await within(WRITE_TIMEOUT_S, writer.drain())


async def _linger(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Half-close, then discard what the client still sends (bounded in bytes and time):
    closing with unread input would reset the connection and could destroy the answer
    before the client reads it (e.g. after a 413 or 431)."""

    async def discard() -> None:
        left = LINGER_BYTES
        while left > 0 and (chunk := await reader.read(min(left, 65536))):
            left -= len(chunk)

    with contextlib.suppress(OSError, RuntimeError, TimeoutError):
        if writer.can_write_eof():
            writer.write_eof()
        await within(LINGER_S, discard())


def _error(status: int, message: str, headers: tuple[tuple[str, str], ...] = ()) -> Response:
    return Response(status, JSON, orjson.dumps({"error": message}), headers)


# ---------------------------------------------------------------- reading a request


async def read_request(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Request:
    """Parse one HTTP/1.x request (head and ``Content-Length`` body); ``HttpError`` if bad."""
    lines = await _read_head(reader)
    parts = lines[0].split(" ")
    if len(parts) != 3:
        raise HttpError(400, "the request line is not 'METHOD /path HTTP/1.1'")
    method, target, version = parts
    if not _TOKEN_CHARS.fullmatch(method) or not _VERSION.fullmatch(version):
        raise HttpError(400, "the request line is not 'METHOD /path HTTP/1.1'")
    if not target.startswith("/"):
        raise HttpError(400, f"the request target must be a path such as /status, not {target!r}")
    headers = _headers(lines[1:])
    if "transfer-encoding" in headers:
        raise HttpError(
            411, "send the body with Content-Length (Transfer-Encoding is not supported)"
        )
    length = _content_length(headers.get("content-length"))
    if length and headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
    try:
        body = await reader.readexactly(length)
    except asyncio.IncompleteReadError as exc:
        raise HttpError(
            400, f"the body ended after {len(exc.partial)} of its {length} bytes (Content-Length)"
        ) from None
    return Request(method, target.split("?", 1)[0], headers, body)


async def _read_head(reader: asyncio.StreamReader) -> list[str]:
    """The request line and header lines (CRLF or bare LF), bounded in bytes and lines."""
    lines: list[str] = []
    size = 0
    while True:
        try:
            raw = await reader.readline()
        except ValueError:  # one line over the stream limit
            raise HttpError(431, f"the request head is over {MAX_HEADER_BYTES} bytes") from None
        size += len(raw)
        if size > MAX_HEADER_BYTES or len(lines) > MAX_HEADER_LINES:
            raise HttpError(
                431,
                f"the request head is over {MAX_HEADER_BYTES} bytes or {MAX_HEADER_LINES} lines",
            )
        if not raw.endswith(b"\n"):
            if size == 0:
                raise _PeerGone
            raise HttpError(400, "the connection ended before the request head's blank line")
        line = raw.rstrip(b"\r\n")
        if not line:
            if lines:
                return lines
            continue  # RFC 9112 2.2: blank lines before the request line are ignored
        try:
            lines.append(line.decode("ascii"))
        except UnicodeDecodeError:
            raise HttpError(400, "the request head is not ASCII; percent-encode the path") from None


def _headers(lines: list[str]) -> dict[str, str]:
    headers: dict[str, str] = {}
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep or not _TOKEN_CHARS.fullmatch(name):
            raise HttpError(400, f"malformed header line {line[:80]!r}; write 'Name: value'")
        key = name.lower()
        if key in headers and key in _SINGLE_HEADERS:
            raise HttpError(400, f"header {name} is given twice")
        headers.setdefault(key, value.strip(" \t"))
    return headers


def _content_length(value: str | None) -> int:
    if value is None:
        return 0
    if not value.isascii() or not value.isdigit():
        raise HttpError(400, f"Content-Length must be a whole number of bytes, not {value[:40]!r}")
    if len(value) > 9 or int(value) > MAX_BODY_BYTES:
        raise HttpError(413, f"the body is over {MAX_BODY_BYTES} bytes; admin bodies are small")
    return int(value)


# ---------------------------------------------------------------- routing

Handler = Callable[["BalancerNode", Request], Awaitable[Response]]


async def route(node: BalancerNode, request: Request) -> Response:
    """Dispatch one parsed request: 404 unknown path, 405 wrong method, 401 if unauthorized."""
    path = request.path
    handler: Handler
    if path.startswith("/backends/"):
        method, handler = "DELETE", _delete_backend
    elif path in ROUTES:
        method, handler = ROUTES[path]
    else:
        raise HttpError(404, "no such endpoint; try /metrics, /status, /strategy, /backends")
    if request.method != method:
        raise HttpError(405, f"use {method} here, not {request.method}", (("Allow", method),))
    if method != "GET":
        authorize(node.config.admin_token, request.headers.get("authorization"))
    return await handler(node, request)


def authorize(token: str | None, header: str | None) -> None:
    """Check ``Authorization: Bearer <token>`` in constant time; no token configured: open."""
    if token is None:
        return
    challenge = (("WWW-Authenticate", 'Bearer realm="lblab-admin"'),)
    if header is None:
        raise HttpError(
            401,
            "this balancer's admin changes need its token: send 'Authorization: Bearer <token>' "
            f"(the balancer's --admin-token or {input_checks.TOKEN_ENV})",
            challenge,
        )
    scheme, _, given = header.partition(" ")
    if not TokenCheck(token).matches(given.strip()) or scheme.lower() != "bearer":
        raise HttpError(
            401,
            f"wrong admin token; send the balancer's --admin-token or {input_checks.TOKEN_ENV} "
            "as 'Authorization: Bearer <token>'",
            challenge,
        )


async def _get_metrics(node: BalancerNode, request: Request) -> Response:
    text = metrics_text(node.snapshot()) + collector.prometheus_text()
    return Response(200, "text/plain; version=0.0.4", text.encode())


async def _get_status(node: BalancerNode, request: Request) -> Response:
    return Response(200, JSON, orjson.dumps(status(node)))


async def _put_strategy(node: BalancerNode, request: Request) -> Response:
    doc = _json_object(request.body, {"name"}, {"options"}, '{"name": "lc", "options": {}}')
    name, options = doc["name"], doc.get("options") or {}
    if not isinstance(name, str):
        raise HttpError(400, f"name must be a strategy name (a string), not {name!r}")
    if not isinstance(options, dict):
        raise HttpError(400, 'options must be an object such as {"tie": "random"}')
    for key, value in options.items():
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise HttpError(400, f"options.{key} must be a string or a number, not {value!r}")
    values = {key: str(value) for key, value in options.items()}
    node.set_strategy(name, values)
    log.info("admin: strategy set to %s %r", name, values)
    return Response(200, JSON, orjson.dumps(status(node)))


async def _post_backend(node: BalancerNode, request: Request) -> Response:
    example = '{"id": "s4", "address": "127.0.0.1:7004", "weight": 1}'
    doc = _json_object(request.body, {"id", "address"}, {"weight"}, example)
    backend_id, address, weight = doc["id"], doc["address"], doc.get("weight", 1)
    if not isinstance(backend_id, str) or not isinstance(address, str):
        raise HttpError(400, f"id and address must be strings; send e.g. {example}")
    input_checks.check_backend_id(backend_id)
    if isinstance(weight, str):  # JSON: a number, not text that parses as one
        raise HttpError(400, f"weight must be a number, not {weight!r}")
    weight = check_weight(weight, "weight")
    host, port = parse_hostport(address, "address")
    input_checks.check_host(host, "address")
    if backend_id in node.backends:
        raise HttpError(400, f"backend {backend_id!r} is already in the pool")
    if len(node.backends) >= MAX_BACKENDS:
        raise HttpError(400, f"the pool already has {MAX_BACKENDS} backends; remove some first")
    own = {p: name for name, p in node.ports().items() if p is not None}
    if await input_checks.resolved_self_loop(host, port, own):
        raise HttpError(
            400,
            f"{address} is this balancer's own {_PORT_NAMES[own[port]]} port: every request "
            "would loop through it; give a server's address",
        )
    node.add_backend(backend_id, host, port, float(weight))
    log.info("admin: added backend %s at %s:%d, weight %g", backend_id, host, port, weight)
    return Response(200, JSON, orjson.dumps(status(node)))


async def _delete_backend(node: BalancerNode, request: Request) -> Response:
    try:
        backend_id = unquote(request.path[len("/backends/") :], errors="strict")
    except UnicodeDecodeError:
        raise HttpError(
            400, "the backend id in the path is not UTF-8 once percent-decoded"
        ) from None
    if backend_id not in node.backends:
        raise HttpError(
            404,
            f"no backend {backend_id!r} in the pool; have {', '.join(node.backends) or 'none'}",
        )
    node.remove_backend(backend_id)
    log.info("admin: removed backend %s", backend_id)
    return Response(200, JSON, orjson.dumps(status(node)))


ROUTES: dict[str, tuple[str, Handler]] = {
    "/metrics": ("GET", _get_metrics),
    "/status": ("GET", _get_status),
    "/strategy": ("PUT", _put_strategy),
    "/backends": ("POST", _post_backend),
}


def _json_object(
    body: bytes, required: set[str], optional: set[str], example: str
) -> dict[str, Any]:
    """The body as a JSON object with exactly the ``required`` and some ``optional`` keys."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise HttpError(400, f"the body is not UTF-8 JSON ({exc}); send e.g. {example}") from None
    if not isinstance(doc, dict):
        raise HttpError(400, f"the body must be a JSON object such as {example}")
    missing = sorted(required - doc.keys())
    unknown = sorted(doc.keys() - required - optional)
    if missing or unknown:
        problem = f"missing {', '.join(missing)}" if missing else f"unknown {', '.join(unknown)}"
        raise HttpError(400, f"{problem}; send e.g. {example}")
    return doc


# ---------------------------------------------------------------- views


def status(node: BalancerNode) -> dict[str, Any]:
    return node.snapshot().status()


def metrics_text(snapshot: NodeSnapshot) -> str:
    """Prometheus exposition text (counters as ``_total``) of one snapshot of the node:
    per backend its gauges and every counter the pool declares, then the node's own."""
    out: list[str] = []

    def family(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        out.extend(exposition.family(name, kind, help_text, samples))

    rows = snapshot.backends

    def per_backend(key: str) -> list[tuple[str, float]]:
        return [
            (f'{{backend="{exposition.label(r["id"])}"}}', float(r[key]))
            for r in rows
            if r[key] is not None
        ]

    family("lblab_balancer_inflight", "gauge", "Requests sent and not yet answered.",
           per_backend("inflight"))  # fmt: skip
    family("lblab_balancer_up", "gauge", "1 if the backend takes new requests.",
           per_backend("available"))  # fmt: skip
    family("lblab_balancer_held_bytes", "gauge",
           "Bytes of unfinished fragmented requests the clients hold on its connection.",
           per_backend("held_bytes"))  # fmt: skip
    for name, help_text in COUNTER_HELP.items():  # every counter the pool declares
        family(f"lblab_balancer_{name}_total", "counter", help_text, per_backend(name))
    family("lblab_balancer_completed_total", "counter", "Outcomes accounted.",
           per_backend("completed"))  # fmt: skip
    family(
        "lblab_balancer_latency_ewma_ms",
        "gauge",
        "EWMA of balancer-observed latency to the first response frame.",
        per_backend("latency_ewma_ms"),
    )
    family("lblab_balancer_clients", "gauge", "Open client connections.",
           [("", snapshot.clients)])  # fmt: skip
    for name, value in snapshot.counters.items():  # every counter the node declares
        family(f"lblab_balancer_{name}_total", "counter", NODE_COUNTER_HELP[name], [("", value)])
    strategy = exposition.label(snapshot.strategy)
    family(
        "lblab_balancer_strategy_decisions_total",
        "counter",
        "The current strategy's own counters of what it decided (its decisions in "
        "`lblab strategies`); they start at 0 when PUT /strategy replaces it.",
        [(f'{{strategy="{strategy}",decision="{exposition.label(name)}"}}', value)
         for name, value in snapshot.decisions.items()],
    )  # fmt: skip
    return "\n".join(out) + "\n"
