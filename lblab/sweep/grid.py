"""A sweep file and the points it names.

A sweep file is TOML::

    seeds = 3                      # or a `seed` axis in [grid]; default: base's seed only
    [base]                         # anything `lblab simulate --config` takes
    requests = 4000
    [[base.servers]]
    count = 90
    [[base.servers]]
    count = 10
    speed = 1
    [grid]                         # axes: a setting of [base] (dotted when nested), a list each
    strategy = ["p2c", "round-robin"]
    rate = [2000, 4000]
    "servers.1.speed" = [1, 4]
    points = [{ strategy = "least-loaded", rate = 3000 }]   # and explicit points

The sweep is the cartesian product of the axes, plus the explicit points, each run with
every seed. A point is identified by a stable hash of its resolved settings (base with
the point's values set, the seed included): the same settings always give the same key,
so a rerun into the same folder finds what is done by key. The settings are hashed,
not the ``SimConfig`` built from them, so a simulator that gains a setting with a
default does not make every finished point unknown.

Every point's config is built (and so checked) when the file is read, before the
first simulation starts: a typo fails in a second, not after an hour of points.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from lblab.balancer.strategies.registry import resolve, user_sources
from lblab.config import load_toml, parse_int
from lblab.errors import ConfigError
from lblab.simulator.config import KNOWN_KEYS, SimConfig, config_from_mapping

FILE_KEYS = ("base", "grid", "points", "seeds")
MAX_POINTS = 1_000_000
"""Past this a sweep file is a typo (an axis of a range meant as a few values)."""
DEFAULT_SEED = 1
DEFAULT_STRATEGY = next(f.default for f in fields(SimConfig) if f.name == "strategy")
"""What a point that sets no ``strategy`` runs: the simulator's own default."""


@dataclass(frozen=True, slots=True)
class Point:
    """One simulation of the sweep: the values it sets, its full settings and its key."""

    values: Mapping[str, Any]
    """The grid values (axis -> value) of this point, ``strategy`` and ``seed`` included."""
    settings: Mapping[str, Any]
    """What ``config_from_mapping`` takes: base with the values set."""
    key: str

    @property
    def strategy(self) -> str:
        """The strategy this point runs (the simulator's default when none is set)."""
        return str(self.settings.get("strategy", DEFAULT_STRATEGY))


@dataclass(frozen=True, slots=True)
class Sweep:
    axes: tuple[str, ...]
    """The varied settings in file order (grid keys, then keys only explicit points set);
    ``strategy`` and ``seed`` are always columns of the results, not listed here."""
    points: tuple[Point, ...]
    digest: str
    """Hash of the file's content (as parsed: comments and layout do not count)."""


def canonical(data: Any) -> str:
    """The one JSON text of ``data`` (sorted keys, no spaces), what keys are hashed over."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)


def point_key(settings: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical(settings).encode()).hexdigest()[:16]


def load_sweep(path: Path) -> Sweep:
    """Read and check a sweep file; every point's config is built once here."""
    return parse_sweep(load_toml(path, "sweep file"), str(path))


def parse_sweep(raw: Mapping[str, Any], where: str = "sweep file") -> Sweep:
    unknown = sorted(set(raw) - set(FILE_KEYS))
    if unknown:
        raise ConfigError(
            f"{where}: unknown key {unknown[0]!r}; a sweep file has {', '.join(FILE_KEYS)} "
            "(settings go under [base], varied ones under [grid])"
        )
    base = raw.get("base", {})
    if not isinstance(base, Mapping):
        raise ConfigError(f"{where}: base must be a table ([base]) of simulate settings")
    grid = raw.get("grid", {})
    if not isinstance(grid, Mapping):
        raise ConfigError(f"{where}: grid must be a table ([grid]) of NAME = [values]")
    explicit = raw.get("points", [])
    if not isinstance(explicit, list) or not all(isinstance(p, Mapping) for p in explicit):
        raise ConfigError(
            f"{where}: points must be a list of tables, e.g. points = [{{rate = 10}}]"
        )
    axes: dict[str, list[Any]] = {}
    for name, values in grid.items():
        _check_name(f"grid.{name}", name)
        if not isinstance(values, list):
            raise ConfigError(
                f"grid.{name}: {values!r} is not a list; write {name} = [{_toml(values)}] "
                "(an axis lists the values it takes)"
            )
        if not values:
            raise ConfigError(
                f"grid.{name}: an empty list gives no points; give at least one value "
                "or remove the axis"
            )
        axes[name] = values
    for i, point in enumerate(explicit):
        for name in point:
            _check_name(f"points[{i}].{name}", name)
    seeds = _seeds(raw, base, axes)
    combos = [dict(zip(axes, c, strict=True)) for c in itertools.product(*axes.values())]
    if not axes and not explicit:
        combos = [{}]  # no grid: the base alone
    chosen = [*combos, *(dict(p) for p in explicit)]
    count = len(chosen) * len(seeds)
    if count > MAX_POINTS:
        raise ConfigError(f"{where}: {count:,} points; give at most {MAX_POINTS:,}")
    names = list(axes)
    names += [n for p in explicit for n in p if n not in names]
    points, seen = [], set()
    for values in chosen:
        for seed in seeds:
            point = _point(base, {**values, "seed": seed})
            if point.key not in seen:  # an explicit point the grid holds already
                seen.add(point.key)
                points.append(point)
    return Sweep(
        axes=tuple(n for n in names if n not in ("strategy", "seed")),
        points=tuple(points),
        digest=hashlib.sha256(canonical(raw).encode()).hexdigest()[:16],
    )


