"""The clock offset of each Locust worker from its master, measured NTP-style per phase.

Rows carry ``t_sent`` from the clock of the host that sent them, and the runner (on the
master's host) cuts the phase's window with its own clock; in a distributed run these
clocks must agree. At the start of each phase the master pings every worker over
Locust's own message channel ``ROUNDS`` times: t0 master sends, t1 worker receives, t2
worker answers, t3 master receives. Each round gives

    offset = ((t1 - t0) + (t2 - t3)) / 2      (worker clock minus master clock)
    bound  = ((t3 - t0) - (t2 - t1)) / 2      (half the round trip spent on the way)

The true offset lies within ``offset +- bound`` whatever the split of the round trip
between the two directions; the round with the smallest bound is kept. The master
writes ``clocks.json`` into the phase's records folder (on its own host: the runner's);
the runner keeps it in the manifest (``phases[].clocks``) and ``lblab.validity`` judges
it against the phase's latencies.

The Locust side is ``loadtests.clock_exchange`` (this module imports no Locust: the
runner reads the file).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

CLOCKS_FILE = "clocks.json"


def estimate(t0: float, t1: float, t2: float, t3: float) -> tuple[float, float]:
    """(offset, bound) in seconds of one exchange; the offset is the worker's clock
    minus the master's, the true one within +- bound of it."""
    return ((t1 - t0) + (t2 - t3)) / 2, max(0.0, ((t3 - t0) - (t2 - t1)) / 2)


def best(exchanges: list[tuple[float, float]]) -> tuple[float, float]:
    """The exchange with the smallest bound (the least queueing on the way)."""
    return min(exchanges, key=lambda e: e[1])


def read_clocks(folder: Path) -> Mapping[str, Any] | None:
    """What the master wrote into a phase's records folder, or None (no distributed
    Locust, or the master did not get that far)."""
    path = folder / CLOCKS_FILE
    try:
        return json.loads(path.read_text()) if path.is_file() else None
    except (OSError, ValueError):
        return None


def write_clocks(folder: Path, workers: Mapping[str, Any], asked: int) -> None:
    """Write ``clocks.json`` whole (a reader never sees half a file)."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{CLOCKS_FILE}.tmp"
    tmp.write_text(json.dumps({"workers": workers, "asked": asked}, indent=1))
    tmp.replace(folder / CLOCKS_FILE)
