"""The sweep's driver: plan the points, run the missing ones on Dask, write rows as they come.

Theory of operation. ``DIR/sweep.json`` records which file the folder was swept from
(the hash of its content) and its axes; a different file for the same folder is
refused unless forced, so one folder never mixes two sweeps' points unknowingly.
Each finished point is one small Parquet file ``DIR/points/<key>.parquet``, written
atomically (``lblab.files``) the moment its row comes back (``as_completed``), and one
line in ``DIR/points.log``. A sweep killed at any moment therefore leaves only whole
point files, and loses only the points in flight; a rerun reads the folder, skips
every point with a file and no error, and runs the rest (missing or failed). At the
end the point files of this sweep are merged into ``DIR/sweep.parquet`` and the
winner map is drawn (``sweep.report``).

Dask runs the points: a ``LocalCluster`` of one single-threaded process per core
(the simulator is pure Python: threads would share one GIL), or the cluster whose
scheduler address is given. The tasks carry a point's settings (a small dict) and
return its row; nothing else crosses the network.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from rich.console import Console
from rich.progress import (
    Progress,
)

from lblab.analysis.load import ResultsError, parquet_errors
from lblab.config import load_json_object
from lblab.errors import ConfigError
from lblab.experiment.progress import bar_columns
from lblab.files import AppendLog, make_folder, write_bytes_atomically
from lblab.results import SWEEP_META, SWEEP_TABLE, write_table_atomically
from lblab.strategy.sources import RECORD_KEY, sources_of, write_copies
from lblab.sweep.grid import Point, Sweep, canonical
from lblab.sweep.point import FIGURES, run_point

log = logging.getLogger(__name__)

POINTS = "points"
POINTS_LOG = "points.log"
CONNECT_TIMEOUT_S = 30.0
"""How long to wait for an external scheduler to answer before giving up."""


@dataclass(frozen=True, slots=True)
class Outcome:
    planned: int
    ran: int
    """Points this invocation ran (the rest were done before)."""
    failed: int
    """Points of the sweep whose row holds an error, this run's or an earlier one's."""
    seconds: float
    table: Path


def sweep_folder(out: Path, sweep: Sweep, source: Path, force: bool) -> None:
    """Make ``out`` this sweep's folder; refuse one swept from a different file."""
    meta_path = out / SWEEP_META
    if meta_path.exists() and not force:
        old = load_json_object(meta_path, "sweep record")
        if old.get("digest") != sweep.digest:
            raise ConfigError(
                f"{out} holds a sweep of a different file ({old.get('file', '?')}, changed "
                f"since or another one): give a new --out, or --force to run {source}'s points "
                "into it (finished points with the same settings are kept)"
            )
    make_folder(out / POINTS)
    meta = {
        "file": str(source),
        "digest": sweep.digest,
        "axes": list(sweep.axes),
        RECORD_KEY: write_copies(out, sources_of(p.strategy for p in sweep.points)),
    }
    write_bytes_atomically(meta_path, json.dumps(meta, indent=2).encode())
    write_bytes_atomically(out / "sweep.toml", source.read_bytes())


def finished(out: Path) -> set[str]:
    """Keys of the points in ``out`` that ran without error. A point file that cannot be
    read (damaged by hand or by the disk: the sweep writes atomically) is not finished,
    and its point runs again."""
    done = set()
    for path in (out / POINTS).glob("*.parquet"):
        try:
            with parquet_errors(path, "sweep point", "its point runs again"):
                errors = pq.read_table(path, columns=["error"]).column("error")
        except ResultsError as exc:
            log.warning("%s", exc)
            continue
        if errors.null_count == len(errors):
            done.add(path.stem)
    return done


def run_sweep(
    sweep: Sweep,
    out: Path,
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    security: Any = None,
    console: Console | None = None,
) -> Outcome:
    """Run the points of ``sweep`` missing from ``out`` and merge all into ``sweep.parquet``.

    ``security``: a ``distributed.Security`` for ``scheduler`` (``scheduler_security``
    makes one); None takes Dask's configuration."""
    console = console or Console(stderr=True)
    started = time.perf_counter()
    for leftover in (out / POINTS).glob(".*.tmp"):  # a point being written when killed
        leftover.unlink(missing_ok=True)
    done = finished(out)
    todo = [p for p in sweep.points if p.key not in done]
    console.print(
        f"sweep: {len(sweep.points)} points, {len(sweep.points) - len(todo)} done before, "
        f"{len(todo)} to run",
        highlight=False,
    )
    if todo:
        with _client(scheduler, workers, security) as client:
            n = len(client.scheduler_info(n_workers=-1)["workers"])
            console.print(
                f"dask: {client.scheduler.address}, {n} workers, dashboard {client.dashboard_link}",
                highlight=False,
            )
            _run_points(client, sweep, todo, out, len(done), console)
    table = consolidate(out, sweep)
    failed = sum(
        e is not None for e in pq.read_table(table, columns=["error"])["error"].to_pylist()
    )
    return Outcome(len(sweep.points), len(todo), failed, time.perf_counter() - started, table)


TLS_FILES = ("ca.pem", "cert.pem", "key.pem")
"""What ``--tls-dir`` holds: the testbed's CA, the cluster's certificate and its key."""


