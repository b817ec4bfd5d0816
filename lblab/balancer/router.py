"""The balancer's sans-I/O router: the stream table, deadlines, replay and accounting.

The router decides what happens to every request frame and every answer; it does no
I/O. Connections hand it frames (a receive buffer with a position, so nothing is
copied before it is needed) and the time ``now``; it answers through the ports of
``balancer/streams.py`` (``ClientPort.send``, ``BackendPort.write``) and keeps the
pool's books. ``balancer/node.py`` composes it with sockets and timers; the unit tests
drive it with fake ports and a fake clock.

Forwarding: a new request from a client asks ``Pool.pick`` for a backend, gets a fresh
odd stream id on that backend's connection, and goes out as bytes: the frame is copied
once out of the receive buffer, its stream id rewritten in the copy with ``pack_into``.
Every later frame of the stream is found in one dict lookup (``Stream``) and forwarded
the same way. Payloads are never decoded except where the strategy asks (routing keys,
response load reports).

Accounting: the shared request lifecycle (``balancer/lifecycle.py``, which the
simulator drives too) makes the pool's calls: one outcome per dispatch on every ending
(``finish``): response, ERROR, timeout, CANCEL, client gone, backend gone. A REJECTED
answer before any response frame is replayed on another backend, which is what makes
draining servers lose nothing.

Stopping (docs/DESIGN.md, "Reliability rules"): once ``stop`` is called every new
request is refused with REJECTED (not processed: safe to retry elsewhere), one flag
check per request; streams already open go on. ``cut`` ends the ones still open when
the node's grace runs out: a CANCELED ERROR to the client (the spec's "may have started
processing it") and a CANCEL to the backend. When to cut is the node's timing.

Probes (strategies with ``uses_probes``): after each pick the router has its
``Prober`` (``balancer/probes.py``) send the probes the strategy wants, on the backends'
connections; ``expire`` times them out and ``backend_lost`` ends those of a lost
connection. Other strategies pay one flag check per pick.

Budgets (``balancer/budgets.py``): a client's streams open at once and the bytes of its
unfinished fragmented requests are bounded per client and shared fairly on each backend
connection; a request over them is REJECTED (a fragment: CANCEL to its backend too),
and the others go on.

Timeouts: every request gets the same timeout, so the lifecycle's FIFO of deadlines
suffices (``expire``, run from the node's periodic tick).
"""

from __future__ import annotations

import logging
from typing import Final, Protocol

from lblab.balancer.budgets import (
    BACKEND_HELD_BYTES,
    CLIENT_HELD_BYTES,
    CLIENT_STREAMS,
    Budgets,
)
from lblab.balancer.lifecycle import Deadlines, Lifecycle
from lblab.balancer.node_counters import NodeCounters
from lblab.balancer.pool import Pool
from lblab.balancer.probes import Prober
from lblab.balancer.strategies.base import RequestView
from lblab.balancer.streams import (
    INTERACTIONS,
    REPLAYABLE,
    BackendPort,
    ClientPort,
    Connections,
    Stream,
)
from lblab.errors import RemoteProtocolError, worth_logging
from lblab.failures import KIND_BY_CODE, balancer_message, is_server_fault, retry_after_ms
from lblab.loadreport import LoadReport
from lblab.wire.codes import (
    FLAG_COMPLETE,
    FLAG_FOLLOWS,
    FLAG_METADATA,
    FRAME_HEADER_LENGTH,
    LENGTH_PREFIX_LENGTH,
    U32,
    ErrorCode,
    FrameType,
)
from lblab.wire.metadata import LOAD_REPORT, ROUTING_KEY, find_entry

log = logging.getLogger("lblab.balancer")

