"""One RSocket connection's rules as a sans-I/O state machine (the h11 ``Connection`` shape).

Every lblab endpoint speaks RSocket through this object: the servers, the agent, the
Locust client and the balancer's ports. It owns the rules of a connection, so each is
written once: SETUP acceptance (``SetupPolicy``: rules as data), the SETUP deadline,
KEEPALIVE (answering the peer's, sending ours when due), the max lifetime (a peer
silent that long is dead), the connection-level frames (stream 0) and stream-id
allocation (``StreamIds``). It owns no socket, timer or clock: the adapter moves bytes
and passes ``now`` (monotonic seconds).

Theory of operation. A connection has a role: ``Role.CLIENT`` sent the SETUP (odd
stream ids, sends KEEPALIVEs every ``keepalive_ms`` of its SETUP), ``Role.SERVER``
accepts one (even ids, answers KEEPALIVEs). Its state goes ``AWAITING_SETUP`` (server
only) -> ``OPEN`` -> ``CLOSED``. Two ways in, one set of rules:

- Bytes: ``receive_data(data)``, then ``next_event()`` until ``NEED_DATA``. Stream
  frames come out as the frozen frames of ``lblab.wire.frames`` (``RequestResponse``,
  ``Payload``, ``Cancel``, ...: frames are already typed values, so no wrapper is made
  per frame); the rest as the events below. Servers, agents and clients use this.
- Frame positions (the balancer's hot path, ``balancer/framing.py`` walks its own
  receive buffer): the adapter handles stream frames itself and hands only stream-0
  frames, and every frame before SETUP, to ``control_frame(buf, pos, length, sid,
  type, flags)``, which returns a ``Control`` verdict (an int) and leaves any detail in
  attributes, so nothing is allocated for a KEEPALIVE, LEASE or METADATA_PUSH.
  ``check_prefix`` judges a first frame from its header before its body arrives.

Whatever the connection itself must send (SETUP, KEEPALIVE answers and ours, the
connection ERROR that ends it) collects in ``data_to_send()``. When a rule is broken,
the ERROR frame is queued, the state is ``CLOSED`` and ``ConnectionFailed`` (or
``SetupRefused``) says why: the adapter writes ``data_to_send()`` and closes. Bytes
received after that are dropped.

Time: every read sets ``active`` (no clock read per read); ``tick(now)`` turns it into
``last_received`` and checks the deadlines. The adapter calls ``tick`` at
``next_tick_at`` (or more often): a silent peer is then declared dead between its
max lifetime and 1.25 times it after its last frame (``LIFETIME_CHECKS``).
"""

from __future__ import annotations

import math
from collections.abc import Container
from dataclasses import dataclass
from enum import IntEnum
from typing import Final

from lblab.errors import LocalProtocolError, RemoteProtocolError
from lblab.wire.codec import NEED_DATA, check_first_frame, decode_frame_body, encode_frame
from lblab.wire.codec import _NeedData as NeedData  # the type of NEED_DATA
from lblab.wire.codes import (
    FLAG_IGNORE,
    FLAG_RESPOND,
    FRAME_HEADER_LENGTH,
    LENGTH_PREFIX_LENGTH,
    MAJOR_VERSION,
    MAX_FRAME_LENGTH,
    MAX_SETUP_LENGTH,
    MAX_STREAM_ID,
    U32,
    ErrorCode,
    FrameType,
)
from lblab.wire.frames import Error, Frame, Keepalive, Setup

__all__ = [
    "NEED_DATA",
    "Connection",
    "ConnectionFailed",
    "Control",
    "Event",
    "KeepaliveAnswered",
    "LeaseReceived",
    "MetadataPushed",
    "NeedData",
    "PeerClosed",
    "Role",
    "SetupAccepted",
    "SetupPolicy",
    "SetupRefused",
    "StreamIds",
]

LIFETIME_CHECKS: Final = 4
"""Checks of the peer's silence per max lifetime while it talks: dead within 1.25x."""
_PREFIX_AND_HEADER: Final = LENGTH_PREFIX_LENGTH + FRAME_HEADER_LENGTH
_KEEPALIVE_MIN_LENGTH: Final = FRAME_HEADER_LENGTH + 8  # and the 8-byte last received position
_KEEPALIVE_REQUEST: Final = encode_frame(Keepalive(respond=True))
_unpack_u32: Final = U32.unpack_from


