"""Display order and labels of scenarios and strategies, for tables and charts.

The matrix itself (sizes, cell names, ``variation``) is ``lblab/scenarios.py``, shared
with the runner and the simulator; this module only decides how it is shown. The matrix
cell ``mp+lr`` is package size m (10 KB) x work volume l (1 MB): rows are package sizes,
columns work volumes, as in the thesis figures 5.1-5.4 and A.21-A.35. Both orders are
lblab's own (``lblab.scenarios.BUILTIN_SCENARIOS``, ``lblab.strategy_names.STRATEGY_NAMES``,
which the balancer's registry checks itself against), never copies kept here.
"""

from __future__ import annotations

from collections.abc import Iterable

from lblab.scenarios import BUILTIN_SCENARIOS, CELLS, PACKAGE_SIZES, WORK_SIZES
from lblab.scenarios import VARIATION as VARIATION  # charts label the cell outside the grid
from lblab.strategy_names import STRATEGY_NAMES


def size_label(n: int) -> str:
    """``100 B``, ``10 KB``, ``1 MB`` (decimal units, as ``lblab.config.parse_size``)."""
    for unit, scale in (("MB", 1_000_000), ("KB", 1_000)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


SIZES = tuple(PACKAGE_SIZES)
"""Size letters in matrix order (``s``, ``m``, ``l``), rows and columns alike."""
PACKAGE_LABELS = {k: size_label(v) for k, v in PACKAGE_SIZES.items()}
WORK_LABELS = {k: size_label(v) for k, v in WORK_SIZES.items()}


def matrix_cell(scenario: str) -> tuple[str, str] | None:
    """``("m", "l")`` for ``"mp+lr"``; None for names outside the matrix."""
    if scenario not in CELLS:
        return None
    package, work = scenario.split("+")
    return package[0], work[0]


def order_scenarios(names: Iterable[str]) -> list[str]:
    """Matrix cells row by row, then ``variation``, then any other names sorted."""
    present = set(names)
    known = [s for s in BUILTIN_SCENARIOS if s in present]
    return known + sorted(present - set(known))


def order_strategies(names: Iterable[str]) -> list[str]:
    """The registry's order (``lblab.strategy_names``), then unknown names sorted."""
    present = set(names)
    rank = {n: i for i, n in enumerate(STRATEGY_NAMES)}

    def key(name: str) -> tuple[int, str]:
        base = name.split(" ")[0]  # "lc [sim]" sorts next to "lc"
        return (rank.get(base, len(rank)), name)

    return sorted(present, key=key)
