"""Health policy: passive ejection with exponential backoff, and slow start.

Pure functions of a ``HealthConfig`` and elapsed times; the pool (``balancer/pool.py``)
applies them to its backends.

- Passive ejection (Envoy outlier detection, Finagle failure accrual): ``eject_after``
  consecutive failed outcomes eject a backend for ``eject_base_s * 2**n`` seconds,
  capped at ``eject_max_s``, where ``n`` counts the backend's earlier ejections (reset
  once it has been back for ``eject_max_s`` and then succeeds).
- Success-rate ejection (Linkerd's unified failure accrual, linkerd2 #15374 and
  linkerd2-proxy ``breaker/success_rate.rs``; Envoy outlier detection's success-rate
  ejection), off unless ``success_rate_threshold`` > 0: each backend's outcomes are
  counted in a ring of ``SUCCESS_RATE_BUCKETS`` buckets spanning
  ``success_rate_window_s`` (``SuccessWindow``); once the window holds at least
  ``success_rate_min_requests`` outcomes and the share of successes is below the
  threshold, the backend is ejected as a failure run would eject it (the same backoff,
  the same panic threshold). When that ejection ends the backend is on probation: the
  first outcome it gives decides, a success lets it take requests again with an empty
  window, a failure ejects it again at once (the next, longer backoff).
- Slow start (Envoy ``slow_start_config``; gRPC's gRFC A100 for weighted round robin
  defines the same): for ``slow_start_window_s`` after a backend becomes available again
  its weight is multiplied by ``max(min_weight, (max(t, 1 ms) / window) ** (1 /
  aggression))``, ``t`` the time since it came back (Envoy's ``applySlowStartFactor``
  floors ``t`` at 1 ms, so the factor is never 0). lblab's addition, off with
  ``slow_start_fast_after`` 0: slow start also ends early, at the answer that makes a
  backend measured as fast as its peers, once it has given ``slow_start_fast_after``
  successful answers since it came and their mean latency is at most
  ``slow_start_fast_ratio`` times the median of its peers' latency EWMAs (the peers: the
  other backends that are UP, not in slow start and have a latency sample; none: it
  does not end early). Envoy, gRPC's A100, Finagle and Linkerd have no such rule (Envoy
  and A100 ramp by time alone; Finagle's and Linkerd's Peak-EWMA ease a new endpoint
  in by its measured latency alone: ``slow_start_fast``).
- Panic (Envoy's ``healthy_panic_threshold``, default 50 %): when fewer than
  ``panic_threshold`` of the connected backends are un-ejected, ejection is ignored and
  every connected backend takes requests again. Ejection exists to route around a few
  bad backends; when it would take out most of the pool, the likelier story is a shared
  cause (overload, a bad client, a network blip), and a pool shrunk to one backend
  would turn that into failures of the balancer's own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from lblab.errors import ConfigError

HUNG_AFTER_S = 3.0
"""A backend that has sent nothing for this long (two missed KEEPALIVE answers and
more) is ejected as hung (``balancer/backend.py``; the simulator's balancers too). A
healthy lblab server answers within milliseconds even when saturated, because its work
runs off the event loop."""
SILENT_LOST_S = 30.0
"""A backend silent this long (six missed KEEPALIVE answers) is treated as lost: its
connection is closed and reconnected."""

SLOW_START_FLOOR_S = 0.001
"""Envoy's floor on the time since a backend came back (``std::max(1ms, ...)``)."""

SUCCESS_RATE_BUCKETS = 10
"""Buckets of a success-rate window (linkerd2-proxy ``success_rate.rs``: ``BUCKETS``)."""


@dataclass(frozen=True, slots=True)
class HealthConfig:
    eject_after: int = 5
    """Consecutive failures that eject a backend; 0 turns passive ejection off."""
    eject_base_s: float = 1.0
    eject_max_s: float = 30.0
    slow_start_window_s: float = 10.0
    """0 turns slow start off."""
    slow_start_aggression: float = 0.5
    """The ramp's shape: 0.5, a square, slower at first (Envoy's and A100's default: 1,
    linear; lblab's default and why: docs/ALGORITHMS.md, "Health")."""
    slow_start_min_weight: float = 0.01
    """The least share of its weight a backend in slow start gets (Envoy's and A100's
    ``min_weight_percent``; their default 10 %, lblab's 1 %)."""
    slow_start_fast_after: int = 5
    """Successful answers since it came after which a backend measured as fast as its
    peers ends its slow start early (``slow_start_fast``); 0 turns that off."""
    slow_start_fast_ratio: float = 1.0
    """"As fast as its peers": the mean latency of its answers since it came at most
    this many times the median of the peers' latency EWMAs."""
    ewma_tau_s: float = 1.0
    """Time constant of ``BackendView.latency_ewma_ms`` (``w = exp(-dt / tau)``)."""
    slow_start_step_s: float = 0.25
    """How often the slow-start factors are advanced (each step re-syncs the strategy)."""
    panic_threshold: float = 0.5
    """Share of connected backends that must be un-ejected; below it ejection is ignored
    (0 turns panic off)."""
    success_rate_threshold: float = 0.0
    """Eject a backend whose share of successes over the window is below this (Linkerd's
    default when on: 0.8); 0 turns success-rate ejection off."""
    success_rate_window_s: float = 10.0
    """The trailing window the success rate is counted over."""
    success_rate_min_requests: int = 100
    """Outcomes the window must hold before the rate can eject (Envoy's
    ``success_rate_request_volume``)."""
    success_rate_stdev_factor: float = 0.0
    """Envoy's statistical success-rate ejection: at the end of each interval of
    ``success_rate_window_s``, a backend whose share of successes in it is below the mean
    of the backends' shares less this many standard deviations of them is ejected
    (Envoy's ``success_rate_stdev_factor`` 1900, i.e. 1.9); 0 turns it off."""
    success_rate_minimum_hosts: int = 5
    """Backends with ``success_rate_min_requests`` outcomes in an interval needed for the
    statistical ejection to judge it (Envoy's ``success_rate_minimum_hosts``)."""

    def __post_init__(self) -> None:
        def need(ok: bool, field: str, rule: str) -> None:
            if not ok:
                raise ConfigError(f"health: {field}={getattr(self, field)!r}; {rule}")

        need(self.eject_after >= 0, "eject_after", "must be 0 (off) or more")
        need(_pos(self.eject_base_s), "eject_base_s", "must be > 0 seconds")
        need(
            _pos(self.eject_max_s) and self.eject_max_s >= self.eject_base_s,
            "eject_max_s",
            "must be >= eject_base_s",
        )
        need(
            math.isfinite(self.slow_start_window_s) and self.slow_start_window_s >= 0,
            "slow_start_window_s",
            "must be 0 (off) or more seconds",
        )
        need(_pos(self.slow_start_aggression), "slow_start_aggression", "must be > 0")
        need(
            math.isfinite(self.slow_start_min_weight) and 0 <= self.slow_start_min_weight <= 1,
            "slow_start_min_weight",
            "must be a share in [0, 1]",
        )
        need(
            0 <= self.slow_start_fast_after <= 1_000_000,
            "slow_start_fast_after",
            "must be 0 (off) to 1000000 answers",
        )
        need(_pos(self.slow_start_fast_ratio), "slow_start_fast_ratio", "must be > 0")
        need(_pos(self.ewma_tau_s), "ewma_tau_s", "must be > 0 seconds")
        need(_pos(self.slow_start_step_s), "slow_start_step_s", "must be > 0 seconds")
        need(
            math.isfinite(self.panic_threshold) and 0 <= self.panic_threshold <= 1,
            "panic_threshold",
            "must be a share in [0, 1] (0: off)",
        )
        need(
            math.isfinite(self.success_rate_threshold) and 0 <= self.success_rate_threshold <= 1,
            "success_rate_threshold",
            "must be a share in [0, 1] (0: off)",
        )
        need(
            _pos(self.success_rate_window_s) and self.success_rate_window_s <= 3600,
            "success_rate_window_s",
            "must be > 0 and at most 3600 seconds",
        )
        need(
            1 <= self.success_rate_min_requests <= 1_000_000,
            "success_rate_min_requests",
            "must be 1 to 1000000 outcomes",
        )
        need(
            math.isfinite(self.success_rate_stdev_factor)
            and 0 <= self.success_rate_stdev_factor <= 100,
            "success_rate_stdev_factor",
            "must be 0 (off) to 100 standard deviations",
        )
        need(
            1 <= self.success_rate_minimum_hosts <= 1_000_000,
            "success_rate_minimum_hosts",
            "must be 1 to 1000000 backends",
        )


def _pos(x: float) -> bool:
    return math.isfinite(x) and x > 0


def ejection_duration(config: HealthConfig, earlier_ejections: int) -> float:
    """Seconds the next ejection lasts: ``base * 2**n`` capped at ``eject_max_s``."""
    if earlier_ejections >= 64:  # 2**64 * base is past any cap; avoid a float overflow
        return config.eject_max_s
    return min(config.eject_base_s * 2.0**earlier_ejections, config.eject_max_s)


def slow_start_factor(config: HealthConfig, elapsed: float) -> float:
    """Weight multiplier ``elapsed`` seconds after recovery; 1.0 once the window is over."""
    window = config.slow_start_window_s
    if window <= 0 or elapsed >= window:
        return 1.0
    ramp = (max(elapsed, SLOW_START_FLOOR_S) / window) ** (1.0 / config.slow_start_aggression)
    return max(config.slow_start_min_weight, ramp)


def slow_start_fast(
    config: HealthConfig, answers: int, mean_ms: float, peers_ms: Sequence[float]
) -> bool:
    """Whether a backend in slow start is measured as fast as its peers, and so ends it
    early: ``slow_start_fast_after`` (not 0) successful answers since it came or more,
    whose mean latency ``mean_ms`` is at most ``slow_start_fast_ratio`` times the median
    of ``peers_ms`` (the peers' latency EWMAs; the mean of the middle two for an even
    count). No peers: False (nothing to be as fast as)."""
    after = config.slow_start_fast_after
    if after == 0 or answers < after or not peers_ms:
        return False
    ranked = sorted(peers_ms)
    middle = len(ranked) // 2
    median = ranked[middle] if len(ranked) % 2 else (ranked[middle - 1] + ranked[middle]) / 2.0
    return mean_ms <= config.slow_start_fast_ratio * median


class SuccessWindow:
    """Successes and outcomes of one backend over the trailing ``window_s``: a ring of
    ``SUCCESS_RATE_BUCKETS`` buckets, each ``window_s / SUCCESS_RATE_BUCKETS`` wide
    (linkerd2-proxy ``SuccessRateWindow``). Recording first rolls the ring to ``now``:
    every bucket whose slice has passed out of the window is emptied (all of them after
    a gap of a whole window), and the current slice starts on a bucket boundary."""

    __slots__ = ("current", "last_roll", "successes", "totals", "width")

    def __init__(self, window_s: float, now: float) -> None:
        self.width = window_s / SUCCESS_RATE_BUCKETS
        self.successes = [0] * SUCCESS_RATE_BUCKETS
        self.totals = [0] * SUCCESS_RATE_BUCKETS
        self.current = 0
        self.last_roll = now

    def _roll(self, now: float) -> None:
        steps = int((now - self.last_roll) // self.width)
        if steps <= 0:
            return
        for i in range(1, min(steps, SUCCESS_RATE_BUCKETS) + 1):
            k = (self.current + i) % SUCCESS_RATE_BUCKETS
            self.successes[k] = self.totals[k] = 0
        self.current = (self.current + steps) % SUCCESS_RATE_BUCKETS
        self.last_roll += steps * self.width

    def record(self, success: bool, now: float) -> None:
        self._roll(now)
        self.totals[self.current] += 1
        if success:
            self.successes[self.current] += 1

    def trips(self, min_requests: int, threshold: float) -> bool:
        """At least ``min_requests`` outcomes in the window, and successes below
        ``threshold`` of them."""
        total = sum(self.totals)
        return total >= min_requests and total > 0 and sum(self.successes) < threshold * total

    def reset(self, now: float) -> None:
        """Empty, starting at ``now`` (after an ejection: it must gather evidence again)."""
        self.successes = [0] * SUCCESS_RATE_BUCKETS
        self.totals = [0] * SUCCESS_RATE_BUCKETS
        self.current = 0
        self.last_roll = now
