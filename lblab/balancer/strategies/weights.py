"""Static weights: validation of the ``--weights`` mapping and the per-backend lookup.

The pool puts each backend's configured weight in ``BackendView.weight``. A strategy may
also be given a ``weights`` mapping (``make_strategy(..., weights=...)``); an entry there
overrides the view's weight for that backend id, so a strategy can be swapped at run
time with new weights without rebuilding the pool.
"""

from __future__ import annotations

from collections.abc import Mapping

from lblab.config import check_weight

from .base import BackendView


def validate_weights(weights: Mapping[str, float] | None) -> dict[str, float]:
    """A copy of ``weights``, each checked by ``lblab.config.check_weight``."""
    return {b: check_weight(raw, f"weights.{b}") for b, raw in (weights or {}).items()}


def weight_of(view: BackendView, overrides: Mapping[str, float]) -> float:
    """Static weight of ``view``: the override if one is given, else the pool's."""
    return overrides.get(view.id, view.weight)
