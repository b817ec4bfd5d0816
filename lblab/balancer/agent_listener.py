"""The agent port: an RSocket server that takes agents' CPU samples as load reports.

Agents (``lblab agent``) connect with a SETUP (data MIME ``application/json``) and send
one REQUEST_FNF per sample whose data is a ``LoadReport`` (source ``agent``) as JSON.
Each goes to ``Pool.report`` for the backend it names. A few frames per second per
server, so this uses the plain frame codec rather than the forwarding machinery.
Requests that expect an answer are refused (REJECTED). The connection rules are
``lblab.wire.connection``'s (through ``lblab.wire_asyncio``): the first frame judged
from its header, the SETUP deadline (``--setup-timeout``), version 1.x with data MIME
``application/json`` and no lease or resumption, KEEPALIVEs answered, an agent silent
beyond its max lifetime closed, malformed frames answered with the right connection
error; plus the caps of ``--max-connections`` and ``--max-pending-setup``
(``lblab.admission``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from lblab.admission import Admission
from lblab.errors import RemoteProtocolError, worth_logging
from lblab.loadreport import LoadReport
from lblab.wire.codes import ErrorCode
from lblab.wire.connection import Event, SetupPolicy
from lblab.wire.frames import (
    Error,
    Frame,
    RequestChannel,
    RequestFnf,
    RequestResponse,
    RequestStream,
)
from lblab.wire.metadata import APPLICATION_JSON
from lblab.wire_asyncio import AcceptedConnection

if TYPE_CHECKING:
    from lblab.balancer.node import BalancerNode

log = logging.getLogger("lblab.balancer.agents")

AGENT_MAX_FRAME_BYTES = 64 * 1024
"""A load report is ~200 bytes; anything near this is not an agent."""
UNKNOWN_SERVERS_NAMED = 16
"""Server names not in the pool that one connection's warnings name (each once)."""


class AgentConnection(AcceptedConnection):
    def __init__(self, node: BalancerNode, policy: SetupPolicy, admission: Admission) -> None:
        super().__init__(policy, admission, node.loop, max_frame_length=AGENT_MAX_FRAME_BYTES)
        self.node = node
        self.unknown_servers: set[str] = set()
        self.malformed = 0

    def on_frame(self, frame: Event | Frame) -> None:
        """A report goes to the pool. What is wrong with one is logged when
        ``worth_logging`` on this connection, and names are cut to 80 characters: a peer
        sending junk as fast as it can must not flood the balancer's log (60 MB in 1.7 s
        once)."""
        match frame:
            case RequestFnf():
                try:
                    report = LoadReport.from_json(frame.data)
                except RemoteProtocolError as exc:
                    self.malformed += 1
                    if worth_logging(self.malformed):
                        log.warning(
                            "ignoring a malformed agent report (%d on this connection): %.300s",
                            self.malformed,
                            exc,
                        )
                    return
                unknown = self.unknown_servers
                if (
                    not self.node.agent_report(report)
                    and report.server not in unknown
                    and len(unknown) < UNKNOWN_SERVERS_NAMED
                ):
                    unknown.add(report.server)
                    log.warning("agent reports for %.80r, which is not in the pool", report.server)
            case RequestResponse() | RequestStream() | RequestChannel():
                self.rsocket.send(
                    Error(
                        stream_id=frame.stream_id,
                        error_code=ErrorCode.REJECTED,
                        message="the agent port takes REQUEST_FNF load reports only",
                    )
                )
            case _:
                pass  # METADATA_PUSH, KEEPALIVE answers, frames of refused streams: ignored


async def start_agent_listener(node: BalancerNode, host: str, port: int) -> asyncio.Server:
    config = node.config
    what = "the balancer's agent port"
    policy = SetupPolicy(
        who=what,
        setup_timeout_s=config.setup_timeout_s,
        data_mimes=(APPLICATION_JSON,),
        max_setup_bytes=AGENT_MAX_FRAME_BYTES,
    )
    admission = Admission(config.max_connections, config.max_pending_setup, what)
    return await node.loop.create_server(
        lambda: AgentConnection(node, policy, admission), host, port
    )
