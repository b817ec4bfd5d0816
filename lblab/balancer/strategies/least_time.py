"""``least-time``: nginx ``least_time``: minimum ``rt_i * (1 + inflight_i) / w_i``.

``rt_i`` is the pool's EWMA of the latency the balancer observed from backend i
(``BackendView.latency_ewma_ms``, successful responses, time constant
``HealthConfig.ewma_tau_s``); a backend with no sample yet uses ``initial_rt_ms``
(default 1 ms, optimistic so that new backends get measured). ``w_i`` is the static
weight times the slow-start factor. Ties by ``tie``: ``random`` (default; nginx tries
tied servers in turn, not always the first) or ``first`` in list order. O(log n) per
update (lazy heap, refreshed on dispatch and completion).

Source: nginx Plus ``least_time`` (``upstream`` module documentation).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mypy_extensions import mypyc_attr

from .base import BackendView
from .least_load import LeastLoadStrategy, LeastTieRule
from .options import check


@mypyc_attr(native_class=False)
@dataclass(frozen=True, slots=True)
class LeastTimeConfig:
    initial_rt_ms: float = 1.0
    tie: "LeastTieRule" = "random"

    def __post_init__(self) -> None:
        check(
            math.isfinite(self.initial_rt_ms) and self.initial_rt_ms > 0,
            f"initial_rt_ms={self.initial_rt_ms}: must be > 0",
        )


@mypyc_attr(allow_interpreted_subclasses=True)
class LeastTime(LeastLoadStrategy[LeastTimeConfig]):
    name = "least-time"
    listed = (2, 3)
    summary = "min latency EWMA * (1 + inflight) / w (nginx least_time)"

    Config = LeastTimeConfig

    def load_key(self, backend: BackendView) -> float:
        rt = backend.latency_ewma_ms
        if rt is None:
            rt = self.config.initial_rt_ms
        return rt * (1 + backend.inflight) / self.effective_weight(backend)
