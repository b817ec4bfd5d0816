"""``first``: always the first available backend in list order ("noBalancing").

The single-server baseline of the Node.js report: every request goes to one backend
until it becomes unavailable. O(1) per pick (a replay walks past excluded backends).
"""

from __future__ import annotations

from collections.abc import Sequence

from mypy_extensions import mypyc_attr

from .base import BackendView, RequestView
from .configured import ConfiguredStrategy


@mypyc_attr(allow_interpreted_subclasses=True)
class First(ConfiguredStrategy):
    name = "first"
    listed = (2, 1)
    summary = "always the first available backend (no balancing)"

    def takes_first_on_ties(self) -> bool:
        return True

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        self._ensure(backends, now)
        found = self.avail.first_eligible(0, request)
        return None if found is None else found[1]
