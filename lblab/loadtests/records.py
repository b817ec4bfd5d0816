"""Exact per-request records, captured from Locust's request event.

Locust's CSV writer loses the last second of a run (docs/FIELD-NOTES.md, "Locust"), so each Locust process
(standalone or worker) keeps its own columns in memory and writes them as immutable
chunk files ``requests-<host>-<pid>-<seq>.json`` (the columns as JSON arrays, orjson)
into the phase's records folder, every ``FLUSH_S`` seconds and at stop. The Locust
process imports no pyarrow (nor the pandas pyarrow pulls in: 2 s of every phase's
start-up, on the harness's own CPU); the runner reads the chunks into Arrow
(``loadtests/record_table.py``). A crash loses at most that much. Next to them it
keeps ``progress-<host>-<pid>.json`` (requests and failures so far) for the runner's
progress bar. The runner merges all chunks of a phase, whoever wrote them.

Each attempt at a phase has a folder of its own, ``raw/phases/<phase>/<attempt>/``, and
the runner merges only its current attempt's folder: a Locust process of an attempt that
was killed (and should have died with it) cannot put a row into the attempt that reruns
the phase, whatever it still writes.

Workers on other loader hosts (``lblab locust-workers``) cannot reach the master's
folder: they are started with ``LBLAB_RECORDS_ROOT`` (their host's results folder) and
write to the same place relative to the run,
``<root>/<run-id>/raw/phases/<phase>/<attempt>/``.
Fetching those folders into the run directory (``infra/experiment.yml`` does) and
``lblab run --collect`` merge them. ``LBLAB_LOADER`` names the loader host in the rows
(default: the hostname, which namespaces on one machine share).

One row per request sent: ``t_sent`` (epoch s; the due time in the open model),
``latency_ms``, ``ok``, ``error_kind``, ``package_bytes``, ``work_bytes``, ``server``
(from the response, for successes), ``cell`` (the drawn cell, for mixed scenarios),
``loader`` (the loader host whose Locust process sent it), and the server's own
``service_ms``, ``queue_ms`` and ``server_ms`` from the response (successes; the
simulated twin's service model is fitted from them, the instrument's own time from
``server_ms``).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from pathlib import Path
from typing import Any

import orjson

from lblab.errors import WriteFailed
from lblab.files import write_bytes_atomically

log = logging.getLogger(__name__)

FLUSH_S = 2.0
HELD_ROWS_MAX = 1_000_000  # about 150 MB of buffered rows while the disk is full
LOADER_ENV = "LBLAB_LOADER"
RECORDS_ROOT_ENV = "LBLAB_RECORDS_ROOT"
COLUMNS = (
    "t_sent",
    "latency_ms",
    "ok",
    "error_kind",
    "error_origin",
    "package_bytes",
    "work_bytes",
    "server",
    "cell",
    "loader",
    "service_ms",
    "queue_ms",
    "server_ms",
    "send_lag_ms",
    "balancer",
)
"""The contract's per-request columns (labels like run_id are added when a phase is
written) plus ``cell``, ``loader``, ``service_ms``, ``queue_ms``, ``server_ms`` (the
server's whole time for it, arrival to answer: ``analysis/report/instrument.py``) and
``send_lag_ms`` (open model: how late each send was against its due time), and
``balancer``, the node
the request went through (``b1`` .. ``bK``); their types are
``record_table.RECORD_SCHEMA``'s."""
CHUNK_GLOB = "requests-*.json"


def local_folder(folder: Path) -> Path:
    """The folder this process writes a phase's records to: ``folder`` (the spec's, on
    the master's host) or, with ``LBLAB_RECORDS_ROOT`` set, the same
    ``<run-id>/raw/phases/<phase>/<attempt>`` under that root on this host."""
    root = os.environ.get(RECORDS_ROOT_ENV)
    if not root:
        return folder
    # phase_folder's layout: the last five parts are <run-id>/raw/phases/<phase>/<attempt>.
    return Path(root).joinpath(*folder.parts[-5:])


def loader_name() -> str:
    """The loader host this process runs on, as the rows name it."""
    return os.environ.get(LOADER_ENV) or socket.gethostname()


def _writer_tag() -> str:
    """``<loader>-<pid>``: unique per process across hosts (the pid alone is per host)."""
    return f"{loader_name()}-{os.getpid()}"


class RequestRecorder:
    """Column buffers for one Locust process; ``flush`` writes what it has as one chunk."""

    def __init__(self, folder: Path) -> None:
        self.folder = local_folder(folder)
        self._tag = _writer_tag()
        self._loader = loader_name()
        self._seq = 0
        self._cols: dict[str, list[Any]] = {c: [] for c in COLUMNS}
        self.requests = 0
        self.failures = 0
        self.dropped = 0  # rows a full disk made this process give up
        self._failing = False

    def add(
        self,
        t_sent: float,
        latency_ms: float,
        error_kind: str | None,
        error_origin: str | None,
        package_bytes: int,
        work_bytes: int,
        server: str | None,
        cell: str,
        service_ms: float | None = None,
        queue_ms: float | None = None,
        send_lag_ms: float | None = None,
        balancer: str = "b1",
        server_ms: float | None = None,
    ) -> None:
        c = self._cols
        c["t_sent"].append(t_sent)
        c["latency_ms"].append(latency_ms)
        c["ok"].append(error_kind is None)
        c["error_kind"].append(error_kind)
        c["error_origin"].append(error_origin)
        c["package_bytes"].append(package_bytes)
        c["work_bytes"].append(work_bytes)
        c["server"].append(server)
        c["cell"].append(cell)
        c["loader"].append(self._loader)
        c["service_ms"].append(service_ms)
        c["queue_ms"].append(queue_ms)
        c["server_ms"].append(server_ms)
        c["send_lag_ms"].append(send_lag_ms)
        c["balancer"].append(balancer)
        self.requests += 1
        if error_kind is not None:
            self.failures += 1

    def flush(self) -> None:
        """Write buffered rows as a new chunk (atomically) and the progress file.

        A write that fails (a full disk) is logged once and the rows are kept for the
        next flush, so room made in time loses nothing; past ``HELD_ROWS_MAX`` the newest
        rows are dropped and counted (``dropped`` in the progress file: the runner's
        ``unaccounted``)."""
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            if self._cols["t_sent"]:
                name = f"requests-{self._tag}-{self._seq:05d}.json"
                write_bytes_atomically(self.folder / name, orjson.dumps(self._cols))
                self._seq += 1
                self._cols = {c: [] for c in COLUMNS}
            write_bytes_atomically(self.folder / f"progress-{self._tag}.json", self._progress())
        except (WriteFailed, OSError) as exc:
            self._write_failed(exc)
        else:
            if self._failing:
                log.warning("records are written again to %s", self.folder)
                self._failing = False

    def _progress(self) -> bytes:
        counts = {"requests": self.requests, "failures": self.failures, "dropped": self.dropped}
        return json.dumps(counts).encode()

    def _write_failed(self, exc: Exception) -> None:
        held = len(self._cols["t_sent"])
        if held > HELD_ROWS_MAX:
            self.dropped += held - HELD_ROWS_MAX
            self._cols = {c: v[:HELD_ROWS_MAX] for c, v in self._cols.items()}
        if not self._failing:
            log.warning(
                "%s; keeping up to %d rows in memory until it can be written", exc, HELD_ROWS_MAX
            )
            self._failing = True


def mark_started(folder: Path) -> None:
    """Note when this process starts its users: phase timelines count from the load's
    start, not from the Locust launch (which takes 1-3 s on a busy machine)."""
    folder = local_folder(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        started = json.dumps({"t": time.time()}).encode()
        write_bytes_atomically(folder / f"started-{_writer_tag()}.json", started)
    except (WriteFailed, OSError) as exc:
        # The runner then times the phase's timeline from its own clock.
        log.warning("%s; the phase's start is not noted", exc)


def started_at(folder: Path) -> float | None:
    """The earliest start any Locust process of the phase noted, or None yet."""
    times = []
    for path in folder.glob("started-*.json"):
        times.append(json.loads(path.read_text())["t"])
    return min(times) if times else None


def read_progress(folder: Path) -> tuple[int, int]:
    """(requests, failures) summed over the phase's Locust processes, as last written."""
    requests = failures = 0
    for path in folder.glob("progress-*.json"):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue  # being replaced right now; the next poll reads it
        requests += data["requests"]
        failures += data["failures"]
    return requests, failures
