"""Every strategy, registered once under its short name (docs/ALGORITHMS.md).

``make_strategy("lc", {"tie": "random"}, rng=random.Random(7))`` builds one with its
typed, validated config. Names and options are checked here, at load; an unknown name
or option is a ``ConfigError`` that lists what is valid.

The names and their order are ``lblab.strategy_names.STRATEGY_NAMES``, which the layers
that may not import the balancer (analysis) read; this module refuses to import if the
classes below register anything else, or in another order.
"""

from __future__ import annotations

import random
from collections.abc import Mapping

from lblab.errors import ConfigError
from lblab.strategy_names import STRATEGY_NAMES

from .awrr import AutomaticWeightedRoundRobin
from .c3 import C3
from .configured import ConfiguredStrategy
from .dwrr import DynamicWeightedRoundRobin
from .dwrr_latency import LatencyDynamicWeightedRoundRobin
from .dynamic import Dynamic
from .dynamic_hybrid import DynamicHybrid
from .dynamic_immediate import DynamicImmediate
from .first import First
from .ip_hash import IpHash
from .lc import LeastConnections
from .lease import Lease
from .least_request import LeastRequest
from .least_time import LeastTime
from .lrt import LeastResponseTime
from .maglev import Maglev
from .options import build_config
from .p2c import PowerOfTwoChoices
from .peak_ewma import PeakEwma
from .prequal import Prequal
from .r import Random
from .ring_hash import RingHash
from .rr import RoundRobin
from .rsocket_weighted import RSocketWeighted
from .wrr import WeightedRoundRobin
from .wrr_block import BlockWeightedRoundRobin
from .wrr_orca import WeightedRoundRobinOrca

STRATEGIES: dict[str, type[ConfiguredStrategy]] = {
    cls.name: cls
    for cls in (
        # the thesis five (and their variants)
        Random,
        RoundRobin,
        WeightedRoundRobin,
        BlockWeightedRoundRobin,
        LeastConnections,
        DynamicWeightedRoundRobin,
        LatencyDynamicWeightedRoundRobin,
        # from the other papers
        First,
        LeastResponseTime,
        LeastTime,
        Dynamic,
        DynamicImmediate,
        DynamicHybrid,
        AutomaticWeightedRoundRobin,
        PowerOfTwoChoices,
        # from the best balancers
        PeakEwma,
        RSocketWeighted,
        IpHash,
        RingHash,
        Maglev,
        Lease,
        # what production runs today
        Prequal,
        LeastRequest,
        WeightedRoundRobinOrca,
        C3,
    )
}
if tuple(STRATEGIES) != STRATEGY_NAMES:
    raise RuntimeError(  # a bug: the two lists are edited together
        f"the registry's strategies {list(STRATEGIES)} differ from "
        f"lblab.strategy_names.STRATEGY_NAMES {list(STRATEGY_NAMES)}: keep both in one order"
    )


def strategy_names() -> list[str]:
    """Registered names, in the order of docs/ALGORITHMS.md (``STRATEGY_NAMES``)."""
    return list(STRATEGIES)


def strategy_class(name: str) -> type[ConfiguredStrategy]:
    try:
        return STRATEGIES[name]
    except KeyError:
        raise ConfigError(
            f"unknown strategy {name!r}; valid strategies: {', '.join(STRATEGIES)}"
        ) from None


def make_strategy(
    name: str,
    options: Mapping[str, object] | None = None,
    rng: random.Random | None = None,
    weights: Mapping[str, float] | None = None,
) -> ConfiguredStrategy:
    """A fresh strategy ``name`` with ``options`` (strings, or TOML values) applied."""
    cls = strategy_class(name)
    config = build_config(cls.Config, options, name)
    return cls(config, rng=rng, weights=weights)
