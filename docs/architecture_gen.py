"""The generated parts of the architecture page (``docs/architecture.md``), from the code.

``docs/hooks.py`` calls ``fill`` on the page at every build; each marker
``<!-- architecture:NAME -->`` of the page becomes:

- ``floors``: the floors of the layers contract in ``pyproject.toml`` (``[tool.importlinter]``,
  top floor first), each package with its module and line count and how many of its
  modules a floor above imports;
- ``ports``: the import graph (grimp's, the one ``lint-imports`` checks) between the
  packages: a Mermaid drawing, then for each pair of packages where one imports the other
  the imported package's modules it imports (the port between them), and which
  packages use each module of the shared base;
- ``contracts``: every import-linter contract, by name.

The rest of the page is written by hand (the two flows, which imports cannot show).
``prose_problems`` checks it: every file path (``lblab/.../x.py``), dotted module
(``lblab.x.y``), class name (``Pool``, ``Pool.pick``) and call (``plan()``) that its
code spans name exists, a class or call in a module named in the same paragraph or list
item.
"""

from __future__ import annotations

import ast
import functools
import re
import tomllib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grimp

REPO = Path(__file__).resolve().parent.parent
PACKAGE = "lblab"
SOURCE = REPO / PACKAGE
MARKER = re.compile(r"<!-- architecture:(\w+) -->")
GENERATED = "*Generated from the code at every build (`docs/architecture_gen.py`).*"


# --- the contracts ------------------------------------------------------------------


@dataclass(frozen=True)
class Floor:
    """One layer of the layers contract: its members, lblab's top-level packages (or
    modules) in the contract's order."""

    number: int
    """0: the shared base, the bottom floor; counted up from there."""
    members: tuple[str, ...]
    independent: bool
    """``a | b``: the members may not import each other; ``a : b``: they may."""
    spec: str
    """The layer as the contract writes it."""

    @property
    def is_base(self) -> bool:
        return self.number == 0


@functools.cache
def importlinter() -> dict[str, Any]:
    """``[tool.importlinter]`` of ``pyproject.toml``."""
    with (REPO / "pyproject.toml").open("rb") as f:
        table: dict[str, Any] = tomllib.load(f)["tool"]["importlinter"]
    return table


def contracts() -> list[dict[str, Any]]:
    """Every import-linter contract, in ``pyproject.toml``'s order."""
    return list(importlinter()["contracts"])


def layers_contract() -> dict[str, Any]:
    """The one contract of type ``layers`` (containers ``lblab``)."""
    found = [c for c in contracts() if c["type"] == "layers"]
    if len(found) != 1 or found[0].get("containers") != [PACKAGE]:
        raise ValueError("pyproject.toml should hold one layers contract over lblab")
    return found[0]


def floors() -> list[Floor]:
    """The floors of the layers contract, top floor first."""
    layers = layers_contract()["layers"]
    out = []
    for k, spec in enumerate(layers):
        independent = "|" in spec
        members = tuple(m.strip() for m in re.split(r"[|:]", spec))
        out.append(Floor(len(layers) - 1 - k, members, independent, spec))
    return out


def outside() -> list[str]:
    """lblab's modules outside every floor (the contract's ``exhaustive_ignores``)."""
    return list(layers_contract().get("exhaustive_ignores", []))


# --- the import graph ---------------------------------------------------------------


@functools.cache
def graph() -> grimp.ImportGraph:
    """lblab's import graph, as ``lint-imports`` builds it (lazy and TYPE_CHECKING
    imports included); no cache is written."""
    return grimp.build_graph(PACKAGE, cache_dir=None)


