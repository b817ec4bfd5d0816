"""Failure-aware load: the effective round trip of a failed answer (Linkerd's load biaser).

Linkerd's proxy (linkerd2-proxy #4537, ``linkerd/load-biaser``, 2026) keeps Peak-EWMA's
load ``rtt * (pending + 1)`` and changes what a failure observes: a success records its
measured round trip, a failure the server answered (HTTP 429, 503, any other 5xx, and the
gRPC failure codes) records a computed, penalised one instead, through the same peak
EWMA, so the penalty decays exactly as the EWMA does:

    e = max(penalty, min(hint, max_retry_after))   429 or 503 with a Retry-After hint
    e = penalty                                    otherwise (5 s by Linkerd's default)

("Honor a hint only above the base penalty. This keeps a failing endpoint from looking
healthier than a hintless one.") A transport error (connection refused or reset) records
its elapsed time, and an error about the client's own request is no failure of the
server's and records nothing special.

In RSocket terms (``penalised_rtt_ms``): REJECTED stands for 429/503 and takes a
Retry-After hint (``Outcome.retry_after_ms``, a server's ``retry-after-ms=`` in the
ERROR's message, ``lblab.failures``); an APPLICATION_ERROR the server marks as its own
fault (``Outcome.server_fault``) stands for a 5xx. A timeout, a lost connection, or an
APPLICATION_ERROR about the request returns None: the caller observes the measured
latency as before (a timeout's is already the whole deadline). One function, so that
every strategy that takes the option (today ``peak-ewma``'s ``failure_penalty_ms``;
docs/ALGORITHMS.md says why not ``p2c``, ``least-request`` or ``lc``) applies one rule.
"""

from __future__ import annotations

from .base import Outcome


def penalised_rtt_ms(
    outcome: Outcome, penalty_ms: float, max_retry_after_ms: float
) -> float | None:
    """The round trip (ms) to observe for ``outcome`` in place of its latency, or None
    to observe its latency (a success, an unpenalised failure, or ``penalty_ms`` 0)."""
    if outcome.ok or penalty_ms <= 0.0:
        return None
    if outcome.error_kind == "rejected":
        hint = outcome.retry_after_ms
        if hint is not None and hint > 0.0:
            return max(penalty_ms, min(hint, max_retry_after_ms))
        return penalty_ms
    if outcome.server_fault:
        return penalty_ms
    return None
