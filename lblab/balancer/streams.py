"""Stream bookkeeping of the frame router: id allocation, the per-request record and the
ports through which the router (``balancer/router.py``) talks to connections.

A client stream (client connection, client stream id) is forwarded as a backend stream
(backend connection, backend stream id). Each side keeps a dict from its own stream id
to the same ``Stream`` record, so a frame from either side finds its peer in one
lookup: REQUEST_N, CANCEL and follow-on fragments from the client go to the stream's
backend; PAYLOAD, ERROR (and a channel's REQUEST_N / CANCEL) from the backend go back
to the client. Both mappings are dropped together when the stream ends; late frames
for an ended stream find nothing and are dropped.

Nothing here does I/O.
"""

from __future__ import annotations

from typing import Final, Protocol

from lblab.balancer.lifecycle import Attempted
from lblab.balancer.strategies.base import Interaction, RequestView
from lblab.wire.codes import FrameType
from lblab.wire.connection import StreamIds

INTERACTIONS: Final[dict[int, Interaction]] = {
    FrameType.REQUEST_RESPONSE: Interaction.REQUEST_RESPONSE,
    FrameType.REQUEST_FNF: Interaction.FIRE_AND_FORGET,
    FrameType.REQUEST_STREAM: Interaction.REQUEST_STREAM,
    FrameType.REQUEST_CHANNEL: Interaction.REQUEST_CHANNEL,
}
REQUEST_TYPES: Final = frozenset(INTERACTIONS)
REPLAYABLE: Final = frozenset((FrameType.REQUEST_RESPONSE, FrameType.REQUEST_STREAM))
"""A REJECTED answer before any response frame is replayed elsewhere only for these:
a channel keeps sending after its first frame, so its request cannot be kept whole."""
MAX_REPLAY_BYTES: Final = 16 * 1024 * 1024
"""Most a request's frames may hold for a replay: beyond it they are let go and the
request is not replayed (its backend's answer, REJECTED included, goes to the client).
Bounds the memory one client's fragmented request holds at the balancer."""
# As plain ints: compiled, comparing an int with an IntEnum member is a generic call.
_RR: Final = int(FrameType.REQUEST_RESPONSE)
_FNF: Final = int(FrameType.REQUEST_FNF)


class ClientPort(Protocol):
    """A client connection as the router sees it (``frontend.ClientConnection``)."""

    address: str | None
    composite_metadata: bool
    streams: dict[int, Stream]
    """Live streams by the client's stream id."""

    def send(self, frame: bytes | bytearray) -> None: ...

    def send_error(self, sid: int, code: int, message: str) -> None: ...

    def block(self, reason: object) -> None:
        """Stop reading this client until every reason has been lifted (backpressure)."""

    def unblock(self, reason: object) -> None: ...


class BackendPort(Protocol):
    """A backend connection as the router sees it (``backend.BackendConnection``)."""

    backend_id: str
    streams: dict[int, Stream]
    """Live streams by the balancer's stream id on this connection."""
    ids: StreamIds
    draining: bool
    """The backend sent CONNECTION_CLOSE: it finishes what it accepted, takes nothing new."""
    retired: bool
    """Replaced or removed: it takes no new streams and closes once ``streams`` is empty."""
    probes: dict[int, ProbeStream]
    """The balancer's own probes waiting for an answer, by stream id (``balancer/probes.py``)."""

    def write(self, frame: bytes | bytearray, client: ClientPort) -> None:
        """Forward a client's frame (the client may be paused while the backend is)."""

    def send(self, frame: bytes | bytearray) -> None:
        """Send the balancer's own frame (a probe): no client to pause."""

    def send_cancel(self, sid: int) -> None: ...

    def close(self) -> None: ...


class Connections(Protocol):
    """Where the router (and the prober) find a picked backend's connection (the node's backends)."""

    def connection(self, backend_id: str) -> BackendPort | None:
        """The connection that takes new streams for ``backend_id``, if it has one."""

    def connection_missing(self, backend_id: str) -> None:
        """The pool counts ``backend_id`` up but it has no connection: mark it down."""


class Stream(Attempted):
    """One forwarded request, from its first frame until both directions have ended.

    Its lifecycle (attempt, timing, deadline, end) is ``balancer/lifecycle.py``'s; this
    record adds the two connections and their stream ids. ``saved`` keeps the request's
    frames (as sent, backend id included) until the first response frame arrives, so a
    REJECTED answer can be replayed on another backend. ``client_open`` is the
    client-to-backend direction (request fragments, channel payloads) and
    ``backend_open`` the other; the stream ends when both are closed, or at once on
    ERROR, CANCEL, timeout or connection loss.
    """

    __slots__ = (
        "backend",
        "backend_open",
        "backend_sid",
        "client",
        "client_open",
        "client_sid",
        "frame_type",
        "held",
        "saved",
        "saved_bytes",
    )

    def __init__(
        self,
        client: ClientPort,
        client_sid: int,
        frame_type: int,
        request: RequestView,
        t_arrival: float,
        deadline: float,
    ) -> None:
        super().__init__(
            request,
            t_arrival,
            deadline,
            counted=frame_type != _FNF,
            deadline_to_end=frame_type == _RR,
        )
        self.client = client
        self.client_sid = client_sid
        self.frame_type = frame_type
        self.backend: BackendPort | None = None
        self.backend_sid = 0
        self.saved: list[bytes | bytearray] | None = [] if frame_type in REPLAYABLE else None
        self.saved_bytes = 0
        self.held = 0
        """Bytes of request fragments forwarded whose last fragment has not come
        (``balancer/budgets.py``)."""
        self.client_open = True
        self.backend_open = frame_type != _FNF

    def keep(self, frame: bytes | bytearray) -> None:
        """Keep a request frame for a replay, until ``MAX_REPLAY_BYTES``."""
        saved = self.saved
        if saved is not None:
            self.saved_bytes += len(frame)
            if self.saved_bytes > MAX_REPLAY_BYTES:
                self.saved = None
            else:
                saved.append(frame)

    def __repr__(self) -> str:
        return (
            f"Stream(client_sid={self.client_sid}, backend_sid={self.backend_sid}, "
            f"type={self.frame_type}, done={self.done})"
        )


class ProbeStream:
    """One probe the balancer sent (``balancer/probes.py``), until answered, timed out or lost."""

    __slots__ = ("backend_id", "conn", "deadline", "done", "sid")

    def __init__(self, conn: BackendPort, sid: int, deadline: float) -> None:
        self.conn = conn
        self.backend_id = conn.backend_id
        self.sid = sid
        self.deadline = deadline
        self.done = False
