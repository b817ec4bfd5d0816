"""What a simulation's apertures connect: each server's balancers."""

from __future__ import annotations

from collections import Counter

from lblab.simulator.run import SimResult


def connections(result: SimResult) -> dict[str, int]:
    """Balancers connected to each server, in server order: those whose aperture holds
    it (``SimResult.subsets``), or every balancer without one (the full mesh)."""
    if not result.subsets:
        return dict.fromkeys(result.servers, result.config.balancers)
    held = Counter(m.id for sub in result.subsets for m in sub.members)
    return {name: held.get(name, 0) for name in result.servers}