def part_of(module: str) -> str | None:
    """The top-level package (or module) of lblab that ``module`` is or is in; None
    for lblab itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == PACKAGE else None


def path_of(module: str) -> Path:
    """The source file of a module of lblab."""
    path = REPO.joinpath(*module.split("."))
    package = path / "__init__.py"
    return package if package.is_file() else path.with_suffix(".py")


def modules_of(member: str) -> list[str]:
    """The modules of one top-level package (or the module itself), sorted."""
    name = f"{PACKAGE}.{member}"
    return sorted(m for m in graph().modules if m == name or m.startswith(name + "."))


def lines_of(modules: Iterable[str]) -> int:
    return sum(len(path_of(m).read_text().splitlines()) for m in modules)


@dataclass(frozen=True)
class Port:
    """What package ``upper`` imports of package ``lower``."""

    upper: str
    lower: str
    modules: Mapping[str, tuple[str, ...]]
    """Each module of ``lower`` imported, with the modules of ``upper`` that import it."""


@functools.cache
def ports() -> tuple[Port, ...]:
    """Every pair of floor members where one imports the other, from the graph."""
    g = graph()
    floor_of = {m: f for f in floors() for m in f.members}
    found: dict[tuple[str, str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for importer in g.modules:
        upper = part_of(importer)
        if upper not in floor_of:
            continue
        for imported in g.find_modules_directly_imported_by(importer):
            lower = part_of(imported)
            if lower in floor_of and lower != upper:
                found[(upper, lower)][imported].add(importer)
    order = {m: k for k, m in enumerate(m for f in floors() for m in f.members)}
    return tuple(
        Port(u, lo, {m: tuple(sorted(s)) for m, s in sorted(mods.items())})
        for (u, lo), mods in sorted(found.items(), key=lambda i: (order[i[0][0]], order[i[0][1]]))
    )


def floor_numbers() -> dict[str, int]:
    return {m: f.number for f in floors() for m in f.members}


# --- rendering ----------------------------------------------------------------------


def _short(module: str, member: str) -> str:
    """``module`` without its package's prefix (``lblab.experiment.plan``: ``plan``)."""
    return (
        module.removeprefix(f"{PACKAGE}.{member}.") if module != f"{PACKAGE}.{member}" else member
    )


def _label(floor: Floor) -> str:
    """A floor's number, with the contract's line when it has more than one member."""
    return f"{floor.number}: `{floor.spec}`" if len(floor.members) > 1 else str(floor.number)


def floors_section() -> str:
    """The floors table: one row per package above the base, one row for the base."""
    numbers = floor_numbers()
    from_above: dict[str, set[str]] = defaultdict(set)
    for port in ports():
        if numbers[port.upper] > numbers[port.lower]:
            from_above[port.lower].update(port.modules)
    out = [
        GENERATED + " The layers contract of `pyproject.toml`, top floor first: a floor may "
        "import the floors below it, never one above. `a | b`: `a` and `b` may not import "
        "each other; `a : b`: they may. Modules and lines: Python source, as `lint-imports` "
        "sees it. Imported from above: how many of a package's modules any higher floor "
        "imports (its port, listed under [The ports](#the-ports)).",
        "",
        "| floor | package | modules | lines | imported from above |",
        "|---|---|---|---|---|",
    ]
    total_modules = total_lines = 0
    for floor in floors():
        if floor.is_base:
            mods = [m for member in floor.members for m in modules_of(member)]
            lines = lines_of(mods)
            used = sum(1 for member in floor.members if from_above[member])
            out.append(
                f"| {floor.number}: the shared base | "
                + ", ".join(f"`{m}`" for m in floor.members)
                + f" | {len(mods)} | {lines:,} | {used} of {len(floor.members)} |"
            )
            total_modules, total_lines = total_modules + len(mods), total_lines + lines
            continue
        for k, member in enumerate(floor.members):
            mods = modules_of(member)
            lines = lines_of(mods)
            label = _label(floor) if k == 0 else ""
            above = f"{len(from_above[member])} of {len(mods)}" if from_above[member] else "-"
            out.append(f"| {label} | `{member}` | {len(mods)} | {lines:,} | {above} |")
            total_modules, total_lines = total_modules + len(mods), total_lines + lines
    rest = [PACKAGE, *(m for name in outside() for m in modules_of(name))]
    out += [
        f"| outside | {', '.join(f'`{m}`' for m in outside())} (the contract's "
        f"`exhaustive_ignores`) and `{PACKAGE}/__init__.py` | {len(rest)} | "
        f"{lines_of(rest):,} | |",
        f"| | all of `{PACKAGE}` | {len(graph().modules)} | {lines_of(graph().modules):,} | |",
        "",
    ]
    return "\n".join(out)


