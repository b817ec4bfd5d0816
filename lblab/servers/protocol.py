"""The server side of one RSocket connection, on ``lblab.wire`` and asyncio.

Why not rsocket-py's server API: the server's own CPU per request counts against its
quota, so framework overhead would read as "work" in the experiments (rsocket-py
serves ~2.3k req/s on a whole core, docs/FIELD-NOTES.md, "Speeds"); and this needs exact control of what
rsocket-py makes awkward: REJECTED at once beyond ``--max-inflight``, LEASE sized to
capacity, METADATA_PUSH on arrival, SETUP data. The tests drive it with rsocket-py's
client, so compliance is checked against the field's library.

Theory of operation: ``data_received`` feeds the frame decoder; every whole frame is
handled at once on the loop. A request is admitted or refused (REJECTED: draining, at
max-inflight, no valid lease) without waiting; admitted work goes to the service slots
(``WorkService``, threads) and its completion comes back to the loop through
``call_soon_threadsafe``. Nothing here blocks: the loop only decodes, admits and writes.

- request-response: one PAYLOAD(NEXT|COMPLETE) or one ERROR.
- probe (``prequal``): a request-response whose metadata is exactly
  ``lblab.wire.metadata.PROBE_METADATA`` (routing ``probe``) is answered at once on the
  loop with a ``ProbeAnswer`` (``{"rif": inflight, "latency_ms": ...}``, the state's
  ``RifLatency`` estimate at that RIF): not admitted, not counted in flight, never
  behind work, whatever the lease, max-inflight or drain state. Every request-response
  that completes records its arrival RIF and latency there (``ServerState.rif_latency``).
- Work that raises is answered by cause: a ``BadRequest`` (``servers/work.py``: the body
  alone decided it, whatever its bytes) with an APPLICATION_ERROR that says what was wrong
  with the request, and no log; anything else is this server's own failure, logged with
  its traceback and answered ``server fault: ...`` (``lblab/failures.py``), the only
  APPLICATION_ERROR that counts toward the backend's ejection; the ``fail`` timeline
  event's ``InjectedFault`` is answered so too (``servers/behaviour.py`` says why),
  without the traceback. Request metadata is never
  read here (routing keys are the balancer's), so only the data can be a bad request.
- fire-and-forget: the same work, no answer.
- request-stream: ``items`` units of the same work (body field, default 3), one at a time,
  each only while the requester's REQUEST_N credit allows; CANCEL stops it.
- request-channel: each inbound payload is one unit of work whose result is sent back
  (credit permitting). Inbound credit is granted ``CHANNEL_WINDOW`` items at a time; the
  channel completes after the requester's COMPLETE and the last answer.
- Fragments (FOLLOWS) are reassembled per stream. What one connection holds across
  all its streams (fragments of unfinished requests, channel items not yet served) is
  bounded by ``MAX_HELD_BYTES`` together: the request that would pass it gets a stream
  ERROR (REJECTED: safe to retry elsewhere) and the rest of its fragments are dropped;
  the connection, which the balancer shares among all its clients, stays up. A PAYLOAD
  fragment for no live channel is a late frame and is dropped, never buffered.
  Answers are small JSON and are never fragmented.
- The connection's rules (``lblab.wire.connection``, the ``ServerState.setup_policy``):
  the first frame judged from its header, the SETUP deadline (``--setup-timeout``),
  version 1.x, LEASE flag accepted, no resumption, KEEPALIVEs answered, a peer silent
  beyond its max lifetime closed, every malformed frame answered with a connection
  ERROR of its code. ``--max-connections`` and ``--max-pending-setup`` cap the port
  (``lblab.admission``). This module only moves bytes and runs one timer for ``tick``.
- LEASE (SETUP with the lease flag): the connection gets ``number_of_requests`` = free
  capacity (``max_inflight - inflight``, split over lease connections) valid for
  ``LEASE_TTL_MS``. It is renewed every ``LEASE_RENEW_S`` and, as capacity frees, as
  soon as the unused part of the lease falls to half the free capacity. A request
  without a valid lease is REJECTED. Draining grants a lease of 0.
- Backpressure: when the transport's write buffer passes its high-water mark (a peer
  that does not read its answers), reading from that peer pauses until it drains.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import deque
from concurrent.futures import Future

import orjson

from lblab.errors import RemoteProtocolError
from lblab.failures import SERVER_FAULT_PREFIX
from lblab.loadreport import ProbeAnswer
from lblab.servers.service import InjectedFault, WorkResult
from lblab.servers.state import ServerState, report_metadata
from lblab.servers.work import BadRequest
from lblab.wire.codec import encode_frame
from lblab.wire.codes import MAX_REQUEST_N, ErrorCode, FrameType
from lblab.wire.connection import Event
from lblab.wire.frames import (
    Cancel,
    Error,
    Frame,
    Lease,
    Payload,
    RequestChannel,
    RequestFnf,
    RequestN,
    RequestResponse,
    RequestStream,
    Setup,
)
from lblab.wire.metadata import APPLICATION_JSON, PROBE_METADATA
from lblab.wire_asyncio import AcceptedConnection

log = logging.getLogger(__name__)

LEASE_TTL_MS = 3000
LEASE_RENEW_S = 1.0
CHANNEL_WINDOW = 16
"""Inbound channel items granted at a time; re-granted when half are consumed."""
MAX_HELD_BYTES = 64 * 1024 * 1024
"""Bytes one connection may hold in unfinished fragmented frames and queued channel items,
over all its streams: 64x the largest matrix package."""
REPORT_PATHS = frozenset({"response", "push"})

Request = RequestResponse | RequestFnf | RequestStream | RequestChannel
Fragmentable = Request | Payload


class _Stream:
    """One admitted request or stream on this connection."""

    __slots__ = (
        "arrived",
        "body",
        "busy",
        "cancelled",
        "consumed",
        "credit",
        "emitted",
        "ended",
        "future",
        "inbound",
        "inbound_done",
        "kind",
        "rif",
    )

    def __init__(self, kind: FrameType, body: bytes, credit: int) -> None:
        self.kind = kind
        self.body = body
        self.credit = credit
        self.arrived = 0.0  # perf_counter() when its current work was submitted
        self.busy = False
        self.cancelled = False
        self.ended = False
        self.emitted = 0
        self.consumed = 0
        self.future: Future[WorkResult] | None = None
        self.inbound: deque[tuple[bytes, float]] = deque()
        self.inbound_done = False
        self.rif = 0
        """Requests in flight at the server when this one arrived (itself not counted)."""


class _Partial:
    """The fragments of one frame so far."""

    __slots__ = ("data", "first", "has_metadata", "metadata", "size")

    def __init__(self, first: Fragmentable) -> None:
        self.first = first
        self.data: list[bytes] = []
        self.metadata: list[bytes] = []
        self.has_metadata = False
        self.size = 0

    def add(self, frame: Fragmentable) -> None:
        if frame.metadata is not None:
            self.has_metadata = True
            self.metadata.append(frame.metadata)
            self.size += len(frame.metadata)
        self.data.append(frame.data)
        self.size += len(frame.data)

    def assemble(self, last: Fragmentable) -> Fragmentable:
        changes: dict[str, object] = {
            "data": b"".join(self.data),
            "metadata": b"".join(self.metadata) if self.has_metadata else None,
            "follows": False,
        }
        if isinstance(self.first, Payload) and isinstance(last, Payload):
            changes["complete"] = self.first.complete or last.complete
            changes["next"] = self.first.next or last.next
        elif isinstance(self.first, RequestChannel) and isinstance(last, Payload):
            changes["complete"] = self.first.complete or last.complete
        return dataclasses.replace(self.first, **changes)  # type: ignore[arg-type]


class ServerConnection(AcceptedConnection):
    def __init__(self, state: ServerState) -> None:
        super().__init__(state.setup_policy, state.admission, asyncio.get_running_loop())
        self.state = state
        self._reports_response = False
        self._streams: dict[int, _Stream] = {}
        self._frags: dict[int, _Partial] = {}
        self._dropping: set[int] = set()
        """Streams whose remaining fragments are dropped (their frame passed the cap)."""
        self._held = 0
        """Bytes in ``_frags`` and in channels' queued inbound items (``MAX_HELD_BYTES``)."""
        self._lease_timer: asyncio.TimerHandle | None = None
        self._lease = False
        self._lease_left = 0
        self._lease_expires = 0.0

    # ------------------------------------------------------------ transport events

    def on_open(self) -> None:
        self.state.connections.add(self)

    def on_close(self) -> None:
        """Closed by us: its streams end and it takes no pushes or leases from now on
        (the socket may linger; the drain waits for it in ``state.connections``)."""
        if self._lease_timer is not None:
            self._lease_timer.cancel()
        self.state.push_connections.discard(self)
        self.state.lease_connections.discard(self)
        for sid, st in list(self._streams.items()):
            self._cancel(sid, st)

    def on_lost(self) -> None:
        self.on_close()
        self.state.connections.discard(self)

    def pause_writing(self) -> None:
        """The peer reads its answers slower than it sends requests: stop reading from it."""
        self.transport.pause_reading()  # type: ignore[union-attr]

    def resume_writing(self) -> None:
        if not self.closed:
            self.transport.resume_reading()  # type: ignore[union-attr]

    # ------------------------------------------------------------ writing

    def write(self, frame: Frame) -> None:
        if not self.closed:
            self.transport.write(encode_frame(frame))  # type: ignore[union-attr]

    def write_raw(self, data: bytes) -> None:
        if not self.closed:
            self.transport.write(data)  # type: ignore[union-attr]

    # ------------------------------------------------------------ frames

    def on_frame(self, frame: Event | Frame) -> None:
        match frame:
            case (
                RequestResponse()
                | RequestFnf()
                | RequestStream()
                | RequestChannel()
                | Payload()
                | RequestN()
                | Cancel()
                | Error()
            ):
                self._on_stream_frame(frame)
            # KEEPALIVE answers, METADATA_PUSH, EXT: nothing for a server to act on

    def _on_stream_frame(self, frame: Fragmentable | RequestN | Cancel | Error) -> None:
        if isinstance(frame, Fragmentable) and (
            frame.follows or frame.stream_id in self._frags or frame.stream_id in self._dropping
        ):
            assembled = self._reassemble(frame)
            if assembled is None:
                return
            frame = assembled
        match frame:
            case RequestResponse():
                if frame.metadata == PROBE_METADATA:
                    self._answer_probe(frame.stream_id)
                else:
                    self._on_request(frame, FrameType.REQUEST_RESPONSE, 1)
            case RequestFnf():
                self._on_request(frame, FrameType.REQUEST_FNF, 1)
            case RequestStream():
                self._on_request(frame, FrameType.REQUEST_STREAM, frame.initial_n)
            case RequestChannel():
                self._on_request(frame, FrameType.REQUEST_CHANNEL, frame.initial_n)
            case Payload():
                self._on_inbound_payload(frame)
            case RequestN():
                self._on_request_n(frame)
            case Cancel():
                self._drop_partial(frame.stream_id)
                st = self._streams.get(frame.stream_id)
                if st is not None:
                    self._cancel(frame.stream_id, st)
            case Error():
                self._on_error(frame)

    def on_setup(self, setup: Setup) -> None:
        """The connection accepted the SETUP (``ServerState.setup_policy``)."""
        paths = _report_paths(setup)
        self._reports_response = "response" in paths
        if "push" in paths:
            self.state.push_connections.add(self)
        if setup.lease:
            self._lease = True
            self.state.lease_connections.add(self)
            self.grant_lease()
            self._lease_timer = self.loop.call_later(LEASE_RENEW_S, self._renew_lease)

    def _reassemble(self, frame: Fragmentable) -> Fragmentable | None:
        sid = frame.stream_id
        if sid in self._dropping:
            if isinstance(frame, Payload):
                if not frame.follows:
                    self._dropping.discard(sid)
                return None
            self._dropping.discard(sid)  # a new request on the id: the dropped frame is over
        partial = self._frags.get(sid)
        if partial is None:
            if isinstance(frame, Payload) and not self._takes_payload(sid):
                return None  # a fragment for no live channel: a late frame
            self._frags[sid] = partial = _Partial(frame)
        elif not isinstance(frame, Payload):
            raise RemoteProtocolError(
                f"stream {sid}: a new {frame.frame_type.name} arrived before the last fragment "
                "of the previous frame"
            )
        before = partial.size
        partial.add(frame)
        self._held += partial.size - before
        if self._held > MAX_HELD_BYTES:
            self._drop_partial(sid)
            if frame.follows:
                self._dropping.add(sid)
            self._refuse_held(sid)
            return None
        if frame.follows:
            return None
        self._drop_partial(sid)
        return partial.assemble(frame)

    def _takes_payload(self, sid: int) -> bool:
        st = self._streams.get(sid)
        return st is not None and st.kind is FrameType.REQUEST_CHANNEL and not st.inbound_done

    def _drop_partial(self, sid: int) -> None:
        partial = self._frags.pop(sid, None)
        if partial is not None:
            self._held -= partial.size

    def _refuse_held(self, sid: int) -> None:
        """A stream's frame would pass ``MAX_HELD_BYTES``: end that stream, keep the connection."""
        message = (
            f"server {self.state.id}: this connection holds over {MAX_HELD_BYTES} bytes of "
            "unfinished requests across its streams; finish or cancel some, or retry elsewhere"
        )
        self.write(Error(stream_id=sid, error_code=ErrorCode.REJECTED, message=message))
        st = self._streams.get(sid)
        if st is not None:
            self._cancel(sid, st)

    # ------------------------------------------------------------ requests

    def _answer_probe(self, sid: int) -> None:
        """A probe: answered now from the counters (the module docstring)."""
        if sid in self._streams:
            self.close_with_error(ErrorCode.CONNECTION_ERROR, f"stream id {sid} is already in use")
            return
        state = self.state
        state.probes += 1
        rif = state.inflight
        answer = ProbeAnswer(rif=rif, latency_ms=round(state.rif_latency.estimate(rif), 3))
        self.write(Payload(stream_id=sid, data=answer.to_json(), next=True, complete=True))

    def _on_request(self, frame: Request, kind: FrameType, credit: int) -> None:
        sid = frame.stream_id
        if sid in self._streams:
            self.close_with_error(ErrorCode.CONNECTION_ERROR, f"stream id {sid} is already in use")
            return
        reason = self._lease_refusal() or self.state.refusal()
        if reason is not None:
            self.state.rejected += 1
            if kind is not FrameType.REQUEST_FNF:
                self.write(Error(stream_id=sid, error_code=ErrorCode.REJECTED, message=reason))
            return
        arrived = time.perf_counter()
        if self._lease:
            self._lease_left -= 1
        st = _Stream(kind, frame.data, credit)
        st.rif = self.state.inflight
        self.state.admit()
        self._streams[sid] = st
        if kind is FrameType.REQUEST_CHANNEL:
            self._held += len(frame.data)
            st.inbound.append((frame.data, arrived))
            st.inbound_done = isinstance(frame, RequestChannel) and frame.complete
            if not st.inbound_done:
                self.write(RequestN(stream_id=sid, n=CHANNEL_WINDOW))
            self._pump_channel(sid, st)
        else:
            self._submit(sid, st, frame.data, arrived)

    def _lease_refusal(self) -> str | None:
        if not self._lease:
            return None
        if self._lease_left <= 0:
            return "lease exhausted: wait for the next LEASE frame"
        if self.loop.time() > self._lease_expires:
            return "lease expired: wait for the next LEASE frame"
        return None

    def _submit(self, sid: int, st: _Stream, body: bytes, arrived: float) -> None:
        st.busy = True
        st.arrived = arrived
        future = self.state.service.submit(body, arrived)
        st.future = future
        future.add_done_callback(lambda f: self._from_worker(sid, st, f))

    def _from_worker(self, sid: int, st: _Stream, future: Future[WorkResult]) -> None:
        """Runs in the worker thread (or on the loop, for a cancelled future)."""
        try:
            self.loop.call_soon_threadsafe(self._on_work_done, sid, st, future)
        except RuntimeError:
            log.debug("stream %d finished after the event loop closed; answer dropped", sid)

    def _on_work_done(self, sid: int, st: _Stream, future: Future[WorkResult]) -> None:
        st.busy, st.future = False, None
        if future.cancelled() or st.cancelled or self.closed:
            self._end(sid, st)
            return
        exc = future.exception()
        if exc is not None:
            self._end(sid, st)
            message = self._failure_message(exc)
            if st.kind is not FrameType.REQUEST_FNF:
                self.write(
                    Error(stream_id=sid, error_code=ErrorCode.APPLICATION_ERROR, message=message)
                )
            return
        result = future.result()
        self.state.record(result)
        match st.kind:
            case FrameType.REQUEST_RESPONSE | FrameType.REQUEST_FNF:
                self._end(sid, st)
                if st.kind is FrameType.REQUEST_RESPONSE:
                    self.state.rif_latency.record(st.rif, result.queue_ms + result.service_ms)
                    self._answer(sid, st, result, complete=True)
            case FrameType.REQUEST_STREAM:
                st.emitted += 1
                st.credit -= 1
                last = st.emitted >= result.items
                if last:
                    self._end(sid, st)
                self._answer(sid, st, result, complete=last, item=st.emitted)
                if not last and st.credit > 0:
                    self._submit(sid, st, st.body, time.perf_counter())
            case FrameType.REQUEST_CHANNEL:
                st.emitted += 1
                st.credit -= 1
                self._answer(sid, st, result, complete=False, item=st.emitted)
                self._pump_channel(sid, st)

    def _failure_message(self, exc: BaseException) -> str:
        """The APPLICATION_ERROR message for work that raised, classified by cause: a
        ``BadRequest`` is the client's and says what was wrong with the request; anything
        else is this server's own failure, logged with its traceback and marked
        ``server fault: `` (the only kind that counts toward the backend's ejection)."""
        if isinstance(exc, BadRequest):
            self.state.bad_requests += 1
            return str(exc)
        self.state.failed += 1
        if not isinstance(exc, InjectedFault):  # the ``fail`` event's are by design
            log.error("work failed", exc_info=exc)
        return f"{SERVER_FAULT_PREFIX}server {self.state.id} failed: {type(exc).__name__}: {exc}"

    def _answer(
        self, sid: int, st: _Stream, result: WorkResult, *, complete: bool, item: int = 0
    ) -> None:
        body = {
            "server": self.state.id,
            "work_bytes": result.work_bytes,
            "service_ms": round(result.service_ms, 3),
            "queue_ms": round(result.queue_ms, 3),
            # From the request's arrival on the event loop to this answer's write: its
            # queue and service plus the server's own time outside its work slot.
            "server_ms": round((time.perf_counter() - st.arrived) * 1e3, 3),
            "inflight": self.state.inflight,
        }
        if item:
            body["item"] = item
        metadata = (
            report_metadata(self.state.report("response", result))
            if self._reports_response
            else None
        )
        self.write(
            Payload(
                stream_id=sid,
                data=orjson.dumps(body),
                metadata=metadata,
                next=True,
                complete=complete,
            )
        )

    def _pump_channel(self, sid: int, st: _Stream) -> None:
        if st.busy or st.ended:
            return
        if st.inbound and st.credit > 0:
            body, arrived = st.inbound.popleft()
            self._held -= len(body)
            st.consumed += 1
            if not st.inbound_done and st.consumed % (CHANNEL_WINDOW // 2) == 0:
                self.write(RequestN(stream_id=sid, n=CHANNEL_WINDOW // 2))
            self._submit(sid, st, body, arrived)
        elif st.inbound_done and not st.inbound:
            self._end(sid, st)
            self.write(Payload(stream_id=sid, complete=True))

    def _on_inbound_payload(self, frame: Payload) -> None:
        st = self._streams.get(frame.stream_id)
        if st is None or st.kind is not FrameType.REQUEST_CHANNEL or st.inbound_done:
            return  # late frame of a stream that ended or was cancelled
        if frame.next:
            self._held += len(frame.data)
            if self._held > MAX_HELD_BYTES:
                self._held -= len(frame.data)
                self._refuse_held(frame.stream_id)
                return
            st.inbound.append((frame.data, time.perf_counter()))
        if frame.complete:
            st.inbound_done = True
        self._pump_channel(frame.stream_id, st)

    def _on_request_n(self, frame: RequestN) -> None:
        st = self._streams.get(frame.stream_id)
        if st is None:
            return
        st.credit = min(MAX_REQUEST_N, st.credit + frame.n)
        if st.kind is FrameType.REQUEST_STREAM and not st.busy and not st.ended:
            self._submit(frame.stream_id, st, st.body, time.perf_counter())
        elif st.kind is FrameType.REQUEST_CHANNEL:
            self._pump_channel(frame.stream_id, st)

    def _on_error(self, frame: Error) -> None:
        self._drop_partial(frame.stream_id)
        st = self._streams.get(frame.stream_id)
        if st is not None:
            self._cancel(frame.stream_id, st)

    def _cancel(self, sid: int, st: _Stream) -> None:
        st.cancelled = True
        if st.busy and st.future is not None:
            st.future.cancel()  # skips the work if no slot took it yet; else it runs out
        elif not st.busy:
            self._end(sid, st)

    def _end(self, sid: int, st: _Stream) -> None:
        if st.ended:
            return
        st.ended = True
        if self._streams.get(sid) is st:
            del self._streams[sid]
        self._held -= sum(len(body) for body, _ in st.inbound)
        st.inbound.clear()
        self.state.release()

    # ------------------------------------------------------------ timers and leases

    def grant_lease(self) -> None:
        n = self.state.lease_share()
        self._lease_left = n
        self._lease_expires = self.loop.time() + LEASE_TTL_MS / 1000.0
        self.write(Lease(ttl_ms=LEASE_TTL_MS, number_of_requests=n))

    def capacity_freed(self) -> None:
        share = self.state.lease_share()
        if share > 0 and self._lease_left * 2 <= share:
            self.grant_lease()

    def _renew_lease(self) -> None:
        if self.closed:
            return
        self.grant_lease()
        self._lease_timer = self.loop.call_later(LEASE_RENEW_S, self._renew_lease)


def _report_paths(setup: Setup) -> frozenset[str]:
    """The report paths a SETUP asks for: JSON data ``{"reports": ["response", "push"]}``."""
    if setup.data_mime != APPLICATION_JSON or not setup.data:
        return frozenset()
    try:
        fields = orjson.loads(setup.data)
    except orjson.JSONDecodeError:
        return frozenset()
    reports = fields.get("reports") if isinstance(fields, dict) else None
    if not isinstance(reports, list):
        return frozenset()
    return REPORT_PATHS.intersection(r for r in reports if isinstance(r, str))
