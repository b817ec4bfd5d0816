"""The built-ins come from one declaration per class: ``name`` and ``listed`` in its module."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import textwrap
import typing
from pathlib import Path

import pytest

from lblab import compiled
from lblab.balancer.strategies.configured import NoOptions
from lblab.balancer.strategies.registry import STRATEGIES, make_strategy
from lblab.errors import ConfigError
from lblab.strategy_names import BUILT_INS, STRATEGY_NAMES, THESIS_FIVE, declared_built_ins


def _module(folder: Path, stem: str, body: str) -> None:
    (folder / f"{stem}.py").write_text(textwrap.dedent(body))


def test_a_module_with_a_listed_class_is_a_built_in_in_its_place(tmp_path: Path) -> None:
    _module(tmp_path, "b", 'class B:\n    name = "b"\n    listed = (2, 1)\n')
    _module(tmp_path, "a", 'class A:\n    name: str = "a"\n    listed = (1, 9)\n')
    _module(tmp_path, "helper", 'class Helper:\n    name = "not a strategy"\n')
    _module(tmp_path, "sub", 'class Sub:\n    name = "c"\n    listed = (1, 10)\n')
    found = declared_built_ins(tmp_path)
    assert [(b.name, b.module, b.cls) for b in found] == [
        ("a", "a", "A"), ("c", "sub", "Sub"), ("b", "b", "B")
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("bodies", "said"),
    [
        (['class A:\n    name = "a"\n    listed = (1, 1)\n',
          'class B:\n    name = "a"\n    listed = (1, 2)\n'], "both name 'a'"),
        (['class A:\n    name = "a"\n    listed = (1, 1)\n',
          'class B:\n    name = "b"\n    listed = (1, 1)\n'], "both listed (1, 1)"),
        (['class A:\n    listed = (1, 1)\n'], "has no name"),
        (['class A:\n    name = "a"\n    listed = (9, 1)\n'], "section 1 to 4"),
        (['class A:\n    name = "a"\n    listed = "first"\n'], "(section, place)"),
    ],
)  # fmt: skip
def test_a_declaration_taken_twice_or_malformed_is_named(
    tmp_path: Path, bodies: list[str], said: str
) -> None:
    for i, body in enumerate(bodies):
        _module(tmp_path, f"m{i}", body)
    with pytest.raises(RuntimeError, match=said.replace("(", r"\(").replace(")", r"\)")):
        declared_built_ins(tmp_path)


def test_the_registry_imports_exactly_the_declared_classes_in_their_order() -> None:
    assert tuple(STRATEGIES) == STRATEGY_NAMES
    assert set(THESIS_FIVE) <= set(STRATEGY_NAMES)
    for b in BUILT_INS:
        cls = STRATEGIES[b.name]
        assert (cls.__name__, cls.__module__.rsplit(".", 1)[-1]) == (b.cls, b.module)


def test_every_strategy_module_is_compiled_but_the_ones_run_once_at_start() -> None:
    compiled_strategies = {m for m in compiled.MODULES if ".strategies." in m}
    assert {f"lblab.balancer.strategies.{b.module}" for b in BUILT_INS} <= compiled_strategies
    assert not {m.rsplit(".", 1)[-1] for m in compiled_strategies} & set(
        compiled.STRATEGIES_NOT_COMPILED
    )


def test_a_built_in_declares_its_options_in_its_own_module() -> None:
    """One file per built-in (issue 42): its options class is in its module, and there,
    compiled or not, it copies, pickles (a sweep's Dask task carries it) and keeps its
    ``Literal`` choices for the option parser."""
    with_options = 0
    for name, cls in STRATEGIES.items():
        config_cls = cls.Config
        assert config_cls is NoOptions or config_cls.__module__ == cls.__module__, name
        config = config_cls()
        assert copy.deepcopy(config) == config and pickle.loads(pickle.dumps(config)) == config
        for field in dataclasses.fields(config_cls):
            hint = typing.get_type_hints(config_cls)[field.name]
            assert hint in (int, float, bool, str) or typing.get_origin(hint) is typing.Literal, (
                f"{name}.{field.name}: {hint!r}"
            )
        with_options += config_cls is not NoOptions
    assert with_options >= 12
    with pytest.raises(ConfigError, match="'bogus' is not one of first, random, rr"):
        make_strategy("lc", {"tie": "bogus"})
    with pytest.raises(ConfigError, match="'bogus' is not one of random, first"):
        make_strategy("c3", {"tie": "bogus"})


def test_every_declared_decision_is_a_counter_of_the_strategy() -> None:
    """``decisions`` names integer attributes the strategy keeps (read by /metrics and the
    simulator's manifest); a strategy without any has none to read."""
    from lblab.balancer.strategies.base import decision_counts
    from lblab.balancer.strategies.registry import STRATEGIES, make_strategy

    declared = {name: cls.decisions for name, cls in STRATEGIES.items() if cls.decisions}
    assert set(declared) >= {"prequal", "wrr-orca", "c3"}
    for name, decisions in declared.items():
        counts = decision_counts(make_strategy(name))
        assert counts == dict.fromkeys((d for d, _ in decisions), 0), name
        assert all(text.endswith(".") for _, text in decisions), name
    assert decision_counts(object()) == {}
