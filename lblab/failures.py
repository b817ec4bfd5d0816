"""The failure vocabulary of the results contract: what went wrong, and who said so.

Every failed request in ``requests.parquet`` carries two names:

- ``error_kind`` (docs/DESIGN.md, "Results contract"): ``timeout``, ``rejected``,
  ``connection``, ``application`` or ``other``;
- ``error_origin``: who produced the failure, so the analysis can separate what the
  algorithm under test caused from what the harness did:

  ==========  ==================================================================
  server      an ERROR a backend sent (REJECTED at its limit, APPLICATION_ERROR),
              passed through the balancer untouched
  balancer    the balancer's own answer: no backend available, its request
              deadline (``--request-timeout``), a malformed request it refused
  client      the load generator's own deadline ran out first
  transport   a connection failed: the client's to the balancer, or the
              balancer's to the backend that held the request
  ==========  ==================================================================

The balancer marks the ERROR frames it writes itself with a message prefix
``balancer/<kind>: `` (``balancer_message``), so any client can tell them from a
backend's without a side channel; ``classify_error`` reads an ERROR frame back into
``(error_kind, error_origin)``. A server marks an APPLICATION_ERROR that is its own
failure, not about the request, with ``SERVER_FAULT_PREFIX``: only those count toward
the backend's passive ejection (``balancer/health.py``). A server may end a REJECTED's
message with a Retry-After hint, ``; retry-after-ms=<whole ms>`` (``retry_after_note``:
its rate limit's wait for the next token), which failure-aware strategies honour
(``balancer/strategies/penalty.py``); any client may ignore it.
"""

from __future__ import annotations

import math

from lblab.wire.codes import ErrorCode

ERROR_KINDS = ("timeout", "rejected", "connection", "application", "other")
ERROR_ORIGINS = ("server", "balancer", "client", "transport")

BALANCER_PREFIX = "balancer/"
SERVER_FAULT_PREFIX = "server fault: "
"""An APPLICATION_ERROR message that starts so is the server's own failure (a bug, an
exhausted resource), not a verdict on the client's request."""

KIND_BY_CODE: dict[int, str] = {
    ErrorCode.REJECTED: "rejected",
    ErrorCode.APPLICATION_ERROR: "application",
    ErrorCode.INVALID: "application",
}


def balancer_message(kind: str, text: str) -> str:
    """The message of an ERROR the balancer writes itself, e.g. ``balancer/timeout: ...``."""
    if kind not in ERROR_KINDS:
        raise ValueError(f"unknown error kind {kind!r}; kinds are {', '.join(ERROR_KINDS)}")
    return f"{BALANCER_PREFIX}{kind}: {text}"


def classify_error(code: int, message: str) -> tuple[str, str]:
    """``(error_kind, error_origin)`` of an ERROR frame a client received."""
    if message.startswith(BALANCER_PREFIX):
        kind = message[len(BALANCER_PREFIX) :].partition(":")[0]
        if kind in ERROR_KINDS:
            return kind, "transport" if kind == "connection" else "balancer"
    return KIND_BY_CODE.get(code, "other"), "server"


RETRY_AFTER_KEY = "retry-after-ms="
_RETRY_AFTER = RETRY_AFTER_KEY.encode()
_DIGITS = frozenset(b"0123456789")


def whole_ms(wait_s: float) -> int:
    """A Retry-After wait as the hint gives it: whole milliseconds, rounded up, at least 1."""
    return max(1, math.ceil(wait_s * 1000.0))


def retry_after_note(wait_s: float) -> str:
    """The hint a REJECTED message ends with (``whole_ms`` of the wait)."""
    return f"; {RETRY_AFTER_KEY}{whole_ms(wait_s)}"


def retry_after_ms(frame: bytes | bytearray, message_at: int) -> float | None:
    """A REJECTED's Retry-After hint in milliseconds (its message from byte ``message_at``
    of ``frame``), or None when it has none. Read in place, no copy."""
    at = frame.find(_RETRY_AFTER, message_at)
    if at < 0:
        return None
    start = end = at + len(_RETRY_AFTER)
    while end < len(frame) and frame[end] in _DIGITS and end - start < 12:
        end += 1
    return float(frame[start:end]) if end > start else None


_SERVER_FAULT = SERVER_FAULT_PREFIX.encode()


def is_server_fault(code: int, frame: bytes | bytearray, message_at: int) -> bool:
    """Does a backend's ERROR (its message from byte ``message_at`` of ``frame``) say
    the backend itself failed (counts toward its ejection)? Read in place, no copy."""
    return code == ErrorCode.APPLICATION_ERROR and frame.startswith(_SERVER_FAULT, message_at)
