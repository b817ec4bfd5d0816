"""Recorded traffic replayed: a trace's send times and request shapes, time-scaled.

A trace is a CSV file, one line per request, with a header naming its columns:

    time_s,package_bytes,work_bytes          (or timestamp instead of time_s)
    0.000,1200,15000
    0.041,300,120000

``time_s`` is seconds from any origin; ``timestamp`` an ISO 8601 date-time
(``2023-11-16 18:17:03.97996``). Times never go back (equal is fine); sizes are whole
bytes, 0 or more. A file whose name ends in ``.gz`` is read through gzip. Any fault is a
``ConfigError`` of one line: ``FILE:LINE: what is wrong; what to do``.

Built-in traces (``BUILTIN_TRACES``) are shipped in ``lblab/data/`` as recorded and
mapped to bytes here, e.g. the Azure LLM inference trace 2023 (tokens -> bytes:
``AZURE_BYTES_PER_CONTEXT_TOKEN``, ``AZURE_BYTES_PER_GENERATED_TOKEN``).

The schedule. A ``TraceWindow`` takes the requests at ``start <= t < start + length``
seconds of the trace (t counted from its first request) and ``Schedule`` time-scales
them to a mean rate R: with n requests and u_i the offsets from the window's first one,

    mean gap  g = u_(n-1) / (n - 1)          (the window's own mean rate is 1 / g)
    due_i     = u_i / (R g)                  (every gap scaled by one factor)
    pass p    = due_i + p n / R              (``loop``: pass p starts n / R after pass 0)

so one pass has mean gap 1 / R, and a looping replay sends exactly n requests every
n / R seconds (the next pass starts one mean gap after the last request). R = 0 keeps
the trace's own pace (R = 1 / g). Without ``loop`` the replay stops at the window's end.

Both drivers take their sends from ``Schedule.sends``: the Locust generator (several
processes split it, ``first`` and ``step``: process i of G sends k = i, i + G, ...,
so no request is sent twice) and the simulator (``simulator/workload.py``). No clock,
no randomness: a replay is the same every time.
"""

from __future__ import annotations

import csv
import gzip
import io
import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from importlib.resources import files
from pathlib import Path

from lblab.errors import ConfigError

AZURE_BYTES_PER_CONTEXT_TOKEN = 8
"""Package bytes per context (prompt) token of the Azure LLM traces. A token is about 4
characters of English text; 8 puts both traces' median prompt next to the matrix's
middle package, 10 KB (code: 1,469 tokens -> 11.8 KB; conversation: 1,020 -> 8.2 KB),
and every prompt inside the matrix's range (at most 14,050 tokens -> 112 KB < 1 MB)."""
AZURE_BYTES_PER_GENERATED_TOKEN = 1_000
"""Work bytes per generated token. Generating is the work of an LLM server (a decode
step per token), as building and parsing JSON is lblab's; 1,000 puts the conversation
trace's median (129 tokens -> 129 KB) next to the middle work, 100 KB, and keeps every
request inside the server's bound (at most 1,899 tokens -> 1.9 MB < 2 MB). One constant
for both traces: code completions really generate ten times fewer tokens (median 13 ->
13 KB, the small work cell) and the mapping keeps that difference."""


@dataclass(frozen=True, slots=True)
class Columns:
    """Where a trace's fields are and how they become seconds and bytes."""

    time: str
    timestamp: bool
    """The time column holds ISO 8601 date-times (else seconds)."""
    package: str
    work: str
    package_scale: int = 1
    """Bytes per unit of the package column (tokens in the Azure traces)."""
    work_scale: int = 1


@dataclass(frozen=True, slots=True)
class BuiltinTrace:
    file: str
    """Under ``lblab/data/``."""
    columns: Columns
    about: str


_AZURE = Columns(
    "TIMESTAMP",
    True,
    "ContextTokens",
    "GeneratedTokens",
    AZURE_BYTES_PER_CONTEXT_TOKEN,
    AZURE_BYTES_PER_GENERATED_TOKEN,
)
BUILTIN_TRACES: dict[str, BuiltinTrace] = {
    "azure-code": BuiltinTrace(
        "azure-llm-2023/code.csv.gz",
        _AZURE,
        "Azure LLM inference trace 2023, code service: 8,819 requests over 57 minutes",
    ),
    "azure-conv": BuiltinTrace(
        "azure-llm-2023/conv.csv.gz",
        _AZURE,
        "Azure LLM inference trace 2023, conversation service: 19,366 requests over 58 minutes",
    ),
}
"""Traces shipped with lblab (``lblab/data/azure-llm-2023/README.md``: source, licence)."""

