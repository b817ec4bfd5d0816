"""Per-client budgets at the balancer: no client can use up what the others share.

Backend connections are shared by every client, and a server bounds what one connection
holds (``servers/protocol.py``: 64 MiB of unfinished fragmented requests together). So a
client that opens fragmented requests and never finishes them would, without these,
fill that allowance and get every other client's large requests REJECTED. Each client
connection has a budget of its own (Envoy's per-connection buffer limits and HTTP/2's
stream limits are the same idea):

- ``client_streams``: streams open at once (requests in flight, and a refused request
  whose fragments are still being swallowed); a request beyond it is REJECTED.
- ``client_held_bytes``: bytes of request fragments forwarded whose last fragment has not
  come (what a server holds to reassemble). The fragment that would pass it ends its
  request: CANCEL to the backend (which drops what it held) and REJECTED to the client.
- ``backend_held_bytes``: what all clients together may hold on one backend connection,
  kept below the server's own allowance. While it has room any client within its own
  budget is served. When a fragment would pass it, the connection is shared max-min
  fairly: its fair share is ``backend_held_bytes / holders``. A client already over its
  fair share is refused. A client within it is served, and the requests of the largest
  holders over their share are ended (the largest request first, CANCEL and REJECTED
  as above) until it fits. Every holder within its share never needs more than the
  budget, so a well-behaved client is never refused because of another.

A request's held bytes are released when its last fragment is forwarded (the server
then has the whole request) and when it ends in any other way. Unfragmented requests
cost one comparison each (the open-streams check) and one at their end. Nothing here
does I/O: the router (``balancer/router.py``) sends the CANCELs and errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:  # types only: the CLI reads the defaults without the balancer's imports
    from lblab.balancer.node_counters import NodeCounters
    from lblab.balancer.streams import BackendPort, ClientPort, Stream

CLIENT_STREAMS: Final = 16_384
"""Default streams open at once per client connection (``--client-max-streams``): a
client at 1,000 requests/s whose server hangs holds 10,000 for a 10 s timeout."""
CLIENT_HELD_BYTES: Final = 16 * 1024 * 1024
"""Default bytes of unfinished fragmented requests per client (``--client-max-held-bytes``)."""
BACKEND_HELD_BYTES: Final = 48 * 1024 * 1024
"""Default that all clients together hold on one backend connection
(``--backend-max-held-bytes``), below lblab's servers' 64 MiB per connection."""
MAX_CLIENT_STREAMS: Final = 1_000_000
"""Most ``--client-max-streams`` may be."""
MAX_HELD_BUDGET: Final = 1 << 34
"""Most a held-bytes budget may be (16 GiB)."""


class Budgets:
    """The bytes each client holds, overall and on each backend connection, and the
    decisions of the module's rules."""

    __slots__ = (
        "backend_held_bytes",
        "client_held_bytes",
        "client_streams",
        "evicted",
        "on_backend",
        "on_backend_total",
        "per_client",
        "stats",
    )

    def __init__(
        self,
        stats: NodeCounters,
        client_streams: int = CLIENT_STREAMS,
        client_held_bytes: int = CLIENT_HELD_BYTES,
        backend_held_bytes: int = BACKEND_HELD_BYTES,
    ) -> None:
        self.client_streams = client_streams
        self.client_held_bytes = client_held_bytes
        self.backend_held_bytes = backend_held_bytes
        self.stats = stats
        self.per_client: dict[ClientPort, int] = {}
        self.on_backend: dict[BackendPort, dict[ClientPort, int]] = {}
        self.on_backend_total: dict[BackendPort, int] = {}
        self.evicted: list[Stream] = []
        """Streams ``hold`` took the room of: the router ends each, then clears this."""

    def streams_refusal(self, client: ClientPort) -> str | None:
        """Why a new request from ``client`` is refused (its open streams), or None."""
        if len(client.streams) < self.client_streams:
            return None
        self.stats.refused_client_streams += 1
        return (
            f"this client connection has {len(client.streams)} streams open, its budget "
            f"(--client-max-streams {self.client_streams}); the request was not processed, "
            "retry once some have ended"
        )

    def hold(self, stream: Stream, conn: BackendPort, n: int) -> str | None:
        """Count ``n`` more bytes of ``stream``'s unfinished request, held on ``conn``; or
        why not (the fragment must not be forwarded). Streams it evicts are in ``evicted``."""
        client = stream.client
        mine = self.per_client.get(client, 0)
        if mine + n > self.client_held_bytes:
            self.stats.refused_client_held_bytes += 1
            return (
                f"this client connection holds {mine} bytes of unfinished fragmented "
                f"requests and this fragment would pass its budget (--client-max-held-bytes "
                f"{self.client_held_bytes}); the request was not processed, finish or cancel "
                "the others first"
            )
        total = self.on_backend_total.get(conn, 0)
        if total + n > self.backend_held_bytes:
            holders = self.on_backend.get(conn, {})
            share = self.backend_held_bytes // (len(holders) + (client not in holders))
            here = holders.get(client, 0)
            if here + n > share:
                self.stats.refused_fair_share += 1
                return (
                    f"backend {conn.backend_id}'s connection is full of unfinished fragmented "
                    f"requests (--backend-max-held-bytes {self.backend_held_bytes}, shared by "
                    f"the clients using it) and this client already holds {here} bytes of its "
                    f"fair share of {share}; the request was not processed, retry later"
                )
            total = self._make_room(conn, holders, client, total + n - self.backend_held_bytes)
        on_conn = self.on_backend.get(conn)
        if on_conn is None:
            on_conn = self.on_backend[conn] = {}
        stream.held += n
        self.per_client[client] = mine + n
        on_conn[client] = on_conn.get(client, 0) + n
        self.on_backend_total[conn] = total + n
        return None

    def _make_room(
        self, conn: BackendPort, holders: dict[ClientPort, int], client: ClientPort, need: int
    ) -> int:
        """End the largest requests of the clients over their fair share on ``conn``
        until ``need`` bytes are free; returns what the connection holds then."""
        while need > 0:
            others = [c for c in holders if c is not client]
            if not others:  # cannot happen while the client is within its share
                break
            victim = max(others, key=holders.__getitem__)
            largest = max(
                (s for s in victim.streams.values() if s.held and s.backend is conn),
                key=_held,
            )
            need -= largest.held
            self.release(largest)
            self.evicted.append(largest)
            self.stats.evicted_fair_share += 1
        return self.on_backend_total.get(conn, 0)

    def release(self, stream: Stream) -> None:
        """``stream``'s request holds nothing any more: its last fragment went, or it ended."""
        n = stream.held
        conn = stream.backend
        if not n or conn is None:
            return
        stream.held = 0
        client = stream.client
        left = self.per_client[client] - n
        if left:
            self.per_client[client] = left
        else:
            del self.per_client[client]
        holders = self.on_backend[conn]
        here = holders[client] - n
        if here:
            holders[client] = here
        else:
            del holders[client]
        total = self.on_backend_total[conn] - n
        if holders:
            self.on_backend_total[conn] = total
        else:
            del self.on_backend[conn]
            del self.on_backend_total[conn]

    def held_on(self, conn: BackendPort) -> int:
        """Bytes all clients hold on ``conn`` (a gauge of the admin API)."""
        return self.on_backend_total.get(conn, 0)


def _held(stream: Stream) -> int:
    return stream.held
