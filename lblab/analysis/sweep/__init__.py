"""Where each strategy wins in a sweep, from ``sweep.parquet`` (``lblab sweep``): the
winner maps of the sweep's report, and the sweep notebook's view.

- ``map``: the winner map per pair of axes, its margins, where the seeds disagree, and
  how a live check agrees with it.
- ``view``: one sweep folder opened once for the notebook (``open_sweep``).
"""

from lblab.analysis.sweep.map import (
    FULL_MARGIN,
    WinnerMap,
    all_maps,
    live_agreement,
    metric_column,
    read_live,
    read_sweep,
    winners,
)
from lblab.analysis.sweep.view import open_sweep

__all__ = [
    "FULL_MARGIN",
    "WinnerMap",
    "all_maps",
    "live_agreement",
    "metric_column",
    "open_sweep",
    "read_live",
    "read_sweep",
    "winners",
]
