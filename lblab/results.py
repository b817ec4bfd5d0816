"""The results contract: one directory per run, long-format Parquet tables.

The column lists here are the contract that the runner, the simulator, the ansible
fetch and ``analysis/`` share (docs/DESIGN.md, "Results contract"). Writers may add columns;
they may not drop or retype these.

Tables are written as they come: each finished unit of work (scenario x strategy x
replication, or a chunk of one) lands as an immutable part file
``<run>/parts/<table>/<key>.parquet`` (``lblab.files.write_atomically``: a crash or a
full disk never leaves half a file). ``consolidate`` merges the parts into
``<run>/<table>.parquet``; it can run again after a resume.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lblab.failures import ERROR_KINDS, ERROR_ORIGINS
from lblab.files import write_atomically

__all__ = ["ERROR_KINDS", "ERROR_ORIGINS"]

_KEY = [
    ("run_id", pa.string()),
    ("scenario", pa.string()),
    ("strategy", pa.string()),
    ("replication", pa.int32()),
]

SCHEMAS: dict[str, pa.Schema] = {
    "requests": pa.schema(
        [
            *_KEY,
            ("t_sent", pa.float64()),
            ("latency_ms", pa.float64()),
            ("ok", pa.bool_()),
            ("error_kind", pa.string()),
            ("error_origin", pa.string()),
            ("package_bytes", pa.int64()),
            ("work_bytes", pa.int64()),
            ("server", pa.string()),
            ("balancer", pa.string()),
        ]
    ),
    "cpu": pa.schema(
        [*_KEY, ("t", pa.float64()), ("server", pa.string()), ("cpu_percent", pa.float64())]
    ),
    "picks": pa.schema(
        [*_KEY, ("t", pa.float64()), ("server", pa.string()), ("inflight_at_pick", pa.int32())]
    ),
}
TABLES = tuple(SCHEMAS)
MANIFEST = "manifest.json"
SWEEP_TABLE = "sweep.parquet"
"""Every row of a sweep, in its --out folder."""
SWEEP_LIVE_TABLE = "live-check.parquet"
"""Measured vs simulated rows of the cells a sweep checked live (``--live-check``)."""
SWEEP_META = "sweep.json"
"""Which file a sweep folder was swept from, and its axes."""
DEFAULTS: dict[str, dict[str, Any]] = {"requests": {"balancer": "b1"}}
"""Contract columns a table may lack, and the value every row then has. ``balancer``
names which of the run's balancers sent the request (``b1`` .. ``bK``): tables written
before there could be several have one, ``b1``."""


def required_columns(table: str) -> list[str]:
    return SCHEMAS[table].names


def missing_columns(table: str, columns: Sequence[str]) -> list[str]:
    """Required columns of ``table`` that ``columns`` lacks (empty when the contract holds);
    a column with a default (``DEFAULTS``) is never missing."""
    present = set(columns) | set(DEFAULTS.get(table, ()))
    return [c for c in SCHEMAS[table].names if c not in present]


def with_defaults(table: str, data: pa.Table, columns: Sequence[str] | None = None) -> pa.Table:
    """``data`` with the defaulted columns (``DEFAULTS``; only those in ``columns`` if given)
    it lacks added, typed to the contract."""
    for name, value in DEFAULTS.get(table, {}).items():
        if name not in data.column_names and (columns is None or name in columns):
            field = SCHEMAS[table].field(name)
            data = data.append_column(field, pa.repeat(pa.scalar(value, field.type), len(data)))
    return data


def to_arrow(
    table: str, rows: Mapping[str, Sequence[Any]] | Sequence[Mapping[str, Any]]
) -> pa.Table:
    """Build an Arrow table with the contract's types for the required columns.

    ``rows`` is either columns (name -> values) or a list of row dicts. Extra columns are
    kept with inferred types.
    """
    t = (
        pa.Table.from_pydict(rows)
        if isinstance(rows, Mapping)
        else pa.Table.from_pylist(list(rows))
    )
    missing = missing_columns(table, t.column_names)
    if missing:
        raise ValueError(f"{table} rows lack required columns {missing}")
    t = with_defaults(table, t)
    for field in SCHEMAS[table]:
        i = t.column_names.index(field.name)
        if t.schema.field(i).type != field.type:
            t = t.set_column(i, field.name, t.column(i).cast(field.type))
    return t


def write_table_atomically(path: Path, table: pa.Table) -> None:
    """``lblab.files.write_atomically`` for a Parquet file."""
    write_atomically(path, lambda out: pq.write_table(table, out))


def write_part(run_dir: Path, table: str, key: str, data: pa.Table) -> Path:
    """Write one immutable part atomically; returns its path."""
    if table not in SCHEMAS:
        raise ValueError(f"unknown table {table!r}; tables are {', '.join(TABLES)}")
    folder = run_dir / "parts" / table
    folder.mkdir(parents=True, exist_ok=True)
    final = folder / f"{key}.parquet"
    write_table_atomically(final, data)
    return final


def drop_consolidated(run_dir: Path) -> None:
    """Remove the merged tables of a run about to get new parts: until ``consolidate``
    runs again, readers read the parts, never a merged table that lacks some."""
    for table in SCHEMAS:
        (run_dir / f"{table}.parquet").unlink(missing_ok=True)


def consolidate(run_dir: Path) -> dict[str, int]:
    """Merge every table's parts into ``<table>.parquet``; returns rows per table.

    A table with no parts is written empty with the contract's schema, so readers always
    find all three files.
    """
    counts = {}
    for table, schema in SCHEMAS.items():
        parts = sorted((run_dir / "parts" / table).glob("*.parquet"))
        if parts:
            merged = pa.concat_tables(
                [pq.read_table(p) for p in parts], promote_options="permissive"
            )
        else:
            merged = schema.empty_table()
        write_table_atomically(run_dir / f"{table}.parquet", merged)
        counts[table] = merged.num_rows
    return counts
