"""The common frame of every lblab strategy: typed config, weights, available list.

``ConfiguredStrategy`` adds to ``BaseStrategy`` what all registered strategies share:
the constructor signature the registry calls (``cls(config, rng=, weights=)``), the
validated weight overrides, and an ``AvailableList`` rebuilt on each pool change.
Subclasses extend ``_rebuild`` to refresh their own per-pool structures (buckets,
heaps, rings), which then happens in exactly one place.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from mypy_extensions import mypyc_attr

from .available import AvailableList
from .base import BackendView, BaseStrategy, RequestView
from .weights import validate_weights, weight_of


@mypyc_attr(native_class=False)
@dataclass(frozen=True, slots=True)
class NoOptions:
    """Config of a strategy that takes no options. An options class in a compiled module
    (this one, every built-in's) is a plain Python class (``native_class=False``: a
    compiled frozen dataclass cannot be copied or pickled), and a ``Literal`` option's
    annotation is quoted (mypyc erases a plain one; ``options.py`` reads the choices)."""


C = TypeVar("C")
"""A strategy's config class (``NoOptions`` for one that takes none)."""


@mypyc_attr(allow_interpreted_subclasses=True)
class ConfiguredStrategy(BaseStrategy, Generic[C]):
    """Generic in its config, so that a compiled subclass reads ``self.config`` as its
    own ``Config`` (mypyc keeps an attribute's type in subclasses; narrowing it there is
    refused). Open to interpreted subclasses (the simulator's own strategies, a user's),
    as every strategy class is: mypyc would otherwise run the ``__init__`` of a compiled
    subclass twice when Python constructs it (docs/STYLE.md)."""

    Config: ClassVar[type[Any]] = NoOptions
    config: C
    full_scan: ClassVar[bool] = False
    """True when ``pick`` looks at every available backend (documented in the module)."""

    def __init__(
        self,
        config: C | None = None,
        *,
        rng: random.Random | None = None,
        weights: Mapping[str, float] | None = None,
    ) -> None:
        super().__init__(rng)
        self.config = config if config is not None else self.Config()
        self.weights = validate_weights(weights)
        self.avail = AvailableList()
        self.by_index: dict[int, BackendView] = {}
        self._setup()

    def pick(
        self, backends: Sequence[BackendView], request: RequestView, now: float
    ) -> BackendView | None:
        raise NotImplementedError(f"{type(self).__name__} must define pick")

    def takes_first_on_ties(self) -> bool:
        """Does this strategy, by its definition, break ties by list order (the first
        of the tied backends)? ``lblab strategy check`` holds every other one to a
        spread over equal idle backends."""
        return False

    def _setup(self) -> None:
        """Initialise the subclass's own state (called at the end of ``__init__``)."""
        return None

    def weight(self, view: BackendView) -> float:
        """Static weight (override or pool's), without slow start."""
        return weight_of(view, self.weights)

    def effective_weight(self, view: BackendView) -> float:
        """Static weight times the slow-start factor of a recovering backend."""
        return weight_of(view, self.weights) * view.slow_start

    def on_pool_change(self, backends: Sequence[BackendView], now: float) -> None:
        self.avail.sync(backends)
        self.by_index = {b.index: b for b in backends}
        self._rebuild(backends, now)

    def _ensure(self, backends: Sequence[BackendView], now: float) -> None:
        """Catch up if ``pick`` is given a pool list this strategy has not seen."""
        if backends is not self.avail.source:
            self.on_pool_change(backends, now)

    def _rebuild(self, backends: Sequence[BackendView], now: float) -> None:
        """Refresh per-pool structures after a pool change; the default keeps none."""
        return None

    def _current(self, view: BackendView) -> bool:
        """Is ``view`` the backend this strategy knows at that index (not a removed one)?"""
        return self.by_index.get(view.index) is view
