"""Read one or several results directories into pandas, only the columns asked for.

A results directory (DESIGN.md, "Results contract") holds ``requests.parquet``,
``cpu.parquet``, ``picks.parquet`` and ``manifest.json``; an interrupted run may hold
only ``parts/<table>/*.parquet``, which are read instead. Live and simulated runs
(``"simulated": true`` in the manifest) have the same tables.

Memory: a thesis run has millions of request rows. Tables are read with pyarrow,
restricted to the needed columns, with the string key columns dictionary-encoded, so
they arrive in pandas as categoricals (one byte or two per row instead of a Python
string). Measured on a synthetic 5M-row requests table (66 MB of Parquet, 2 busy
cores): the columns the metrics need load in 0.9 s with a peak RSS of 430 MB (130 MB of
it the imports); ``summarize`` on top takes 5.5 s and peaks at 645 MB.

Warm-up: the runner keeps the rows of each phase's first ``warmup`` seconds and marks
them with a boolean ``warmup`` column in all three tables (loadtests/runner.py); they are
dropped here. A table without the column (simulated runs, older runs) has no warm-up.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lblab.errors import ConfigError
from lblab.results import MANIFEST, SCHEMAS, missing_columns

KEY = ["run_id", "strategy", "scenario", "replication"]
"""Columns naming one unit of measurement; pooled metrics drop ``run_id`` and ``replication``."""

_DICTIONARY_COLUMNS = ("run_id", "scenario", "strategy", "server", "error_kind")
_TIME_COLUMN = {"requests": "t_sent", "cpu": "t", "picks": "t"}
SIM_SUFFIX = " [sim]"
"""Appended to strategy names of simulated runs when live and simulated runs are mixed."""


class ResultsError(ConfigError):
    """A results directory is missing or does not match the results contract."""


@dataclass(frozen=True)
class Run:
    """One results directory and its manifest."""

    path: Path
    manifest: dict[str, Any]

    @property
    def run_id(self) -> str:
        return str(self.manifest.get("run_id") or self.path.name)

    @property
    def simulated(self) -> bool:
        return bool(self.manifest.get("simulated", False))

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
    manifest: dict[str, Any] = {}
    if manifest_path.exists():
        try:
            manifest = json.loads(manifest_path.read_text())
        except json.JSONDecodeError as exc:
            raise ResultsError(
                f"{manifest_path} is not valid JSON ({exc}); fix or remove it"
            ) from exc
    run = Run(p, manifest)
    if not run.table_files("requests"):
        raise ResultsError(
            f"{p} has no requests.parquet (nor parts/requests/*.parquet): it is not a results "
            "directory, or the run wrote nothing yet"
        )
    return run


@dataclass
class Results:
    """One or several runs, read table by table and column by column."""

    runs: list[Run]
    notes: list[str] = field(default_factory=list)

    @property
    def mixed(self) -> bool:
        return len({r.simulated for r in self.runs}) > 1

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
        names = pq.read_schema(path).names
        missing = missing_columns(table, names)
        if missing:
            raise ResultsError(
                f"{path}: the {table} table lacks required columns {missing} (it has {names}). "
                "It was not written to the results contract: rewrite it with "
                "lblab.results.to_arrow, or re-run the experiment with the current lblab"
            )
        columns = [c for c in wanted if c in names] + (["warmup"] if "warmup" in names else [])
        dictionary = [c for c in _DICTIONARY_COLUMNS if c in columns]
        source = pq.ParquetFile(path, read_dictionary=dictionary)
        for i in range(source.num_row_groups):
            chunk = _without_warmup(source.read_row_group(i, columns=columns))
            frames.append(chunk.to_pandas(self_destruct=True, split_blocks=True))
            del chunk
    pa.default_memory_pool().release_unused()
    if not frames:
        return None
    frame = _concat(frames)
    if frame["run_id"].isna().any():
        raise ResultsError(f"{files[0]}: run_id has empty values; every row must name its run")
    return frame


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
    return pd.concat(frames, ignore_index=True)


def _without_warmup(chunk: pa.Table) -> pa.Table:
    """Drop rows marked ``warmup`` (null counts as measured) in Arrow, before pandas."""
    if "warmup" not in chunk.column_names:
        return chunk
    measured = pc.invert(pc.fill_null(chunk["warmup"], False))
    return chunk.filter(measured).drop_columns(["warmup"])
