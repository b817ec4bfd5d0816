"""``dynamic``: least estimated queued work, updated only when a response arrives.

The estimate for backend i is the server's own estimate of the work still queued at it,
``est_wait_ms`` of the latest load report it put in response metadata
(``service_ms * inflight`` when a report lacks it); a backend that has not reported yet
estimates 0. Picks go to the least estimate, ties to the first in list order.

That is the report's estimate: its server answers with ``queue.length * delay``, the
requests still waiting after the answered one, times its fixed service time
(``Server/users.js`` in github.com/VoxelrSam/LoadBalancer). The answered request's own
queue wait (``queue_ms``) is not added: it is history, not work ahead, and would make
a backend that has just drained look busy. The balancer does not adjust
the estimate when it dispatches, so every request between two responses goes to the
same backend: it herds until updated, as the Node.js report observed. O(log n) per
pick. (The report's code compared its header estimates as strings, ``"10000" <
"250"``; lblab compares numbers. ``simulator/reproduce/ingram_model.py`` re-runs the
string version to reproduce the report's figures.)

Variants differ only in which reports they accept: ``dynamic-immediate`` (the server
pushes its estimate when a request arrives) and ``dynamic-hybrid`` (both).

Source: S. Ingram, *CS 422 Project Report* ("dynamic", "dynamicImmediate",
"dynamicHybrid").
"""

from __future__ import annotations

from typing import ClassVar

from mypy_extensions import mypyc_attr

from lblab.loadreport import LoadReport

from .base import BackendView
from .least_load import LeastLoadStrategy


def estimate_ms(report: LoadReport) -> float | None:
    """The queued-work estimate a report carries, or None if it carries none."""
    if report.est_wait_ms is not None:
        return report.est_wait_ms
    if report.service_ms is not None and report.inflight is not None:
        return report.service_ms * report.inflight
    return None


@mypyc_attr(allow_interpreted_subclasses=True)
class Dynamic(LeastLoadStrategy):
    name = "dynamic"
    listed = (2, 4)
    summary = "least server-estimated queued work, updated from response reports only (herds)"

    def takes_first_on_ties(self) -> bool:
        return True  # its definition (docs/ALGORITHMS.md): ties to the first in list order

    uses_response_reports = True
    accepted_sources: ClassVar[frozenset[str]] = frozenset({"response"})
    refresh_on_dispatch = False
    refresh_on_complete = False

    def _setup(self) -> None:
        super()._setup()
        self.estimates: dict[str, float] = {}

    def load_key(self, backend: BackendView) -> float:
        return self.estimates.get(backend.id, 0.0)

    def on_report(self, backend: BackendView, report: LoadReport, now: float) -> None:
        if report.source not in self.accepted_sources:
            return
        est = estimate_ms(report)
        if est is not None:
            self.estimates[backend.id] = est
            self.refresh(backend)
