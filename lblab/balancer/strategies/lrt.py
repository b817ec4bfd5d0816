"""``lrt``: least response time as in the storage-system report (Martins et al.).

Pick the minimum of the pair ``(inflight_i, avg_rt_i)`` in that order: least
connections, with the cumulative mean of server-reported service times as the
tie-break (then list order). ``avg_rt_i`` is the mean of every ``service_ms`` that
backend i reported in response metadata; a backend with none yet has ``avg_rt = 0``,
so it is tried before measured ones at the same in-flight count. O(log n) per pick.

Source: E. Martins, H. Nguyen, Y. Evans, *An Overview of Server Load-Balancing*, 2025.
"""

from __future__ import annotations

from dataclasses import dataclass

from mypy_extensions import mypyc_attr

from lblab.loadreport import LoadReport

from .base import BackendView
from .least_load import LeastLoadStrategy, LeastTieRule


@mypyc_attr(native_class=False)
@dataclass(frozen=True, slots=True)
class LeastResponseTimeConfig:
    tie: "LeastTieRule" = "random"


@mypyc_attr(allow_interpreted_subclasses=True)
class LeastResponseTime(LeastLoadStrategy[LeastResponseTimeConfig]):
    name = "lrt"
    listed = (2, 2)
    summary = "min (inflight, mean server-reported service time), in that order; ties at random"
    Config = LeastResponseTimeConfig

    uses_response_reports = True

    def _setup(self) -> None:
        super()._setup()
        self._sum: dict[str, float] = {}
        self._count: dict[str, int] = {}

    def avg_rt(self, backend: BackendView) -> float:
        count = self._count.get(backend.id, 0)
        return self._sum[backend.id] / count if count else 0.0

    def load_key(self, backend: BackendView) -> tuple[int, float]:
        return (backend.inflight, self.avg_rt(backend))

    def on_report(self, backend: BackendView, report: LoadReport, now: float) -> None:
        if report.source == "response" and report.service_ms is not None:
            self._sum[backend.id] = self._sum.get(backend.id, 0.0) + report.service_ms
            self._count[backend.id] = self._count.get(backend.id, 0) + 1
            self.refresh(backend)
