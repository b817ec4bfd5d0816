"""Parsing of the values people type: numbers, durations, sizes, addresses, key=value
lists, TOML and JSON files.

Each parser raises ``ConfigError`` naming the field, the bad value and an example of a
good one; ``lblab.cli.main`` turns it into one line on stderr and exit code 2. Component
configs are frozen dataclasses built from these values once, at load, and check their
ranges in ``__post_init__`` with ``check_range``; after that no code sees a raw dict.
NaN and infinity are never accepted: every comparison with NaN is false, so a NaN would
slip through ``x <= 0`` checks and surface much later as a traceback.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lblab.errors import ConfigError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)\s*(ms|s|m|h)?\s*$")
"""A plain or exponent number (``str(1e-05)`` is ``'1e-05'``: a value the runner passes on
as text must parse again), then an optional unit."""
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


MAX_DURATION = 7 * 86400.0
"""Longest duration anything here accepts (a week): longer is a typo, not an experiment."""


MAX_WEIGHT = 1e6
"""Largest static weight: a million to one is past any capacity mix; more is a typo."""


MAX_SEED = 2**32 - 1
"""Largest seed: numpy seeds with it, JSON and Parquet carry it, and ``seed + phase``
stays a 64-bit integer."""


ID_PATTERN = re.compile(r"[A-Za-z0-9_.-]{1,64}")
"""The one grammar of an id a person gives (a server, a backend, an agent's server, a
timeline event's server): 1-64 ASCII letters, digits, ``_``, ``.`` or ``-``. Ids name
``/metrics`` labels, log lines, cgroups (``lblab-<id>-<pid>``, read back from the right)
and files (``server-<id>.log``), so none can add a line, a label or a folder."""


def check_id(value: object, field: str) -> str:
    """``value`` if it is an id (``ID_PATTERN``), else a ``ConfigError`` naming ``field``."""
    if not isinstance(value, str) or not ID_PATTERN.fullmatch(value):
        raise ConfigError(
            f"{field}: {value!r} is not an id; give 1-64 letters, digits, '_', '.' or '-', e.g. s1"
        )
    return value


TOKEN_PATTERN = re.compile(r"[\x21-\x7e]{16,256}")
"""A shared secret (the admin token, the report token): visible ASCII, so it travels in
an HTTP header and in RSocket metadata as given, and long enough not to be guessed."""


def check_token(token: str, flag: str, env: str) -> str:
    """``token`` if it is one (``TOKEN_PATTERN``), else a ``ConfigError`` naming ``flag``
    and ``env``, the two ways to give it."""
    if not TOKEN_PATTERN.fullmatch(token):
        raise ConfigError(
            f"{flag} / {env} must be 16-256 visible ASCII characters "
            "(no spaces); generate one with e.g. `openssl rand -hex 24`"
        )
    return token


def check_weight(raw: object, where: str) -> float:
    """A backend's static weight from any source (flags, TOML, JSON, the admin API): a
    finite number in (0, ``MAX_WEIGHT``]. The one rule every driver and config applies."""
    try:
        if isinstance(raw, bool) or not isinstance(raw, int | float | str):
            raise TypeError
        weight = float(raw)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{where}: {raw!r} is not a number; give e.g. 1 or 2.5") from None
    if not (math.isfinite(weight) and 0 < weight <= MAX_WEIGHT):
        raise ConfigError(
            f"{where}: weight {raw!r} must be a number > 0 and at most {MAX_WEIGHT:g} "
            "(leave a backend out of the pool instead of giving it weight 0)"
        )
    return weight


def check_range(
    field: str,
    value: float,
    *,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
) -> None:
    """Raise ``ConfigError`` unless ``value`` is finite and within the bounds given.

    The ``__post_init__`` helper: safe against NaN, which passes every ``<`` test.
    """
    try:
        finite = not isinstance(value, bool) and math.isfinite(value)
    except OverflowError:  # an integer past the float range
        raise ConfigError(f"{field}: the number given is far too large") from None
    if not finite:
        raise ConfigError(f"{field}: {value!r} is not a finite number; give a plain number")
    if minimum is not None and value < minimum:
        raise ConfigError(f"{field}: {value} must be {_bound(minimum)} or more")
    if above is not None and value <= above:
        raise ConfigError(f"{field}: {value} must be above {_bound(above)}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"{field}: {value} must be at most {_bound(maximum)}")


def _bound(x: float) -> str:
    """A bound as a person writes it: 4194304 and 0.01, not 4.1943e+06; 1e+09 stays."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e7 else f"{x:g}"


def parse_float(
    value: Any,
    field: str,
    *,
    minimum: float | None = None,
    above: float | None = None,
    maximum: float | None = None,
) -> float:
    """A finite number from a TOML number or its text, within the bounds given."""
    if isinstance(value, bool):
        raise ConfigError(f"{field}: {value!r} is not a number")
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{field}: {value!r} is not a number") from None
    check_range(field, number, minimum=minimum, above=above, maximum=maximum)
    return number


def parse_int(value: Any, field: str, *, minimum: int = 0, maximum: int | None = None) -> int:
    """A whole number from a TOML integer or its text (``5``, not ``5.5`` nor ``true``)."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigError(f"{field}: {value!r} is not a whole number")
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(f"{field}: {value!r} is not a whole number") from None
    check_range(field, number, minimum=minimum, maximum=maximum)
    return number


def parse_duration(
    value: str | float | int, field: str = "duration", *, above: float | None = None
) -> float:
    """Seconds from ``90``, ``1.5s``, ``250ms``, ``20m`` or ``1h``: finite, 0 to a week.

    ``above=0`` refuses 0 as well (a timeout or a period).
    """
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    else:
        m = _DURATION.match(str(value))
        if not m:
            raise ConfigError(
                f"{field}: {value!r} is not a duration; write e.g. 90, 250ms, 30s, 20m or 1h"
            )
        seconds = float(m.group(1)) * _DURATION_UNITS[m.group(2)]
    if not math.isfinite(seconds):
        raise ConfigError(f"{field}: {value!r} is not a finite duration; write e.g. 30s or 20m")
    if seconds < 0:
        raise ConfigError(f"{field}: {value!r} is negative; a duration is 0 or more")
    if above is not None and seconds <= above:
        raise ConfigError(f"{field}: {value!r} is too short; give more than {above:g} s")
    if seconds > MAX_DURATION:
        raise ConfigError(f"{field}: {value!r} is longer than a week; give e.g. 30s or 20m")
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
    """``(host, port)`` from ``127.0.0.1:7001`` or ``[::1]:7001``: the port in ASCII
    digits (``int`` takes any script's), an IPv6 host in brackets (``::1:7001`` could
    be either)."""
    host, sep, port = str(value).rpartition(":")
    if not sep or not host or not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
        raise ConfigError(f"{field}: {value!r} is not HOST:PORT; write e.g. 127.0.0.1:7001")
    if host.startswith("[") and host.endswith("]") and len(host) > 2:
        return host[1:-1], int(port)
    if ":" in host or "[" in host or "]" in host:
        raise ConfigError(f"{field}: {value!r}: write an IPv6 address in brackets, e.g. [::1]:7001")
    return host, int(port)


def parse_assignments(value: str, field: str, example: str = "s1=1,s2=1,s3=7") -> dict[str, str]:
    """``{"s1": "1", "s2": "7"}`` from ``s1=1,s2=7``."""
    out: dict[str, str] = {}
    for item in filter(None, (p.strip() for p in value.split(","))):
        name, sep, val = (part.strip() for part in item.partition("="))
        if not sep or not name or not val:
            raise ConfigError(f"{field}: {item!r} is not NAME=VALUE; write e.g. {example}")
        if name in out:
            raise ConfigError(f"{field}: {name!r} is given twice")
        out[name] = val
    return out


def _read_text(path: Path, what: str) -> str:
    """The UTF-8 text of a file a person named, or a ``ConfigError`` saying why not."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} {path} does not exist; check the path") from None
    except IsADirectoryError:
        raise ConfigError(f"{what} {path} is a directory; give the file itself") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{what} {path} is not UTF-8 text (byte {exc.start}); is it the right file?"
        ) from None
    except OSError as exc:
        raise ConfigError(f"{what} {path} cannot be read: {exc.strerror or exc}") from None


