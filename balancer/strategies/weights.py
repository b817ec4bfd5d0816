"""Static weights: validation of the ``--weights`` mapping and the per-backend lookup.

The pool puts each backend's configured weight in ``BackendView.weight``. A strategy may
also be given a ``weights`` mapping (``make_strategy(..., weights=...)``); an entry there
overrides the view's weight for that backend id, so a strategy can be swapped at run
time with new weights without rebuilding the pool.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from lblab.errors import ConfigError

from .base import BackendView


def validate_weights(weights: Mapping[str, float] | None) -> dict[str, float]:
    """A copy of ``weights``; every weight must be a finite number > 0."""
    out: dict[str, float] = {}
    for backend, raw in (weights or {}).items():
        try:
            w = float(raw)
        except (TypeError, ValueError):
            raise ConfigError(f"weights: {backend}={raw!r} is not a number") from None
        if not (math.isfinite(w) and w > 0):
            raise ConfigError(
                f"weights: {backend}={raw!r}; a weight must be a number > 0 "
                "(leave a backend out of the pool instead of giving it weight 0)"
            )
        out[backend] = w
    return out


def weight_of(view: BackendView, overrides: Mapping[str, float]) -> float:
    """Static weight of ``view``: the override if one is given, else the pool's."""
    return overrides.get(view.id, view.weight)
