"""``c3``: C3's adaptive replica selection: cubic replica ranking and cubic rate control.

Ranking. Each server s is scored ``Psi_s = R_s - 1/mu_s + q_hat_s^3 / mu_s`` with
``q_hat_s = 1 + os_s * n + q_s``; lower is better; the best of equal rank is drawn at
random (``tie = "random"``, the default) or is the first in list order (``first``),
counted in ``ties``. ``os_s`` is this balancer's requests in flight to s (the client's
outstanding requests), ``n`` the number of clients (option ``clients``, default 1; the
authors' code multiplies by the number of servers it tracks instead), ``q_s`` an EWMA of
the queue size s reports (``inflight`` of its response report: requests still at the
server after this one left, as Cassandra-C3's ``QSZ``), ``1/mu_s`` an EWMA of the
service time it reports (``service_ms``) and ``R_s`` an EWMA of the response time this
balancer saw (``Outcome.latency_ms``). Every EWMA is ``x = 0.9 * sample + 0.1 * x``
from 0 (``ALPHA``); the code keeps ``R - 1/mu`` as one EWMA of ``latency - service``,
which is the same number. The EWMAs move on each successful response that carries a
report; a server with none yet scores 0, so new servers are tried first. Times in ms;
``queue_ms`` is not part of C3's feedback and is not used.

Rate control, per server (times in ms; rates in requests per ``rate_interval_ms``,
delta = 20 ms):

- a token bucket: ``srate`` tokens per delta, at most ``max_tokens`` (200) stored,
  full at first sight; ``srate`` starts at 1;
- ``rrate``, the responses received per delta (Cassandra-C3's ``SlottedRateTracker``,
  starting at 100): when the first response of a later delta slot arrives, the finished
  slot's count c gives ``rrate = c / 20 + rrate * 19 / 20`` (the code's weight
  ``(now - lastTick) / interval`` for one slot at 20 ms); after an idle slot or more,
  ``rrate = c`` (the repository's ``metrics/SlottedRateTracker``; the copy inside
  ``RateController`` weights by idle slots / 20, which passes 1 after 20 idle slots);
- on every answered response (not a timeout or a lost connection), after counting it:
  if ``srate > rrate`` and the last increase is more than 4 deltas old (hysteresis),
  ``R0 = srate``, ``srate = max(beta * srate, 0.1)`` with ``beta = 0.2``, and the time
  is noted; else if ``srate < rrate``, ``srate = C * (T - cbrt(R0 * beta / C))^3 + R0``
  with ``C = 0.000004``, ``T`` the ms since the last decrease (infinite before one), the
  step capped at ``s_max = 10`` above the current ``srate``.

Pick. Servers are tried in rank order; the first whose bucket holds a token (one is
taken) wins. When every server is over its rate, C3 holds the request (its replica
group actor stashes it for the least wait any bucket names). lblab's drivers cannot
hold a request, so the pick goes to the best-ranked server anyway, without a token, and
counts in ``backpressure`` (``backpressure_wait_ms`` sums the waits C3 would have
made). Cost: O(n) per pick when the best server has a token, O(n log n) otherwise.

Constants are the authors' code (``c3/ScoreTracker.java``, ``c3/RateController.java``,
``config/Config.java``: ``c3_rate_interval_ms = 20``, ``c3_rate_limiter_max_tokens =
200``). Source: L. Suresh, M. Canini, S. Schmid, A. Feldmann, *C3: Cutting Tail Latency
in Cloud Data Stores via Adaptive Replica Selection*, NSDI 2015; github.com/lalithsuresh/cassandra-c3.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from mypy_extensions import mypyc_attr

from lblab.loadreport import LoadReport

from .base import BACKEND_FAULT_KINDS, BackendView, Outcome, RequestView
from .configured import ConfiguredStrategy
from .least_load import LeastTieRule
from .options import check


@mypyc_attr(native_class=False)
@dataclass(frozen=True, slots=True)
class C3Config:
    clients: int = 1
    """``n``: the clients sharing the servers (the concurrency compensation)."""
    rate_interval_ms: float = 20.0
    """delta: the rate limiter's and the receive-rate tracker's interval."""
    max_tokens: float = 200.0
    """The token bucket's capacity."""
    tie: "LeastTieRule" = "random"
    """Servers of equal rank: the best one drawn at random, or the first in list order."""

    def __post_init__(self) -> None:
        check(1 <= self.clients <= 1_000_000, f"clients={self.clients}: must be in 1..1000000")
        check(
            math.isfinite(self.rate_interval_ms) and self.rate_interval_ms > 0,
            f"rate_interval_ms={self.rate_interval_ms}: must be > 0 ms",
        )
        check(
            math.isfinite(self.max_tokens) and self.max_tokens >= 1,
            f"max_tokens={self.max_tokens}: must be >= 1",
        )


