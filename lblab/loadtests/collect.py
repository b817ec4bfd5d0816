"""Slicing the balancer's picks and the agents' CPU samples into phases.

Both arrive as JSON lines appended by other processes (``raw/picks-*.jsonl``: ``{"t",
"server", "inflight_at_pick", "strategy"}``; ``raw/cpu-*.jsonl``: ``{"t", "server",
"cpu_percent"}``). For an external testbed, copy those files into ``raw/`` under the
same names (the ansible fetch does) and run ``lblab run --collect``: the same code
collects them. Each ``JsonlTail`` remembers its byte offset, so a 20-minute phase is
read once, not re-read for every later phase; a partial last line waits for the next
read.
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import Any

import orjson


class JsonlTail:
    """New complete lines of one append-only file, parsed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0

    def read_new(self) -> list[dict[str, Any]]:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        end = data.rfind(b"\n") + 1
        self.offset += end
        rows = []
        for line in data[:end].splitlines():
            if line.strip():
                try:
                    rows.append(orjson.loads(line))
                except orjson.JSONDecodeError:
                    continue  # a line torn by a killed writer; the rest of the file is fine
        return rows


class WindowSource:
    """All rows of the files matching a glob, ordered by ``t``, sliced by time windows."""

    def __init__(self, folder: Path, pattern: str) -> None:
        self.folder, self.pattern = folder, pattern
        self._tails: dict[Path, JsonlTail] = {}
        self._times: list[float] = []
        self._rows: list[dict[str, Any]] = []

    def poll(self) -> None:
        for path in sorted(self.folder.glob(self.pattern)):
            tail = self._tails.setdefault(path, JsonlTail(path))
            new = [r for r in tail.read_new() if isinstance(r.get("t"), int | float)]
            if not new:
                continue
            self._rows.extend(new)
            self._rows.sort(key=lambda r: r["t"])
            self._times = [r["t"] for r in self._rows]

    def window(self, start: float, end: float) -> list[dict[str, Any]]:
        lo = bisect.bisect_left(self._times, start)
        hi = bisect.bisect_right(self._times, end)
        return self._rows[lo:hi]

    def forget_before(self, t: float) -> None:
        """Drop rows older than ``t`` (every phase that could want them is collected)."""
        cut = bisect.bisect_left(self._times, t)
        del self._rows[:cut]
        del self._times[:cut]