def load_toml(path: Path, what: str = "config file") -> dict[str, Any]:
    """The tables of a TOML file; every way it can be unreadable is a ``ConfigError``."""
    text = _read_text(path, what)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{what} {path} is not valid TOML: {exc}") from None


def load_json_object(path: Path, what: str) -> dict[str, Any]:
    """A JSON file holding one object (a manifest); anything else is a ``ConfigError``."""
    text = _read_text(path, what)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{what} {path} is not valid JSON ({exc}); fix or remove it") from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"{what} {path} holds a JSON {type(data).__name__}, not an object; "
            "is it the right file?"
        )
    return data


def parse_names(values: str | Sequence[str] | None) -> list[str]:
    """Names from a repeatable option whose values may each be a comma list: ``-s rr
    -s lc`` and ``-s rr,lc`` (and ``--strategies rr,lc``) all give ``[rr, lc]``."""
    if values is None:
        return []
    given = [values] if isinstance(values, str) else values
    return [n for v in given for n in split_commas(v)]


def split_commas(text: str) -> list[str]:
    """A comma list whose commas inside brackets stay with their item:
    ``rr,least-request[a=1,b=2]`` -> ``["rr", "least-request[a=1,b=2]"]``."""
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        depth += (char == "[") - (char == "]")
        if char == "," and depth <= 0:
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    items.append("".join(current))
    return [item.strip() for item in items if item.strip()]
