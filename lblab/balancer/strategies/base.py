"""The strategy interface every algorithm implements (docs/DESIGN.md, "Strategy interface").

Strategies are sans-I/O: no sockets, sleeps, clocks or module-level ``random``. The
driver (the balancer node, or the simulator) owns the pool and passes ``now`` in
monotonic seconds; randomness comes from the ``random.Random`` handed to the
constructor. A strategy keeps its own state (weights, cursors, EWMAs) and reads the
driver-maintained ``BackendView`` fields.

``pick`` receives the whole pool in its stable list order, including backends that are
not available, so that positional rules (round robin order, "first in list order",
hash rings) stay stable across health changes. A strategy must never return a backend
for which ``eligible(backend, request)`` is false; it returns ``None`` when none is.

Probes (``uses_probes``, Prequal): after each pick the driver asks
``probe_targets(backends, now)`` which backends to probe, sends each a probe (the balancer
a REQUEST_RESPONSE on its backend connection, ``balancer/probes.py``; the simulator an
event with the network delay and the server's CPU cost), and feeds every answer back
with ``on_probe(backend, rif, latency_ms, now)``. A probe that times out or fails is
only counted (``Pool.probe_lost``); the strategy hears nothing of it, and its own rules
(age, reuse) retire what it has. The strategy never sends anything and never waits.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, Final, Protocol

from mypy_extensions import mypyc_attr

from lblab.loadreport import LoadReport


class Health(StrEnum):
    UP = "up"
    EJECTED = "ejected"  # passive ejection after consecutive failures, for a backoff period
    DRAINING = "draining"  # told us it is shutting down: no new requests
    DOWN = "down"  # connection lost, reconnecting


class Interaction(StrEnum):
    REQUEST_RESPONSE = "request_response"
    REQUEST_STREAM = "request_stream"
    REQUEST_CHANNEL = "request_channel"
    FIRE_AND_FORGET = "fire_and_forget"


@dataclass(slots=True, eq=False)
class BackendView:
    """What a balancer can know of one backend. The driver writes it; strategies read it."""

    id: str
    index: int
    """Position in the pool's list order (stable while the backend is in the pool)."""
    weight: float = 1.0
    """Static weight from the configuration."""
    state: Health = Health.UP
    inflight: int = 0
    """Requests sent and not yet answered; the driver decrements it on every outcome."""
    latency_ewma_ms: float | None = None
    last_latency_ms: float | None = None
    completed: int = 0
    consecutive_failures: int = 0
    last_report: LoadReport | None = None
    report_at: float | None = None
    """Driver's ``now`` when ``last_report`` arrived (its age is ``now - report_at``)."""
    slow_start: float = 1.0
    """Weight multiplier in (0, 1] while a recovered backend is eased back in."""
    lease_remaining: int | None = None
    """Requests the backend's current LEASE still allows (None: the backend grants no leases)."""
    lease_expires_at: float | None = None

    @property
    def available(self) -> bool:
        return self.state is Health.UP


class _Value:
    """Equality, hashing, pickling and repr by a value's fields, for the values built per
    request below (they were NamedTuples, and callers relied on all four). ``_names``
    names the fields in the order of ``__init__``'s parameters. Not a dataclass: compiled,
    a dataclass took 222 ns to build against 115 for this (one ``timeit`` each)."""

    _names: ClassVar[tuple[str, ...]] = ()

    def _fields(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self._names)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Value)
            and type(other) is type(self)
            and self._fields() == other._fields()
        )

    def __hash__(self) -> int:
        return hash(self._fields())

    def __reduce__(self) -> tuple[type[_Value], tuple[object, ...]]:
        return type(self), self._fields()  # picklable compiled too, as the tuples were

    def __repr__(self) -> str:
        pairs = ", ".join(f"{n}={v!r}" for n, v in zip(self._names, self._fields(), strict=True))
        return f"{type(self).__name__}({pairs})"


