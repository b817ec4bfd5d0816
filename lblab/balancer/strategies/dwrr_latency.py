"""``dwrr-latency``: the thesis DWRR, weights from server-reported service times.

``lat_i`` = mean of the last 3 ``service_ms`` values backend i reported in response
metadata; ``inv_i = ceil(lat_i / max(1, min lat))``; ``w_i = max(inv) // inv_i``. The
weights are recomputed at the end of each cycle (when the walk wraps to the first
backend) and used as ``w_i`` consecutive picks per backend, as in the thesis
implementation (``wrr-block``). A backend with no report yet counts as the fastest
(``inv = 1``), so it gets the largest weight and is measured quickly; with no reports
at all every weight is 1. O(1) per pick (O(n) once per cycle).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Final

from mypy_extensions import mypyc_attr

from lblab.loadreport import LoadReport

from .base import BackendView
from .wrr_block import BlockWeightedRoundRobin

SAMPLES: Final = 3


@mypyc_attr(allow_interpreted_subclasses=True)
class LatencyDynamicWeightedRoundRobin(BlockWeightedRoundRobin):
    name = "dwrr-latency"
    listed = (1, 7)
    summary = "thesis DWRR: w = max(inv) // inv, inv = ceil(lat / max(1, min lat)), per cycle"
    uses_response_reports = True

    def _setup(self) -> None:
        super()._setup()
        self._samples: dict[str, deque[float]] = {}

    def on_report(self, backend: BackendView, report: LoadReport, now: float) -> None:
        if report.source == "response" and report.service_ms is not None:
            self._samples.setdefault(backend.id, deque(maxlen=SAMPLES)).append(report.service_ms)

    def _cycle_weights(self, now: float) -> dict[str, int]:
        lat = {b.id: sum(s) / len(s) for b in self.avail.items if (s := self._samples.get(b.id))}
        if not lat:
            return {b.id: 1 for b in self.avail.items}
        floor = max(1.0, min(lat.values()))
        inv = {b.id: max(1, math.ceil(lat.get(b.id, 0.0) / floor)) for b in self.avail.items}
        top = max(inv.values())
        return {backend_id: max(1, top // i) for backend_id, i in inv.items()}
