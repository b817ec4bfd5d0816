"""The architecture page (``docs/architecture.md``, its generated parts from
``docs/architecture_gen.py``): the floors are the layers contract's and cover lblab, the
hand-written flows name only what exists, and the import graph only goes down."""

from __future__ import annotations

import importlib.util
import pkgutil
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

import lblab

DOCS = Path(__file__).resolve().parents[2] / "docs"
PAGE = DOCS / "architecture.md"


def _generator() -> ModuleType:
    name = "architecture_gen"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, DOCS / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
    return sys.modules[name]


gen = _generator()


def _top_level() -> set[str]:
    """lblab's top-level modules and packages the layers contract must place."""
    found = {m.name for m in pkgutil.iter_modules(lblab.__path__)}
    return found - set(gen.outside())


def test_the_floors_are_the_layers_contract_top_first() -> None:
    floors = gen.floors()
    assert [f.spec for f in floors] == gen.layers_contract()["layers"]
    assert [f.number for f in floors] == list(range(len(floors) - 1, -1, -1))
    assert floors[-1].is_base


def test_every_top_level_package_is_on_exactly_one_floor() -> None:
    members = [m for f in gen.floors() for m in f.members]
    assert len(members) == len(set(members))
    assert set(members) == _top_level()


def test_the_floors_table_names_every_floor_and_package_once() -> None:
    section = gen.floors_section()
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    for floor in gen.floors():
        label = f"| {floor.number}" + (": " if len(floor.members) > 1 or floor.is_base else " |")
        assert sum(row.startswith(label) for row in rows) == 1, floor.spec
        if len(floor.members) > 1 and not floor.is_base:
            assert f"`{floor.spec}`" in section
    for name in _top_level():
        assert section.count(f"`{name}`") == 1, name
    for name in gen.outside():
        assert section.count(f"`{name}`") == 1, name


def test_the_counts_add_up_to_the_graph() -> None:
    on_floors = [m for f in gen.floors() for member in f.members for m in gen.modules_of(member)]
    rest = [m for name in gen.outside() for m in gen.modules_of(name)]
    assert len(on_floors) + len(rest) + 1 == len(gen.graph().modules)  # + lblab itself


def test_every_edge_between_floors_goes_down() -> None:
    """``lint-imports`` forbids an upward import, so the drawing has none: every port goes
    to a lower floor, or to a sibling the contract lets it import (``a : b``)."""
    floors = {m: f for f in gen.floors() for m in f.members}
    ports = gen.ports()
    assert ports
    for port in ports:
        upper, lower = floors[port.upper], floors[port.lower]
        assert port.upper != port.lower
        assert upper.number >= lower.number, f"{port.upper} -> {port.lower} goes up"
        if upper.number == lower.number:
            assert not upper.independent, f"{port.upper} -> {port.lower}: independent siblings"
        assert all(gen.part_of(m) == port.lower for m in port.modules)
        for importers in port.modules.values():
            assert importers and all(gen.part_of(i) == port.upper for i in importers)


def test_the_port_between_the_experiment_and_its_drivers_is_the_testbed_protocol() -> None:
    ports = {(p.upper, p.lower): p for p in gen.ports()}
    for driver in ("loadtests", "simulator"):
        assert "lblab.experiment.testbed" in ports[(driver, "experiment")].modules
    assert ("loadtests", "simulator") not in ports and ("simulator", "loadtests") not in ports
    assert ("experiment", "loadtests") not in ports and ("experiment", "simulator") not in ports
    assert ports[("app", "loadtests")].modules.keys() == {"lblab.loadtests.locust_testbed"}


def test_the_drawing_has_every_package_and_only_downward_arrows() -> None:
    drawing = gen.mermaid()
    numbers = gen.floor_numbers()
    for floor in gen.floors():
        if not floor.is_base:
            for member in floor.members:
                assert f'p_{member}["{member}"]' in drawing
    arrows = re.findall(r"p_(\w+) -->\|(\d+)\| p_(\w+)", drawing)
    assert arrows
    for upper, _, lower in arrows:
        assert numbers[upper] > numbers[lower]


def test_the_prose_names_only_what_exists() -> None:
    text = PAGE.read_text()
    assert gen.prose_problems(text) == []
    named = gen.prose_modules(text)
    assert len(named) >= 30  # the flows name real modules, not none
    for module in named:
        assert gen.path_of(module).is_file(), module
    for module in (
        "lblab.app.testbeds",
        "lblab.experiment.runner",
        "lblab.experiment.testbed",
        "lblab.balancer.router",
        "lblab.balancer.pool",
        "lblab.balancer.lifecycle",
    ):
        assert module in named


@pytest.mark.parametrize(
    ("prose", "problem"),
    [
        ("The runner (`lblab/experiment/runnr.py`).", "no such file"),
        ("See `lblab.balancer.pool.Pool.pik`.", "defines no Pool.pik"),
        ("`Pool.pik` of `lblab/balancer/pool.py`.", "`Pool.pik`: not defined"),
        ("`plan()` of `lblab/experiment/runner.py`.", "`plan()`: not defined"),
        ("`Runner.execute`, with no module beside it.", "no module"),
    ],
)
def test_the_prose_check_finds_what_does_not_exist(prose: str, problem: str) -> None:
    problems = gen.prose_problems(prose)
    assert len(problems) == 1 and problem in problems[0]


def test_fill_replaces_every_marker_and_refuses_a_missing_one() -> None:
    text = PAGE.read_text()
    page = gen.fill(text)
    assert not gen.MARKER.search(page)
    assert "```mermaid" in page
    for contract in gen.contracts():
        assert contract["name"] in page
    with pytest.raises(ValueError, match="missing markers"):
        gen.fill(text.replace("<!-- architecture:ports -->", ""))
