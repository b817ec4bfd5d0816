"""The balancer's probes (strategies with ``uses_probes``, ``prequal``): sans-I/O.

After each pick the router calls ``send``: the pool asks the strategy which backends to
probe (``Pool.probe_targets``) and each gets one probe on the backend's current
connection, a REQUEST_RESPONSE whose metadata is ``PROBE_METADATA`` (routing ``probe``)
and whose data is empty. The server answers it at once from its counters, never behind
work (``servers/protocol.py``), with a PAYLOAD of ``ProbeAnswer`` JSON.

Stream ids: a probe takes the connection's next odd id (``StreamIds.allocate``, skipping
the client streams in flight) and is filed in ``BackendPort.probes``, apart from the
client streams. A backend frame for an id that is no client stream is looked up there
(``answer``), so an answer never reaches a client and a client's answer is never read
as a probe's. A client stream cannot later take a live probe's id: ids only repeat
after the counter wraps 2^30 allocations, and a probe lives at most ``PROBE_TIMEOUT_S``.

Ends, each exactly once, each counted per backend in the pool (``Pool.probe_*``):
answered (a well-formed PAYLOAD: to the strategy), failed (an ERROR, a malformed or
unexpected answer, the connection lost: logged at debug, nothing else), or timed out
after ``PROBE_TIMEOUT_S`` (``expire``, from the node's tick: a CANCEL to the backend,
and a late answer finds nothing and is dropped). Every probe has the same timeout, so
deadlines are a FIFO, as the router's.
"""

from __future__ import annotations

import logging
from collections import deque

from lblab.balancer.pool import Pool
from lblab.balancer.streams import BackendPort, Connections, ProbeStream
from lblab.errors import RemoteProtocolError
from lblab.loadreport import ProbeAnswer
from lblab.wire.codec import decode_frame_body, encode_frame
from lblab.wire.codes import U32
from lblab.wire.frames import Error, Payload, RequestResponse
from lblab.wire.metadata import PROBE_METADATA

log = logging.getLogger("lblab.balancer")

PROBE_TIMEOUT_S = 1.0
"""A probe unanswered this long is given up: Prequal's pool keeps no probe older than
1 s by default, so a later answer could only be thrown away."""

_PROBE_FRAME = encode_frame(RequestResponse(stream_id=1, metadata=PROBE_METADATA))
_pack_u32 = U32.pack_into


class Prober:
    """Sends, matches, times out and counts the balancer's probes."""

    __slots__ = ("connections", "deadlines", "pool", "timeout_s")

    def __init__(
        self, pool: Pool, connections: Connections, timeout_s: float = PROBE_TIMEOUT_S
    ) -> None:
        self.pool = pool
        self.connections = connections
        self.timeout_s = timeout_s
        self.deadlines: deque[ProbeStream] = deque()

    def send(self, now: float) -> None:
        """Send the probes the strategy wants now (a backend without a connection is skipped)."""
        for view in self.pool.probe_targets(now):
            conn = self.connections.connection(view.id)
            if conn is None:
                continue
            sid = conn.ids.allocate(conn.streams)
            frame = bytearray(_PROBE_FRAME)
            _pack_u32(frame, 3, sid)
            conn.send(frame)
            probe = ProbeStream(conn, sid, now + self.timeout_s)
            conn.probes[sid] = probe
            self.deadlines.append(probe)
            self.pool.probe_sent(view.id)

    def answer(self, conn: BackendPort, sid: int, body: bytes, now: float) -> None:
        """A backend frame on probe stream ``sid`` (``body``: the frame without its length
        prefix): the probe ends, answered if it is a well-formed answer, else failed."""
        probe = conn.probes.pop(sid)
        probe.done = True
        try:
            answer = _parse(body)
        except RemoteProtocolError as exc:
            log.debug("probe of backend %s failed: %s", probe.backend_id, exc)
            self.pool.probe_lost(probe.backend_id, timed_out=False)
            return
        self.pool.probe_answer(probe.backend_id, answer, now)

    def expire(self, now: float) -> None:
        """Give up the probes whose deadline has passed: a CANCEL each, counted timed out."""
        deadlines = self.deadlines
        while deadlines and (deadlines[0].done or deadlines[0].deadline <= now):
            probe = deadlines.popleft()
            if probe.done:
                continue
            probe.done = True
            del probe.conn.probes[probe.sid]
            probe.conn.send_cancel(probe.sid)
            self.pool.probe_lost(probe.backend_id, timed_out=True)

    def lost(self, conn: BackendPort) -> None:
        """``conn`` closed: its probes end unanswered, counted failed."""
        for probe in conn.probes.values():
            probe.done = True
            self.pool.probe_lost(probe.backend_id, timed_out=False)
        conn.probes.clear()


def _parse(body: bytes) -> ProbeAnswer:
    """The ``ProbeAnswer`` in a probe stream's frame, or ``RemoteProtocolError`` saying why not."""
    frame = decode_frame_body(body)
    if isinstance(frame, Payload) and frame.next and not frame.follows:
        return ProbeAnswer.from_json(frame.data)
    if isinstance(frame, Error):
        raise RemoteProtocolError(f"answered ERROR 0x{int(frame.error_code):x}: {frame.message}")
    raise RemoteProtocolError(f"unexpected answer to a probe: {frame!r}"[:200])
