"""Columnar result buffers: typed ``array``s, turned into Arrow once.

A million-request run appends a million rows; a dict per row would cost ~10x the
memory and time of ``array.array`` appends. A request row goes into three arrays, one
per type, with one ``extend`` each (``RequestRows.FLOATS``, ``LONGS``, ``INTS`` give
the order), rather than twelve appends: the row is written once per simulated request.
Server and balancer names are stored as indexes into the run's lists (-1 for "none")
and failures as indexes into ``FAILURES`` (``error_kind``, ``error_origin``); all
become strings when the table is built.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from lblab.results import ERROR_KINDS, to_arrow

_MODELLED_ORIGIN = {
    "timeout": "balancer",  # the watchdog models the balancer's --request-timeout
    "rejected": "server",  # every try was refused by a server at its limit
    "connection": "transport",
    "application": "server",
    "other": "balancer",
}
FAILURES: tuple[tuple[str, str], ...] = (
    *((kind, _MODELLED_ORIGIN[kind]) for kind in ERROR_KINDS),
    ("rejected", "balancer"),
)
"""(error_kind, error_origin) by code: one code per kind with its origin in the model,
then the balancer's own REJECTED when no backend is eligible (``NO_BACKEND``)."""
ERROR_CODE = {kind: i for i, kind in enumerate(ERROR_KINDS)}
NO_BACKEND = len(ERROR_KINDS)
NO_ERROR = -1


def _names(idx: np.ndarray, names: Sequence[str]) -> pa.Array:
    """String column from int32 codes; a negative code is null."""
    indices = pa.array(idx, mask=idx < 0)
    return pa.DictionaryArray.from_arrays(indices, pa.array(list(names), pa.string())).cast(
        pa.string()
    )


def _col(buf: array, dtype: str) -> np.ndarray:
    return np.frombuffer(buf, dtype=dtype) if len(buf) else np.zeros(0, dtype)


def _key_columns(key: dict[str, object], n: int) -> dict[str, pa.Array]:
    """The run's key repeated on every row (built in C: a 1M-row list costs 0.1 s a column)."""
    return {k: pa.repeat(pa.scalar(v), n) for k, v in key.items()}


class RequestRows:
    """Request rows; ``floats``, ``longs`` and ``ints`` hold the columns named below, row-major."""

    FLOATS = ("t_sent", "latency_ms", "queue_ms", "service_ms")
    LONGS = ("request_id", "package_bytes", "work_bytes")
    INTS = ("ok", "error", "server", "attempts", "balancer")
    """``error``: a ``FAILURES`` code (-1: none); ``server``: an index (-1: none);
    ``balancer``: the index of the balancer that took the request."""

    __slots__ = ("floats", "ints", "longs")

    def __init__(self) -> None:
        self.floats = array("d")
        self.longs = array("q")
        self.ints = array("i")

    def __len__(self) -> int:
        return len(self.longs) // len(self.LONGS)

    def table(
        self, key: dict[str, object], servers: Sequence[str], balancers: Sequence[str]
    ) -> pa.Table:
        f = _col(self.floats, "f8").reshape(-1, len(self.FLOATS))
        q = _col(self.longs, "i8").reshape(-1, len(self.LONGS))
        i = _col(self.ints, "i4").reshape(-1, len(self.INTS))
        error = i[:, 1].copy()
        cols: dict[str, Any] = _key_columns(key, len(self))
        cols |= {
            "t_sent": f[:, 0].copy(),
            "latency_ms": f[:, 1].copy(),
            "ok": i[:, 0].astype(bool),
            "error_kind": _names(error, [kind for kind, _ in FAILURES]),
            "error_origin": _names(error, [origin for _, origin in FAILURES]),
            "package_bytes": q[:, 1].copy(),
            "work_bytes": q[:, 2].copy(),
            "server": _names(i[:, 2].copy(), servers),
            "balancer": _names(i[:, 4].copy(), balancers),
            "request_id": q[:, 0].copy(),
            "attempts": i[:, 3].copy(),
            "queue_ms": f[:, 2].copy(),
            "service_ms": f[:, 3].copy(),
            # A simulated server has no time outside its work slot
            # (``analysis/report/instrument.py``).
            "server_ms": f[:, 2] + f[:, 3],
        }
        return to_arrow("requests", cols)


class SampleRows:
    """Rows of ``(t, server, value)``: the picks (inflight at pick) and cpu tables."""

    __slots__ = ("server", "t", "value")

    def __init__(self, value_type: str) -> None:
        self.t = array("d")
        self.server = array("i")
        self.value: array[Any] = array(value_type)

    def __len__(self) -> int:
        return len(self.t)

    def table(
        self, name: str, value_column: str, key: dict[str, object], servers: Sequence[str]
    ) -> pa.Table:
        cols: dict[str, Any] = _key_columns(key, len(self))
        cols |= {
            "t": _col(self.t, "f8"),
            "server": _names(_col(self.server, "i4"), servers),
            value_column: _col(self.value, "f8" if self.value.typecode == "d" else "i4"),
        }
        return to_arrow(name, cols)
