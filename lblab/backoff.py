"""Reconnect delays: one jittered exponential backoff for every peer that reconnects.

``jittered_backoff`` is drawn uniformly from ``[base / 2, min(max, base * 2^failures)]``:
exponential so a peer that stays down is not hammered, jittered ("full jitter" with a
floor, AWS Architecture Blog, "Exponential Backoff And Jitter") so peers restarted
together do not reconnect in lockstep. The caller passes its own ``random.Random``, so a
seeded strategy's draws are not shifted and tests can fix the seed.
"""

from __future__ import annotations

import random

RECONNECT_BASE_S = 0.1
RECONNECT_MAX_S = 5.0
"""The balancer's reconnects to a lost backend (``balancer/backend.py``; the simulator's
balancers reconnect the same way), jittered so that backends restarted together are not
hit by synchronized reconnects."""
_MAX_DOUBLINGS = 16
"""2^16 x base is past any cap in use; it keeps the power finite after many failures."""


def jittered_backoff(failures: int, base_s: float, max_s: float, rng: random.Random) -> float:
    """Seconds to wait before the next attempt after ``failures`` failed ones in a row."""
    cap = min(max_s, base_s * 2 ** min(failures, _MAX_DOUBLINGS))
    return rng.uniform(base_s / 2, max(cap, base_s))