def _node(member: str) -> str:
    return f"p_{member}"


def mermaid() -> str:
    """The floors as Mermaid subgraphs, top first; an edge per pair of packages where
    one imports the other, labelled with the number of modules it imports. The base is
    one node, and the edges into it are left out (every floor has them)."""
    lines = ["```mermaid", "flowchart TD"]
    for floor in floors():
        lines.append(f'  subgraph F{floor.number}["floor {floor.number}"]')
        if floor.is_base:
            lines.append(f'    base["the shared base: {len(floor.members)} modules and packages"]')
        else:
            lines += [f'    {_node(m)}["{m}"]' for m in floor.members]
        lines.append("  end")
    numbers = floor_numbers()
    for port in ports():
        if numbers[port.lower] == 0:
            continue
        lines.append(f"  {_node(port.upper)} -->|{len(port.modules)}| {_node(port.lower)}")
    lines.append("```")
    return "\n".join(lines)


def ports_section() -> str:
    numbers = floor_numbers()
    base = next(f for f in floors() if f.is_base)
    users: dict[str, dict[str, int]] = defaultdict(dict)
    for port in ports():
        if numbers[port.lower] == 0:
            importers = {i for found in port.modules.values() for i in found}
            users[port.lower][port.upper] = len(importers)
    out = [
        GENERATED + " Each arrow: a package imports the one below it; its label, how many "
        "modules of the lower one it imports. Every floor also imports the shared base "
        "(its arrows are left out; [its table](#the-shared-base) says who uses what). The "
        "theme draws it with Mermaid, fetched from the network; offline its source shows, "
        "and the table under it holds the same.",
        "",
        mermaid(),
        "",
        "### Between the packages",
        "",
        "Each pair of packages where the upper one imports the lower one: the lower "
        "one's modules it imports (the port), each with how many of the upper one's "
        "modules import it.",
        "",
        "| from | to | modules imported (by how many) |",
        "|---|---|---|",
    ]
    for port in ports():
        if numbers[port.lower] == 0:
            continue
        mods = ", ".join(
            f"`{_short(m, port.lower)}` ({len(found)})" for m, found in port.modules.items()
        )
        out.append(f"| `{port.upper}` | `{port.lower}` | {mods} |")
    out += [
        "",
        "### The shared base",
        "",
        "Each module (or package) of the bottom floor: its size, and the packages that "
        "import it, each with how many of its modules do.",
        "",
        "| module | modules | lines | imported by |",
        "|---|---|---|---|",
    ]
    order = {m: k for k, m in enumerate(m for f in floors() for m in f.members)}
    for member in base.members:
        mods = modules_of(member)
        who = sorted(users[member].items(), key=lambda i: order[i[0]])
        used = ", ".join(f"`{u}` ({n})" for u, n in who) or "-"
        out.append(f"| `{member}` | {len(mods)} | {lines_of(mods):,} | {used} |")
    out.append("")
    return "\n".join(out)


def contracts_section() -> str:
    out = [
        GENERATED + " `uv run lint-imports` checks these contracts of `pyproject.toml` "
        "(`scripts/test` runs it); a change that breaks one fails the tests.",
        "",
        "| contract | kind |",
        "|---|---|",
    ]
    for contract in contracts():
        name = contract["name"].replace("|", "\\|")
        out.append(f"| {name} | {contract['type']} |")
    out.append("")
    return "\n".join(out)


SECTIONS = {
    "floors": floors_section,
    "ports": ports_section,
    "contracts": contracts_section,
}


