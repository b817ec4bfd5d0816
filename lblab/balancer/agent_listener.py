"""The agent port: an RSocket server that takes agents' CPU samples as load reports.

Agents (``lblab agent``) connect with a SETUP (data MIME ``application/json``) and send
one REQUEST_FNF per sample whose data is a ``LoadReport`` (source ``agent``) as JSON.
Each goes to ``Pool.report`` for the backend it names. A few frames per second per
server, so this uses the plain frame codec rather than the forwarding machinery.
Requests that expect an answer are refused (REJECTED).

Who may report. With ``--report-token`` (``LBLAB_REPORT_TOKEN``) a connection's SETUP
must carry that token as a Bearer entry of RSocket's authentication extension in its
composite metadata (``lblab.wire.auth``); one without it, or with another token, is
refused with REJECTED_SETUP before any of its reports is read. The token is checked
once per connection, in constant time; the reports that follow cost nothing more. A
report claiming a server's in-band source (``response``, ``push``: only the balancer's
own connection to that server carries those) is refused whatever the token. Both are
counted node-wide (``agent_connections_bad_token``, ``agent_reports_bad_source`` in
``/metrics`` and ``/status``) and logged the 1st, 2nd, 4th ... time (``worth_logging``):
a peer retrying in a loop writes a line per doubling. Without a token the port takes
reports from any peer that reaches it, and says so once when it opens. The connection rules are
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
from lblab.loadreport import REPORT_TOKEN_ENV, LoadReport
from lblab.wire.auth import AUTHENTICATION, TokenCheck, bearer_token
from lblab.wire.codes import ErrorCode
from lblab.wire.connection import Event, SetupPolicy
from lblab.wire.frames import (
    Error,
    Frame,
    RequestChannel,
    RequestFnf,
    RequestResponse,
    RequestStream,
    Setup,
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


NEEDS_TOKEN = (
    "the agent port takes load reports only from connections whose SETUP carries the run's "
    f"report token (--report-token / {REPORT_TOKEN_ENV}) as a Bearer entry of "
    f"{AUTHENTICATION} in its composite metadata"
)
"""Why a connection without the token is refused (REJECTED_SETUP), to the peer and in
the log."""


class AgentConnection(AcceptedConnection):
    def __init__(
        self,
        node: BalancerNode,
        policy: SetupPolicy,
        admission: Admission,
        token: TokenCheck | None,
    ) -> None:
        super().__init__(policy, admission, node.loop, max_frame_length=AGENT_MAX_FRAME_BYTES)
        self.node = node
        self.token = token
        self.unknown_servers: set[str] = set()
        self.malformed = 0

    def on_setup(self, setup: Setup) -> None:
        """With a token configured, a SETUP without it is refused: the connection ends
        before any of its reports is read."""
        token = self.token
        if token is None:
            return
        offered = bearer_token(setup.metadata_mime, setup.metadata)
        if offered is not None and token.matches(offered):
            return
        why = "no report token" if offered is None else "a wrong report token"
        count = self.node.agent_bad_token()
        if worth_logging(count):
            log.warning(
                "refused an agent connection with %s (%d so far): %s", why, count, NEEDS_TOKEN
            )
        self.close_with_error(
            ErrorCode.REJECTED_SETUP, f"{NEEDS_TOKEN}; this SETUP has {why}", logged=False
        )

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
                if report.source != "agent":
                    count = self.node.agent_bad_source()
                    if worth_logging(count):
                        log.warning(
                            "refused an agent-port report for %.80r claiming source %r (%d so "
                            "far): only the balancer's own connection to a server carries its "
                            "response and push reports",
                            report.server,
                            report.source,
                            count,
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
    token = TokenCheck(config.report_token) if config.report_token is not None else None
    server = await node.loop.create_server(
        lambda: AgentConnection(node, policy, admission, token), host, port
    )
    if token is None:
        log.warning(
            "the agent port takes load reports from any peer that reaches it: no "
            "--report-token (or %s) was given",
            REPORT_TOKEN_ENV,
        )
    return server
