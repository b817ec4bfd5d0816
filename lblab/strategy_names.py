"""The built-in strategies' names in their one order, read from their own declarations.

Each built-in is one class in a module of ``lblab/balancer/strategies/`` that declares its
``name`` and where it is ``listed``: ``(section, place)`` in docs/ALGORITHMS.md, the
sections being ``SECTIONS``. This module reads those two class attributes from the
modules' source (``ast``, no import), so the layers that must not import the balancer
(analysis) order their tables and charts by the same tuple the balancer's registry
imports its classes from. Adding a strategy touches its module (and its section of
docs/ALGORITHMS.md), not a list here.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

STRATEGIES_DIR = Path(__file__).resolve().parent / "balancer" / "strategies"
"""Where the built-in strategies' modules are."""

SECTIONS: tuple[str, ...] = (
    "the thesis five (and their variants)",
    "from the other papers",
    "from the best balancers",
    "what production runs today",
)
"""docs/ALGORITHMS.md's sections of strategies; a ``listed = (k, place)`` is in section k
(1-based)."""

THESIS_FIVE: tuple[str, ...] = ("r", "rr", "wrr", "lc", "dwrr")
"""The five algorithms the thesis compares, in its order."""


@dataclass(frozen=True, slots=True)
class BuiltIn:
    """One built-in strategy as its module declares it."""

    name: str
    listed: tuple[int, int]
    module: str
    """The module's name in ``lblab.balancer.strategies`` (``rr``)."""
    cls: str
    """The class's name in it (``RoundRobin``)."""


def _constant(node: ast.expr) -> object:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def _class_constants(node: ast.ClassDef) -> dict[str, object]:
    """The class body's ``x = constant`` and ``x: T = constant`` assignments."""
    found: dict[str, object] = {}
    for stmt in node.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        else:
            continue
        if isinstance(target, ast.Name):
            found[target.id] = _constant(value)
    return found


def _declared_in(path: Path) -> list[BuiltIn]:
    text = path.read_text(encoding="utf-8")
    if "listed" not in text:  # most helper modules: no parse
        return []
    found = []
    for node in ast.parse(text, str(path)).body:
        if not isinstance(node, ast.ClassDef):
            continue
        constants = _class_constants(node)
        if "listed" not in constants:
            continue
        name, listed = constants.get("name"), constants["listed"]
        where = f"{path.name}: class {node.name}"
        if not isinstance(name, str) or not name:
            raise RuntimeError(f"{where} is listed but has no name = '...' of its own")
        if not (
            isinstance(listed, tuple)
            and len(listed) == 2
            and all(isinstance(n, int) for n in listed)
            and 1 <= listed[0] <= len(SECTIONS)
        ):
            raise RuntimeError(
                f"{where}: listed = {listed!r}; give (section, place) with section 1 to "
                f"{len(SECTIONS)} ({', '.join(SECTIONS)}) and place a whole number"
            )
        found.append(BuiltIn(name, (listed[0], listed[1]), path.stem, node.name))
    return found


def declared_built_ins(folder: Path = STRATEGIES_DIR) -> tuple[BuiltIn, ...]:
    """Every built-in declared in ``folder``'s modules, in their listed order; a name or
    a place taken twice is a ``RuntimeError`` (a bug in a strategy's module)."""
    found = [b for path in sorted(folder.glob("*.py")) for b in _declared_in(path)]
    for attribute in ("name", "listed"):
        seen: dict[object, BuiltIn] = {}
        for b in found:
            other = seen.setdefault(getattr(b, attribute), b)
            if other is not b:
                raise RuntimeError(
                    f"{b.module}.{b.cls} and {other.module}.{other.cls} are both "
                    f"{attribute} {getattr(b, attribute)!r}: give one of them another"
                )
    return tuple(sorted(found, key=lambda b: b.listed))


BUILT_INS: tuple[BuiltIn, ...] = declared_built_ins()
"""Every built-in strategy, in the order of docs/ALGORITHMS.md."""

STRATEGY_NAMES: tuple[str, ...] = tuple(b.name for b in BUILT_INS)
"""Every built-in strategy's name, in the order of docs/ALGORITHMS.md."""