class Role(IntEnum):
    CLIENT = 1
    """We send the SETUP; our stream ids are odd; we send KEEPALIVEs."""
    SERVER = 2
    """We accept a SETUP (``SetupPolicy``); our stream ids are even; we answer KEEPALIVEs."""


class State(IntEnum):
    AWAITING_SETUP = 0
    OPEN = 1
    CLOSED = 2


_AWAITING_SETUP: Final = State.AWAITING_SETUP
_OPEN: Final = State.OPEN
_CLOSED: Final = State.CLOSED


class Control(IntEnum):
    """What ``control_frame`` found; details are in the connection's attributes."""

    NONE = 0
    """Handled here (a KEEPALIVE answered, an ignorable frame); nothing for the adapter."""
    SETUP_ACCEPTED = 1
    """``setup`` holds the peer's SETUP."""
    FAILED = 2
    """``failure`` says why; its ERROR is queued and the connection is closed."""
    PEER_CLOSED = 3
    """The peer sent a connection ERROR; ``peer_closed`` holds it."""
    KEEPALIVE_ANSWER = 4
    """The peer answered one of our KEEPALIVEs."""
    LEASE = 5
    """``lease_ttl_ms`` and ``lease_requests`` hold the peer's new LEASE."""
    METADATA_PUSH = 6
    """The metadata is ``buf[pos + 9 : pos + 3 + length]``."""


# ---------------------------------------------------------------- events


@dataclass(frozen=True, slots=True, kw_only=True)
class SetupAccepted:
    setup: Setup


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionFailed:
    """We end the connection: an ERROR of ``code`` is queued; write it, then close."""

    code: int
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SetupRefused(ConnectionFailed):
    """The peer's SETUP broke the ``SetupPolicy`` (or never came in time)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PeerClosed:
    """The peer sent a connection ERROR (CONNECTION_CLOSE when it drains)."""

    code: int
    message: str


@dataclass(frozen=True, slots=True, kw_only=True)
class KeepaliveAnswered:
    """The peer answered one of our KEEPALIVEs (it is alive and serving)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaseReceived:
    ttl_ms: int
    number_of_requests: int


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataPushed:
    metadata: bytes


KEEPALIVE_ANSWERED: Final = KeepaliveAnswered()

Event = (
    SetupAccepted
    | ConnectionFailed
    | PeerClosed
    | KeepaliveAnswered
    | LeaseReceived
    | MetadataPushed
)
"""What ``next_event`` returns besides stream frames and ``NEED_DATA``."""


# ---------------------------------------------------------------- rules as data


@dataclass(frozen=True, slots=True, kw_only=True)
class SetupPolicy:
    """What a server-role connection accepts in a SETUP; anything else is refused.

    The version's major must be ``major`` (else UNSUPPORTED_SETUP). The LEASE flag is
    accepted only with ``lease``. A resume token is always UNSUPPORTED_SETUP and a RESUME
    frame REJECTED_RESUME: nothing in lblab resumes. ``data_mimes`` lists the data MIME
    types accepted (None: any). The first frame must be a SETUP on stream 0 of at most
    ``max_setup_bytes`` (judged from its header, ``check_first_frame``) and arrive within
    ``setup_timeout_s`` of connecting. ``who`` names us in refusals, e.g. "the balancer".
    """

    who: str
    setup_timeout_s: float
    lease: bool = False
    data_mimes: tuple[str, ...] | None = None
    max_setup_bytes: int = MAX_SETUP_LENGTH
    major: int = MAJOR_VERSION

    def __post_init__(self) -> None:
        if not self.setup_timeout_s > 0:
            raise LocalProtocolError(f"setup_timeout_s must be > 0, not {self.setup_timeout_s}")
        if not _PREFIX_AND_HEADER <= self.max_setup_bytes <= MAX_FRAME_LENGTH:
            raise LocalProtocolError(
                f"max_setup_bytes must be in {_PREFIX_AND_HEADER}..{MAX_FRAME_LENGTH}, "
                f"not {self.max_setup_bytes}"
            )

    def refusal(self, setup: Setup) -> str | None:
        """Why ``setup`` is refused (UNSUPPORTED_SETUP), or None to accept it."""
        if setup.major != self.major:
            return (
                f"RSocket version {setup.major}.{setup.minor} is not supported; "
                f"{self.who} speaks {self.major}.x"
            )
        if setup.lease and not self.lease:
            return f"{self.who} issues no leases; connect without the LEASE flag"
        if setup.resume_token is not None:
            return f"resumption is not supported by {self.who}; connect without a resume token"
        if self.data_mimes is not None and setup.data_mime not in self.data_mimes:
            return (
                f"data MIME {setup.data_mime!r} is not supported; {self.who} takes "
                f"{', '.join(self.data_mimes)}"
            )
        return None


