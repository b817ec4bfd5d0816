"""The balancer's ``GET /status`` as Prometheus text: the agents' CPU and the strategy.

The balancer's own ``/metrics`` has its counters per backend but neither the CPU the
agents report nor the running strategy; ``/status`` (JSON) has both. This exporter
fetches ``/status`` on every scrape (nothing cached, no thread of its own) and answers:

- ``lblab_status_up``: 1 if the balancer answered, else 0 (and nothing else);
- ``lblab_status_strategy{strategy}``: 1 for the strategy running now;
- ``lblab_status_report_cpu_util{backend,source}``: CPU of the backend's last load
  report, a fraction of the server's own allowance (1 = saturated); ``source`` is
  ``agent`` for the agents' samples, ``response`` or ``push`` for the servers' own;
- ``lblab_status_report_qps{backend,source}``, ``lblab_status_report_age_seconds{backend,source}``.

A backend without a report yet has no samples. Only the last report per backend is
seen, so a scrape every few seconds samples the agents (which report at ``--interval``,
0.25 s by default); the run's full CPU record is ``cpu.parquet``.

    uv run python -m lblab.infra.monitoring.status_exporter --balancer 127.0.0.1:9100 --port 9101
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import urllib.error
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from lblab.config import parse_hostport
from lblab.errors import ConfigError
from lblab.exposition import family, label
from lblab.procs import announce_ready

log = logging.getLogger("lblab.status_exporter")

FETCH_TIMEOUT_S = 3.0
"""Deadline of one ``/status`` request; Prometheus' default scrape timeout is 10 s."""
_REPORT_FIELDS = (
    ("cpu_util", "report_cpu_util", "CPU of the last load report (fraction of the allowance)."),
    ("qps", "report_qps", "Requests per second in the last load report."),
    ("age_s", "report_age_seconds", "Seconds since the backend's last load report."),
)


def _family(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> list[str]:
    return family(f"lblab_status_{name}", kind, help_text, samples)


def metrics_text(status: dict[str, Any] | None) -> str:
    """Prometheus text of one ``/status`` answer (None: the balancer did not answer)."""
    up = _family("up", "gauge", "1 if the balancer's /status answered.", [("", int(bool(status)))])
    if not status:
        return "\n".join(up) + "\n"
    out = up + _family(
        "strategy",
        "gauge",
        "1 for the strategy the balancer runs now.",
        [(f'{{strategy="{label(status.get("strategy"))}"}}', 1)],
    )
    reports = [
        (str(b.get("id")), b["last_report"])
        for b in status.get("backends") or []
        if isinstance(b, dict) and isinstance(b.get("last_report"), dict)
    ]
    for key, name, help_text in _REPORT_FIELDS:
        samples = [
            (f'{{backend="{label(backend)}",source="{label(r.get("source"))}"}}', float(r[key]))
            for backend, r in reports
            if isinstance(r.get(key), int | float) and math.isfinite(r[key])
        ]
        out += _family(name, "gauge", help_text, samples)
    return "\n".join(out) + "\n"


def fetch_status(url: str, timeout: float = FETCH_TIMEOUT_S) -> dict[str, Any] | None:
    """The balancer's ``/status`` JSON, or None (logged) when it does not answer."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            body = json.loads(resp.read())
    except (OSError, ValueError) as exc:  # URLError, timeouts and refusals are OSErrors
        log.warning("%s did not answer: %s", url, exc)
        return None
    return body if isinstance(body, dict) else None


def make_server(
    host: str, port: int, fetch: Callable[[], dict[str, Any] | None]
) -> ThreadingHTTPServer:
    """An HTTP server answering ``GET /metrics`` with ``metrics_text(fetch())``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404, "only /metrics is served here")
                return
            body = metrics_text(fetch()).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug(format, *args)

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--balancer", required=True, help="HOST:PORT of the balancer's admin API")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=9101, help="port to listen on (0: any)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    try:
        host, port = parse_hostport(args.balancer, "--balancer")
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}/status"
    try:
        server = make_server(args.host, args.port, lambda: fetch_status(url))
    except OSError as exc:
        print(f"error: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    bound = int(server.server_address[1])
    log.info("serving http://%s:%d/metrics from %s", args.host, bound, url)
    announce_ready("status-exporter", port=bound, balancer=url)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