class RequestView(_Value):
    """What a strategy may know of one request. The driver builds one per request and
    nothing changes it afterwards (``excluding`` makes a changed copy).

    A plain class, not a NamedTuple: compiled (``lblab/compiled.py``) it is a C struct
    built by one call, where a NamedTuple's ``__new__`` runs as interpreted Python with
    its keyword arguments gathered into a dict, 0.3-0.4 us a request in the balancer
    (docs/FIELD-NOTES.md, "Where lblab's balancer spends its CPU")."""

    _names: ClassVar[tuple[str, ...]] = (
        "request_id", "interaction", "package_bytes", "routing_key", "client_address",
        "exclude", "attempt",
    )  # fmt: skip

    request_id: int
    interaction: Interaction
    package_bytes: int
    routing_key: bytes | None
    """From the request's routing-key metadata, for the hash strategies."""
    client_address: str | None
    """The client's IP address as text, for ``ip-hash``."""
    exclude: frozenset[str]
    """Backends already tried for this request (a REJECTED replay must go elsewhere)."""
    attempt: int

    def __init__(
        self,
        request_id: int,
        interaction: Interaction = Interaction.REQUEST_RESPONSE,
        package_bytes: int = 0,
        routing_key: bytes | None = None,
        client_address: str | None = None,
        exclude: frozenset[str] = frozenset(),
        attempt: int = 0,
    ) -> None:
        self.request_id = request_id
        self.interaction = interaction
        self.package_bytes = package_bytes
        self.routing_key = routing_key
        self.client_address = client_address
        self.exclude = exclude
        self.attempt = attempt

    def excluding(self, backend_id: str, attempt: int) -> RequestView:
        """This request again as attempt ``attempt``, never to ``backend_id``."""
        return RequestView(
            self.request_id,
            self.interaction,
            self.package_bytes,
            self.routing_key,
            self.client_address,
            self.exclude | {backend_id},
            attempt,
        )


MAX_ATTEMPTS: Final = 3
"""Tries of one request across backends when they answer REJECTED (docs/DESIGN.md, "Reliability rules")."""


def next_attempt(
    request: RequestView, rejected_by: str, max_attempts: int = MAX_ATTEMPTS
) -> RequestView | None:
    """The replay policy both drivers follow: the same request again, never to a backend
    that already refused it, or None once it has had ``max_attempts`` tries."""
    if request.attempt + 1 >= max_attempts:
        return None
    return request.excluding(rejected_by, request.attempt + 1)


class Outcome(_Value):
    """How one dispatch ended, as the driver saw it. Built once and not changed; a plain
    class for the reason ``RequestView`` is one."""

    _names: ClassVar[tuple[str, ...]] = (
        "ok", "latency_ms", "error_kind", "server_fault", "retry_after_ms",
    )  # fmt: skip

    ok: bool
    latency_ms: float
    """Balancer-observed: dispatch to first response frame (or to the error)."""
    error_kind: str | None
    """One of ``lblab.failures.ERROR_KINDS`` when not ok."""
    server_fault: bool
    """An error the backend flagged as its own failure (``lblab.failures.is_server_fault``)."""
    retry_after_ms: float | None
    """The backend's Retry-After hint with a REJECTED (``lblab.failures.retry_after_ms``):
    how long it asks not to be sent more; None when it gave none."""

    def __init__(
        self,
        ok: bool,
        latency_ms: float,
        error_kind: str | None = None,
        server_fault: bool = False,
        retry_after_ms: float | None = None,
    ) -> None:
        self.ok = ok
        self.latency_ms = latency_ms
        self.error_kind = error_kind
        self.server_fault = server_fault
        self.retry_after_ms = retry_after_ms

    @property
    def backend_fault(self) -> bool:
        """Does this failure count toward the backend's passive ejection?

        Only what the backend is responsible for: a timeout (it did not answer in time),
        a lost or refused connection, or an error it flagged as its own failure. Not an
        answer about the client's request (APPLICATION_ERROR, INVALID), and not REJECTED:
        that is overload, "safe to retry elsewhere", and the request is replayed.
        """
        return not self.ok and (self.error_kind in BACKEND_FAULT_KINDS or self.server_fault)


BACKEND_FAULT_KINDS: Final = frozenset({"timeout", "connection"})
_UP: Final = Health.UP
"""A module constant: ``Health.UP`` looks the member up in the enum class every time
(0.5 us on this VM), and ``eligible`` runs for every candidate of every pick."""


def eligible(backend: BackendView, request: RequestView) -> bool:
    """May this request be sent to this backend?"""
    return backend.state is _UP and backend.id not in request.exclude


