"""The measured window of a phase: one definition for the runner, the simulator, the
analysis, the report and the terminal lines.

A phase's load starts with its first request (``load_start``). Its measured window runs
from ``load_start + warmup`` to the end of the load: ``load_start + warmup + duration``
for a timed phase, or the last answer for a phase of a fixed request count, and never
past the last answer. Every row of every table is labelled by where it falls
(``window`` column):

- requests by ``t_sent``: ``before`` the window's start, ``inside``, or ``after`` its end;
- CPU samples by the interval each one averages, ``(t - interval, t]``: ``inside`` only
  if all of it lies in the window, so a sample that straddles the end of the load (and
  reads the idle time after it) never counts;
- picks by ``t``, like requests.

Throughput is the successful requests sent inside the window divided by the window's
length; the analysis, the report, the summary table and the progress line all use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    import pyarrow as pa

WINDOW_COLUMN = "window"
BEFORE, INSIDE, AFTER = "before", "inside", "after"
LABELS = (BEFORE, INSIDE, AFTER)


@dataclass(frozen=True, slots=True)
class Window:
    """[start, end) in epoch seconds."""

    start: float
    end: float

    @property
    def seconds(self) -> float:
        return max(self.end - self.start, 0.0)

    def to_dict(self) -> dict[str, float]:
        return {"start": self.start, "end": self.end, "seconds": self.seconds}

    @classmethod
    def from_dict(cls, data: Any) -> Window | None:
        """The window a manifest entry holds, or None for runs written before windows."""
        if not isinstance(data, dict):
            return None
        try:
            return cls(float(data["start"]), float(data["end"]))
        except (KeyError, TypeError, ValueError):
            return None


def phase_window(
    load_start: float, last_answer: float, warmup: float, duration: float | None
) -> Window:
    """The measured window of a phase (``duration`` None: a phase of a request count)."""
    start = load_start + warmup
    end = last_answer if duration is None else min(start + duration, last_answer)
    return Window(start, max(end, start))


def label_times(t: npt.ArrayLike, window: Window, interval: float = 0.0) -> npt.NDArray[Any]:
    """``before`` / ``inside`` / ``after`` for each time; ``interval`` > 0 labels samples
    that average ``(t - interval, t]`` (inside only when all of it is in the window)."""
    times = np.asarray(t, dtype=float)
    out = np.full(times.shape, INSIDE, dtype=object)
    if interval > 0:
        out[times - interval < window.start] = BEFORE
        out[times > window.end] = AFTER
    else:
        out[times < window.start] = BEFORE
        out[times >= window.end] = AFTER
    return out


def with_window(table: pa.Table, column: str, window: Window, interval: float = 0.0) -> pa.Table:
    """``table`` with its rows labelled by their ``column`` time: the ``window`` column,
    and ``warmup`` (``window == "before"``), as every results table carries them."""
    import pyarrow as pa  # here: the command line imports this module and stays light
    import pyarrow.compute as pc

    where = pa.array(label_times(table[column].to_numpy(), window, interval), pa.string())
    return table.append_column(WINDOW_COLUMN, where).append_column(
        "warmup", pc.equal(where, BEFORE)
    )


def throughput(ok_inside: int, window: Window) -> float:
    """Successful requests per second of the window (NaN for an empty window)."""
    return ok_inside / window.seconds if window.seconds > 0 else float("nan")


def cpu_per_request_us(cores: float, window_s: float, requests: int) -> float:
    """Microseconds of CPU per request sent inside a window: ``cores`` (the share of one
    core a process used over the window) times the window's length, over its requests;
    NaN without requests. The balancer check and the thesis's claims both read it."""
    return cores * window_s / requests * 1e6 if requests else float("nan")
