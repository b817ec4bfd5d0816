"""The agent port: an RSocket server that takes agents' CPU samples as load reports.

Agents (``lblab agent``) connect with a SETUP (data MIME ``application/json``) and send
one REQUEST_FNF per sample whose data is a ``LoadReport`` (source ``agent``) as JSON.
Each goes to ``Pool.report`` for the backend it names. A few frames per second per
server, so this uses the plain frame codec rather than the forwarding machinery.
KEEPALIVEs are answered; requests that expect an answer are refused (REJECTED);
malformed frames close the connection with the right connection error. The port has
the client port's guards: the first frame judged from its header, the SETUP deadline
and the connection caps (``--setup-timeout``, ``--max-connections``,
``--max-pending-setup``, ``lblab.admission``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from lblab.admission import Admission
from lblab.errors import RemoteProtocolError
from lblab.loadreport import LoadReport
from lblab.wire.codec import NEED_DATA, FrameDecoder, encode_frame
from lblab.wire.codes import ErrorCode
from lblab.wire.frames import (
    Error,
    Keepalive,
    RequestChannel,
    RequestFnf,
    RequestResponse,
    RequestStream,
    Setup,
)

if TYPE_CHECKING:
    from balancer.node import BalancerNode

log = logging.getLogger("lblab.balancer.agents")

AGENT_MAX_FRAME_BYTES = 64 * 1024
"""A load report is ~200 bytes; anything near this is not an agent."""


class AgentConnection(asyncio.Protocol):
    def __init__(self, node: BalancerNode, admission: Admission) -> None:
        self.node = node
        self.admission = admission
        self.decoder = FrameDecoder(max_frame_length=AGENT_MAX_FRAME_BYTES, first_frame=True)
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.setup_done = False
        self.setup_timer: asyncio.TimerHandle | None = None
        self.unknown_servers: set[str] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self.admission.admit(self):
            timeout_s = self.node.config.setup_timeout_s
            self.setup_timer = self.node.loop.call_later(timeout_s, self._setup_expired)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.setup_timer is not None:
            self.setup_timer.cancel()
        self.admission.gone(self)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            self.decoder.receive_data(data)
            while not self.closed and (frame := self.decoder.next_frame()) is not NEED_DATA:
                self._on_frame(frame)
        except RemoteProtocolError as exc:
            self._close_with_error(exc)

    def refuse(self, message: str) -> None:
        """Turned away by the connection caps."""
        self._close_with_error(RemoteProtocolError(message, ErrorCode.REJECTED_SETUP))

    def _setup_expired(self) -> None:
        self.setup_timer = None
        if not self.setup_done:
            timeout_s = self.node.config.setup_timeout_s
            self._close_with_error(
                RemoteProtocolError(
                    f"no SETUP within {timeout_s:g} s of connecting (--setup-timeout)",
                    ErrorCode.INVALID_SETUP,
                )
            )

    def _close_with_error(self, exc: RemoteProtocolError) -> None:
        log.info("agent connection: %s", exc)
        if self.closed or self.transport is None:
            return
        self.closed = True
        self.transport.write(
            encode_frame(Error(stream_id=0, error_code=exc.error_code, message=str(exc)))
        )
        self.transport.close()

    def _on_frame(self, frame: object) -> None:
        assert self.transport is not None
        if not self.setup_done:  # the decoder lets only a SETUP through first
            assert isinstance(frame, Setup)
            if frame.major != 1:
                raise RemoteProtocolError(
                    f"RSocket version {frame.major}.{frame.minor} is not supported",
                    ErrorCode.UNSUPPORTED_SETUP,
                )
            self.setup_done = True
            self.admission.setup_done(self)
            if self.setup_timer is not None:
                self.setup_timer.cancel()
                self.setup_timer = None
            return
        match frame:
            case RequestFnf():
                try:
                    report = LoadReport.from_json(frame.data)
                except RemoteProtocolError as exc:
                    log.warning("ignoring a malformed agent report: %s", exc)
                    return
                if not self.node.agent_report(report) and report.server not in self.unknown_servers:
                    self.unknown_servers.add(report.server)
                    log.warning("agent reports for %r, which is not in the pool", report.server)
            case Keepalive(respond=True):
                self.transport.write(
                    encode_frame(
                        Keepalive(respond=False, last_received_position=0, data=frame.data)
                    )
                )
            case RequestResponse() | RequestStream() | RequestChannel():
                self.transport.write(
                    encode_frame(
                        Error(
                            stream_id=frame.stream_id,
                            error_code=ErrorCode.REJECTED,
                            message="the agent port takes REQUEST_FNF load reports only",
                        )
                    )
                )
            case Setup():
                raise RemoteProtocolError("SETUP may only be sent once per connection")
            case _:
                pass  # METADATA_PUSH, KEEPALIVE answers, frames of refused streams: ignored


async def start_agent_listener(node: BalancerNode, host: str, port: int) -> asyncio.Server:
    config = node.config
    admission = Admission(
        config.max_connections, config.max_pending_setup, "the balancer's agent port"
    )
    return await node.loop.create_server(lambda: AgentConnection(node, admission), host, port)
