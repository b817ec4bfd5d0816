"""Parsing of the values people type: durations, sizes, addresses, key=value lists, TOML.

Each parser raises ``ConfigError`` naming the field, the bad value and an example of a
good one. Component configs are frozen dataclasses built from these values once, at
load; after that no code sees a raw dict.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from lblab.errors import ConfigError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|KIB|MB|MIB|GB|GIB)?\s*$", re.IGNORECASE)
# Decimal units as the thesis uses them (10 KB = 10,000 bytes); binary with an "i".
_SIZE_UNITS = {
    None: 1,
    "B": 1,
    "KB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "KIB": 1024,
    "MIB": 1024**2,
    "GIB": 1024**3,
}


def parse_duration(value: str | float | int, field: str = "duration") -> float:
    """Seconds from ``90``, ``1.5s``, ``250ms``, ``20m`` or ``1h``."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        m = _DURATION.match(str(value))
        if not m:
            raise ConfigError(
                f"{field}: {value!r} is not a duration; write e.g. 90, 250ms, 30s, 20m or 1h"
            )
        seconds = float(m.group(1)) * _DURATION_UNITS[m.group(2)]
    if seconds < 0:
        raise ConfigError(f"{field}: {value!r} is negative; a duration is 0 or more")
    return seconds


def parse_size(value: str | int, field: str = "size") -> int:
    """Bytes from ``100``, ``100B``, ``10KB`` (10,000), ``1MB`` or ``64KiB``."""
    if isinstance(value, int) and not isinstance(value, bool):
        n = value
    else:
        m = _SIZE.match(str(value))
        if not m:
            raise ConfigError(
                f"{field}: {value!r} is not a size; write e.g. 100B, 10KB, 1MB or 64KiB"
            )
        unit = m.group(2).upper() if m.group(2) else None
        n = int(float(m.group(1)) * _SIZE_UNITS[unit])
    if n < 0:
        raise ConfigError(f"{field}: {value!r} is negative")
    return n


def parse_hostport(value: str, field: str = "address") -> tuple[str, int]:
    """``(host, port)`` from ``127.0.0.1:7001`` or ``[::1]:7001``."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"{field}: {value!r} is not HOST:PORT; write e.g. 127.0.0.1:7001")
    return host.strip("[]"), int(port)


def parse_assignments(value: str, field: str) -> dict[str, str]:
    """``{"s1": "1", "s2": "7"}`` from ``s1=1,s2=7``."""
    out: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in value.split(","))):
        name, sep, val = item.partition("=")
        if not sep or not name or not val:
            raise ConfigError(f"{field}: {item!r} is not NAME=VALUE; write e.g. s1=1,s2=1,s3=7")
        if name in out:
            raise ConfigError(f"{field}: {name!r} is given twice")
        out[name] = val
    return out


def load_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"config file {path} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}") from None
