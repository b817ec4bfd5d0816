"""Health policy: passive ejection with exponential backoff, and slow start.

Pure functions of a ``HealthConfig`` and elapsed times; the pool (``balancer/pool.py``)
applies them to its backends.

- Passive ejection (Envoy outlier detection, Finagle failure accrual): ``eject_after``
  consecutive failed outcomes eject a backend for ``eject_base_s * 2**n`` seconds,
  capped at ``eject_max_s``, where ``n`` counts the backend's earlier ejections (reset
  once it has been back for ``eject_max_s`` and then succeeds).
- Slow start (Envoy ``slow_start_config``): for ``slow_start_window_s`` after a backend
  becomes available again its weight is multiplied by
  ``max(0.1, (t / window) ** (1 / aggression))``, ``t`` the time since it came back.
- Panic (Envoy's ``healthy_panic_threshold``, default 50 %): when fewer than
  ``panic_threshold`` of the connected backends are un-ejected, ejection is ignored and
  every connected backend takes requests again. Ejection exists to route around a few
  bad backends; when it would take out most of the pool, the likelier story is a shared
  cause (overload, a bad client, a network blip), and a pool shrunk to one backend
  would turn that into failures of the balancer's own.
"""

from __future__ import annotations

import math
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

SLOW_START_MIN_FACTOR = 0.1
"""Envoy's ``min_weight_percent`` default: a recovering backend gets at least 10 %."""


@dataclass(frozen=True, slots=True)
class HealthConfig:
    eject_after: int = 5
    """Consecutive failures that eject a backend; 0 turns passive ejection off."""
    eject_base_s: float = 1.0
    eject_max_s: float = 30.0
    slow_start_window_s: float = 10.0
    """0 turns slow start off."""
    slow_start_aggression: float = 1.0
    ewma_tau_s: float = 1.0
    """Time constant of ``BackendView.latency_ewma_ms`` (``w = exp(-dt / tau)``)."""
    slow_start_step_s: float = 0.25
    """How often the slow-start factors are advanced (each step re-syncs the strategy)."""
    panic_threshold: float = 0.5
    """Share of connected backends that must be un-ejected; below it ejection is ignored
    (0 turns panic off)."""

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
        need(_pos(self.ewma_tau_s), "ewma_tau_s", "must be > 0 seconds")
        need(_pos(self.slow_start_step_s), "slow_start_step_s", "must be > 0 seconds")
        need(
            math.isfinite(self.panic_threshold) and 0 <= self.panic_threshold <= 1,
            "panic_threshold",
            "must be a share in [0, 1] (0: off)",
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
    ramp = (max(elapsed, 0.0) / window) ** (1.0 / config.slow_start_aggression)
    return max(SLOW_START_MIN_FACTOR, ramp)
