"""Connection caps of one listening port: total, and before SETUP.

Shared by the balancer's client and agent ports and the server. Sans-I/O: the
protocol objects call ``admit`` from ``connection_made``, ``setup_done`` once their
SETUP is accepted and ``gone`` from ``connection_lost``; a connection to refuse is told
through its ``refuse(message)`` (an ERROR REJECTED_SETUP, then close).

Over ``max_connections`` a new connection is refused (checked first, so a pending cap
above it changes nothing). Over ``max_pending_setup`` the
OLDEST connection still without SETUP is closed, not the new one: a flood of idle
connections then only ever displaces idle connections, and a well-behaved client
(which sends its SETUP within a round trip of connecting) still gets in. The SETUP
deadline (``SETUP_TIMEOUT_S``, run by each protocol with one timer) closes the rest.
"""

from __future__ import annotations

from typing import Protocol

from lblab.errors import ConfigError

SETUP_TIMEOUT_S = 5.0
"""A connection without an accepted SETUP this long after connecting is closed."""
MAX_CONNECTIONS = 10_000
"""Connections at once per port (the process's file limit here is 20,000)."""
MAX_PENDING_SETUP = 256
"""Connections at once that have not completed SETUP (each holds a small buffer only)."""


class Refusable(Protocol):
    def refuse(self, message: str) -> None:
        """Send ERROR REJECTED_SETUP with ``message`` and close."""


class Admission:
    """The caps of one port (values checked by the command line: ``check_limits``)."""

    __slots__ = ("max_connections", "max_pending_setup", "open", "pending", "what")

    def __init__(self, max_connections: int, max_pending_setup: int, what: str) -> None:
        self.max_connections = max_connections
        self.max_pending_setup = max_pending_setup
        self.what = what
        self.open: set[Refusable] = set()
        self.pending: dict[Refusable, None] = {}
        """Connections without SETUP, oldest first (dicts keep insertion order)."""

    def admit(self, conn: Refusable) -> bool:
        """Take a new connection; False (and ``conn`` refused) when the port is full."""
        if len(self.open) >= self.max_connections:
            conn.refuse(
                f"{self.what} is at its limit of {self.max_connections} connections; retry later"
            )
            return False
        self.open.add(conn)
        self.pending[conn] = None
        if len(self.pending) > self.max_pending_setup:
            oldest = next(iter(self.pending))
            del self.pending[oldest]
            self.open.discard(oldest)  # refused: closed at once, no longer counted
            oldest.refuse(
                f"{self.what} has {self.max_pending_setup} connections waiting for their "
                "SETUP; the oldest is closed: send SETUP right after connecting"
            )
        return True

    def setup_done(self, conn: Refusable) -> None:
        self.pending.pop(conn, None)

    def closing(self, conn: Refusable) -> None:
        """We closed ``conn`` and it lingers (``wire_asyncio.close_without_reset``): it
        still holds a socket, counted in ``open``, but no longer waits for its SETUP."""
        self.pending.pop(conn, None)

    def gone(self, conn: Refusable) -> None:
        self.open.discard(conn)
        self.pending.pop(conn, None)


def check_limits(max_connections: int, max_pending_setup: int, setup_timeout_s: float) -> None:
    """ConfigError naming the flag when a cap or the SETUP deadline is out of range."""
    if not 1 <= max_connections <= 1_000_000:
        raise ConfigError(f"--max-connections must be in 1..1000000, not {max_connections}")
    if not 1 <= max_pending_setup <= 1_000_000:
        raise ConfigError(f"--max-pending-setup must be in 1..1000000, not {max_pending_setup}")
    if not 0.05 <= setup_timeout_s <= 600:
        raise ConfigError(f"--setup-timeout must be in 0.05..600 seconds, not {setup_timeout_s}")
