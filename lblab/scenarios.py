"""The scenario matrix: what each request looks like.

The thesis crosses package size (request body) with work volume (the JSON document the
server builds, serializes and parses):

    package s/m/l = 100 B / 10 KB / 1 MB      work r: s/m/l = 10 KB / 100 KB / 1 MB

A cell is named ``<package>p+<work>r`` (``sp+sr`` ... ``lp+lr``). ``variation`` draws one
of the nine cells per request, uniformly, from a seeded ``random.Random``. Presets may
define further scenarios as lists of (possibly custom) cells; a scenario with several
cells draws among them the same way.

A trace scenario has no cells: a recorded trace gives each request's shape and send
time (``lblab/traces.py``; it runs under the ``trace`` load model). ``azure-code`` and
``azure-conv`` are built in (``TRACE_SCENARIOS``), outside the default list of a run.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from functools import lru_cache

from lblab.errors import ConfigError
from lblab.traces import BUILTIN_TRACES, TraceWindow

PACKAGE_SIZES = {"s": 100, "m": 10_000, "l": 1_000_000}
WORK_SIZES = {"s": 10_000, "m": 100_000, "l": 1_000_000}


@dataclass(frozen=True, slots=True)
class Cell:
    """One request shape: ``package_bytes`` of request body, ``work_bytes`` of server work."""

    name: str
    package_bytes: int
    work_bytes: int

    def __post_init__(self) -> None:
        if self.package_bytes < 0 or self.work_bytes < 0:
            raise ConfigError(f"cell {self.name}: sizes must be 0 or more")


CELLS: dict[str, Cell] = {
    f"{p}p+{w}r": Cell(f"{p}p+{w}r", PACKAGE_SIZES[p], WORK_SIZES[w])
    for p in PACKAGE_SIZES
    for w in WORK_SIZES
}
VARIATION = "variation"
BUILTIN_SCENARIOS: tuple[str, ...] = (*CELLS, VARIATION)
"""Every built-in scenario, in the one order runs and tables use: the matrix row by row."""
TRACE_SCENARIOS: tuple[str, ...] = tuple(BUILTIN_TRACES)
"""Built-in trace scenarios, each replaying the built-in trace of its name; a run names
them itself (they are not in a run's default scenarios: they need the trace model)."""


@dataclass(frozen=True, slots=True)
class Scenario:
    """A named mix of cells (one cell: every request is that cell), or a trace."""

    name: str
    cells: tuple[Cell, ...]
    trace: TraceWindow | None = None
    """What a trace scenario replays (its cells are empty)."""

    def __post_init__(self) -> None:
        if not self.cells and self.trace is None:
            raise ConfigError(f"scenario {self.name}: needs at least one cell or a trace")
        if self.cells and self.trace is not None:
            raise ConfigError(f"scenario {self.name}: give cells or a trace, not both")

    def chooser(self, rng: random.Random) -> CellChooser:
        return CellChooser(self.cells, rng)


class CellChooser:
    """Draws the cell of each request; a single-cell scenario costs no random draw."""

    __slots__ = ("_cells", "_rng")

    def __init__(self, cells: tuple[Cell, ...], rng: random.Random) -> None:
        self._cells, self._rng = cells, rng

    def next(self) -> Cell:
        cells = self._cells
        return cells[0] if len(cells) == 1 else self._rng.choice(cells)


def builtin_scenario(name: str) -> Scenario:
    """``sp+sr`` ... ``lp+lr``, ``variation`` and the trace scenarios (their whole trace);
    ConfigError lists the names otherwise."""
    if name == VARIATION:
        return Scenario(VARIATION, tuple(CELLS.values()))
    if name in TRACE_SCENARIOS:
        return Scenario(name, (), TraceWindow(source=name))
    cell = CELLS.get(name)
    if cell is None:
        raise ConfigError(
            f"unknown scenario {name!r}; built-in scenarios are "
            f"{', '.join(BUILTIN_SCENARIOS + TRACE_SCENARIOS)} "
            "(or define one under [scenario_defs.NAME] in the config)"
        )
    return Scenario(name, (cell,))


# The matrix's nine bodies stay cached; a trace's shapes are mostly distinct (19,366 in
# azure-conv, about 180 MB of bodies if every one were kept), so the cache is bounded.
@lru_cache(maxsize=64)
def request_body(package_bytes: int, work_bytes: int) -> bytes:
    """The wire contract's request data: ``{"work_bytes": W, "pad": "..."}``, exactly
    ``package_bytes`` long once encoded, or the unpadded minimum (about 30 bytes) when the
    package size is smaller than that."""
    bare = json.dumps({"work_bytes": work_bytes, "pad": ""}, separators=(",", ":")).encode()
    pad = max(0, package_bytes - len(bare))
    body = json.dumps({"work_bytes": work_bytes, "pad": "x" * pad}, separators=(",", ":"))
    return body.encode()
