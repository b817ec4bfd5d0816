"""Every strategy's options: the frozen dataclass each strategy names as its ``Config``.

``options.py`` converts ``--strategy-option`` values by these classes' annotations (a
``Literal`` gives the choices) and their ``__post_init__`` checks run at load; the docs
and ``lblab strategies`` list their fields. They live apart from the strategies because
the strategies are compiled (``lblab/compiled.py``) and these must not be: mypyc erases a
``Literal`` annotation to a plain type and builds frozen dataclasses that cannot be
copied or pickled. Each strategy's module documents what its options mean.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from .options import check


@dataclass(frozen=True, slots=True)
class NoOptions:
    """Config of a strategy that takes no options."""


# -- awrr ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AwrrConfig:
    interval: float = 0.1
    a: float = 0.5

    def __post_init__(self) -> None:
        check(self.interval > 0, f"interval={self.interval}: must be > 0 seconds")
        check(0 <= self.a <= 1, f"a={self.a}: must be in [0, 1]")


# -- c3 ------------------------------------------------------------------------


LeastTieRule = Literal["random", "first"]
"""Ties at the least load: uniform among the tied (``random``), or the first in list order."""


@dataclass(frozen=True, slots=True)
class C3Config:
    clients: int = 1
    """``n``: the clients sharing the servers (the concurrency compensation)."""
    rate_interval_ms: float = 20.0
    """delta: the rate limiter's and the receive-rate tracker's interval."""
    max_tokens: float = 200.0
    """The token bucket's capacity."""
    tie: LeastTieRule = "random"
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


# -- dwrr ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DynamicWrrConfig:
    interval: float = 0.5
    """Seconds between weight recomputations."""
    eps: float = 0.01
    """Floor of the CPU utilisation in the denominator."""
    alpha: float = 0.5
    """EWMA weight of the newest score."""

    def __post_init__(self) -> None:
        check(self.interval > 0, f"interval={self.interval}: must be > 0 seconds")
        check(0 < self.eps <= 1, f"eps={self.eps}: must be in (0, 1]")
        check(0 < self.alpha <= 1, f"alpha={self.alpha}: must be in (0, 1]")


# -- lc ------------------------------------------------------------------------

TieRule = Literal["first", "random", "rr"]


@dataclass(frozen=True, slots=True)
class LeastConnectionsConfig:
    tie: TieRule = "random"
    weighted: bool = False


# -- least_request -------------------------------------------------------------

MAX_CHOICES = 1000
"""A bound on ``choice_count`` (Envoy's is uint32): the draws are made on every pick."""


@dataclass(frozen=True, slots=True)
class LeastRequestConfig:
    choice_count: int = 2
    """Backends drawn per pick when all weights are equal."""
    active_request_bias: float = 1.0
    """Exponent of ``(inflight + 1)`` that divides the weight in the EDF regime."""

    def __post_init__(self) -> None:
        check(
            2 <= self.choice_count <= MAX_CHOICES,
            f"choice_count={self.choice_count}: must be in 2..{MAX_CHOICES}",
        )
        check(
            math.isfinite(self.active_request_bias) and self.active_request_bias >= 0,
            f"active_request_bias={self.active_request_bias}: must be a number >= 0",
        )


# -- least_load (lrt, least-time) ----------------------------------------------


@dataclass(frozen=True, slots=True)
class LeastResponseTimeConfig:
    tie: LeastTieRule = "random"


@dataclass(frozen=True, slots=True)
class LeastTimeConfig:
    initial_rt_ms: float = 1.0
    tie: LeastTieRule = "random"

    def __post_init__(self) -> None:
        check(
            math.isfinite(self.initial_rt_ms) and self.initial_rt_ms > 0,
            f"initial_rt_ms={self.initial_rt_ms}: must be > 0",
        )


# -- maglev --------------------------------------------------------------------

DEFAULT_TABLE_SIZE = 65537


def is_prime(n: int) -> bool:
    if n < 2:
        return False
    if n % 2 == 0:
        return n == 2
    f = 3
    while f * f <= n:
        if n % f == 0:
            return False
        f += 2
    return True


@dataclass(frozen=True, slots=True)
class MaglevConfig:
    table_size: int = DEFAULT_TABLE_SIZE

    def __post_init__(self) -> None:
        check(
            3 <= self.table_size <= 10_000_019 and is_prime(self.table_size),
            f"table_size={self.table_size}: must be a prime between 3 and 10000019 "
            "(e.g. 251, 65537)",
        )


