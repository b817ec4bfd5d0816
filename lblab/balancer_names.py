"""The names of a run's balancers, ``b1`` .. ``bK``: the ``balancer`` column of the
requests table, live (``[testbed] balancers``) and simulated (``balancers``) alike."""

from __future__ import annotations


def balancer_names(count: int) -> tuple[str, ...]:
    """``b1`` .. ``b<count>``."""
    return tuple(f"b{k}" for k in range(1, count + 1))
