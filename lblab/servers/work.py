"""The JSON work a server does per request (docs/DESIGN.md, "Wire contract").

A request body is ``{"work_bytes": W, "pad": "..."}`` (a request-stream may add
``"items": N``); anything else (not UTF-8 JSON, other keys, a field of the wrong type
or out of range) is a ``BadRequest``, the client's error. The work is: parse the body,
take the document whose JSON encoding is exactly W bytes (built once per size and
cached), ``json.dumps`` it and ``json.loads`` the result. Only a checked ``work_bytes``
reaches the document, so nothing a client sends can make the work itself raise. The
stdlib ``json`` module is the work on purpose: it is what the thesis measured; the
server's own framing uses orjson.

The document is a list of small uniform records (ints, floats, strings, a bool, a short
list) padded to the exact size, so the cost per byte is the same at every size: about
25-35 ns/B on these machines (1 MB: ~30 ms on one unthrottled core), which makes work
volume a linear knob.
"""

from __future__ import annotations

import json
import math
import sys
import threading
from collections import OrderedDict
from dataclasses import dataclass
from itertools import islice
from typing import Any, NoReturn

from lblab.errors import ApplicationError

MAX_WORK_BYTES = 2_000_000
"""Cap on ``work_bytes``: twice the thesis matrix's largest (1 MB). A larger value is an
APPLICATION_ERROR found while parsing the body, before any work. What a size costs here
(one unthrottled core): 1 MB ~0.1 s to build the document once, 0.07 s per request;
2 MB 0.3 s and 0.1 s; 16 MB (the old cap) took seconds and ~160 MiB for one 40-byte
request."""
MAX_STREAM_ITEMS = 10_000
MAX_STREAM_WORK_BYTES = 100_000_000
"""Cap on ``items * work_bytes`` of one request-stream (~7 s of work on one core), so a
40-byte request cannot ask for 10,000 items of the largest work."""
DEFAULT_STREAM_ITEMS = 3
CACHE_BUDGET_BYTES = 8_000_000
"""Encoded bytes of documents kept in the cache: the matrix's 10 KB + 100 KB + 1 MB fit
with room to spare, and requests cycling through many sizes hold ~30 MiB of documents
at most (a document's Python objects take several times its encoded size)."""

_FRAME_BYTES = len(json.dumps({"records": [], "pad": ""}))  # 26
_SEPARATOR_BYTES = 2  # ", " between list items with json.dumps' default separators


class BadRequest(ApplicationError):
    """The request's own content is wrong: not UTF-8 JSON, nested past the parser, the
    wrong shape, a field of the wrong type or out of range. Answered as a client error
    (an APPLICATION_ERROR that says what was wrong, never ``server fault: ``), so it does
    not count toward the backend's ejection; the server's own failures are anything else
    (``servers/protocol.py``)."""


@dataclass(frozen=True, slots=True)
class WorkRequest:
    work_bytes: int
    items: int = DEFAULT_STREAM_ITEMS
    """How many items a request-stream emits (ignored by the other interactions)."""


FIELDS = frozenset({"work_bytes", "pad", "items"})
"""The keys a request body may hold; any other is refused, so a typo such as ``itmes``
is an error rather than a silent default."""
PREVIEW_CHARS = 40
"""How much of a value from the request an error message quotes: the value may be a
megabyte string, a 4000-digit integer or an array nested 900 deep."""
_SHAPE = 'send {"work_bytes": <int>, "pad": "<string>"}'


def _no_constant(name: str) -> NoReturn:
    raise BadRequest(f"request body has {name}, which is not JSON (RFC 8259); {_SHAPE}")


_DECODER = json.JSONDecoder(parse_constant=_no_constant)
"""Python's decoder, refusing the NaN and Infinity literals it would otherwise accept.
``parse_constant`` is only called for those, so a valid body parses at the same cost."""


