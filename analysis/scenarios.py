"""Scenario names of the thesis matrix and the display order of scenarios and strategies.

The matrix cell ``mp+lr`` is package size m (10 KB) x work volume l (1 MB): rows are
package sizes, columns work volumes, as in the thesis figures 5.1-5.4 and A.21-A.35.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

SIZES = ("s", "m", "l")
PACKAGE_LABELS = {"s": "100 B", "m": "10 KB", "l": "1 MB"}
WORK_LABELS = {"s": "10 KB", "m": "100 KB", "l": "1 MB"}
VARIATION = "variation"
MATRIX = tuple(f"{p}p+{w}r" for p in SIZES for w in SIZES)

_CELL = re.compile(r"^([sml])p\+([sml])r$")
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
    m = _CELL.match(scenario)
    return (m.group(1), m.group(2)) if m else None


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
