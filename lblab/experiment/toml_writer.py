"""TOML text for config-shaped dicts: what ``lblab run --print-config`` prints.

The standard library reads TOML (``tomllib``) but does not write it, and a run's config
needs only a small part of the format: scalars, lists of scalars, tables and arrays of
tables. ``RunConfig.to_toml`` writes the resolved config with it, so that
``--print-config > my.toml`` and ``--config my.toml`` give the same run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def dumps_toml(data: Mapping[str, Any]) -> str:
    """TOML for config-shaped dicts: scalars, lists of scalars, tables, arrays of tables."""
    lines: list[str] = []
    _emit_table(data, [], lines)
    return "\n".join(lines).strip() + "\n"


def _value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list | tuple):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, Mapping):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() else json.dumps(k)


def _is_table_array(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, Mapping) for x in v)


def _emit_table(data: Mapping[str, Any], path: list[str], lines: list[str]) -> None:
    scalars = {
        k: v for k, v in data.items() if not isinstance(v, Mapping) and not _is_table_array(v)
    }
    for k, v in scalars.items():
        lines.append(f"{_key(k)} = {_value(v)}")
    for k, v in data.items():
        if isinstance(v, Mapping):
            sub = [*path, _key(k)]
            lines += ["", f"[{'.'.join(sub)}]"]
            _emit_table(v, sub, lines)
        elif _is_table_array(v):
            for item in v:
                lines += ["", f"[[{'.'.join([*path, _key(k)])}]]"]
                for ik, iv in item.items():
                    lines.append(f"{_key(ik)} = {_value(iv)}")
