"""The balancer's admin HTTP port (``--admin-port``): metrics, status and runtime changes.

A deliberately small HTTP/1.1 server (one request per connection, ``Connection: close``)
on asyncio streams, off the forwarding path:

- ``GET /metrics``: Prometheus text format, per backend: in-flight, picks, errors,
  ejections, ties, completed, latency EWMA; node totals (clients, replays, timeouts...).
- ``GET /status``: JSON ``{"strategy", "options", "backends": [...], "clients", ...}``.
- ``PUT /strategy`` with ``{"name": "lc", "options": {...}}``: swap the strategy (fresh state).
- ``POST /backends`` with ``{"id": "s4", "address": "127.0.0.1:7004", "weight": 1}``: add one.
- ``DELETE /backends/<id>``: remove one (its in-flight requests finish; new ones go elsewhere).

Errors are JSON ``{"error": "..."}`` with 400 (bad input), 404 or 405.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING, Any

import orjson

from lblab.config import parse_hostport
from lblab.errors import ConfigError

if TYPE_CHECKING:
    from balancer.node import BalancerNode

log = logging.getLogger("lblab.balancer.admin")

MAX_HEADER_BYTES = 16 * 1024
MAX_BODY_BYTES = 64 * 1024
"""Admin requests are tiny JSON documents; anything bigger is refused (413)."""
READ_TIMEOUT_S = 5.0

_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Payload Too Large",
}


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


async def start_admin(node: BalancerNode, host: str, port: int) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            status, content_type, body = await asyncio.wait_for(
                _serve(node, reader), READ_TIMEOUT_S
            )
        except TimeoutError:
            status, content_type, body = 400, "application/json", _error("request timed out")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            writer.close()
            return
        head = (
            f"HTTP/1.1 {status} {_REASONS.get(status, '')}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        )
        writer.write(head.encode("ascii") + body)
        with contextlib.suppress(ConnectionError):
            await writer.drain()
        writer.close()

    return await asyncio.start_server(handle, host, port, limit=MAX_HEADER_BYTES)


def _error(message: str) -> bytes:
    return orjson.dumps({"error": message})


async def _serve(node: BalancerNode, reader: asyncio.StreamReader) -> tuple[int, str, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, _version = lines[0].split(" ", 2)
    except ValueError:
        return 400, "application/json", _error(f"malformed request line {lines[0]!r}")
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.strip().lower() == "content-length":
            try:
                length = int(value.strip())
            except ValueError:
                return 400, "application/json", _error("Content-Length is not an integer")
    if length > MAX_BODY_BYTES:
        return 413, "application/json", _error(f"body over {MAX_BODY_BYTES} bytes")
    body = await reader.readexactly(length) if length else b""
    path = target.split("?", 1)[0]
    try:
        return route(node, method, path, body)
    except HttpError as exc:
        return exc.status, "application/json", _error(str(exc))
    except ConfigError as exc:
        return 400, "application/json", _error(str(exc))


def route(node: BalancerNode, method: str, path: str, body: bytes) -> tuple[int, str, bytes]:
    """Dispatch one admin request; returns (status, content type, body)."""
    if path == "/metrics":
        _allow(method, "GET")
        return 200, "text/plain; version=0.0.4", metrics_text(node).encode()
    if path == "/status":
        _allow(method, "GET")
        return 200, "application/json", orjson.dumps(status(node))
    if path == "/strategy":
        _allow(method, "PUT")
        doc = _json_object(body)
        name = doc.get("name")
        options = doc.get("options") or {}
        if not isinstance(name, str) or not isinstance(options, dict):
            raise HttpError(400, 'expected {"name": "<strategy>", "options": {...}}')
        node.set_strategy(name, {str(k): str(v) for k, v in options.items()})
        return 200, "application/json", orjson.dumps(status(node))
    if path == "/backends":
        _allow(method, "POST")
        doc = _json_object(body)
        backend_id, address = doc.get("id"), doc.get("address")
        weight = doc.get("weight", 1)
        if not isinstance(backend_id, str) or not isinstance(address, str):
            raise HttpError(400, 'expected {"id": "s4", "address": "HOST:PORT", "weight": 1}')
        if not isinstance(weight, int | float) or isinstance(weight, bool):
            raise HttpError(400, f"weight must be a number, not {weight!r}")
        host, port = parse_hostport(address)
        node.add_backend(backend_id, host, port, float(weight))
        return 200, "application/json", orjson.dumps(status(node))
    if path.startswith("/backends/"):
        _allow(method, "DELETE")
        node.remove_backend(path[len("/backends/") :])
        return 200, "application/json", orjson.dumps(status(node))
    raise HttpError(404, f"no such endpoint {path}; try /metrics, /status, /strategy, /backends")


def _allow(method: str, allowed: str) -> None:
    if method != allowed:
        raise HttpError(405, f"use {allowed} here, not {method}")


def _json_object(body: bytes) -> dict[str, Any]:
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise HttpError(400, f"body is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise HttpError(400, "body must be a JSON object")
    return doc


def status(node: BalancerNode) -> dict[str, Any]:
    rows = node.pool.status()
    now = node.loop.time()
    for row in rows:
        backend_id = str(row["id"])
        backend = node.backends.get(backend_id)
        if backend is not None:
            row["address"] = backend.address.address
            row["connected"] = backend.conn is not None and not backend.conn.closed
        view = node.pool.get(backend_id)
        report = view.last_report
        row["last_report"] = (
            None
            if report is None or view.report_at is None
            else {
                "source": report.source,
                "age_s": round(now - view.report_at, 3),
                "cpu_util": report.cpu_util,
                "qps": report.qps,
            }
        )
        row["lease_remaining"] = view.lease_remaining
    return {
        "strategy": node.strategy.name,
        "options": node.strategy_options,
        "backends": rows,
        "clients": len(node.clients),
        "paused_clients": sum(1 for c in node.clients if c.blockers),
        "outstanding": node.pool.outstanding,
        **node.stats,
    }


def metrics_text(node: BalancerNode) -> str:
    """Prometheus exposition text (counters as ``_total``)."""
    out: list[str] = []

    def family(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> None:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} {kind}")
        out.extend(f"{name}{labels} {value:g}" for labels, value in samples)

    views = node.pool.views
    counters = node.pool.counters

    def per_backend(get: Any) -> list[tuple[str, float]]:
        return [(f'{{backend="{v.id}"}}', float(get(v))) for v in views]

    family(
        "lblab_balancer_inflight",
        "gauge",
        "Requests sent and not yet answered.",
        per_backend(lambda v: v.inflight),
    )
    family(
        "lblab_balancer_up",
        "gauge",
        "1 if the backend takes new requests.",
        per_backend(lambda v: v.available),
    )
    family(
        "lblab_balancer_picks_total",
        "counter",
        "Times the strategy picked the backend.",
        per_backend(lambda v: counters[v.id].picks),
    )
    family(
        "lblab_balancer_errors_total",
        "counter",
        "Failed outcomes (timeouts, errors, connection loss).",
        per_backend(lambda v: counters[v.id].errors),
    )
    family(
        "lblab_balancer_ejections_total",
        "counter",
        "Passive ejections.",
        per_backend(lambda v: counters[v.id].ejections),
    )
    family(
        "lblab_balancer_ties_total",
        "counter",
        "Picks where candidates tied on load.",
        per_backend(lambda v: counters[v.id].ties),
    )
    family(
        "lblab_balancer_completed_total",
        "counter",
        "Outcomes accounted.",
        per_backend(lambda v: v.completed),
    )
    family(
        "lblab_balancer_latency_ewma_ms",
        "gauge",
        "EWMA of balancer-observed latency to the first response frame.",
        [
            (f'{{backend="{v.id}"}}', v.latency_ewma_ms)
            for v in views
            if v.latency_ewma_ms is not None
        ],
    )
    family("lblab_balancer_clients", "gauge", "Open client connections.", [("", len(node.clients))])
    for name, value in node.stats.items():
        family(
            f"lblab_balancer_{name}_total", "counter", name.replace("_", " ") + ".", [("", value)]
        )
    return "\n".join(out) + "\n"
