"""The run's progress display: a bar for the whole run, one for the current phase.

On a terminal it is a live ``rich`` display with the phase's requests per second and
failures; elsewhere (CI logs, ansible) it prints one line per finished phase instead,
so logs stay readable.
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def bar_columns() -> tuple[ProgressColumn, ...]:
    """A bar's columns: what, the bar, done of all, time taken, ETA (runs and sweeps)."""
    return (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )


class RunProgress:
    def __init__(self, total_phases: int, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        self.live = self.console.is_terminal
        self._progress = Progress(
            *bar_columns(),
            console=self.console,
            disable=not self.live,
            transient=False,
        )
        self._run: TaskID = self._progress.add_task("run", total=total_phases)
        self._phase: TaskID | None = None
        self._label = ""
        self._seconds = 1.0

    def __enter__(self) -> RunProgress:
        self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._progress.stop()

    def add_phases(self, n: int) -> None:
        """A block added to an adaptive run: the bar (and its ETA) grows."""
        total = self._progress.tasks[self._run].total or 0
        self._progress.update(self._run, total=total + n)
        if not self.live:
            self.console.print(f"adding a block of {n} phases", highlight=False)

    def note(self, line: str) -> None:
        """A line between phases (an adaptive run's decision): printed above the live
        bars, with no time or source tag (``console.log`` would add ``progress.py:66``)."""
        self.console.print(line, highlight=False)

    def skip(self, n: int = 1) -> None:
        """Phases already done (a resumed run)."""
        self._progress.advance(self._run, n)

    def start_phase(self, label: str, seconds: float) -> None:
        self._label, self._seconds = label, max(1.0, seconds)
        if self._phase is not None:
            self._progress.remove_task(self._phase)
        self._phase = self._progress.add_task(label, total=self._seconds)

    def update_phase(self, elapsed: float, requests: int, failures: int) -> None:
        if self._phase is None:
            return
        rate = requests / elapsed if elapsed > 0 else 0.0
        self._progress.update(
            self._phase,
            completed=min(elapsed, self._seconds),
            description=f"{self._label}  {rate:7.0f} req/s  {failures} failed",
        )

    def end_phase(self, status: str, requests: int, failures: int, ok_per_s: float | None) -> None:
        """``ok_per_s``: successful requests per second of the measured window
        (``lblab/windows.py``), the figure the summary and the report show."""
        self._progress.advance(self._run)
        rate = "no measured window" if ok_per_s is None else f"{ok_per_s:.0f} ok req/s measured"
        self.note(f"{self._label}: {status}, {requests} requests, {failures} failed, {rate}")
