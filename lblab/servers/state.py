"""What one server process knows across its connections: load, drain state, load reports.

``inflight`` counts requests (and open streams) admitted and not finished, over all
connections: that is what ``--max-inflight`` bounds and what reports carry. A stream or
channel holds one unit for its whole life. Reports (``LoadReport``):

- ``response`` (in response metadata): ``inflight`` after this request left, its own
  ``queue_ms`` and ``service_ms``, and ``est_wait_ms`` for a new arrival.
- ``push`` (METADATA_PUSH on arrival): ``inflight`` including the arrival, the mean
  ``service_ms`` and ``est_wait_ms``.

``est_wait_ms = mean_service_ms * max(0, inflight - workers + 1) / workers``: the work
queued ahead of a new request spread over the service slots (0 while a slot is free).
``mean_service_ms`` is an EWMA over completions (alpha 0.2). ``qps`` is completions per
second over the last full one-second window, ``eps`` the requests refused (REJECTED) or
failed by the server's own fault per second over the same window.

The state talks to its connections through the ``ConnectionPort`` protocol (pushing
reports, granting leases, closing at shutdown); it never imports ``servers.protocol``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from lblab.admission import MAX_CONNECTIONS, MAX_PENDING_SETUP, SETUP_TIMEOUT_S, Admission
from lblab.failures import retry_after_note
from lblab.loadreport import LoadReport, ReportSource, RifLatency
from lblab.servers.behaviour import TokenBucket
from lblab.servers.service import WorkResult, WorkService
from lblab.wire.codec import encode_frame
from lblab.wire.connection import SetupPolicy
from lblab.wire.frames import MetadataPush
from lblab.wire.metadata import LOAD_REPORT, encode_composite

SERVICE_EWMA_ALPHA = 0.2
QPS_WINDOW_S = 1.0


class ConnectionPort(Protocol):
    """What the state asks of a connection (``servers.protocol.ServerConnection``)."""

    def write_raw(self, data: bytes) -> None:
        """Send these frame bytes."""

    def grant_lease(self) -> None:
        """Send a new LEASE of this connection's share of the free capacity."""

    def capacity_freed(self) -> None:
        """A request ended: renew the lease if its unused part fell low."""

    def close_with_error(self, code: int, message: str) -> None:
        """End the connection with a connection ERROR of ``code``."""


def report_metadata(report: LoadReport) -> bytes:
    """Composite metadata holding one load report entry."""
    return encode_composite([(LOAD_REPORT, report.to_json())])


class ServerState:
    def __init__(
        self,
        server_id: str,
        max_inflight: int,
        service: WorkService,
        *,
        setup_timeout_s: float = SETUP_TIMEOUT_S,
        max_connections: int = MAX_CONNECTIONS,
        max_pending_setup: int = MAX_PENDING_SETUP,
    ) -> None:
        self.id = server_id
        self.max_inflight = max_inflight
        self.service = service
        self.setup_policy = SetupPolicy(
            who=f"server {server_id}", setup_timeout_s=setup_timeout_s, lease=True
        )
        """What a SETUP must be: version 1.x, any MIME types; LEASE granted (protocol.py)."""
        self.admission = Admission(max_connections, max_pending_setup, f"server {server_id}")
        self.inflight = 0
        self.limiter: TokenBucket | None = None
        """The ``reject`` timeline event's rate limit, on ``time.monotonic``'s clock."""
        self.draining = False
        self.drained = asyncio.Event()
        self.connections: set[ConnectionPort] = set()
        self.push_connections: set[ConnectionPort] = set()
        self.lease_connections: set[ConnectionPort] = set()
        self.completed = 0
        self.rejected = 0
        self.bad_requests = 0
        """Requests refused for their own content (``servers.work.BadRequest``)."""
        self.failed = 0
        """Requests whose work failed by this server's own fault (``server fault: ``)."""
        self.probes = 0
        """Probes answered (``prequal``; not requests: never admitted, never in flight)."""
        self.rif_latency = RifLatency()
        """Latency by arrival RIF of the request-responses served, for probe answers."""
        self.mean_service_ms: float | None = None
        self.qps = 0.0
        self.eps = 0.0
        self._window_start = time.monotonic()
        self._window_count = 0
        self._window_errors = 0
        """``rejected + failed`` when the window started."""

    # ------------------------------------------------------------ admission

    def refusal(self) -> str | None:
        """Why a new request must be REJECTED now, or None to admit it."""
        if self.draining:
            return f"server {self.id} is draining (shutting down); retry elsewhere"
        if self.inflight >= self.max_inflight:
            return (
                f"server {self.id} is at its max-inflight of {self.max_inflight}; retry elsewhere"
            )
        limiter = self.limiter
        if limiter is not None and not limiter.take(time.monotonic()):
            return (
                f"server {self.id} is over its rate limit of {limiter.rate:g} requests/s; "
                f"retry elsewhere{retry_after_note(limiter.wait_s())}"
            )
        return None

    def admit(self) -> None:
        self.inflight += 1
        if self.push_connections:
            frame = encode_frame(MetadataPush(metadata=report_metadata(self.report("push"))))
            for conn in self.push_connections:
                conn.write_raw(frame)

    def release(self) -> None:
        """One admitted request or stream is over (answered, failed, cancelled or lost)."""
        self.inflight -= 1
        for conn in self.lease_connections:
            conn.capacity_freed()
        if self.draining and self.inflight == 0:
            self.drained.set()

    def record(self, result: WorkResult) -> None:
        """One unit of work completed: update the service-time mean and the qps window."""
        self.completed += 1
        mean = self.mean_service_ms
        self.mean_service_ms = (
            result.service_ms
            if mean is None
            else mean + SERVICE_EWMA_ALPHA * (result.service_ms - mean)
        )
        self._window_count += 1
        now = time.monotonic()
        if now - self._window_start >= QPS_WINDOW_S:
            errors = self.rejected + self.failed
            self.qps = self._window_count / (now - self._window_start)
            self.eps = (errors - self._window_errors) / (now - self._window_start)
            self._window_start, self._window_count, self._window_errors = now, 0, errors

    def begin_drain(self) -> None:
        self.draining = True
        for conn in self.lease_connections:
            conn.grant_lease()
        if self.inflight == 0:
            self.drained.set()

    # ------------------------------------------------------------ reports and leases

    def est_wait_ms(self) -> float:
        # Before the first completion the fixed --delay-ms is the service time known a
        # priori (Ingram's servers announce theirs): estimating 0 would make every
        # arrival on a fresh server report an empty queue, and dynamic-immediate would
        # send it every request of a batch (measured: 9 of 10 to one server).
        mean = self.mean_service_ms
        if mean is None:
            mean = self.service.delay_ms
        workers = self.service.workers
        return mean * max(0, self.inflight - workers + 1) / workers

    def report(self, source: ReportSource, result: WorkResult | None = None) -> LoadReport:
        return LoadReport(
            server=self.id,
            source=source,
            t=time.time(),
            qps=round(self.qps, 3),
            eps=round(self.eps, 3),
            inflight=self.inflight,
            queue_ms=None if result is None else round(result.queue_ms, 3),
            service_ms=round(result.service_ms, 3)
            if result is not None
            else (None if self.mean_service_ms is None else round(self.mean_service_ms, 3)),
            est_wait_ms=round(self.est_wait_ms(), 3),
        )

    def lease_share(self) -> int:
        """Requests one lease connection may send: free capacity split over lease connections."""
        if self.draining:
            return 0
        free = max(0, self.max_inflight - self.inflight)
        n = max(1, len(self.lease_connections))
        return max(free // n, 1 if free else 0)
