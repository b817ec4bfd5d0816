"""The node's own counters, declared once: the router's refusals, replays and deadlines,
the budgets' refusals and evictions, and the ports' protocol errors and refused agents.

Each field is one ``lblab_balancer_<name>_total`` family of ``/metrics``
(``admin.metrics_text`` walks the fields) with its help text, as the pool's per-backend
``BackendCounters`` are; the router, its budgets and the node count into one instance.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Final


def counter(help_text: str) -> Any:
    """A counter field, 0 at start; its help text is what ``/metrics`` says of it."""
    return field(default=0, metadata={"help": help_text})


@dataclass(slots=True)
class NodeCounters:
    rejected_no_backend: int = counter("Requests answered REJECTED: no backend was available.")
    rejected_stopping: int = counter("Requests answered REJECTED while the balancer stopped.")
    strategy_errors: int = counter(
        "Picks in which the strategy raised (the request was answered REJECTED)."
    )
    replays: int = counter("REJECTED answers replayed on another backend.")
    timeouts: int = counter("Requests that passed their deadline at the balancer.")
    cut_at_stop: int = counter(
        "Requests still in flight when the drain at stop ran out (answered CANCELED)."
    )
    refused_client_streams: int = counter(
        "Requests refused: their client had --client-max-streams streams open."
    )
    refused_client_held_bytes: int = counter(
        "Fragments refused: their client would hold more than --client-max-held-bytes."
    )
    refused_fair_share: int = counter(
        "Fragments refused: a full backend connection, their client over its fair share."
    )
    evicted_fair_share: int = counter(
        "Unfinished requests ended to make room for a client within its fair share."
    )
    protocol_errors: int = counter("Connections closed for a protocol error.")
    agent_connections_bad_token: int = counter(
        "Agent connections refused for no or a wrong report token."
    )
    agent_reports_bad_source: int = counter(
        "Agent-port reports dropped for claiming a server's own in-band source."
    )


NODE_COUNTER_HELP: Final = {f.name: str(f.metadata["help"]) for f in fields(NodeCounters)}


def counter_values(counters: NodeCounters) -> dict[str, int]:
    """Each counter by its name, in declaration order (the admin API's ``counters``)."""
    return {name: getattr(counters, name) for name in NODE_COUNTER_HELP}