def parse_work_request(body: bytes) -> WorkRequest:
    """Parse and check a request body; ``BadRequest`` names what is wrong.

    The body is parsed with the stdlib decoder on purpose (its cost per package byte is
    part of the measured work, module docstring). Every failure the body alone can cause
    is a ``BadRequest``: the parser's ``RecursionError`` too, which nesting deeper than
    the interpreter's recursion limit (1000) raises, since the stack depth at this call
    is the same for every request.
    """
    try:
        fields = _DECODER.decode(body.decode())
    except UnicodeDecodeError as exc:
        raise BadRequest(
            f"request body is not UTF-8 ({exc.reason} at byte {exc.start}); {_SHAPE}"
        ) from None
    except json.JSONDecodeError as exc:
        raise BadRequest(f"request body is not valid JSON ({exc}); {_SHAPE}") from None
    except RecursionError:
        raise BadRequest(
            f"request body nests arrays or objects deeper than this server parses "
            f"(about {sys.getrecursionlimit()} levels); {_SHAPE}"
        ) from None
    except ValueError as exc:  # an integer past the interpreter's digit limit (4300)
        reason = str(exc).partition(";")[0]
        raise BadRequest(
            f"request body holds a number this server cannot read ({reason})"
        ) from None
    if not isinstance(fields, dict):
        raise BadRequest(f"request body must be a JSON object, not {_preview(fields)}; {_SHAPE}")
    if not fields.keys() <= FIELDS:
        unknown = islice((_preview(k) for k in fields if k not in FIELDS), 3)
        raise BadRequest(
            f"request body has keys other than work_bytes, pad and items: {', '.join(unknown)}"
        )
    if "work_bytes" not in fields:
        raise BadRequest(f"work_bytes is missing: {_SHAPE}")
    work_bytes = _int_field(fields, "work_bytes", 0, MAX_WORK_BYTES)
    if not isinstance(fields.get("pad", ""), str):
        raise BadRequest(f"pad must be a string, got {_preview(fields['pad'])}")
    items = DEFAULT_STREAM_ITEMS
    if "items" in fields:
        items = _int_field(fields, "items", 1, MAX_STREAM_ITEMS)
        if items * work_bytes > MAX_STREAM_WORK_BYTES:
            raise BadRequest(
                f"items {items} x work_bytes {work_bytes} exceeds this server's cap of "
                f"{MAX_STREAM_WORK_BYTES} bytes of work per stream; ask for fewer or smaller items"
            )
    return WorkRequest(work_bytes, items)


def _int_field(fields: dict[str, Any], name: str, low: int, high: int) -> int:
    value = fields[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{name} must be an integer, got {_preview(value)}")
    if value < low:
        raise BadRequest(f"{name} must be >= {low}, got {_preview(value)}")
    if value > high:
        raise BadRequest(f"{name} {_preview(value)} exceeds this server's cap of {high}")
    return value


def _preview(value: Any) -> str:
    """A value from the request as an error message quotes it: scalars as JSON, cut to
    ``PREVIEW_CHARS``; a number that overflowed, an array or an object by kind only
    (encoding a container could recurse as deep as the parser did, and cost as much as
    the body)."""
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, float) and math.isinf(value):  # 1e400: NaN and Infinity are refused
        return "a number beyond the range of a double"
    text = json.dumps(value[: PREVIEW_CHARS + 1] if isinstance(value, str) else value)
    return text if len(text) <= PREVIEW_CHARS else text[:PREVIEW_CHARS] + "..."


def _record(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "name": f"item-{i:08d}",
        "price": round(i * 1.37, 2),
        "qty": i % 97,
        "active": i % 3 == 0,
        "tags": ["alpha", "beta", "gamma"],
    }


def build_document(work_bytes: int) -> Any:
    """A JSON value whose ``json.dumps`` encoding is exactly ``work_bytes`` long (>= 1)."""
    if work_bytes < 1:
        raise ValueError(f"work_bytes must be >= 1, not {work_bytes}")
    if work_bytes < _FRAME_BYTES:
        return 0 if work_bytes == 1 else "x" * (work_bytes - 2)
    records: list[dict[str, Any]] = []
    size = _FRAME_BYTES
    while True:
        record = _record(len(records))
        extra = len(json.dumps(record)) + (_SEPARATOR_BYTES if records else 0)
        if size + extra > work_bytes:
            break
        records.append(record)
        size += extra
    return {"records": records, "pad": "x" * (work_bytes - size)}


class DocumentCache:
    """Documents by size, least recently used evicted past a budget of encoded bytes.

    Shared by the worker threads, hence the lock (held only for dict operations; a miss
    builds outside it, so two threads may build the same size once each, harmlessly).
    """

    def __init__(self, budget_bytes: int = CACHE_BUDGET_BYTES) -> None:
        self._docs: OrderedDict[int, Any] = OrderedDict()
        self._bytes = 0
        self._budget = budget_bytes
        self._lock = threading.Lock()

    def get(self, work_bytes: int) -> Any:
        with self._lock:
            doc = self._docs.get(work_bytes)
            if doc is not None:
                self._docs.move_to_end(work_bytes)
                return doc
        doc = build_document(work_bytes)
        with self._lock:
            if work_bytes not in self._docs:
                self._docs[work_bytes] = doc
                self._bytes += work_bytes
                while self._bytes > self._budget and len(self._docs) > 1:
                    size, _ = self._docs.popitem(last=False)
                    self._bytes -= size
        return doc

    def __len__(self) -> int:
        return len(self._docs)


def do_work(body: bytes, cache: DocumentCache) -> WorkRequest:
    """The whole per-request work: parse the body, then dumps + loads of the document."""
    request = parse_work_request(body)
    if request.work_bytes:
        json.loads(json.dumps(cache.get(request.work_bytes)))
    return request
