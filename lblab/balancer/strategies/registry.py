"""Every strategy, registered once under its short name (docs/ALGORITHMS.md).

``make_strategy("lc", {"tie": "random"}, rng=random.Random(7))`` builds one with its
typed, validated config. Names and options are checked here, at load; an unknown name
or option is a ``ConfigError`` that lists what is valid.

The built-ins are found from their own declarations: a class with ``name`` and
``listed`` in a module of this package (``lblab.strategy_names`` reads them from the
source, for the layers that may not import the balancer; this module imports exactly
those classes, in that order).
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Mapping

from lblab.errors import ConfigError
from lblab.strategy_names import BUILT_INS

from . import specs
from .configured import ConfiguredStrategy
from .options import build_config
from .specs import StrategySource


def _import_built_ins() -> dict[str, type[ConfiguredStrategy]]:
    """Each class ``lblab.strategy_names.BUILT_INS`` reads from the modules' source,
    imported, and checked to be what its source declares."""
    found: dict[str, type[ConfiguredStrategy]] = {}
    for b in BUILT_INS:
        cls = getattr(importlib.import_module(f"{__package__}.{b.module}"), b.cls)
        if not (isinstance(cls, type) and issubclass(cls, ConfiguredStrategy)):
            raise RuntimeError(f"{b.module}.{b.cls} is listed but is not a ConfiguredStrategy")
        if (cls.name, cls.__dict__.get("listed")) != (b.name, b.listed):
            raise RuntimeError(  # a bug: the source and the class disagree
                f"{b.module}.{b.cls}: its source says name {b.name!r} listed {b.listed}, "
                f"the class {cls.name!r} {cls.__dict__.get('listed')}"
            )
        found[b.name] = cls
    return found


STRATEGIES: dict[str, type[ConfiguredStrategy]] = _import_built_ins()
"""Every built-in strategy by name, in the order of docs/ALGORITHMS.md."""
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