# -- peak_ewma -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PeakEwmaConfig:
    tau: float = 10.0
    """Decay time constant in seconds."""

    def __post_init__(self) -> None:
        check(math.isfinite(self.tau) and self.tau > 0, f"tau={self.tau}: must be > 0 seconds")


# -- prequal -------------------------------------------------------------------

MAX_R_PROBE = 64.0
"""Most probes per query: more costs the servers more than any pick can gain."""
MAX_POOL_SIZE = 1024


@dataclass(frozen=True, slots=True)
class PrequalConfig:
    r_probe: float = 3.0
    """Probes per query (>= 0; fractional: 0.5 is one probe every 2 queries)."""
    q_rif: float = 0.84
    """A probe is hot when its RIF is above this quantile of the RIF window."""
    pool_size: int = 16
    max_age_s: float = 1.0
    """Probes older than this leave the pool."""
    reuse_delta: float = 1.0
    """The paper's delta in the reuse budget (module docstring)."""
    max_reuse: int = 16
    """Most uses of one probe (and the budget where the paper's formula is undefined)."""
    rif_window: int = 64
    """How many of the last answered RIFs the hot/cold quantile is taken over."""

    def __post_init__(self) -> None:
        check(
            math.isfinite(self.r_probe) and 0 <= self.r_probe <= MAX_R_PROBE,
            f"r_probe must be in [0, {MAX_R_PROBE:g}], not {self.r_probe}",
        )
        check(0 <= self.q_rif <= 1, f"q_rif must be in [0, 1], not {self.q_rif}")
        check(
            1 <= self.pool_size <= MAX_POOL_SIZE,
            f"pool_size must be in 1..{MAX_POOL_SIZE}, not {self.pool_size}",
        )
        check(0 < self.max_age_s <= 3600, f"max_age_s must be in (0, 3600], not {self.max_age_s}")
        check(
            0 <= self.reuse_delta <= 1e6,
            f"reuse_delta must be in [0, 1e6], not {self.reuse_delta}",
        )
        check(
            1 <= self.max_reuse <= 1_000_000, f"max_reuse must be in 1..10^6, not {self.max_reuse}"
        )
        check(
            1 <= self.rif_window <= 1_000_000,
            f"rif_window must be in 1..10^6, not {self.rif_window}",
        )


# -- ring_hash -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RingHashConfig:
    points_per_weight: int = 160

    def __post_init__(self) -> None:
        check(
            4 <= self.points_per_weight <= 10_000,
            f"points_per_weight={self.points_per_weight}: must be in 4..10000",
        )


# -- wrr_orca ------------------------------------------------------------------

MIN_UPDATE_PERIOD_S = 0.1
"""gRPC raises a smaller ``weight_update_period`` to 100 ms; lblab refuses it instead."""


@dataclass(frozen=True, slots=True)
class WrrOrcaConfig:
    blackout_period: float = 10.0
    """Seconds of reports before a backend's weight is used (0: at once)."""
    weight_expiration_period: float = 180.0
    """Seconds without an update after which a weight is dropped."""
    weight_update_period: float = 1.0
    """Seconds between scheduler rebuilds."""
    error_utilization_penalty: float = 1.0
    """Multiplier of the error rate ``eps / qps`` added to the utilisation."""

    def __post_init__(self) -> None:
        check(
            math.isfinite(self.blackout_period) and self.blackout_period >= 0,
            f"blackout_period={self.blackout_period}: must be >= 0 seconds",
        )
        check(
            math.isfinite(self.weight_expiration_period) and self.weight_expiration_period > 0,
            f"weight_expiration_period={self.weight_expiration_period}: must be > 0 seconds",
        )
        check(
            math.isfinite(self.weight_update_period)
            and self.weight_update_period >= MIN_UPDATE_PERIOD_S,
            f"weight_update_period={self.weight_update_period}: must be >= "
            f"{MIN_UPDATE_PERIOD_S} seconds (gRPC's floor)",
        )
        check(
            math.isfinite(self.error_utilization_penalty) and self.error_utilization_penalty >= 0,
            f"error_utilization_penalty={self.error_utilization_penalty}: must be >= 0",
        )
