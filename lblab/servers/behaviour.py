"""A server that misbehaves on purpose: the ``fail``, ``reject`` and ``cold`` timeline
events, sans-I/O (every method that depends on time takes ``now``), so that the live
server (``servers/service.py``, ``servers/state.py``) and the simulated one
(``simulator/model.py``) run the same rules.

- ``Failing(rate, delay_ms)``: each request, with probability ``rate`` (a draw from the
  server's own seeded stream), takes its service slot for ``delay_ms`` and is answered
  with an APPLICATION_ERROR marked ``server fault: `` (``lblab/failures.py``) instead of
  its work. Marked so on purpose: an injected failure stands for the server's own
  failure (a bug, a dependency down, an exhausted resource), which is what passive
  ejection exists to route around; a balancer that keeps sending to a server that fails
  fast (the "black hole" that looks idle) is the case these events are for, and it can
  only be measured if the balancer sees the failures as the server's.
- ``RateLimit(limit, burst)``: a token bucket (``TokenBucket``) of ``limit`` tokens a
  second holding at most ``burst``; a request that finds no token is REJECTED at once,
  as a rate-limited service answers (the balancer replays it elsewhere), its message
  ending with the wait for the next token (``TokenBucket.wait_s``) as a Retry-After hint
  (``lblab.failures.retry_after_note``). ``burst`` 0
  means a tenth of a second's worth, at least one token.
- ``ColdStart(factor, duration_s, started)``: from ``started`` every request's service
  time is multiplied by ``factor_at(now)``, which falls linearly in time from ``factor``
  to 1 over ``duration_s`` (a JIT, caches and pools warming up).
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace

from lblab.config import check_range

MAX_FAIL_DELAY_MS = 3_600_000.0
MAX_LIMIT = 1_000_000.0  # requests/s
MAX_COLD_FACTOR = 1000.0
MAX_COLD_S = 3600.0
BURST_S = 0.1
"""A rate limit's default burst: this many seconds of its rate (at least one token)."""


@dataclass(frozen=True, slots=True)
class Failing:
    rate: float = 0.0
    """Share of requests answered with an error (0: none, 1: every one)."""
    delay_ms: float = 1.0
    """How long a failing request holds its slot before its error is sent."""

    def __post_init__(self) -> None:
        check_range("fail.rate", self.rate, minimum=0.0, maximum=1.0)
        check_range("fail.delay_ms", self.delay_ms, minimum=0.0, maximum=MAX_FAIL_DELAY_MS)

    def fails(self, rng: random.Random) -> bool:
        """Does the next request fail? (No draw at all when none fail.)"""
        return self.rate > 0.0 and rng.random() < self.rate


NO_FAILURES = Failing()


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` held, full at the start; ``take``
    spends one if there is one. Called from one thread (the server's event loop, or the
    simulator's clock)."""

    __slots__ = ("_last", "_tokens", "burst", "rate")

    def __init__(self, rate: float, burst: float, now: float) -> None:
        self.rate = rate
        self.burst = burst
        self._tokens = burst
        self._last = now

    def take(self, now: float) -> bool:
        tokens = min(self.burst, self._tokens + (now - self._last) * self.rate)
        self._last = now
        if tokens >= 1.0:
            self._tokens = tokens - 1.0
            return True
        self._tokens = tokens
        return False

    def wait_s(self) -> float:
        """Seconds from the last ``take`` until the bucket holds a whole token again."""
        return max(0.0, (1.0 - self._tokens) / self.rate)


@dataclass(frozen=True, slots=True)
class RateLimit:
    limit: float = 0.0
    """Requests a second admitted (0: no limit)."""
    burst: float = 0.0
    """Most tokens held (0: ``BURST_S`` of the limit, at least 1)."""

    def __post_init__(self) -> None:
        check_range("reject.limit", self.limit, minimum=0.0, maximum=MAX_LIMIT)
        check_range("reject.burst", self.burst, minimum=0.0, maximum=MAX_LIMIT)

    @property
    def tokens(self) -> float:
        """The bucket's size: ``burst``, or its default."""
        return self.burst or max(1.0, math.floor(self.limit * BURST_S))

    def bucket(self, now: float) -> TokenBucket | None:
        """A full bucket from ``now``; None without a limit."""
        return TokenBucket(self.limit, self.tokens, now) if self.limit > 0 else None


@dataclass(frozen=True, slots=True)
class ColdStart:
    factor: float = 1.0
    """Service time multiplier when cold (1: warm)."""
    duration_s: float = 0.0
    """Seconds over which it eases (linearly) to 1."""
    started: float = 0.0
    """When it began, on the clock ``factor_at`` is given."""

    def __post_init__(self) -> None:
        check_range("cold.factor", self.factor, minimum=1.0, maximum=MAX_COLD_FACTOR)
        check_range("cold.duration", self.duration_s, minimum=0.0, maximum=MAX_COLD_S)

    def starting(self, now: float) -> ColdStart:
        return replace(self, started=now)

    def factor_at(self, now: float) -> float:
        """``1 + (factor - 1) * (1 - elapsed / duration)`` while warming, then 1."""
        if self.duration_s <= 0.0:
            return 1.0
        left = 1.0 - (now - self.started) / self.duration_s
        return 1.0 + (self.factor - 1.0) * min(1.0, left) if left > 0.0 else 1.0

    def over(self, now: float) -> bool:
        return now - self.started >= self.duration_s
