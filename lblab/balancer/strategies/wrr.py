"""``wrr``: static weights, smooth weighted round robin (nginx).

For each available i: ``cw_i += w_i``; pick the largest ``cw`` (first in list order wins
ties); ``cw_pick -= sum(w)``. Weights 5,1,1 give A A B A C A A; over any run of
``sum(w)`` picks each backend gets exactly ``w_i``. ``w_i`` is the static weight times
the backend's slow-start factor, so a recovering backend is eased in. Weights are
positive (zero is rejected when the pool or strategy is configured).

Cost: a documented full scan (vectorised; see ``smooth.py``). Source: nginx
``ngx_http_upstream_round_robin.c``, "smooth weighted round-robin balancing" (2012).
"""

from __future__ import annotations

from collections.abc import Sequence

from mypy_extensions import mypyc_attr

from .base import BackendView, RequestView
from .configured import ConfiguredStrategy
from .smooth import SmoothWeights


@mypyc_attr(allow_interpreted_subclasses=True)
class WeightedRoundRobin(ConfiguredStrategy):
    name = "wrr"
    listed = (1, 3)
    summary = "static weights, smooth weighted round robin (nginx): 5,1,1 -> A A B A C A A"
    full_scan = True

    def _setup(self) -> None:
        self.smooth = SmoothWeights()

    def _rebuild(self, backends: Sequence[BackendView], now: float) -> None:
        items = self.avail.items
        self.smooth.reset(items, [self.effective_weight(b) for b in items])

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        self._ensure(backends, now)
        return self.smooth.pick(request)