def scheduler_security(scheduler: str, tls_dir: Path | None) -> Any:
    """The ``distributed.Security`` for ``scheduler``: mutual TLS from ``tls_dir`` (as
    ``infra/dask.yml`` makes it), Dask's own configuration, or none for ``tcp://``."""
    from distributed import Security

    tls = scheduler.startswith("tls://")
    if tls_dir is None:
        configured = Security()  # Dask's config (distributed.comm.tls.*), if any
        if tls and not configured.get_tls_config_for_role("client")["ca_file"]:
            raise ConfigError(
                f"--scheduler {scheduler}: a TLS scheduler needs the testbed's certificates; "
                "give --tls-dir with the folder infra/dask.yml made on this controller "
                "(~/.config/lblab/dask-tls), or set Dask's distributed.comm.tls config"
            )
        return configured
    if not tls:
        raise ConfigError(
            f"--tls-dir is for a TLS scheduler; write --scheduler as tls://HOST:PORT "
            f"(not {scheduler})"
        )
    missing = [name for name in TLS_FILES if not (tls_dir / name).is_file()]
    if missing:
        raise ConfigError(
            f"--tls-dir {tls_dir}: {', '.join(missing)} missing; it must hold "
            f"{', '.join(TLS_FILES)}, as infra/dask.yml makes them on the controller"
        )
    ca, cert, key = (str(tls_dir / name) for name in TLS_FILES)
    return Security(
        tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key, require_encryption=True
    )


@contextmanager
def _client(scheduler: str | None, workers: int | None, security: Any) -> Iterator[Any]:
    from distributed import Client, LocalCluster

    if not logging.getLogger().isEnabledFor(logging.DEBUG):  # -v shows Dask's own log
        logging.getLogger("distributed").setLevel(logging.WARNING)
    if scheduler is not None:
        try:
            client = Client(scheduler, timeout=CONNECT_TIMEOUT_S, security=security)
        except OSError as exc:
            raise ConfigError(
                f"--scheduler {scheduler}: no Dask scheduler answered ({exc}); start one with "
                "`dask scheduler` (and workers with `dask worker ADDRESS`), or leave "
                "--scheduler out for a local cluster (one that infra/dask.yml started speaks "
                "TLS: tls://HOST:PORT with --tls-dir)"
            ) from None
        with client:
            yield client
        return
    with (
        LocalCluster(
            n_workers=workers or os.cpu_count() or 1,
            threads_per_worker=1,  # pure-Python simulations: one GIL per process
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def _run_points(
    client: Any, sweep: Sweep, todo: Sequence[Point], out: Path, skipped: int, console: Console
) -> None:
    from distributed import as_completed

    by_key = {f"lblab-point-{p.key}": p for p in todo}
    sources = tuple(sources_of(p.strategy for p in todo))
    futures = [client.submit(run_point, p.settings, sources, key=k) for k, p in by_key.items()]
    points_log = AppendLog(out / POINTS_LOG, log)
    progress = Progress(
        *bar_columns(),
        console=console,
        disable=not console.is_terminal,
    )
    task = progress.add_task("points", total=len(sweep.points), completed=skipped)
    step = max(1, len(todo) // 10)  # off a terminal: a line per tenth
    try:
        with progress:
            for i, future in enumerate(as_completed(futures), 1):
                point = by_key[future.key]
                try:
                    result = future.result()
                except Exception as exc:  # the worker died, or the task could not run
                    result = dict.fromkeys(FIGURES) | {
                        "worker": None,
                        "wall_s": None,
                        "error": f"{type(exc).__name__}: {exc}",
                    }
                row = write_point(out, sweep, point, result)
                line = {"key": point.key, "worker": row["worker"], "error": row["error"]}
                points_log.append((json.dumps(line) + "\n").encode(), 1)
                progress.advance(task)
                if row["error"] is not None:
                    progress.console.print(
                        f"point {_shown(point.values)} failed: {row['error']}", highlight=False
                    )
                if not console.is_terminal and (i % step == 0 or i == len(todo)):
                    console.print(f"{skipped + i}/{len(sweep.points)} points", highlight=False)
    finally:
        points_log.close()


def _shown(values: Mapping[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in values.items())


def cell_value(value: Any) -> Any:
    """A grid value as a column value: scalars as they are, tables and lists as JSON."""
    return value if isinstance(value, str | int | float | bool) else canonical(value)


def write_point(out: Path, sweep: Sweep, point: Point, result: Mapping[str, Any]) -> dict[str, Any]:
    """Write one point's row, ``DIR/points/<key>.parquet``; returns the row."""
    row = {a: cell_value(point.values.get(a)) for a in sweep.axes}
    row |= {
        "strategy": point.strategy,
        "seed": point.values["seed"],
        **result,
        "key": point.key,
    }
    write_table_atomically(out / POINTS / f"{point.key}.parquet", pa.Table.from_pylist([row]))
    return row


def consolidate(out: Path, sweep: Sweep) -> Path:
    """Merge this sweep's point files, in the file's order, into ``DIR/sweep.parquet``
    (points of an earlier file in a forced folder stay in ``points/`` only)."""
    parts = [
        pq.read_table(path)
        for p in sweep.points
        if (path := out / POINTS / f"{p.key}.parquet").exists()
    ]
    merged = pa.concat_tables(parts, promote_options="permissive") if parts else pa.table({})
    path = out / SWEEP_TABLE
    write_table_atomically(path, merged)
    return path