ALPHA: Final = 0.9
"""Weight of the newest sample in the queue, service and response time EWMAs."""
CUBIC_BETA: Final = 0.2
"""Multiplicative decrease: ``srate`` falls to ``beta * srate``."""
CUBIC_C: Final = 0.000004
"""Cubic growth constant (rate per ms^3)."""
CUBIC_SMAX: Final = 10.0
"""Largest increase of ``srate`` in one update (requests per delta)."""
HYSTERESIS_FACTOR: Final = 4
"""No decrease within this many deltas of an increase."""
MIN_RATE: Final = 0.1
"""Floor of ``srate`` after a decrease."""
INITIAL_SEND_RATE: Final = 1.0
INITIAL_RECEIVE_RATE: Final = 100.0
RECEIVE_ALPHA: Final = 1 / 20
"""The code's ``(now - lastTick) / interval`` for one slot of its default 20 ms."""


class ServerState:
    """What one C3 client keeps per server: feedback EWMAs, token bucket, cubic rate."""

    __slots__ = (
        "count",
        "decreased_at",
        "increased_at",
        "q",
        "r_max",
        "r_minus_s",
        "rrate",
        "s",
        "sent_at",
        "slot",
        "srate",
        "tokens",
    )

    def __init__(self, now_ms: float, cfg: C3Config) -> None:
        self.q = 0.0
        self.s = 0.0
        self.r_minus_s = 0.0
        self.srate = INITIAL_SEND_RATE
        self.tokens = cfg.max_tokens
        self.sent_at = now_ms
        self.rrate = INITIAL_RECEIVE_RATE
        self.slot = math.floor(now_ms / cfg.rate_interval_ms)
        self.count = 0
        self.r_max = 0.0
        self.decreased_at: float | None = None
        self.increased_at: float | None = None

    def score(self, outstanding: int, clients: int) -> float:
        """``Psi = (R - 1/mu) + (1 + os * n + q)^3 / mu``."""
        return self.r_minus_s + (1.0 + outstanding * clients + self.q) ** 3 * self.s

    def observe(self, queue: float, service_ms: float, latency_ms: float) -> None:
        self.q = ALPHA * queue + (1 - ALPHA) * self.q
        self.s = ALPHA * service_ms + (1 - ALPHA) * self.s
        self.r_minus_s = ALPHA * (latency_ms - service_ms) + (1 - ALPHA) * self.r_minus_s

    def try_acquire(self, now_ms: float, cfg: C3Config) -> float:
        """Take a token: 0, or the ms until one is due (the code's ``tryAcquire``)."""
        interval = cfg.rate_interval_ms
        tokens = min(cfg.max_tokens, self.tokens + self.srate / interval * (now_ms - self.sent_at))
        if tokens >= 1:
            self.tokens = tokens - 1
            self.sent_at = now_ms
            return 0.0
        return (1 - tokens) * interval / self.srate

    def receive_rate(self, now_ms: float, cfg: C3Config) -> float:
        """``rrate`` after rolling the slot to ``now_ms`` (the code's ``getCurrentRate``)."""
        slot = math.floor(now_ms / cfg.rate_interval_ms)
        gap = slot - self.slot
        if gap == 1:
            self.rrate = RECEIVE_ALPHA * self.count + (1 - RECEIVE_ALPHA) * self.rrate
        elif gap > 1:
            self.rrate = float(self.count)
        if gap > 0:
            self.slot, self.count = slot, 0
        return self.rrate

    def answered(self, now_ms: float, cfg: C3Config) -> None:
        """A response arrived: count it and adjust ``srate`` (``updateCubicSendingRate``)."""
        receive = self.receive_rate(now_ms, cfg)
        self.count += 1
        send = self.srate
        hysteresis = HYSTERESIS_FACTOR * cfg.rate_interval_ms
        if send > receive and (
            self.increased_at is None or now_ms - self.increased_at > hysteresis
        ):
            self.r_max = send
            self.srate = max(send * CUBIC_BETA, MIN_RATE)
            self.decreased_at = now_ms
        elif send < receive:
            self.increased_at = now_ms
            if self.decreased_at is None:
                self.srate = send + CUBIC_SMAX
                return
            elapsed = now_ms - self.decreased_at
            k = math.cbrt(self.r_max * CUBIC_BETA / CUBIC_C)
            target = CUBIC_C * (elapsed - k) ** 3 + self.r_max
            self.srate = send + CUBIC_SMAX if target - send > CUBIC_SMAX else target


