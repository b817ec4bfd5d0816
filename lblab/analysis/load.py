"""Read one or several results directories into pandas, only the columns asked for.

A results directory (docs/DESIGN.md, "Results contract") holds ``requests.parquet``,
``cpu.parquet``, ``picks.parquet`` and ``manifest.json``; an interrupted run may hold
only ``parts/<table>/*.parquet``, which are read instead. Live and simulated runs
(``"simulated": true`` in the manifest) have the same tables.

Memory: a thesis run has millions of request rows. Tables are read with pyarrow,
restricted to the needed columns, with the string key columns dictionary-encoded, so
they arrive in pandas as categoricals (one byte or two per row instead of a Python
string). Measured on a synthetic 5M-row requests table (66 MB of Parquet, 2 busy
cores): the columns the metrics need load in 0.9 s with a peak RSS of 430 MB (130 MB of
it the imports); ``summarize`` on top takes 5.5 s and peaks at 645 MB.

Measured window (``lblab/windows.py``): the runner labels every row of the three tables
``window`` = before / inside / after its phase's measured window; only ``inside`` rows
are read here. Tables without that column (older runs) drop the rows marked ``warmup``
instead; a table with neither is all measured.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lblab.errors import ConfigError
from lblab.manifest import Manifest, load
from lblab.results import MANIFEST, SCHEMAS, missing_columns, with_defaults
from lblab.windows import INSIDE, WINDOW_COLUMN, Window

if TYPE_CHECKING:  # pandas loads with the first table read, so opening a bad run fails fast
    import pandas as pd

KEY = ["run_id", "strategy", "scenario", "replication"]
"""Columns naming one unit of measurement; pooled metrics drop ``run_id`` and ``replication``."""

_DICTIONARY_COLUMNS = ("run_id", "scenario", "strategy", "server", "error_kind", "balancer")
_TIME_COLUMN = {"requests": "t_sent", "cpu": "t", "picks": "t"}
SIM_SUFFIX = " [sim]"
"""Appended to strategy names of simulated runs when live and simulated runs are mixed."""


class ResultsError(ConfigError):
    """A results directory is missing or does not match the results contract."""


@dataclass(frozen=True)
class Run:
    """One results directory and its manifest."""

    path: Path
    manifest: Manifest

    @property
    def run_id(self) -> str:
        return self.manifest.run_id

    @property
    def simulated(self) -> bool:
        return self.manifest.simulated

    def windows(self) -> dict[tuple[str, str, str, int], Window]:
        """Measured window of each (run_id, scenario, strategy, replication) the manifest
        records (``lblab/windows.py``); empty for runs written before windows."""
        return {(self.run_id, *key): w for key, w in self.manifest.windows().items()}

    def table_files(self, table: str) -> list[Path]:
        """The consolidated table file, or the part files of an unconsolidated run."""
        whole = self.path / f"{table}.parquet"
        if whole.exists():
            return [whole]
        return sorted((self.path / "parts" / table).glob("*.parquet"))


def open_run(path: str | Path) -> Run:
    """Check that ``path`` is a results directory and read its manifest."""
    p = Path(path)
    if not p.is_dir():
        raise ResultsError(
            f"results directory {p} does not exist; pass a folder written by `lblab run` "
            "or `lblab simulate` (results/<run-id>/)"
        )
    manifest_path = p / MANIFEST
    manifest = Manifest(run_id=p.name)
    if manifest_path.exists():
        try:
            manifest = load(manifest_path)
        except ConfigError as exc:
            raise ResultsError(str(exc)) from None
    run = Run(p, manifest)
    if not run.table_files("requests"):
        raise ResultsError(
            f"{p} has no requests.parquet (nor parts/requests/*.parquet): it is not a results "
            "directory, or the run wrote nothing yet"
        )
    for table in SCHEMAS:  # footers only: an unreadable file is named now, not mid-report
        for path in run.table_files(table):
            with parquet_errors(path, table):
                pq.read_schema(path)
    return run


def check_run(run: Run) -> None:
    """Check every table file's columns against the results contract (footers only).

    For commands that hand the run to other processes (the notebooks' kernels), where a
    ``ResultsError`` raised while reading would be a cell's traceback, not one line.
    """
    for table in SCHEMAS:
        for path in run.table_files(table):
            _check_schema(path, table)


@contextmanager
def parquet_errors(
    path: Path,
    table: str,
    remedy: str = "restore it, or remove it and re-run that part of the experiment",
) -> Iterator[None]:
    """Turn pyarrow's errors about an unreadable file into a one-line ``ResultsError``
    naming it and what to do (``remedy``)."""
    try:
        yield
    except pa.ArrowMemoryError:
        raise  # out of memory says nothing about the file
    except (pa.ArrowException, OSError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ResultsError(
            f"{path} is not a readable {table} table ({reason}): it is truncated, damaged or "
            f"not Parquet; {remedy}"
        ) from None


def _check_schema(path: Path, table: str) -> list[str]:
    """The column names of one table file, checked against the results contract."""
    with parquet_errors(path, table):
        schema = pq.read_schema(path)
    names = schema.names
    missing = missing_columns(table, names)
    retyped = [
        f"{f.name} is {schema.field(f.name).type}, not {f.type}"
        for f in SCHEMAS[table]
        if f.name in names and not _compatible(schema.field(f.name).type, f.type)
    ]
    if missing or retyped:
        problem = f"lacks required columns {missing}" if missing else "; ".join(retyped)
        raise ResultsError(
            f"{path}: the {table} table {problem} (it has {names}). It was not written to the "
            "results contract: rewrite it with lblab.results.to_arrow, or re-run the "
            "experiment with the current lblab"
        )
    return names


def _kind(t: pa.DataType) -> str:
    if pa.types.is_dictionary(t):
        t = t.value_type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "text"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        return "int"
    if pa.types.is_floating(t):
        return "float"
    return "null" if pa.types.is_null(t) else str(t)


def _compatible(found: pa.DataType, contract: pa.DataType) -> bool:
    """Same kind of values (any width or encoding); whole numbers pass for floats."""
    have, want = _kind(found), _kind(contract)
    return have in (want, "null") or (have, want) == ("int", "float")


@dataclass
class Results:
    """One or several runs, read table by table and column by column."""

    runs: list[Run]
    notes: list[str] = field(default_factory=list)

    @property
    def mixed(self) -> bool:
        return len({r.simulated for r in self.runs}) > 1

    def windows(self) -> dict[tuple[str, str, str, int], Window]:
        """Every run's measured windows (``Run.windows``)."""
        return {k: w for run in self.runs for k, w in run.windows().items()}

    def table(self, table: str, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """Rows of ``table`` from every run, warm-up excluded, with ``columns`` (plus the key).

        A run without the table (cpu or picks) contributes nothing and adds a note.
        """
        wanted = _wanted_columns(table, columns)
        frames = []
        for run in self.runs:
            frame = _read(run, table, wanted, self.notes)
            if frame is None:
                continue
            if self.mixed and run.simulated:
                frame["strategy"] = frame["strategy"].cat.rename_categories(
                    lambda s: f"{s}{SIM_SUFFIX}"
                )
            frames.append(frame)
        if not frames:
            schema = SCHEMAS[table]
            frame = (
                schema.empty_table().select([c for c in wanted if c in schema.names]).to_pandas()
            )
            return frame.astype({c: "category" for c in _DICTIONARY_COLUMNS if c in frame.columns})
        return _concat(frames)


def open_results(paths: str | Path | Iterable[str | Path]) -> Results:
    """Open one results directory or several (their rows are pooled by strategy and scenario)."""
    items = [paths] if isinstance(paths, str | Path) else list(paths)
    if not items:
        raise ResultsError("no results directory given")
    return Results([open_run(p) for p in items])


def _wanted_columns(table: str, columns: Sequence[str] | None) -> list[str]:
    if table not in SCHEMAS:
        raise ValueError(f"unknown table {table!r}; tables are {', '.join(SCHEMAS)}")
    base = [*KEY, _TIME_COLUMN[table]]
    extra = SCHEMAS[table].names if columns is None else columns
    return list(dict.fromkeys([*base, *extra]))


def _read(run: Run, table: str, wanted: list[str], notes: list[str]) -> pd.DataFrame | None:
    """Read ``wanted`` columns of one run's table, one row group at a time.

    Converting a whole 5M-row table at once peaked at 3x the final frame (decompression
    and Arrow buffers alive next to the pandas copy); row group by row group with
    ``self_destruct`` keeps the peak near the final frame plus one row group.
    """
    files = run.table_files(table)
    if not files:
        notes.append(f"{run.path}: no {table} table (no {table}.parquet); its charts are empty")
        return None
    frames = []
    for path in files:
        names = _check_schema(path, table)
        columns = [c for c in wanted if c in names] + [c for c in _MARKS if c in names]
        dictionary = [c for c in _DICTIONARY_COLUMNS if c in columns]
        with parquet_errors(path, table):
            source = pq.ParquetFile(path, read_dictionary=dictionary)
            for i in range(source.num_row_groups):
                chunk = _measured_only(source.read_row_group(i, columns=columns))
                chunk = _defaulted(table, chunk, wanted)
                frames.append(chunk.to_pandas(self_destruct=True, split_blocks=True))
                del chunk
    pa.default_memory_pool().release_unused()
    if not frames:
        return None
    frame = _concat(frames)
    if frame["run_id"].isna().any():
        raise ResultsError(f"{files[0]}: run_id has empty values; every row must name its run")
    return frame


def _defaulted(table: str, chunk: pa.Table, wanted: list[str]) -> pa.Table:
    """The wanted columns a file may lack (``lblab.results.DEFAULTS``), at their default."""
    names = chunk.column_names
    chunk = with_defaults(table, chunk, wanted)
    for name in chunk.column_names[len(names) :]:
        if name in _DICTIONARY_COLUMNS:
            i = chunk.column_names.index(name)
            chunk = chunk.set_column(i, name, chunk[name].dictionary_encode())
    return chunk


def _concat(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Concatenate frames whose categorical columns may have different categories."""
    if len(frames) == 1:
        return frames[0]
    for col in _DICTIONARY_COLUMNS:
        if col not in frames[0].columns:
            continue
        union = sorted(set().union(*(set(f[col].cat.categories) for f in frames)))
        for f in frames:
            f[col] = f[col].cat.set_categories(union)
    import pandas as pd

    return pd.concat(frames, ignore_index=True)


_MARKS = (WINDOW_COLUMN, "warmup")


def _measured_only(chunk: pa.Table) -> pa.Table:
    """Keep the rows inside the measured window (see the module doc), in Arrow."""
    names = chunk.column_names
    if WINDOW_COLUMN in names:
        measured = pc.fill_null(pc.equal(chunk[WINDOW_COLUMN], INSIDE), False)
    elif "warmup" in names:  # runs from before windows: null counts as measured
        measured = pc.invert(pc.fill_null(chunk["warmup"], False))
    else:
        return chunk
    return chunk.filter(measured).drop_columns([c for c in _MARKS if c in names])
