"""Display order and labels of scenarios and strategies, for tables and charts.

The matrix itself (sizes, cell names, ``variation``) is ``lblab/scenarios.py``, shared
with the runner and the simulator; this module only decides how it is shown. The matrix
cell ``mp+lr`` is package size m (10 KB) x work volume l (1 MB): rows are package sizes,
columns work volumes, as in the thesis figures 5.1-5.4 and A.21-A.35.
"""

from __future__ import annotations

from collections.abc import Iterable

from lblab.scenarios import CELLS, PACKAGE_SIZES, VARIATION, WORK_SIZES


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
MATRIX = tuple(CELLS)

# The thesis five first, in the thesis' order, then the other registry names.
_STRATEGY_ORDER = (
    "r",
    "rr",
    "wrr",
    "wrr-block",
    "lc",
    "dwrr",
    "dwrr-latency",
    "first",
    "lrt",
    "least-time",
    "dynamic",
    "dynamic-immediate",
    "dynamic-hybrid",
    "awrr",
    "p2c",
    "peak-ewma",
    "rsocket-weighted",
    "ip-hash",
    "ring-hash",
    "maglev",
    "lease",
)


def matrix_cell(scenario: str) -> tuple[str, str] | None:
    """``("m", "l")`` for ``"mp+lr"``; None for names outside the matrix."""
    if scenario not in CELLS:
        return None
    package, work = scenario.split("+")
    return package[0], work[0]


def order_scenarios(names: Iterable[str]) -> list[str]:
    """Matrix cells row by row, then ``variation``, then any other names sorted."""
    present = set(names)
    known = [s for s in (*MATRIX, VARIATION) if s in present]
    return known + sorted(present - set(known))


def order_strategies(names: Iterable[str]) -> list[str]:
    """The thesis five first, then the rest of the registry order, then unknown names sorted."""
    present = set(names)
    rank = {n: i for i, n in enumerate(_STRATEGY_ORDER)}

    def key(name: str) -> tuple[int, str]:
        base = name.split(" ")[0]  # "lc [sim]" sorts next to "lc"
        return (rank.get(base, len(rank)), name)

    return sorted(present, key=key)