_FORMAT_HINT = "time_s or timestamp, package_bytes, work_bytes"


@dataclass(frozen=True, slots=True)
class Trace:
    """A parsed trace: request k at ``times[k]`` seconds after the first, with its shape."""

    source: str
    times: tuple[float, ...]
    packages: tuple[int, ...]
    works: tuple[int, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceWindow:
    """What to replay: a built-in trace or a CSV file, and a window of it."""

    source: str
    """A built-in name (``BUILTIN_TRACES``) or a file's path."""
    start: float = 0.0
    """Seconds into the trace (from its first request) where the window opens."""
    length: float | None = None
    """Seconds of trace in the window (None: to the trace's end)."""
    loop: bool = False
    """At the window's end, start it again (else the replay stops there)."""

    def __post_init__(self) -> None:
        if not self.source:
            raise ConfigError(
                f"trace: give a built-in trace ({', '.join(BUILTIN_TRACES)}) or a CSV file"
            )
        if not 0 <= self.start < math.inf:
            raise ConfigError(f"trace_start: {self.start!r} must be 0 or more seconds")
        if self.length is not None and not 0 < self.length < math.inf:
            raise ConfigError(f"trace_length: {self.length!r} must be above 0 seconds")


def trace_path(source: str) -> Path:
    """The file of a built-in trace, or ``source`` as a path."""
    builtin = BUILTIN_TRACES.get(source)
    if builtin is None:
        return Path(source)
    return Path(str(files("lblab").joinpath("data", builtin.file)))


@cache
def load_trace(source: str) -> Trace:
    """Read and check a trace (cached: each process parses a file once)."""
    builtin = BUILTIN_TRACES.get(source)
    path = trace_path(source)
    try:
        raw = path.read_bytes()
        data = gzip.decompress(raw) if path.name.endswith(".gz") else raw
        text = data.decode("utf-8-sig")  # a spreadsheet's byte-order mark is no column name
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise ConfigError(
            f"{path}: cannot read the trace ({reason}); give a CSV file ({_FORMAT_HINT}) "
            f"or a built-in trace ({', '.join(BUILTIN_TRACES)})"
        ) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason}); save the CSV as UTF-8") from None
    if builtin is not None:  # named as the person named it
        return parse_trace(text, source, builtin.columns)
    return parse_trace(text, str(path))


def parse_trace(text: str, source: str, columns: Columns | None = None) -> Trace:
    """The trace in ``text`` (``source`` names it in errors). ``columns`` None: lblab's
    own format, ``time_s`` or ``timestamp``, ``package_bytes``, ``work_bytes``."""
    rows = csv.reader(io.StringIO(text))
    header = next(rows, None)
    if not header or not any(h.strip() for h in header):
        raise ConfigError(
            f"{source}:1: the trace is empty; give a header line ({_FORMAT_HINT}) "
            "and a line per request"
        )
    names = [h.strip().lower() for h in header]
    if columns is None:
        time = "timestamp" if "timestamp" in names and "time_s" not in names else "time_s"
        columns = Columns(time, time == "timestamp", "package_bytes", "work_bytes")
    at: dict[str, int] = {}
    for name in (columns.time, columns.package, columns.work):
        if name.lower() not in names:
            what = "time_s or timestamp" if name == "time_s" else name
            raise ConfigError(
                f"{source}:1: no {what} column (the header has {', '.join(header)}); "
                f"a trace's header names {_FORMAT_HINT}"
            )
        at[name] = names.index(name.lower())
    i_time, i_package, i_work = at[columns.time], at[columns.package], at[columns.work]
    width = len(header)
    times: list[float] = []
    packages: list[int] = []
    works: list[int] = []
    origin: datetime | None = None
    for row in rows:
        line = rows.line_num
        if not row or not any(field.strip() for field in row):
            continue
        if len(row) != width:
            raise ConfigError(
                f"{source}:{line}: {len(row)} fields where the header has {width}; "
                "give every line the header's columns"
            )
        raw_time = row[i_time].strip()
        if columns.timestamp:
            try:
                stamp = datetime.fromisoformat(raw_time)
                origin = origin or stamp
                t = (stamp - origin).total_seconds()
            except (ValueError, TypeError):
                raise ConfigError(
                    f"{source}:{line}: {columns.time} {raw_time!r} is not an ISO 8601 "
                    "date-time like the first line's (e.g. 2023-11-16 18:17:03.97996)"
                ) from None
        else:
            try:
                t = float(raw_time)
            except ValueError:
                t = math.nan
            if not math.isfinite(t):
                raise ConfigError(
                    f"{source}:{line}: {columns.time} {raw_time!r} is not a number of seconds"
                )
        if times and t < times[-1]:
            raise ConfigError(
                f"{source}:{line}: time {raw_time} is before the previous request's; "
                "sort the trace by time"
            )
        times.append(t)
        packages.append(_size(row[i_package], columns.package, columns.package_scale, source, line))
        works.append(_size(row[i_work], columns.work, columns.work_scale, source, line))
    if not times:
        raise ConfigError(
            f"{source}:2: the trace has a header but no requests; add a line per request"
        )
    first = times[0]
    return Trace(source, tuple(t - first for t in times), tuple(packages), tuple(works))


