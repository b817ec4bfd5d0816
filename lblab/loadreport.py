"""A server's load as reported to the balancer.

One value type for every path a report travels: the agent's sample stream (source
``agent``), the load report a server puts in response metadata (``response``) and the
estimate a server pushes when a request arrives (``push``). Fields a path does not know
stay ``None``. Encoded as compact JSON under ``lblab.wire.metadata.LOAD_REPORT``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

import orjson

from lblab.errors import RemoteProtocolError

ReportSource = Literal["agent", "response", "push"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadReport:
    server: str
    source: ReportSource
    t: float
    """Sender's wall clock (epoch seconds) when measured."""
    cpu_util: float | None = None
    """Fraction of the server's own CPU allowance in use (1.0 = saturated)."""
    qps: float | None = None
    """Requests served per second over the last interval."""
    eps: float | None = None
    """Errors per second over the same interval as ``qps`` (ORCA's ``eps``): requests the
    server refused as overloaded or failed by its own fault."""
    inflight: int | None = None
    queue_ms: float | None = None
    service_ms: float | None = None
    """Service time of the request this report answers, or a recent mean."""
    est_wait_ms: float | None = None
    """Server's estimate of the queued work ahead of a new request."""

    def to_json(self) -> bytes:
        return orjson.dumps({k: v for k, v in asdict(self).items() if v is not None})

    @classmethod
    def from_json(cls, raw: bytes) -> LoadReport:
        try:
            fields = orjson.loads(raw)
            return cls(**fields)
        except (orjson.JSONDecodeError, TypeError) as exc:
            raise RemoteProtocolError(f"malformed load report {raw[:80]!r}: {exc}") from exc