NO_BACKEND_MESSAGE: Final = balancer_message("rejected", "no backend available")
STOPPING_MESSAGE: Final = balancer_message(
    "rejected", "the balancer is stopping; the request was not processed, retry elsewhere"
)
STRATEGY_FAILED_MESSAGE: Final = balancer_message(
    "rejected",
    "the strategy raised an error picking a backend (logged at the balancer); the request "
    "was not sent, retry",
)
# Where things are in a length-prefixed frame as the ports hold it (``tests/unit/
# test_router_offsets.py`` ties them to the codec): the body starts after the prefix and
# the header; a payload's metadata length (3 bytes) opens its body, an error's code (4).
BODY_AT: Final = LENGTH_PREFIX_LENGTH + FRAME_HEADER_LENGTH
METADATA_LENGTH_LENGTH: Final = 3
METADATA_AT: Final = BODY_AT + METADATA_LENGTH_LENGTH
ERROR_MESSAGE_AT: Final = BODY_AT + 4
INITIAL_N_LENGTH: Final = 4
"""A request-stream's or request-channel's initial request-n, before its metadata."""
_pack_u32: Final = U32.pack_into
_unpack_u32: Final = U32.unpack_from
_RR: Final = int(FrameType.REQUEST_RESPONSE)
_FNF: Final = int(FrameType.REQUEST_FNF)
_CHANNEL: Final = int(FrameType.REQUEST_CHANNEL)
_PAYLOAD: Final = int(FrameType.PAYLOAD)
_CANCEL: Final = int(FrameType.CANCEL)
_ERROR: Final = int(FrameType.ERROR)
_REQUEST_N: Final = int(FrameType.REQUEST_N)


class PickRecorder(Protocol):
    """The picks log (``balancer/picklog.py``): appends in memory, written by the node."""

    def record(self, t: float, server: str, inflight_at_pick: int, strategy: str) -> None: ...