def fill(markdown: str) -> str:
    """The page with each marker replaced by its generated part; a ``ValueError`` for a
    marker this module does not know or a part the page lacks."""
    names = MARKER.findall(markdown)
    unknown = sorted(set(names) - set(SECTIONS))
    missing = sorted(set(SECTIONS) - set(names))
    if unknown or missing:
        raise ValueError(
            f"architecture.md: unknown markers {unknown}, missing markers {missing} "
            f"(known: {', '.join(SECTIONS)})"
        )
    return MARKER.sub(lambda m: SECTIONS[m.group(1)](), markdown)


# --- checking the prose -------------------------------------------------------------

_SPAN = re.compile(r"`([^`\n]+)`")
_PATH = re.compile(r"[\w./-]+\.py")
_DOTTED = re.compile(rf"{PACKAGE}(\.\w+)+")
_SYMBOL = re.compile(r"[A-Z]\w*[a-z]\w*(\.\w+)?")
_CALL = re.compile(r"[\w.]+\(\)")


def _blocks(markdown: str) -> list[str]:
    """The page's paragraphs and list items, without its generated parts and comments."""
    text = re.sub(r"<!--.*?-->", "", markdown, flags=re.S)
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return [b for b in re.split(r"\n\s*\n|\n(?=\s*(?:[-*]|\d+\.) )", text) if b.strip()]


def _module_of_path(span: str) -> str | None:
    """The module a file path names (``lblab/x/y.py``, or ``x/y.py`` under ``lblab/``)."""
    for base in (REPO, SOURCE):
        path = base / span
        if path.is_file():
            rel = path.resolve().relative_to(REPO).with_suffix("")
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            return ".".join(parts)
    return None


@functools.cache
def _definitions(module: str) -> dict[str, set[str]]:
    """A module's top-level names, each class with the names its body defines."""
    tree = ast.parse(path_of(module).read_text())
    names: dict[str, set[str]] = {}

    def targets(stmt: ast.stmt) -> list[str]:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            return [stmt.name]
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            return [stmt.target.id]
        if isinstance(stmt, ast.Assign):
            return [t.id for t in stmt.targets if isinstance(t, ast.Name)]
        return []

    for stmt in tree.body:
        for name in targets(stmt):
            body = stmt.body if isinstance(stmt, ast.ClassDef) else []
            names[name] = {n for s in body for n in targets(s)}
    return names


def _defines(module: str, symbol: str) -> bool:
    name, _, attr = symbol.partition(".")
    found = _definitions(module).get(name)
    return found is not None and (not attr or attr in found)


def prose_problems(markdown: str) -> list[str]:
    """What the hand-written page names that does not exist (an empty list: all does)."""
    modules = set(graph().modules)
    problems = []
    for block in _blocks(markdown):
        named: list[str] = []
        symbols: list[str] = []
        for span in _SPAN.findall(block):
            if _PATH.fullmatch(span):
                module = _module_of_path(span)
                if module is None:
                    problems.append(f"`{span}`: no such file")
                elif module in modules:
                    named.append(module)
            elif _DOTTED.fullmatch(span):
                parts = span.split(".")
                k = next(k for k in range(len(parts), 0, -1) if ".".join(parts[:k]) in modules)
                module, rest = ".".join(parts[:k]), ".".join(parts[k:])
                if rest and not _defines(module, rest):
                    problems.append(f"`{span}`: {module} defines no {rest}")
                named.append(module)
            elif _SYMBOL.fullmatch(span) or _CALL.fullmatch(span):
                symbols.append(span)
        for span in symbols:
            symbol = span.removesuffix("()")
            if not any(_defines(m, symbol) for m in named):
                where = ", ".join(dict.fromkeys(named)) or "no module"
                problems.append(f"`{span}`: not defined in {where} (named beside it)")
    return problems


def prose_modules(markdown: str) -> list[str]:
    """The modules the hand-written page names by file path or dotted name, in order."""
    modules = set(graph().modules)
    out: list[str] = []
    for block in _blocks(markdown):
        for span in _SPAN.findall(block):
            module = None
            if _PATH.fullmatch(span):
                module = _module_of_path(span)
            elif _DOTTED.fullmatch(span) and span in modules:
                module = span
            if module and module not in out:
                out.append(module)
    return out