def _check_name(where: str, name: str) -> None:
    head = name.split(".")[0].replace("-", "_")
    if head not in KNOWN_KEYS:
        raise ConfigError(
            f"{where}: {head!r} is not a simulate setting; name one of [base]'s settings "
            f"(dotted when nested, e.g. servers.1.speed): {', '.join(sorted(KNOWN_KEYS))}"
        )


def _toml(value: Any) -> str:
    return json.dumps(value) if isinstance(value, str) else str(value).lower()


def _seeds(raw: Mapping[str, Any], base: Mapping[str, Any], axes: dict[str, Any]) -> list[int]:
    first = parse_int(base.get("seed", DEFAULT_SEED), "base.seed", minimum=0)
    if "seed" in axes:
        if "seeds" in raw:
            raise ConfigError("seeds: give seeds = N or a grid.seed axis, not both")
        return [parse_int(s, "grid.seed", minimum=0) for s in axes.pop("seed")]
    n = parse_int(raw.get("seeds", 1), "seeds", minimum=1, maximum=10_000)
    return list(range(first, first + n))


def _point(base: Mapping[str, Any], values: Mapping[str, Any]) -> Point:
    settings = copy.deepcopy(dict(base))
    settings.setdefault("picks_every", 0)  # only a summary row leaves the worker
    for name, value in values.items():
        _set(settings, name, value)
    shown = ", ".join(f"{k}={v!r}" for k, v in values.items())
    try:
        # A strategy of the user's own (a spec) is loaded here and runs by its name; the
        # key also hashes its source, so an edited file is a new point.
        settings["strategy"] = resolve(str(settings.get("strategy", DEFAULT_STRATEGY)))
        config_from_mapping(settings)
    except ConfigError as exc:
        raise ConfigError(f"the point {shown}: {exc}") from exc
    keyed = dict(settings)
    if (source := user_sources().get(settings["strategy"])) is not None:
        keyed["strategy_sha256"] = source.sha256
    if "strategy" in values:
        values = {**values, "strategy": settings["strategy"]}
    return Point(values=dict(values), settings=settings, key=point_key(keyed))


def _set(settings: dict[str, Any], name: str, value: Any) -> None:
    """Set a dotted ``name`` (``servers.1.speed``) in ``settings``; a missing table on
    the way is made, a list is indexed by number."""
    parts = name.split(".")
    here: Any = settings
    for i, part in enumerate(parts):
        where = ".".join(parts[:i]) or "the top"
        slot: int | str
        if isinstance(here, list):
            slot = _index(here, part, name, where)
        elif isinstance(here, dict):
            slot = part
            if i < len(parts) - 1 and here.get(part) is None:
                here[part] = {}
        else:
            raise ConfigError(
                f"grid.{name}: base's {where} is {here!r}, not a table or list to set in; "
                "give it as a table (e.g. [[base.servers]]) in [base]"
            )
        if i == len(parts) - 1:
            here[slot] = value
        else:
            here = here[slot]


def _index(items: Sequence[Any], part: str, name: str, where: str) -> int:
    if not part.isdigit() or int(part) >= len(items):
        raise ConfigError(
            f"grid.{name}: base's {where} is a list of {len(items)}; index it by 0.."
            f"{len(items) - 1}"
        )
    return int(part)
