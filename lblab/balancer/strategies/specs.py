"""A user's strategy, given by spec: loaded once per process, registered under its name.

A spec names a class: ``path/to/file.py:Class`` (a file) or ``package.module:Class`` (an
importable module); an installed package may also add a name through the entry-point
group ``lblab.strategies`` (``name = "package.module:Class"``). Loading checks the class
(a ``lblab.strategy.Strategy`` subclass with a ``name`` of its own that is no built-in's
and a ``pick``) and records its source as a ``StrategySource``: the class's name, its
file's text and that text's sha256, so a run can keep a copy, a Dask worker can be sent
it, and a balancer process can load the same bytes (``install``).

Every failure is one ``ConfigError`` line naming the spec and what to do. Nothing here
runs per request: the registry calls it when a name it does not know is asked for.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from lblab.errors import ConfigError

ENTRY_POINT_GROUP = "lblab.strategies"
"""The entry-point group through which installed packages add strategies."""
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.-]{0,47}")
"""A strategy's name: what tables, charts and ``--strategy`` show (lower case)."""
_MODULE_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
_LOADED_PREFIX = "lblab_user_strategies"
"""Modules loaded from a file live in ``sys.modules`` under this prefix (a dataclass
``Config`` and pickling need the class's module there)."""


@dataclass(frozen=True, slots=True)
class StrategySource:
    """Where a user's strategy came from, and the bytes it was loaded from."""

    name: str
    """The class's ``name``: the strategy's name everywhere else."""
    spec: str
    """As given, with a file's path made absolute (``/abs/file.py:Class``)."""
    class_name: str
    filename: str
    """The source file's name (``file.py``), what a copy is written as."""
    text: str
    """The source file's text."""
    sha256: str

    def to_plain(self) -> dict[str, str]:
        """What the manifest records (the text is kept as a file beside it)."""
        return {"spec": self.spec, "class": self.class_name, "file": self.filename,
                "sha256": self.sha256}  # fmt: skip


def is_spec(text: str) -> bool:
    """A spec names a class with ``:``; a built-in or entry-point name never has one."""
    return ":" in text


def split_spec(spec: str) -> tuple[str, str]:
    """``("path/or.module", "Class")``, checked for form only."""
    target, _, class_name = spec.rpartition(":")
    if not target or not class_name.isidentifier():
        raise ConfigError(
            f"strategy {spec!r}: a spec is FILE.py:Class or package.module:Class "
            "(e.g. ./my_strategy.py:MyStrategy)"
        )
    return target, class_name


def load(spec: str) -> tuple[type[Any], StrategySource]:
    """The class a spec names and its source, checked (``check_class``)."""
    target, class_name = split_spec(spec)
    if target.endswith(".py") or "/" in target or "\\" in target:
        path = Path(target).expanduser().resolve()
        if not path.is_file():
            raise ConfigError(
                f"strategy {spec!r}: no file {path}; give the path of a .py file "
                "(relative to the current directory), e.g. ./my_strategy.py:MyStrategy"
            )
        text = _read(path, spec)
        module = _exec_file(text, path, spec)
        spec = f"{path}:{class_name}"
    else:
        if not _MODULE_PATTERN.fullmatch(target):
            raise ConfigError(
                f"strategy {spec!r}: {target!r} is neither a .py file nor a module name"
            )
        module = _import(target, spec)
        path = Path(getattr(module, "__file__", "") or "")
        text = _read(path, spec) if path.is_file() else ""
    cls = getattr(module, class_name, None)
    if cls is None:
        classes = sorted(n for n, v in vars(module).items() if isinstance(v, type))
        raise ConfigError(
            f"strategy {spec!r}: {path.name or target} has no class {class_name!r}"
            f" (it has {', '.join(classes) or 'none'})"
        )
    check_class(cls, spec)
    digest = hashlib.sha256(text.encode()).hexdigest()
    return cls, StrategySource(cls.name, spec, class_name, path.name, text, digest)


