"""A phase's request records as one Arrow table: the runner's side of ``records``.

The Locust processes write JSON chunks and import no pyarrow (``loadtests/records.py``);
this module gives the columns their contract types and merges a phase's chunks.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pyarrow as pa

from lblab.loadtests.records import CHUNK_GLOB, COLUMNS
from lblab.results import DEFAULTS, SCHEMAS

_MEASURED = COLUMNS[:8]  # the results contract's own columns, in its order
RECORD_SCHEMA = pa.schema(
    [SCHEMAS["requests"].field(name) for name in _MEASURED]
    + [pa.field("cell", pa.string()), pa.field("loader", pa.string())]
    + [
        pa.field(name, pa.float64())
        for name in ("service_ms", "queue_ms", "server_ms", "send_lag_ms")
    ]
    + [SCHEMAS["requests"].field("balancer")]
)
assert tuple(RECORD_SCHEMA.names) == COLUMNS, "records.COLUMNS and the schema disagree"


def read_records(folder: Path) -> pa.Table:
    """All chunks of a phase, merged (empty table with the record schema if none)."""
    chunks = sorted(folder.glob(CHUNK_GLOB))
    if not chunks:
        return RECORD_SCHEMA.empty_table()
    return pa.concat_tables([_chunk(orjson.loads(p.read_bytes())) for p in chunks])


def _chunk(columns: dict[str, list[object]]) -> pa.Table:
    """One chunk's columns; a column a loader older than it did not write takes the
    contract's default (``results.DEFAULTS``: ``balancer`` is ``b1``, the one there was)."""
    rows = len(columns.get("t_sent", ()))
    for name, value in DEFAULTS["requests"].items():
        columns.setdefault(name, [value] * rows)
    columns.setdefault("server_ms", [None] * rows)  # loaders before servers reported it
    return pa.Table.from_pydict(columns, schema=RECORD_SCHEMA)
