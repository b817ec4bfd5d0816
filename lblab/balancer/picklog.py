"""The balancer's picks log (``--picks FILE``): one JSON line per decision, written in batches.

The forwarding path only appends a tuple to a list; the node's periodic timer turns
the batch into JSON lines and appends them to the file at least once a second and at
exit, so a slow disk never stalls a request; a full disk drops whole batches, counted
and logged once (``lblab.files.AppendLog``), and forwarding goes on. Lines follow the
contract
``{"t": epoch_s, "server": "s2", "inflight_at_pick": 3, "strategy": "lc"}``.
"""

from __future__ import annotations

import logging
from pathlib import Path

import orjson

from lblab.files import AppendLog

log = logging.getLogger(__name__)

FLUSH_INTERVAL_S = 1.0
"""The contract: picks reach the file at least once a second."""
MAX_BUFFERED_PICKS = 200_000
"""A flush is forced beyond this many buffered picks (~20 MB of tuples) to bound memory."""


class PickLog:
    __slots__ = ("_file", "_pending", "path")

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = AppendLog(path, log)
        self._pending: list[tuple[float, str, int, str]] = []

    @property
    def dropped(self) -> int:
        """Picks a full disk kept out of the file."""
        return self._file.dropped

    def record(self, t: float, server: str, inflight_at_pick: int, strategy: str) -> None:
        pending = self._pending
        pending.append((t, server, inflight_at_pick, strategy))
        if len(pending) >= MAX_BUFFERED_PICKS:
            self.flush()

    def flush(self) -> None:
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        dumps = orjson.dumps
        self._file.append(
            b"".join(
                dumps({"t": t, "server": s, "inflight_at_pick": n, "strategy": name}) + b"\n"
                for t, s, n, name in pending
            ),
            len(pending),
        )

    def close(self) -> None:
        self.flush()
        self._file.close()