def _size(raw: str, column: str, scale: int, source: str, line: int) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(
            f"{source}:{line}: {column} {raw.strip()!r} is not a whole number; "
            "sizes are whole bytes (or tokens in a token trace)"
        ) from None
    if value < 0:
        raise ConfigError(f"{source}:{line}: {column} {value} is negative; sizes are 0 or more")
    return value * scale


class Schedule:
    """A window of a trace, time-scaled to a mean rate (the module's docstring)."""

    __slots__ = ("dues", "loop", "native_rate", "packages", "period", "rate", "works")

    def __init__(self, trace: Trace, window: TraceWindow, rate: float = 0.0) -> None:
        if not 0 <= rate < math.inf:
            raise ConfigError(f"rate: {rate!r} must be 0 (the trace's own) or more per second")
        end = math.inf if window.length is None else window.start + window.length
        picked = [i for i, t in enumerate(trace.times) if window.start <= t < end]
        where = f"{trace.source}: the window from {window.start:g} s" + (
            "" if window.length is None else f" for {window.length:g} s"
        )
        if len(picked) < 2:
            raise ConfigError(
                f"{where} holds {len(picked)} of the trace's {len(trace.times)} requests "
                f"(which span {trace.times[-1]:g} s); a replay needs at least 2: move "
                "trace_start or widen trace_length"
            )
        first, last = trace.times[picked[0]], trace.times[picked[-1]]
        n = len(picked)
        gap = (last - first) / (n - 1)
        if gap <= 0:
            raise ConfigError(
                f"{where}: all its {n} requests have the same time, so it has no rate; "
                "give the requests their own send times"
            )
        self.native_rate = 1.0 / gap
        self.rate = rate or self.native_rate
        scale = self.native_rate / self.rate
        self.dues = tuple((trace.times[i] - first) * scale for i in picked)
        self.packages = tuple(trace.packages[i] for i in picked)
        self.works = tuple(trace.works[i] for i in picked)
        self.period = n / self.rate
        self.loop = window.loop

    def __len__(self) -> int:
        """Requests in one pass of the window."""
        return len(self.dues)

    def due(self, k: int) -> float:
        """When send k is due, in seconds from the replay's start (k past one pass:
        the next pass, whether or not it loops)."""
        passes, i = divmod(k, len(self.dues))
        return passes * self.period + self.dues[i]

    def count(self, until: float | None = None, most: int | None = None) -> int:
        """How many sends the replay makes: due before ``until`` (seconds), at most
        ``most``; without ``loop`` one pass at most. None and None with ``loop``: no end."""
        n = len(self.dues)
        limit = most if self.loop else min(most or n, n)
        if until is None:
            if limit is None:
                raise ConfigError("a looping trace needs a duration or a request count")
            return limit
        passes, left = divmod(until, self.period)
        within = int(passes) * n + sum(1 for d in self.dues if d < left)
        return within if limit is None else min(within, limit)

    def sends(
        self,
        *,
        until: float | None = None,
        most: int | None = None,
        first: int = 0,
        step: int = 1,
    ) -> Iterator[tuple[float, int, int]]:
        """``(due, package_bytes, work_bytes)`` of sends ``first``, ``first + step``, ...
        of the ``count(until, most)`` the replay makes."""
        if step < 1 or first < 0:
            raise ConfigError(f"sends: first {first} and step {step} must be 0+ and 1+")
        n = len(self.dues)
        dues, packages, works, period = self.dues, self.packages, self.works, self.period
        for k in range(first, self.count(until, most), step):
            passes, i = divmod(k, n)
            yield passes * period + dues[i], packages[i], works[i]


@cache
def schedule(window: TraceWindow, rate: float = 0.0) -> Schedule:
    """The window of its trace, time-scaled to ``rate`` (0: the trace's own pace)."""
    return Schedule(load_trace(window.source), window, rate)