class StreamIds:
    """Stream ids one side opens: odd for the client, even for the server (spec, "Stream
    Identifiers"), wrapping after 2^31 - 1 back to the first, skipping ids still in use
    by long-lived streams rather than reusing them."""

    __slots__ = ("_first", "_next")

    def __init__(self, first: int = 1) -> None:
        if not 0 < first <= MAX_STREAM_ID:
            raise LocalProtocolError(f"first stream id must be in 1..{MAX_STREAM_ID}, not {first}")
        self._first = 2 - first % 2  # the wrap goes back to 1 or 2
        self._next = first

    def allocate(self, in_use: Container[int] = ()) -> int:
        """The next id not in ``in_use``. ``in_use`` cannot hold all 2^30 ids of a parity:
        every live stream holds a request buffered somewhere."""
        sid = self._next
        while sid in in_use:
            sid = sid + 2 if sid + 2 <= MAX_STREAM_ID else self._first
        self._next = sid + 2 if sid + 2 <= MAX_STREAM_ID else self._first
        return sid


# ---------------------------------------------------------------- the connection


class Connection:
    """One RSocket connection's state; see the module docstring.

    Build it with ``Connection.accepting(policy, now)`` (server role) or
    ``Connection.connecting(setup, now)`` (client role: the SETUP is queued at once).
    """

    __slots__ = (
        "_buf",
        "_keepalive_s",
        "_lease",
        "_lifetime_s",
        "_next_keepalive",
        "_out",
        "_pos",
        "_setup_deadline",
        "active",
        "failure",
        "ids",
        "last_received",
        "lease_requests",
        "lease_ttl_ms",
        "max_frame_length",
        "next_tick_at",
        "peer_closed",
        "policy",
        "role",
        "setup",
        "state",
    )

    def __init__(
        self,
        role: Role,
        now: float,
        *,
        policy: SetupPolicy | None = None,
        setup: Setup | None = None,
        max_frame_length: int = MAX_FRAME_LENGTH,
    ) -> None:
        if (policy is None) != (role is Role.CLIENT) or (setup is None) != (role is Role.SERVER):
            raise LocalProtocolError("a server connection takes a policy, a client one a setup")
        self.role = role
        self.policy = policy
        self.setup = setup
        self.max_frame_length = max_frame_length
        self.ids = StreamIds(1 if role is Role.CLIENT else 2)
        self._buf = bytearray()
        self._pos = 0
        self._out = bytearray()
        self.active = False
        """Set by every read; ``tick`` turns it into ``last_received``."""
        self.last_received = now
        self.failure: ConnectionFailed | None = None
        self.peer_closed: PeerClosed | None = None
        self.lease_ttl_ms = 0
        self.lease_requests = 0
        self._setup_deadline = math.inf
        self._keepalive_s = 0.0
        self._next_keepalive = math.inf
        if setup is None:
            assert policy is not None
            self.state = State.AWAITING_SETUP
            self._setup_deadline = now + policy.setup_timeout_s
            self._lifetime_s = math.inf
            self._lease = False
        else:
            self.state = State.OPEN
            self._out += encode_frame(setup)
            self._lifetime_s = setup.max_lifetime_ms / 1000.0
            self._keepalive_s = setup.keepalive_ms / 1000.0
            self._next_keepalive = now + self._keepalive_s
            self._lease = setup.lease
        self.next_tick_at = min(self._setup_deadline, self._next_keepalive, now + self._lifetime_s)
        """When ``tick`` must run next (monotonic seconds)."""

    @classmethod
    def accepting(
        cls, policy: SetupPolicy, now: float, *, max_frame_length: int = MAX_FRAME_LENGTH
    ) -> Connection:
        return cls(Role.SERVER, now, policy=policy, max_frame_length=max_frame_length)

    @classmethod
    def connecting(
        cls, setup: Setup, now: float, *, max_frame_length: int = MAX_FRAME_LENGTH
    ) -> Connection:
        return cls(Role.CLIENT, now, setup=setup, max_frame_length=max_frame_length)

    # ------------------------------------------------------------ state

    @property
    def open(self) -> bool:
        """SETUP done and not closed: stream frames may flow."""
        return self.state is State.OPEN

    @property
    def closed(self) -> bool:
        return self.state is State.CLOSED

    @property
    def lifetime_s(self) -> float:
        """How long the peer may stay silent (inf before SETUP: the deadline rules then)."""
        return self._lifetime_s

    # ------------------------------------------------------------ bytes out

    def data_to_send(self) -> bytes:
        """Bytes the connection itself has to send (empty if none); taken once."""
        if not self._out:
            return b""
        out = bytes(self._out)
        self._out.clear()
        return out

    def send(self, frame: Frame) -> None:
        """Queue a frame of the adapter's (it leaves with ``data_to_send``)."""
        if self.state is not State.CLOSED:
            self._out += encode_frame(frame)

    def next_stream_id(self, in_use: Container[int] = ()) -> int:
        return self.ids.allocate(in_use)

    def close(self, code: int, message: str) -> ConnectionFailed:
        """End the connection with an ERROR of ``code`` (queued); a no-op once closed."""
        if self.state is State.CLOSED:
            return self.failure or ConnectionFailed(code=code, message=message)
        setup_codes = ErrorCode.INVALID_SETUP <= code <= ErrorCode.REJECTED_SETUP
        failed = SetupRefused if setup_codes else ConnectionFailed
        self.failure = failed(code=code, message=message)
        self._out += encode_frame(Error(stream_id=0, error_code=code, message=message))
        self.state = State.CLOSED
        return self.failure

    def _fail(self, code: int, message: str) -> Control:
        self.close(code, message)
        return Control.FAILED

    def peer_gone(self) -> None:
        """The transport closed: nothing more is sent or received."""
        self.state = State.CLOSED
        self._out.clear()

    # ------------------------------------------------------------ time

    def tick(self, now: float) -> ConnectionFailed | None:
        """Check the deadlines at ``now``: SETUP in time, the peer not silent beyond its
        max lifetime; queue our KEEPALIVE when due. Sets ``next_tick_at``."""
        if self.state is State.CLOSED:
            return None
        if self.state is State.AWAITING_SETUP:
            if now >= self._setup_deadline:
                assert self.policy is not None
                return self.close(
                    ErrorCode.INVALID_SETUP,
                    f"no SETUP within {self.policy.setup_timeout_s:g} s of connecting "
                    "(--setup-timeout)",
                )
            self.next_tick_at = self._setup_deadline
            return None
        lifetime = self._lifetime_s
        if self.active:
            self.active = False
            self.last_received = now
            next_check = now + lifetime / LIFETIME_CHECKS
        elif now - self.last_received >= lifetime:
            return self.close(
                ErrorCode.CONNECTION_ERROR,
                f"no frame for {now - self.last_received:.1f} s, beyond the max lifetime "
                f"of {lifetime:g} s",
            )
        else:
            next_check = self.last_received + lifetime
        if now >= self._next_keepalive:
            self._out += _KEEPALIVE_REQUEST
            self._next_keepalive = now + self._keepalive_s
        self.next_tick_at = min(next_check, self._next_keepalive)
        return None

    # ------------------------------------------------------------ bytes in

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Take bytes from the peer; ``next_event`` returns what they complete."""
        if self.state is State.CLOSED:
            return
        self.active = True
        if self._pos:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    def next_event(self) -> Event | Frame | NeedData:
        """The next stream frame or event, or ``NEED_DATA``; ``NEED_DATA`` forever once
        closed (after ``ConnectionFailed`` or ``PeerClosed`` the adapter closes)."""
        buf = self._buf
        while (state := self.state) is not _CLOSED:
            pos = self._pos
            available = len(buf) - pos
            if state is _AWAITING_SETUP and self.check_prefix(buf, pos, available):
                return self.close(ErrorCode.INVALID_SETUP, "")  # the failure check_prefix set
            if available < LENGTH_PREFIX_LENGTH:
                return NEED_DATA
            length = (buf[pos] << 16) | (buf[pos + 1] << 8) | buf[pos + 2]
            if length > self.max_frame_length:
                return self.close(
                    ErrorCode.CONNECTION_ERROR,
                    f"frame of {length} bytes exceeds the limit of {self.max_frame_length} bytes",
                )
            if length < FRAME_HEADER_LENGTH:
                return self.close(
                    ErrorCode.CONNECTION_ERROR,
                    f"frame of {length} bytes is shorter than the 6-byte header",
                )
            end = pos + LENGTH_PREFIX_LENGTH + length
            if available < LENGTH_PREFIX_LENGTH + length:
                return NEED_DATA
            self._pos = end
            # Stream 0 (or before SETUP, when check_prefix has seen to stream 0): the rules.
            if state is _AWAITING_SETUP or not (
                buf[pos + 3] | buf[pos + 4] | buf[pos + 5] | buf[pos + 6]
            ):
                type_flags = (buf[pos + 7] << 8) | buf[pos + 8]
                event = self._event(
                    self.control_frame(buf, pos, length, 0, type_flags >> 10, type_flags & 0x3FF),
                    buf,
                    pos,
                    end,
                )
                if event is not None:
                    return event
                continue
            body = memoryview(buf)[pos + LENGTH_PREFIX_LENGTH : end]
            try:
                frame = decode_frame_body(body)
            except RemoteProtocolError as exc:
                return self.close(exc.error_code, str(exc))
            finally:
                body.release()
            if frame is not None:
                return frame
        return NEED_DATA

    def _event(self, control: Control, buf: bytearray, pos: int, end: int) -> Event | None:
        match control:
            case Control.NONE:
                return None
            case Control.SETUP_ACCEPTED:
                assert self.setup is not None
                return SetupAccepted(setup=self.setup)
            case Control.FAILED:
                return self.failure
            case Control.PEER_CLOSED:
                return self.peer_closed
            case Control.KEEPALIVE_ANSWER:
                return KEEPALIVE_ANSWERED
            case Control.LEASE:
                return LeaseReceived(
                    ttl_ms=self.lease_ttl_ms, number_of_requests=self.lease_requests
                )
            case Control.METADATA_PUSH:
                return MetadataPushed(metadata=bytes(buf[pos + _PREFIX_AND_HEADER : end]))
        raise AssertionError(control)  # pragma: no cover - the enum is closed

    # ------------------------------------------------------------ frame positions

    def check_prefix(self, buf: bytes | bytearray, pos: int, available: int) -> bool:
        """Before SETUP: judge the first frame from the ``available`` bytes at ``pos``
        (``check_first_frame``); True if it was refused (``failure`` says why)."""
        if self.state is not State.AWAITING_SETUP:
            return self.state is State.CLOSED
        assert self.policy is not None
        try:
            check_first_frame(
                buf, pos, available, min(self.policy.max_setup_bytes, self.max_frame_length)
            )
        except RemoteProtocolError as exc:
            self._fail(exc.error_code, str(exc))
            return True
        return False

    def control_frame(
        self, buf: bytearray, pos: int, length: int, sid: int, frame_type: int, flags: int
    ) -> Control:
        """Apply the connection rules to one whole frame at ``buf[pos]`` (its length
        prefix; ``length`` is the body's): every frame before SETUP, and stream-0 frames
        after it. Stream frames of an open connection are the adapter's."""
        state = self.state
        if state is not State.OPEN:
            if state is State.CLOSED:
                return Control.NONE
            return self._on_setup(buf, pos, length)
        body = pos + _PREFIX_AND_HEADER
        if sid:
            return self._fail(
                ErrorCode.CONNECTION_ERROR, f"control_frame got a frame of stream {sid}"
            )
        if frame_type == FrameType.KEEPALIVE:
            if length < _KEEPALIVE_MIN_LENGTH or buf[body] & 0x80:
                return self._fail(
                    ErrorCode.CONNECTION_ERROR, "KEEPALIVE needs a 63-bit last received position"
                )
            if not flags & FLAG_RESPOND:
                return Control.KEEPALIVE_ANSWER
            start = len(self._out)
            self._out += buf[pos : body + length - FRAME_HEADER_LENGTH]
            self._out[start + 8] &= ~FLAG_RESPOND & 0xFF  # clear R; echo position and data
            return Control.NONE
        if frame_type == FrameType.METADATA_PUSH:
            # The spec says its METADATA flag MUST be set, but the frame's whole body is
            # metadata either way, and rsocket-js 0.0.27 (the most used release) sends it
            # with no flags: taken, as rsocket-java takes it, rather than closing a
            # connection with every stream on it over a redundant bit.
            return Control.METADATA_PUSH
        if frame_type == FrameType.ERROR:
            if length < FRAME_HEADER_LENGTH + 4:
                return self._fail(
                    ErrorCode.CONNECTION_ERROR,
                    f"ERROR of {length} bytes is too short for its error code",
                )
            end = pos + LENGTH_PREFIX_LENGTH + length
            self.peer_closed = PeerClosed(
                code=_unpack_u32(buf, body)[0],
                message=bytes(buf[body + 4 : end]).decode("utf-8", "replace"),
            )
            return Control.PEER_CLOSED
        if frame_type == FrameType.LEASE:
            if self.role is not Role.CLIENT or not self._lease:
                return self._fail(
                    ErrorCode.CONNECTION_ERROR,
                    "LEASE from the peer: this connection did not negotiate leases",
                )
            if length < FRAME_HEADER_LENGTH + 8:
                return self._fail(
                    ErrorCode.CONNECTION_ERROR,
                    f"LEASE of {length} bytes is too short for its TTL and count",
                )
            self.lease_ttl_ms = _unpack_u32(buf, body)[0] & MAX_STREAM_ID
            self.lease_requests = _unpack_u32(buf, body + 4)[0] & MAX_STREAM_ID
            return Control.LEASE
        if frame_type == FrameType.SETUP:
            return self._fail(
                ErrorCode.CONNECTION_ERROR, "SETUP may only be sent once per connection"
            )
        if frame_type == FrameType.RESUME:
            return self._fail(ErrorCode.REJECTED_RESUME, "resumption is not supported")
        if frame_type > FrameType.RESUME_OK and flags & FLAG_IGNORE:
            return Control.NONE  # EXT, or an unknown type the sender marked ignorable
        return self._fail(
            ErrorCode.CONNECTION_ERROR, f"unexpected frame type 0x{frame_type:02x} on stream 0"
        )

    def _on_setup(self, buf: bytearray, pos: int, length: int) -> Control:
        if self.check_prefix(buf, pos, LENGTH_PREFIX_LENGTH + length):
            return Control.FAILED
        policy = self.policy
        assert policy is not None
        try:
            setup = decode_frame_body(bytes(buf[pos + LENGTH_PREFIX_LENGTH : pos + 3 + length]))
        except RemoteProtocolError as exc:  # the codec codes a bad SETUP INVALID_SETUP
            return self._fail(exc.error_code, str(exc))
        assert isinstance(setup, Setup)  # check_prefix let only a SETUP through
        refusal = policy.refusal(setup)
        if refusal is not None:
            return self._fail(ErrorCode.UNSUPPORTED_SETUP, refusal)
        self.setup = setup
        self.state = State.OPEN
        self._lifetime_s = setup.max_lifetime_ms / 1000.0
        self._lease = setup.lease
        self._setup_deadline = math.inf
        return Control.SETUP_ACCEPTED