class Strategy(Protocol):
    name: ClassVar[str]
    """Registry name used by the CLI, configs and results (``rr``, ``p2c``, ...)."""
    summary: ClassVar[str]
    """One line: the definition, for ``lblab strategies``."""
    uses_response_reports: ClassVar[bool]
    """The driver parses load reports in response metadata for it."""
    uses_push_reports: ClassVar[bool]
    """The driver asks servers to push reports (METADATA_PUSH) when a request arrives."""
    uses_agent_reports: ClassVar[bool]
    """The driver feeds it the agents' CPU samples."""
    uses_leases: ClassVar[bool]
    """The driver asks backends for leases and keeps ``BackendView.lease_*``."""
    uses_routing_key: ClassVar[bool]
    """The driver parses a request's composite metadata for ``RequestView.routing_key``."""
    uses_probes: ClassVar[bool]
    """The driver asks ``probe_targets`` after each pick and sends the probes."""
    ties: int
    """Picks so far where the chosen backend tied on load with another candidate."""

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None: ...

    def on_dispatch(self, backend: BackendView, request: RequestView, now: float) -> None: ...

    def on_complete(
        self, backend: BackendView, request: RequestView, outcome: Outcome, now: float
    ) -> None: ...

    def on_report(self, backend: BackendView, report: LoadReport, now: float) -> None: ...

    def on_pool_change(self, backends: Sequence[BackendView], now: float) -> None: ...

    def probe_targets(self, backends: Sequence[BackendView], now: float) -> Sequence[BackendView]:
        """Backends to probe now (after a pick); each is sent one probe."""

    def on_probe(self, backend: BackendView, rif: int, latency_ms: float, now: float) -> None:
        """A probe's answer: ``rif`` requests in flight, ``latency_ms`` the server's
        recent median latency at about that RIF (``lblab.loadreport.RifLatency``)."""


def decision_counts(strategy: object) -> dict[str, int]:
    """The strategy's decision counters by name (``BaseStrategy.decisions``; a strategy
    that declares none, or is not a ``BaseStrategy``, has none)."""
    declared: tuple[tuple[str, str], ...] = getattr(type(strategy), "decisions", ())
    return {name: int(getattr(strategy, name)) for name, _ in declared}


@mypyc_attr(allow_interpreted_subclasses=True)
class BaseStrategy:
    """No-op hooks, so a strategy defines only what it uses.

    The ``uses_*`` flags tell the driver which signals to collect, so a strategy that
    ignores them costs nothing for them: load reports in response metadata, reports
    pushed by servers when a request arrives, agent CPU samples, LEASE frames, probes.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    listed: ClassVar[tuple[int, int]]
    """A built-in's place in docs/ALGORITHMS.md, ``(section, place)``: declaring it in
    a class of a module of this package makes the class a built-in
    (``lblab.strategy_names``). A user strategy leaves it out."""
    uses_response_reports: ClassVar[bool] = False
    uses_push_reports: ClassVar[bool] = False
    uses_agent_reports: ClassVar[bool] = False
    uses_leases: ClassVar[bool] = False
    uses_routing_key: ClassVar[bool] = False
    uses_probes: ClassVar[bool] = False
    decisions: ClassVar[tuple[tuple[str, str], ...]] = ()
    """The strategy's own counters of what it decided, as (attribute, what it counts):
    integer attributes it increments (prequal's ``fallbacks``); ``decision_counts``
    reads them for ``/metrics``, ``/status`` and the simulator's manifest."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.rng = rng if rng is not None else random.Random(0)
        self.ties = 0
        """Picks where the chosen backend tied on load with another candidate (the
        Finagle ``p2c/zero`` idea: is the load signal telling backends apart?)."""

    def on_dispatch(self, backend: BackendView, request: RequestView, now: float) -> None:
        return None

    def on_complete(
        self, backend: BackendView, request: RequestView, outcome: Outcome, now: float
    ) -> None:
        return None

    def on_report(self, backend: BackendView, report: LoadReport, now: float) -> None:
        return None

    def on_pool_change(self, backends: Sequence[BackendView], now: float) -> None:
        return None

    def probe_targets(self, backends: Sequence[BackendView], now: float) -> Sequence[BackendView]:
        return ()

    def on_probe(self, backend: BackendView, rif: int, latency_ms: float, now: float) -> None:
        return None
