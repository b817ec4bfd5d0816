"""The strategy names every layer shares, in their one order (docs/ALGORITHMS.md).

The balancer's registry (``balancer/strategies/registry.py``) registers exactly these, in
this order, and refuses to import otherwise; ``analysis/``, which must not import the
balancer, orders its tables and charts by the same tuple; the run config defaults to the
thesis five. A new strategy is added here and in the registry, in the same place.
"""

from __future__ import annotations

THESIS_FIVE: tuple[str, ...] = ("r", "rr", "wrr", "lc", "dwrr")
"""The five algorithms the thesis compares, in its order."""

STRATEGY_NAMES: tuple[str, ...] = (
    # the thesis five (and their variants)
    "r",
    "rr",
    "wrr",
    "wrr-block",
    "lc",
    "dwrr",
    "dwrr-latency",
    # from the other papers
    "first",
    "lrt",
    "least-time",
    "dynamic",
    "dynamic-immediate",
    "dynamic-hybrid",
    "awrr",
    "p2c",
    # from the best balancers
    "peak-ewma",
    "rsocket-weighted",
    "ip-hash",
    "ring-hash",
    "maglev",
    "lease",
    # what production runs today
    "prequal",
    "least-request",
    "wrr-orca",
    "c3",
)
"""Every registered strategy, in the order of docs/ALGORITHMS.md."""