@mypyc_attr(allow_interpreted_subclasses=True)
class C3(ConfiguredStrategy[C3Config]):
    name = "c3"
    listed = (4, 4)
    decisions = (
        ("backpressure", "Picks with no server's token free: sent to the best-ranked anyway."),
    )
    summary = "C3: rank by R - 1/mu + (1 + os*n + q)^3 / mu; cubic per-server rate limits"

    def takes_first_on_ties(self) -> bool:
        return self.config.tie == "first"

    Config = C3Config
    uses_response_reports = True
    full_scan = True

    def _setup(self) -> None:
        self.servers: dict[str, ServerState] = {}
        self.backpressure = 0
        """Picks made while every eligible server was over its rate (C3 would wait)."""
        self.backpressure_wait_ms = 0.0
        """Sum over those picks of the least wait a token bucket named."""
        self._feedback: dict[str, tuple[int, float]] = {}

    def _server(self, backend: BackendView, now: float) -> ServerState:
        state = self.servers.get(backend.id)
        if state is None:
            state = self.servers[backend.id] = ServerState(now * 1000.0, self.config)
        return state

    def score(self, backend: BackendView, now: float) -> float:
        return self._server(backend, now).score(backend.inflight, self.config.clients)

    def on_report(self, backend: BackendView, report: LoadReport, now: float) -> None:
        if (
            report.source == "response"
            and report.inflight is not None
            and report.service_ms is not None
        ):
            self._feedback[backend.id] = (report.inflight, report.service_ms)

    def on_complete(
        self, backend: BackendView, request: RequestView, outcome: Outcome, now: float
    ) -> None:
        feedback = self._feedback.pop(backend.id, None)
        if not outcome.ok and outcome.error_kind in BACKEND_FAULT_KINDS:
            return  # no response arrived
        state = self._server(backend, now)
        state.answered(now * 1000.0, self.config)
        if outcome.ok and feedback is not None:
            state.observe(feedback[0], feedback[1], outcome.latency_ms)

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        self._ensure(backends, now)
        candidates = self.avail.eligible_items(request)
        if not candidates:
            return None
        scores = [self.score(b, now) for b in candidates]
        best = min(range(len(scores)), key=scores.__getitem__)  # the first of equals
        tied = scores.count(scores[best])
        if tied > 1:
            self.ties += 1
            if self.config.tie == "random":
                least = scores[best]
                best = [k for k, s in enumerate(scores) if s == least][self.rng.randrange(tied)]
        now_ms = now * 1000.0
        cfg = self.config
        wait = self._server(candidates[best], now).try_acquire(now_ms, cfg)
        if wait == 0.0:
            return candidates[best]
        waits = [wait]
        for k in sorted(range(len(scores)), key=scores.__getitem__):  # stable: list order
            if k != best:
                wait = self._server(candidates[k], now).try_acquire(now_ms, cfg)
                if wait == 0.0:
                    return candidates[k]
                waits.append(wait)
        self.backpressure += 1
        self.backpressure_wait_ms += min(waits)
        return candidates[best]
