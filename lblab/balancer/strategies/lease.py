"""``lease``: RSocket-native; the backend with the most remaining lease allowance.

A backend grants LEASE frames (``number`` requests within ``ttl``); the driver records
them in ``BackendView.lease_remaining`` / ``lease_expires_at`` and the pool decrements
``lease_remaining`` on each dispatch. A backend is a candidate only while it holds a
live lease: ``lease_remaining > 0`` and ``now < lease_expires_at``. A backend that
grants no leases (``lease_remaining is None``) is never picked: never send beyond a
lease. Most remaining allowance wins; ties go to the first in list order.

Cost: a documented full scan over the available backends (the allowance changes on
every dispatch and expires with time). Source: RSocket protocol, "Lease Semantics".
"""

from __future__ import annotations

from collections.abc import Sequence

from mypy_extensions import mypyc_attr

from .base import BackendView, RequestView
from .configured import ConfiguredStrategy


@mypyc_attr(allow_interpreted_subclasses=True)
class Lease(ConfiguredStrategy):
    name = "lease"
    listed = (3, 6)
    summary = "most remaining LEASE allowance; never beyond a lease"
    uses_leases = True
    full_scan = True

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        self._ensure(backends, now)
        best: BackendView | None = None
        most = 0
        tied = False
        exclude = request.exclude
        for b in self.avail.items:  # a live lease with the most allowance left
            left = b.lease_remaining
            if left is None or left < most or left <= 0:
                continue
            expires = b.lease_expires_at
            if (expires is not None and now >= expires) or not b.available or b.id in exclude:
                continue
            if left > most:
                best, most, tied = b, left, False
            else:
                tied = True
        if tied:
            self.ties += 1
        return best
