"""What the balancer's connections share, and the events they raise toward the node.

Connections (``frontend.ClientConnection``, ``backend.Backend`` and its connections)
never reach into the node: they route frames through the ``Router``, batch their
writes through the ``Outbox``, and tell the node about lifecycle changes through
``NodeEvents``, which ``BalancerNode`` implements. The node is the only one that
turns those events into pool changes, so the pool stays the only writer of the
backend views.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass
from typing import Protocol

from lblab.balancer.outbox import Outbox
from lblab.balancer.router import Router
from lblab.balancer.streams import BackendPort, ClientPort


class NodeEvents(Protocol):
    def setup_wants(self) -> tuple[tuple[str, ...], bool]:
        """Report kinds and the LEASE flag the current strategy needs in backend SETUPs."""

    def client_opened(self, client: ClientPort) -> None: ...

    def client_closed(self, client: ClientPort) -> None:
        """The client's connection is gone; its streams are to be ended."""

    def broadcast(self, frame: bytes, client: ClientPort) -> None:
        """A client's METADATA_PUSH: to every connected backend."""

    def backend_up(self, backend_id: str) -> None: ...

    def backend_down(self, backend_id: str) -> None: ...

    def backend_hung(self, backend_id: str, silent_s: float) -> None: ...

    def backend_answering(self, backend_id: str, now: float) -> None: ...

    def backend_draining(self, backend_id: str) -> None: ...

    def backend_lease(self, backend_id: str, ttl_s: float, count: int, now: float) -> None: ...

    def push_report(self, backend_id: str, metadata: memoryview, now: float) -> None: ...

    def retiring(self, conn: BackendPort) -> None:
        """``conn`` takes no new streams; close it once its streams end or time out."""

    def protocol_failure(self) -> None:
        """A connection closed itself on a protocol error (counted for the admin API)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Wiring:
    loop: asyncio.AbstractEventLoop
    outbox: Outbox
    router: Router
    events: NodeEvents
    max_frame_bytes: int
    jitter: random.Random
    """Reconnect jitter; apart from the strategy's seeded draws."""
