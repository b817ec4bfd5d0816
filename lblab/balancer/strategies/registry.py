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

from . import specs
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
from .specs import StrategySource
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
_USER: dict[str, tuple[type[ConfiguredStrategy], StrategySource]] = {}
"""User strategies loaded in this process (``resolve``, ``install``): name -> class and
source."""
_BY_SPEC: dict[str, str] = {}
"""Each spec loaded in this process (as given, and as its source records it) -> its name,
so that a spec given again is the strategy loaded before, wherever its file is now."""


def strategy_names() -> list[str]:
    """Built-in names, in the order of docs/ALGORITHMS.md (``STRATEGY_NAMES``); the user
    strategies loaded in this process are ``user_sources()``."""
    return list(STRATEGIES)


def resolve(ref: str) -> str:
    """The name of the strategy ``ref`` gives: a built-in's or a loaded one's name as it
    is, or a spec (``file.py:Class``, ``package.module:Class``) or an entry-point name
    (group ``lblab.strategies``), loaded and registered here, once per process."""
    if ref in STRATEGIES or ref in _USER:
        return ref
    if ref in _BY_SPEC:
        return _BY_SPEC[ref]
    spec = ref if specs.is_spec(ref) else specs.entry_point(ref)
    if spec is None:
        raise ConfigError(
            f"unknown strategy {ref!r}; valid strategies: {', '.join([*STRATEGIES, *_USER])}, "
            "or a file of your own as path/to/file.py:Class (see `lblab strategy new`)"
        )
    cls, source = specs.load(spec)
    if not specs.is_spec(ref) and cls.name != ref:
        raise ConfigError(
            f"strategy {ref!r}: its entry point names {spec}, whose name is {cls.name!r}; "
            "the entry point's name and the class's name must be the same"
        )
    _register(cls, source)
    _BY_SPEC[ref] = source.name
    return source.name


def install(source: StrategySource) -> str:
    """Register a user strategy from its recorded source (a run's copy, a Dask task)."""
    known = _USER.get(source.name)
    if known is None or known[1].sha256 != source.sha256:
        _register(specs.install(source), source)
    return source.name


def user_sources() -> dict[str, StrategySource]:
    """The user strategies loaded in this process, by name."""
    return {name: source for name, (_, source) in _USER.items()}


def _register(cls: type[ConfiguredStrategy], source: StrategySource) -> None:
    name = source.name
    if name in STRATEGIES:
        raise ConfigError(
            f"strategy {source.spec!r}: its name {name!r} is a built-in strategy's; "
            "give the class another name"
        )
    if name in _USER:
        known = _USER[name][1]
        if known.sha256 != source.sha256:
            raise ConfigError(
                f"strategy {source.spec!r}: the name {name!r} is already taken by {known.spec} "
                "(another source); give one of the classes another name"
            )
    _USER[name] = cls, source
    _BY_SPEC[source.spec] = name


def strategy_class(ref: str) -> type[ConfiguredStrategy]:
    """The class of a name or spec (``resolve``)."""
    name = resolve(ref)
    return STRATEGIES[name] if name in STRATEGIES else _USER[name][0]


def make_strategy(
    name: str,
    options: Mapping[str, object] | None = None,
    rng: random.Random | None = None,
    weights: Mapping[str, float] | None = None,
) -> ConfiguredStrategy:
    """A fresh strategy ``name`` (or spec) with ``options`` (strings, or TOML values) applied."""
    cls = strategy_class(name)
    config = build_config(cls.Config, options, cls.name)
    return cls(config, rng=rng, weights=weights)
