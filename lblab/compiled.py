"""The balancer's forwarding path compiled by mypyc, used only while it matches the source.

``scripts/compile`` (run by ``scripts/setup`` where a C compiler is) compiles ``MODULES``,
the modules a request passes through in the balancer and in the load generator's client,
from the same typed source with mypyc, into ``lblab/_compiled/``, and writes there a
manifest with each source's SHA-256 and the interpreter it was built for. At the first
import of ``lblab`` (``install``), a finder serving those extension modules goes first on
``sys.meta_path`` if the manifest matches the source and this interpreter; otherwise
nothing changes and everything runs as plain Python. It is all or nothing: compiled code
reaches into the classes of the other compiled modules, so one changed source means none
is used (an edited module runs at once as its source says; ``scripts/setup`` builds again).
``LBLAB_PURE_PYTHON=1`` turns it off. Why compile at all, and what it gains and costs:
docs/FIELD-NOTES.md, "Where lblab's balancer spends its CPU".
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

PACKAGE = Path(__file__).resolve().parent

STRATEGIES_NOT_COMPILED = ("__init__", "listing", "options", "registry", "specs")
"""The modules of ``balancer/strategies/`` left out of ``MODULES`` (why: its docstring)."""


def _strategy_modules() -> list[str]:
    """Every other module of ``balancer/strategies/``: a built-in strategy added there is
    compiled with the others, with no list to edit."""
    folder = PACKAGE / "balancer" / "strategies"
    return [
        f"lblab.balancer.strategies.{p.stem}"
        for p in sorted(folder.glob("*.py"))
        if p.stem not in STRATEGIES_NOT_COMPILED
    ]


MODULES = (
    "lblab.balancer.framing",
    "lblab.balancer.outbox",
    "lblab.balancer.wiring",
    "lblab.balancer.router",
    "lblab.balancer.budgets",
    "lblab.balancer.node_counters",
    "lblab.balancer.streams",
    "lblab.balancer.pool",
    "lblab.balancer.backend",
    "lblab.balancer.frontend",
    "lblab.balancer.lifecycle",
    *_strategy_modules(),
    "lblab.wire.codec",
    "lblab.wire.codes",
    "lblab.wire.connection",
    "lblab.wire.metadata",
    "lblab.loadtests.rsocket_client",
)
"""What is compiled: the per-request path of the balancer and of the Locust user's client,
and every registered strategy with what it shares (the views, the base classes, the
available list, the EWMA decay, the schedulers), so that all strategies pick at the
same, compiled price (``benchmarks/bench_pick.py``); each one's options class, in its
module, is a plain Python class there (``@mypyc_attr(native_class=False)``: a compiled
frozen dataclass cannot be copied or pickled) with its ``Literal`` options quoted (mypyc
erases a plain one). Left out (``STRATEGIES_NOT_COMPILED``): the registry, spec loading,
option parsing and listing (``registry``, ``specs``, ``options``, ``listing``: run once,
at start) and the simulator's own strategies."""

GROUP = "lblab_core"
"""mypyc's name for the shared library of the group (``lblab_core__mypyc``)."""

BUILD_DIR = PACKAGE / "_compiled"
MANIFEST = BUILD_DIR / "manifest.json"
OFF_ENV = "LBLAB_PURE_PYTHON"


def source_of(module: str, package: Path = PACKAGE) -> Path:
    """The ``.py`` file of a module of ``MODULES``."""
    return package.joinpath(*module.split(".")[1:]).with_suffix(".py")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def interpreter() -> str:
    """What an extension module is built for: the implementation and minor version, and
    the platform (``cpython-311 .cpython-311-x86_64-linux-gnu.so``), as wheels are."""
    return f"{sys.implementation.cache_tag} {importlib.machinery.EXTENSION_SUFFIXES[0]}"


def manifest_for(modules: Sequence[str], package: Path = PACKAGE) -> dict[str, object]:
    """The manifest a build of ``modules`` from ``package``'s source writes."""
    return {
        "interpreter": interpreter(),
        "sources": {m: digest(source_of(m, package)) for m in modules},
    }


def stale_reason(manifest: dict[str, object], package: Path = PACKAGE) -> str | None:
    """Why the build described by ``manifest`` must not be used here, or None if it may."""
    if manifest.get("interpreter") != interpreter():
        return f"built for {manifest.get('interpreter')!r}, this is {interpreter()!r}"
    sources = manifest.get("sources")
    if not isinstance(sources, dict) or sorted(sources) != sorted(MODULES):
        return "built from another list of modules"
    for module, sha in sources.items():
        try:
            if digest(source_of(module, package)) != sha:
                return f"{source_of(module, package).name} changed since the build"
        except OSError as exc:
            return f"cannot read {module}'s source: {exc}"
    return None


class _CompiledFinder:
    """Serves ``MODULES`` and the group's shared library from the build folder (a
    meta path finder by its ``find_spec``; ``importlib.abc``'s base class would import
    ``importlib.resources`` into every lblab process)."""

    def __init__(self, files: dict[str, Path]) -> None:
        self.files = files

    def find_spec(
        self, name: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        file = self.files.get(name)
        if file is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(name, str(file))
        return importlib.util.spec_from_file_location(name, file, loader=loader)


def _extension(folder: Path, stem: str) -> Path | None:
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        if (file := folder / (stem + suffix)).is_file():
            return file
    return None


def locate() -> tuple[dict[str, Path], str | None]:
    """The build's extension files by module name, or why it cannot be used here."""
    try:
        manifest = json.loads(MANIFEST.read_text())
    except FileNotFoundError:
        return {}, "not built yet"
    except (OSError, ValueError) as exc:
        return {}, f"unreadable {MANIFEST}: {exc}"
    reason = stale_reason(manifest)
    if reason is not None:
        return {}, reason
    files = {}
    for name in (*MODULES, f"{GROUP}__mypyc"):
        parts = name.split(".")
        file = _extension(BUILD_DIR.joinpath(*parts[:-1]), parts[-1])
        if file is None:
            return {}, f"{name} is missing from {BUILD_DIR}"
        files[name] = file
    return files, None


@functools.cache
def install() -> str:
    """Put the compiled modules first on the import path, if they match (once per
    process); ``status()``."""
    if os.environ.get(OFF_ENV, "") not in ("", "0"):
        return f"plain Python ({OFF_ENV} is set)"
    files, reason = locate()
    if reason is not None:
        return f"plain Python ({reason}; scripts/compile builds it)"
    sys.meta_path.insert(0, _CompiledFinder(files))
    return f"compiled ({len(MODULES)} modules, mypyc)"


def status() -> str:
    """``compiled (...)`` or ``plain Python (why)``: how this process runs ``MODULES``."""
    return install()


def active() -> bool:
    """Does this process run ``MODULES`` compiled?"""
    return status().startswith("compiled")