def install(source: StrategySource) -> type[Any]:
    """The class of ``source``, loaded from its recorded text (a copy, another host)."""
    module = _exec_file(source.text, Path(source.filename), source.spec, source.sha256)
    cls = getattr(module, source.class_name, None)
    if cls is None:
        raise ConfigError(f"strategy {source.spec!r}: its source has no {source.class_name!r}")
    check_class(cls, source.spec)
    return cls


def check_class(cls: object, spec: str) -> None:
    """Is ``cls`` a strategy class lblab can drive? A ``ConfigError`` saying why not."""
    from .configured import ConfiguredStrategy

    if not isinstance(cls, type) or not issubclass(cls, ConfiguredStrategy):
        raise ConfigError(
            f"strategy {spec!r}: {getattr(cls, '__name__', cls)!r} is not a strategy class; "
            "subclass lblab.strategy.Strategy (from lblab.strategy import Strategy)"
        )
    name = cls.__dict__.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise ConfigError(
            f'strategy {spec!r}: {cls.__name__} needs name = "..." of its own: lower-case '
            f"letters, digits, '-', '_' or '.', at most 48 (it has {name!r})"
        )
    if cls.pick is ConfiguredStrategy.pick:
        raise ConfigError(
            f"strategy {spec!r}: {cls.__name__} defines no pick(backends, request, now)"
        )
    if not isinstance(getattr(cls, "summary", ""), str):
        raise ConfigError(f"strategy {spec!r}: {cls.__name__}.summary must be a string")


def entry_point(name: str) -> str | None:
    """The spec an installed package declares for ``name`` (group ``lblab.strategies``)."""
    for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return str(ep.value)
    return None


def _read(path: Path, spec: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"strategy {spec!r}: cannot read {path}: {exc}") from None


def _exec_file(text: str, path: Path, spec: str, digest: str | None = None) -> ModuleType:
    """Run a strategy file's text as a module of its own (once per text and path)."""
    digest = digest or hashlib.sha256(text.encode()).hexdigest()
    stem = re.sub(r"\W", "_", path.stem) or "strategy"
    name = f"{_LOADED_PREFIX}.{stem}_{digest[:12]}"
    if name in sys.modules:
        return sys.modules[name]
    try:
        code = compile(text, str(path), "exec")
    except SyntaxError as exc:
        raise ConfigError(
            f"strategy {spec!r}: {path.name} line {exc.lineno}: {exc.msg}; fix the file "
            f"(python -m py_compile {path.name} shows it)"
        ) from None
    module = ModuleType(name)
    module.__file__ = str(path)
    sys.modules.setdefault(_LOADED_PREFIX, ModuleType(_LOADED_PREFIX))
    sys.modules[name] = module
    try:
        exec(code, module.__dict__)  # loading the user's own strategy is the point
    except Exception as exc:
        del sys.modules[name]
        raise ConfigError(
            f"strategy {spec!r}: running {path.name} raised {_where(exc, str(path))}; fix the file"
        ) from None
    return module


def _import(target: str, spec: str) -> ModuleType:
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (target == exc.name or target.startswith(f"{exc.name}.")):
            raise ConfigError(
                f"strategy {spec!r}: no module {target!r} here; install its package in "
                "lblab's environment, or give a file: path/to/file.py:Class"
            ) from None
        raise ConfigError(f"strategy {spec!r}: importing {target} raised {_where(exc)}") from None
    except Exception as exc:
        raise ConfigError(f"strategy {spec!r}: importing {target} raised {_where(exc)}") from None


def _where(exc: BaseException, filename: str | None = None) -> str:
    """``NameError: name 'x' is not defined (file.py line 12)``: the exception and the
    deepest line of the user's file it passed through."""
    text = f"{type(exc).__name__}: {exc}"
    frames = traceback.extract_tb(exc.__traceback__)
    mine = [f for f in frames if filename is None or f.filename == filename]
    if mine:
        text += f" ({Path(mine[-1].filename).name} line {mine[-1].lineno})"
    return text
