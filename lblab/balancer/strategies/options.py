"""Turning ``--strategy-option name=value`` strings into a strategy's typed config.

Each strategy declares a frozen dataclass ``Config``; this module converts the raw
values (strings from the CLI, or numbers/booleans from TOML) by the field's annotation
(``int``, ``float``, ``bool``, ``str`` or a ``Literal`` of choices) and builds it once,
so the dataclass's ``__post_init__`` range checks run at load and nothing later sees a
raw dict. Every failure is a ``ConfigError`` naming the strategy, the option and what
would be valid.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any, Literal, get_args, get_origin

from lblab.config import parse_assignments
from lblab.errors import ConfigError

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})


def build_config(config_cls: type[Any], options: Mapping[str, object] | None, strategy: str) -> Any:
    """An instance of ``config_cls`` from raw option values; unknown names are rejected."""
    fields = {f.name: f for f in dataclasses.fields(config_cls)}
    hints = typing.get_type_hints(config_cls)
    kwargs: dict[str, object] = {}
    for name, raw in (options or {}).items():
        if name not in fields:
            valid = ", ".join(sorted(fields)) or "none"
            raise ConfigError(
                f"strategy {strategy!r}: unknown option {name!r}; valid options: {valid}"
            )
        kwargs[name] = _convert(raw, hints[name], f"strategy {strategy!r} option {name!r}")
    try:
        return config_cls(**kwargs)
    except ConfigError as exc:
        raise ConfigError(f"strategy {strategy!r}: {exc}") from None


def _convert(raw: object, annotation: Any, what: str) -> object:
    if get_origin(annotation) is Literal:
        choices = get_args(annotation)
        if raw not in choices:
            raise ConfigError(f"{what}: {raw!r} is not one of {', '.join(map(str, choices))}")
        return raw
    if annotation is bool:
        if isinstance(raw, bool):
            return raw
        text = str(raw).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ConfigError(f"{what}: {raw!r} is not a boolean; write true or false")
    if annotation in (int, float):
        if isinstance(raw, bool):
            raise ConfigError(f"{what}: {raw!r} is not a number")
        try:
            return annotation(raw)
        except (TypeError, ValueError):
            kind = "an integer" if annotation is int else "a number"
            raise ConfigError(f"{what}: {raw!r} is not {kind}") from None
    if annotation is str:
        return str(raw)
    raise TypeError(f"{what}: unsupported option type {annotation!r}")  # a bug in a Config


def check(condition: bool, message: str) -> None:
    """Raise ``ConfigError(message)`` unless ``condition``: the ``__post_init__`` helper."""
    if not condition:
        raise ConfigError(message)


def split_options(text: str, where: str) -> tuple[str, dict[str, str]]:
    """``("least-request", {"choice_count": "3"})`` from ``least-request[choice_count=3]``:
    a strategy (a name or a spec) with options of its own, the one grammar of every
    ``--strategy`` flag. Without brackets the options are empty."""
    text = text.strip()
    if not text.endswith("]"):
        return text, {}
    ref, bracket, inside = text[:-1].partition("[")
    if not bracket or not ref:
        raise ConfigError(
            f"{where}: {text!r} is not STRATEGY[NAME=VALUE,...]; write e.g. "
            "'least-request[choice_count=3]' (quoted: the shell reads brackets)"
        )
    ref = ref.strip()
    return ref, parse_assignments(inside, f"{where} {ref!r}", f"'{ref}[tie=random]'")
