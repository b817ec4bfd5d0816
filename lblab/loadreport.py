"""A server's load as reported to the balancer.

One value type for every path a report travels: the agent's sample stream (source
``agent``), the load report a server puts in response metadata (``response``) and the
estimate a server pushes when a request arrives (``push``). Fields a path does not know
stay ``None``. Encoded as compact JSON under ``lblab.wire.metadata.LOAD_REPORT``.

A probe (``prequal``) is answered with a ``ProbeAnswer`` instead: the requests in flight
and the server's latency at about that many, from its ``RifLatency`` record (the live
server and the simulated one keep the same record).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import asdict, dataclass
from typing import Final, Literal, get_args

import orjson

from lblab.errors import RemoteProtocolError

ReportSource = Literal["agent", "response", "push"]
_SOURCES: Final = frozenset(get_args(ReportSource))
_NUMBERS: Final = frozenset(
    ("t", "cpu_util", "qps", "eps", "queue_ms", "service_ms", "est_wait_ms")
)
REPORT_TOKEN_ENV: Final = "LBLAB_REPORT_TOKEN"
"""Where the balancer (``--report-token``) and the agents find the run's report token:
the agent port takes reports only from a connection whose SETUP carries it
(``lblab.wire.auth``; docs/DESIGN.md, "Wire contract")."""
MAX_MEASURE: Final = 1e9
"""Largest rate (per second), time (ms), in-flight count or CPU share a report may state:
far beyond any server, and small enough that the strategies' arithmetic on it (a rate
over a CPU share of 0.001, a weight scaled by 100) stays finite. A report past it, or
below 0, is refused: one report of ``qps`` 1e307 once made ``dwrr``'s weights NaN and
every pick raise."""
_MEASURES: Final = (_NUMBERS - {"t"}) | {"inflight"}
"""The fields ``MAX_MEASURE`` bounds: every number but the sender's clock."""


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
        """Parse and check a report; anything else is a ``RemoteProtocolError`` saying what.

        Every field's type is checked here, where a sender's mistake can be named: the
        strategies that read the report run compiled (``lblab/compiled.py``) and would
        raise a ``TypeError`` deep in the balancer instead. Numbers are stored as floats
        (an ``inflight`` as a whole number: 2.0 is taken as 2), so a report reads the same
        compiled and as plain Python."""
        try:
            fields = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise RemoteProtocolError(f"malformed load report {raw[:80]!r}: {exc}") from exc
        if not isinstance(fields, dict):
            raise RemoteProtocolError(f"load report {raw[:80]!r} is not a JSON object")
        for name, value in fields.items():
            if value is None and name != "t":
                continue
            if name in _NUMBERS:
                fields[name] = _number(name, value)
            elif name == "inflight":
                fields[name] = _whole(name, value)
            if name in _MEASURES and not 0 <= fields[name] <= MAX_MEASURE:
                raise RemoteProtocolError(
                    f"load report: {name} {value!r} is out of range (0 to {MAX_MEASURE:g})"
                )
        if not isinstance(fields.get("server"), str):
            raise RemoteProtocolError(f"load report: server {fields.get('server')!r} is not a name")
        if fields.get("source") not in _SOURCES:
            raise RemoteProtocolError(
                f"load report: source {fields.get('source')!r} is not one of "
                f"{', '.join(sorted(_SOURCES))}"
            )
        try:
            return cls(**fields)
        except TypeError as exc:  # a key missing or unknown
            raise RemoteProtocolError(f"malformed load report {raw[:80]!r}: {exc}") from exc


def _number(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise RemoteProtocolError(f"load report: {name} {value!r} is not a finite number")
    return float(value)


def _whole(name: str, value: object) -> int:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise RemoteProtocolError(f"load report: {name} {value!r} is not a whole number")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeAnswer:
    """A server's answer to a probe: ``{"rif": 3, "latency_ms": 12.5}`` as the PAYLOAD data."""

    rif: int
    """Requests in flight at the server when it answered (admitted, not yet finished)."""
    latency_ms: float
    """``RifLatency.estimate(rif)``: recent median latency of requests that arrived at
    about this RIF (0 before the server has any)."""

    def to_json(self) -> bytes:
        return orjson.dumps({"rif": self.rif, "latency_ms": self.latency_ms})

    @classmethod
    def from_json(cls, raw: bytes) -> ProbeAnswer:
        """Parse and check an answer; anything else is a ``RemoteProtocolError`` saying what.
        Keys other than the two are ignored (a newer server may say more)."""
        try:
            fields = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise RemoteProtocolError(f"malformed probe answer {raw[:80]!r}: {exc}") from exc
        if not isinstance(fields, dict):
            raise RemoteProtocolError(f"probe answer {raw[:80]!r} is not a JSON object")
        rif, latency = fields.get("rif"), fields.get("latency_ms")
        if not isinstance(rif, int) or isinstance(rif, bool) or rif < 0:
            raise RemoteProtocolError(f"probe answer: rif {rif!r} is not a whole number >= 0")
        if (
            not isinstance(latency, int | float)
            or isinstance(latency, bool)
            or not math.isfinite(latency)
            or latency < 0
        ):
            raise RemoteProtocolError(
                f"probe answer: latency_ms {latency!r} is not a finite number >= 0"
            )
        return cls(rif=rif, latency_ms=float(latency))


RIF_LATENCY_SAMPLES = 16
"""Latencies kept per RIF value: the median of 16 moves with a quarter of them replaced."""
RIF_LATENCY_MAX_RIF = 255
"""RIF values above this share its record: at most 256 x 16 floats per server."""


class RifLatency:
    """A server's latency by requests in flight, for probe answers (Prequal's server side).

    For each RIF value ``r`` (requests in flight when a request arrived, itself not
    counted; values above ``RIF_LATENCY_MAX_RIF`` share its record) the latencies of the
    last ``RIF_LATENCY_SAMPLES`` request-response requests that arrived at ``r``, each from
    its arrival to the end of its work (queue plus service), in ms. ``estimate(r)`` is
    the median of the record at ``r``; without samples at ``r``, of the nearest RIF that
    has some (the lower one on a tie); without any sample, 0. So a probe answered at RIF
    r says what a request that arrives now may expect. Sans-I/O: the caller gives
    the numbers, the server on its loop and the simulator at ``env.now``.
    """

    __slots__ = ("_by_rif",)

    def __init__(self) -> None:
        self._by_rif: dict[int, deque[float]] = {}

    def record(self, rif: int, latency_ms: float) -> None:
        key = min(rif, RIF_LATENCY_MAX_RIF)
        samples = self._by_rif.get(key)
        if samples is None:
            samples = self._by_rif[key] = deque(maxlen=RIF_LATENCY_SAMPLES)
        samples.append(latency_ms)

    def estimate(self, rif: int) -> float:
        by_rif = self._by_rif
        if not by_rif:
            return 0.0
        key = min(rif, RIF_LATENCY_MAX_RIF)
        if key not in by_rif:
            key = min(by_rif, key=lambda r: (abs(r - key), r))
        ordered = sorted(by_rif[key])
        half = len(ordered) // 2
        if len(ordered) % 2:
            return ordered[half]
        return (ordered[half - 1] + ordered[half]) / 2.0
