"""Columnar result buffers: one typed ``array`` per column, turned into Arrow once.

A million-request run appends a million rows; a dict per row would cost ~10x the
memory and time of ``array.array`` appends. Server names are stored as indexes into
the run's server list (-1 for "none") and failures as indexes into ``FAILURES``
(``error_kind``, ``error_origin``); both become strings when the table is built.
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


def _names(codes: array, names: Sequence[str]) -> pa.Array:
    """String column from int codes; a negative code is null."""
    idx = np.frombuffer(codes, dtype=np.int32) if len(codes) else np.zeros(0, np.int32)
    indices = pa.array(idx, mask=idx < 0)
    return pa.DictionaryArray.from_arrays(indices, pa.array(list(names), pa.string())).cast(
        pa.string()
    )


def _col(buf: array, dtype: str) -> np.ndarray:
    return np.frombuffer(buf, dtype=dtype) if len(buf) else np.zeros(0, dtype)


class RequestRows:
    __slots__ = (
        "attempts",
        "error",
        "latency_ms",
        "ok",
        "package_bytes",
        "queue_ms",
        "request_id",
        "server",
        "service_ms",
        "t_sent",
        "work_bytes",
    )

    def __init__(self) -> None:
        self.request_id = array("q")
        self.t_sent = array("d")
        self.latency_ms = array("d")
        self.ok = array("b")
        self.error = array("i")
        self.package_bytes = array("q")
        self.work_bytes = array("q")
        self.server = array("i")
        self.attempts = array("i")
        self.queue_ms = array("d")
        self.service_ms = array("d")

    def __len__(self) -> int:
        return len(self.t_sent)

    def table(self, key: dict[str, object], servers: Sequence[str]) -> pa.Table:
        n = len(self)
        cols: dict[str, Any] = {k: [v] * n for k, v in key.items()}
        cols |= {
            "t_sent": _col(self.t_sent, "f8"),
            "latency_ms": _col(self.latency_ms, "f8"),
            "ok": _col(self.ok, "i1").astype(bool),
            "error_kind": _names(self.error, [kind for kind, _ in FAILURES]),
            "error_origin": _names(self.error, [origin for _, origin in FAILURES]),
            "package_bytes": _col(self.package_bytes, "i8"),
            "work_bytes": _col(self.work_bytes, "i8"),
            "server": _names(self.server, servers),
            "request_id": _col(self.request_id, "i8"),
            "attempts": _col(self.attempts, "i4"),
            "queue_ms": _col(self.queue_ms, "f8"),
            "service_ms": _col(self.service_ms, "f8"),
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
        n = len(self)
        cols: dict[str, Any] = {k: [v] * n for k, v in key.items()}
        cols |= {
            "t": _col(self.t, "f8"),
            "server": _names(self.server, servers),
            value_column: _col(self.value, "f8" if self.value.typecode == "d" else "i4"),
        }
        return to_arrow(name, cols)