class Router:
    """Routes every stream between clients and backends; accounts each exactly once."""

    __slots__ = (
        "budgets",
        "connections",
        "deadlines",
        "epoch_offset",
        "lifecycle",
        "pick_failed",
        "picks",
        "pool",
        "prober",
        "request_seq",
        "stats",
        "stopping",
        "timeout_s",
    )

    def __init__(
        self,
        pool: Pool,
        connections: Connections,
        *,
        timeout_s: float,
        picks: PickRecorder | None = None,
        epoch_offset: float = 0.0,
        client_streams: int = CLIENT_STREAMS,
        client_held_bytes: int = CLIENT_HELD_BYTES,
        backend_held_bytes: int = BACKEND_HELD_BYTES,
    ) -> None:
        self.pool = pool
        self.lifecycle = Lifecycle(pool)
        self.connections = connections
        self.timeout_s = timeout_s
        self.picks = picks
        self.epoch_offset = epoch_offset
        """Added to ``now`` (monotonic) to log picks in epoch seconds."""
        self.deadlines: Deadlines[Stream] = Deadlines()
        self.prober = Prober(pool, connections)
        self.request_seq = 0
        self.pick_failed = False
        self.stopping = False
        """Set by ``stop``: every new request is refused."""
        self.stats = NodeCounters()
        """The node's counters (``node_counters.py``): the node counts its own here too."""
        self.budgets = Budgets(self.stats, client_streams, client_held_bytes, backend_held_bytes)
        """Per-client limits; its counters are in ``stats``."""

    # ------------------------------------------------------------ from clients

    def open_stream(
        self,
        client: ClientPort,
        buf: bytearray,
        pos: int,
        length: int,
        sid: int,
        frame_type: int,
        flags: int,
        now: float,
    ) -> None:
        """A client's REQUEST_* frame at ``buf[pos:]``: pick a backend and forward it.

        Raises ``RemoteProtocolError`` when ``sid`` is still live on this client."""
        if sid in client.streams:
            raise RemoteProtocolError(f"stream id {sid} reused while that stream is still live")
        key = None
        if self.pool.strategy.uses_routing_key and flags & FLAG_METADATA:
            key = routing_key(buf, pos, length, frame_type) if client.composite_metadata else None
        self.request_seq += 1
        request = RequestView(
            request_id=self.request_seq,
            interaction=INTERACTIONS[frame_type],
            package_bytes=length,
            routing_key=key,
            client_address=client.address,
        )
        stream = Stream(client, sid, frame_type, request, now, now + self.timeout_s)
        follows = flags & FLAG_FOLLOWS
        if frame_type == _CHANNEL:
            stream.client_open = bool(follows or not flags & FLAG_COMPLETE)
        else:
            stream.client_open = bool(follows)
        over = None if self.stopping else self.budgets.streams_refusal(client)
        if over is not None:
            self._reject(stream, balancer_message("rejected", over), bool(follows))
            return
        backend = None if self.stopping else self._dispatch(stream, now)
        if backend is None:
            self._refuse(stream, bool(follows))
            return
        if follows:
            over = self.budgets.hold(stream, backend, 3 + length)
            if over is not None:
                self.finish(stream, True, "canceled", now)  # dispatched, never sent
                self._reject(stream, balancer_message("rejected", over), True)
                return
            self._evict(now)
        frame = buf[pos : pos + 3 + length]
        _pack_u32(frame, 3, stream.backend_sid)
        backend.write(frame, client)
        stream.keep(frame)
        if frame_type == _FNF and not follows:
            self.finish(stream, True, None, now)
            return
        client.streams[sid] = stream
        self.deadlines.add(stream)

    def _refuse(self, stream: Stream, follows: bool) -> None:
        """Answer a request no backend takes (the node stops, the strategy failed, or none
        is eligible) with REJECTED: it was not processed, so the client may retry it."""
        if self.stopping:
            self.stats.rejected_stopping += 1
            message = STOPPING_MESSAGE
        elif self.pick_failed:
            self.pick_failed = False
            message = STRATEGY_FAILED_MESSAGE
        else:
            self.stats.rejected_no_backend += 1
            message = NO_BACKEND_MESSAGE
        self._reject(stream, message, follows)

    def _reject(self, stream: Stream, message: str, follows: bool) -> None:
        """REJECTED with ``message`` for a request nothing of which a backend will
        process (fire-and-forget gets no answer); with ``follows``, its remaining
        fragments are swallowed."""
        client = stream.client
        if stream.frame_type != _FNF:
            client.send_error(stream.client_sid, ErrorCode.REJECTED, message)
        if follows:
            stream.done = True
            client.streams[stream.client_sid] = stream

    def _cancel_over_budget(self, stream: Stream, message: str, now: float) -> None:
        """End a request whose fragments are at its backend: CANCEL there (the server
        drops what it held), REJECTED to the client (it was not processed)."""
        if stream.backend is not None:
            stream.backend.send_cancel(stream.backend_sid)
        self.finish(stream, True, "canceled", now)
        self._reject(stream, balancer_message("rejected", message), stream.client_open)

    def _evict(self, now: float) -> None:
        """End the requests ``Budgets.hold`` took the room of (their clients held more
        than their fair share of a backend connection another client needed)."""
        evicted = self.budgets.evicted
        while evicted:
            stream = evicted.pop()
            backend_id = stream.view.id if stream.view is not None else "?"
            self._cancel_over_budget(
                stream,
                f"backend {backend_id}'s connection was full of unfinished fragmented requests "
                "and this client held more than its fair share of it; this request, its "
                "largest there, was cancelled at the backend and not processed",
                now,
            )

    def _dispatch(self, stream: Stream, now: float) -> BackendPort | None:
        """Pick a backend for ``stream`` and register it there; None when none is eligible."""
        lifecycle = self.lifecycle
        while True:
            try:
                view = lifecycle.pick(stream, now)
            except Exception:  # a strategy's bug: refuse this request, keep the connection
                self._strategy_failed()
                return None
            if view is None:
                return None
            conn = self.connections.connection(view.id)
            if conn is not None:
                break
            # The pool and the connection disagree for a moment: the backend is down, and
            # this request does not go there even if the pool has not caught up.
            self.connections.connection_missing(view.id)
            lifecycle.skip(stream, view.id)
        strategy = self.pool.strategy
        if self.picks is not None:
            self.picks.record(now + self.epoch_offset, view.id, view.inflight, strategy.name)
        bsid = conn.ids.allocate(conn.streams)
        stream.backend = conn
        stream.backend_sid = bsid
        conn.streams[bsid] = stream
        lifecycle.dispatched(stream, view, now)
        if strategy.uses_probes:
            self.prober.send(now)
        return conn

    def _strategy_failed(self) -> None:
        """The strategy raised in ``pick``: nothing was dispatched, and the refusal that
        follows says why (``pick_failed``). Logged with its traceback when
        ``worth_logging`` (a broken strategy fails every pick)."""
        self.pick_failed = True
        self.stats.strategy_errors += 1
        count = self.stats.strategy_errors
        if worth_logging(count):
            log.exception(
                "strategy %s raised picking a backend (%d times so far); the request is "
                "refused with REJECTED",
                self.pool.strategy.name,
                count,
            )

    def client_frame(
        self,
        client: ClientPort,
        buf: bytearray,
        pos: int,
        length: int,
        sid: int,
        frame_type: int,
        flags: int,
        now: float,
    ) -> None:
        """PAYLOAD / REQUEST_N / CANCEL / ERROR from a client: follow the stream to its backend."""
        stream = client.streams.get(sid)
        if stream is None:
            return  # late frame of an ended stream
        if stream.done:  # fragments of a request that was refused
            if not flags & FLAG_FOLLOWS or frame_type != _PAYLOAD:
                del client.streams[sid]
            return
        backend = stream.backend
        assert backend is not None  # a live stream is always on a backend
        if frame_type == _PAYLOAD and not stream.client_open:
            return  # the request side is complete: a late frame, dropped
        if frame_type == _PAYLOAD and flags & FLAG_FOLLOWS:
            over = self.budgets.hold(stream, backend, 3 + length)
            if over is not None:
                self._cancel_over_budget(stream, over, now)
                return
            self._evict(now)
        elif frame_type == _PAYLOAD and stream.held:
            self.budgets.release(stream)  # the last fragment: the server has it whole
        frame = buf[pos : pos + 3 + length]
        _pack_u32(frame, 3, stream.backend_sid)
        backend.write(frame, client)
        if frame_type == _PAYLOAD:
            if stream.latency_ms is None:
                stream.keep(frame)
            if not flags & FLAG_FOLLOWS:
                if stream.frame_type == _CHANNEL:
                    if flags & FLAG_COMPLETE:
                        stream.client_open = False
                        if not stream.backend_open:
                            self.finish(stream, True, None, now)
                else:
                    stream.client_open = False
                    if stream.frame_type == _FNF:
                        self.finish(stream, True, None, now)
        elif frame_type in (_CANCEL, _ERROR):  # ERROR ends a channel both ways
            self.finish(stream, True, "canceled", now)

    def client_gone(self, client: ClientPort, now: float) -> None:
        """A client connection closed: CANCEL its backend streams, account each once."""
        for stream in list(client.streams.values()):
            if not stream.done and stream.backend is not None:
                stream.backend.send_cancel(stream.backend_sid)
            self.finish(stream, True, "canceled", now)
        client.streams.clear()

    # ------------------------------------------------------------ stopping

    def stop(self) -> None:
        """The node is stopping: refuse every new request from now on; open streams go on."""
        self.stopping = True

    def cut(self, client: ClientPort, grace_s: float, now: float) -> None:
        """The stop's grace of ``grace_s`` ran out: end each of ``client``'s open streams.

        The client gets an ERROR it can read: CANCELED, which the spec defines as "the
        Responder canceled the request but may have started processing it", exactly
        what is known of a request cut in flight (REJECTED would promise it did not
        run); its message is ``balancer/connection: ...``, the kind of a request whose
        path ended under it (as for a lost backend). The backend gets a CANCEL, so it
        can drop the work it has not started. Fire-and-forget gets no ERROR (it has no
        answer); the swallowed fragments of a refused request are simply dropped.
        """
        for stream in list(client.streams.values()):
            if not stream.done:
                self.stats.cut_at_stop += 1
                backend_id = stream.view.id if stream.view is not None else "?"
                if stream.frame_type != _FNF:
                    client.send_error(
                        stream.client_sid,
                        ErrorCode.CANCELED,
                        balancer_message(
                            "connection",
                            f"the balancer stopped with the request in flight at backend "
                            f"{backend_id} when its {grace_s:g} s grace ran out; cancelled "
                            "there, it may or may not have run",
                        ),
                    )
                if stream.backend is not None:
                    stream.backend.send_cancel(stream.backend_sid)
            self.finish(stream, True, "canceled", now)
        client.streams.clear()

    # ------------------------------------------------------------ from backends

    def backend_frame(
        self,
        stream: Stream,
        frame: bytearray,
        frame_type: int,
        flags: int,
        now: float,
    ) -> None:
        """A stream frame from ``stream``'s backend, already copied with the client's id.

        The backend connection has found ``stream`` (``BackendPort.streams``) and checked
        that ``frame_type`` is one a backend may send on a stream."""
        client = stream.client
        if frame_type == _PAYLOAD:
            client.send(frame)
            if stream.latency_ms is None:
                self.lifecycle.answered(stream, now)
                stream.saved = None
            if flags & FLAG_METADATA and self.pool.strategy.uses_response_reports:
                mlen = (frame[BODY_AT] << 16) | (frame[BODY_AT + 1] << 8) | frame[BODY_AT + 2]
                self.load_report(stream, memoryview(frame)[METADATA_AT : METADATA_AT + mlen], now)
            if not flags & FLAG_FOLLOWS and (flags & FLAG_COMPLETE or stream.frame_type == _RR):
                stream.backend_open = False
                if stream.frame_type != _CHANNEL or not stream.client_open:
                    self.finish(stream, True, None, now)
        elif frame_type == _ERROR:
            code = (
                _unpack_u32(frame, BODY_AT)[0]
                if len(frame) >= ERROR_MESSAGE_AT
                else ErrorCode.APPLICATION_ERROR
            )
            self._backend_error(stream, code, frame, now)
        elif frame_type == _REQUEST_N:
            client.send(frame)
        else:  # CANCEL: a channel's responder side stops taking the client's payloads
            client.send(frame)
            stream.client_open = False
            if not stream.backend_open:
                self.finish(stream, True, None, now)

    def _backend_error(self, stream: Stream, code: int, frame: bytearray, now: float) -> None:
        hint: float | None = None
        if code == ErrorCode.REJECTED:
            hint = retry_after_ms(frame, ERROR_MESSAGE_AT)
            if self._replay(stream, now, hint):
                return
        stream.client.send(frame)
        fault = is_server_fault(code, frame, ERROR_MESSAGE_AT)
        kind = KIND_BY_CODE.get(code, "other")
        self.finish(stream, False, kind, now, server_fault=fault, retry_after_ms=hint)

    def load_report(self, stream: Stream, metadata: bytes | memoryview, now: float) -> None:
        """A load report in a response's composite metadata (response-report strategies)."""
        if stream.view is None:
            return
        try:
            raw = find_entry(metadata, LOAD_REPORT)
            if raw is not None:
                self.pool.report(stream.view.id, LoadReport.from_json(raw), now)
        except RemoteProtocolError as exc:
            log.debug("ignoring a malformed load report from %s: %s", stream.view.id, exc)

    def backend_lost(self, conn: BackendPort, reason: str, now: float) -> None:
        """A backend connection closed: replay what a draining backend never took, fail
        the rest with an error naming the backend."""
        message = balancer_message(
            "connection", f"backend {conn.backend_id} connection lost: {reason}"
        )
        for stream in list(conn.streams.values()):
            # After CONNECTION_CLOSE the backend has finished every stream it accepted
            # (spec: it waits for them), so an unanswered request was never processed.
            if conn.draining and self._replay(stream, now):
                continue
            if not stream.done:
                stream.client.send_error(stream.client_sid, ErrorCode.APPLICATION_ERROR, message)
            self.finish(stream, False, "connection", now)
        conn.streams.clear()
        self.prober.lost(conn)

    # ------------------------------------------------------------ replay and accounting

    def _replay(self, stream: Stream, now: float, retry_after_ms: float | None = None) -> bool:
        """Send a refused request (its refusal's Retry-After hint, if any, goes to the
        pool with it) to another backend. False when it cannot be replayed
        (not fully received, not a replayable kind, its frames let go, or the lifecycle's
        reasons: answered already, out of tries; nothing changed) or no other backend is
        eligible (the refusal is accounted; the caller ends the stream)."""
        saved, conn = stream.saved, stream.backend
        if (
            saved is None
            or stream.frame_type not in REPLAYABLE
            or stream.client_open
            or conn is None
            or not self.lifecycle.replay(stream, now, retry_after_ms)
        ):
            return False
        conn.streams.pop(stream.backend_sid, None)
        stream.backend = None
        backend = self._dispatch(stream, now)
        if backend is None:
            self.pick_failed = False  # the caller ends the stream with the refusal it had
            stream.backend = conn  # so that finish() closes it if it is retired and now idle
            return False
        self.stats.replays += 1
        sid = stream.backend_sid
        for frame in saved:
            _pack_u32(frame, 3, sid)
            backend.write(frame, stream.client)
        return True

    def finish(
        self,
        stream: Stream,
        ok: bool,
        error_kind: str | None,
        now: float,
        *,
        server_fault: bool = False,
        retry_after_ms: float | None = None,
    ) -> None:
        """End a stream: account it (once: ``Lifecycle.end``, which also says why a
        cancel is not a failure and fire-and-forget is never in flight) and drop both
        mappings."""
        if not self.lifecycle.end(
            stream, ok, error_kind, now, server_fault=server_fault, retry_after_ms=retry_after_ms
        ):
            return
        if stream.held:
            self.budgets.release(stream)
        _forget(stream.client.streams, stream.client_sid)
        conn = stream.backend
        if conn is not None:
            _forget(conn.streams, stream.backend_sid)
        stream.saved = None
        if conn is not None and conn.retired and not conn.streams:
            conn.close()

    def expire(self, now: float) -> None:
        """End every request whose deadline has passed: an error to the client, a CANCEL
        to the backend; give up the probes whose deadline has passed."""
        self.prober.expire(now)
        self.deadlines.sweep(self.pool.outstanding)
        for stream in self.deadlines.due(now):
            self.stats.timeouts += 1
            backend_id = stream.view.id if stream.view is not None else "?"
            stream.client.send_error(
                stream.client_sid,
                ErrorCode.APPLICATION_ERROR,
                balancer_message(
                    "timeout",
                    f"timed out after {self.timeout_s:g} s at the balancer (backend {backend_id})",
                ),
            )
            if stream.backend is not None:
                stream.backend.send_cancel(stream.backend_sid)
            self.finish(stream, False, "timeout", now)


def _forget(streams: dict[int, Stream], sid: int) -> None:
    """``streams.pop(sid, None)``: mypyc has no primitive for ``dict.pop``, so compiled
    that is a generic method call; these two are native."""
    if sid in streams:
        del streams[sid]  # noqa: RUF051


def routing_key(buf: bytearray, pos: int, length: int, frame_type: int) -> bytes | None:
    """The routing-key entry of a request's composite metadata (only for hash strategies)."""
    start = pos + BODY_AT
    if frame_type in (FrameType.REQUEST_STREAM, FrameType.REQUEST_CHANNEL):
        start += INITIAL_N_LENGTH
    mlen = (buf[start] << 16) | (buf[start + 1] << 8) | buf[start + 2]
    begin = start + METADATA_LENGTH_LENGTH
    end = min(begin + mlen, pos + LENGTH_PREFIX_LENGTH + length)
    try:
        return find_entry(memoryview(buf)[begin:end], ROUTING_KEY)
    except RemoteProtocolError:
        return None
