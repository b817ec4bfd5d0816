"""The public strategy API: what a strategy of your own is written against.

    from lblab.strategy import Strategy, BackendView, RequestView, eligible

    class LeastOfThree(Strategy):
        name = "least-of-3"
        summary = "fewest in flight among three backends drawn at random"

        def pick(self, backends, request, now):
            candidates = [b for b in backends if eligible(b, request)]
            if not candidates:
                return None
            drawn = self.rng.sample(candidates, min(3, len(candidates)))
            return min(drawn, key=lambda b: b.inflight)

A subclass defines ``name`` (its name in every table and flag) and ``pick(backends,
request, now)``; ``self.rng`` is a ``random.Random`` the driver seeds, ``now`` the
driver's monotonic clock in seconds (the balancer's, or the simulator's). It may define
``Config`` (a frozen dataclass of its options, built and validated like the built-ins'),
the hooks ``on_dispatch``, ``on_complete``, ``on_report``, ``on_pool_change`` (call
``super()``), ``probe_targets`` and ``on_probe``, and the ``uses_*`` flags that ask the
driver for load reports, leases, routing keys or probes. It must never return a backend
for which ``eligible`` is false, and never read a clock, draw from the module-level
``random``, sleep or do I/O: ``lblab strategy check SPEC`` holds it to that.

Give it as ``path/to/file.py:Class`` (or ``package.module:Class``, or an entry point of
group ``lblab.strategies``) wherever lblab takes a strategy name. The guide:
docs/guides/write-a-strategy.md. ``API_VERSION`` changes when any of this does.
"""

from __future__ import annotations

from lblab.balancer.strategies.base import (
    BackendView,
    Health,
    Interaction,
    Outcome,
    RequestView,
    eligible,
)
from lblab.balancer.strategies.configured import ConfiguredStrategy as Strategy
from lblab.balancer.strategies.configured import NoOptions
from lblab.balancer.strategies.options import check as check_option
from lblab.errors import ConfigError
from lblab.loadreport import LoadReport

API_VERSION = "1"
"""The version of this API (docs/guides/write-a-strategy.md says what each one has)."""

__all__ = [
    "API_VERSION",
    "BackendView",
    "ConfigError",
    "Health",
    "Interaction",
    "LoadReport",
    "NoOptions",
    "Outcome",
    "RequestView",
    "Strategy",
    "check_option",
    "eligible",
]
