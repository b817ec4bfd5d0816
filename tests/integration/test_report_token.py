"""The agent port's report token, live: real ``lblab server`` processes behind a real
balancer on loopback, forgers and agents as real sockets and processes.

The reports sent make s1 look 1,000 times as capable per unit of CPU as s2 and s3: taken,
they send nearly every request of ``dwrr`` and ``wrr-orca`` to s1. From a peer without the
token, with a wrong one, or claiming a server's in-band source they must change no pick.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import time
from collections import Counter
from pathlib import Path

import pytest
from balancer_testbed import (
    RawClient,
    admin,
    client_setup,
    processes,
    served_counts,
    start_balancer,
    start_server,
    status_of,
    wait_for,
)

from lblab.experiment import runconfig
from lblab.loadreport import REPORT_TOKEN_ENV, LoadReport, ReportSource
from lblab.loadtests.local_testbed import LocalProcesses
from lblab.procs import Child, lblab_command, spawn
from lblab.wire.auth import bearer_metadata
from lblab.wire.codes import ErrorCode
from lblab.wire.frames import Error, RequestFnf, RequestResponse

TOKEN = secrets.token_urlsafe(24)
WRONG = secrets.token_urlsafe(24)
STRATEGIES = {
    # Weights recomputed every 50 ms / 100 ms (gRPC's floor), used at once: a taken
    # report shows in the picks within a fraction of a second.
    "dwrr": ("--strategy-option", "interval=0.05"),
    "wrr-orca": (
        "--strategy-option", "blackout_period=0",
        "--strategy-option", "weight_update_period=0.1",
    ),
}  # fmt: skip
BATCH = 60
WATCH_S = 1.0
"""How long picks are watched after the forgers: 20 of dwrr's recomputations here, 10
of wrr-orca's rebuilds; a taken report shows in less (``test_..._drive``)."""


def skewing_reports(source: ReportSource) -> list[LoadReport]:
    t = time.time()
    return [
        LoadReport(server="s1", source=source, t=t, cpu_util=0.001, qps=1000.0),
        LoadReport(server="s2", source=source, t=t, cpu_util=1.0, qps=1000.0),
        LoadReport(server="s3", source=source, t=t, cpu_util=1.0, qps=1000.0),
    ]


def as_frames(reports: list[LoadReport], first_stream: int = 1) -> list[RequestFnf]:
    return [
        RequestFnf(stream_id=first_stream + 2 * i, data=r.to_json()) for i, r in enumerate(reports)
    ]


def env_with(token: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != REPORT_TOKEN_ENV}
    if token is not None:
        env[REPORT_TOKEN_ENV] = token
    return env


def counter(balancer: Child, name: str) -> float:
    """A node counter as ``/metrics`` shows it."""
    code, text = admin(balancer, "GET", "/metrics")
    assert code == 200, text
    match = re.search(rf"^lblab_balancer_{name}_total (\d+)$", text, re.MULTILINE)
    assert match, f"no {name} in /metrics"
    return float(match.group(1))


def picks(balancer: Child) -> Counter[str]:
    """Who answered ``BATCH`` requests sent one at a time (each one picked anew)."""
    counts = asyncio.run(served_counts(balancer.ready["port"], BATCH, 1))
    assert sum(counts.values()) == BATCH, counts
    return counts


def even(counts: Counter[str]) -> bool:
    """As round robin spreads them: dwrr's is exact, wrr-orca's order is redrawn at each
    rebuild. Taken, the reports give s1 over 90 %."""
    return all(counts[s] >= BATCH // 4 for s in ("s1", "s2", "s3"))


def refused_setup(port: int, setup_metadata: bytes | None) -> Error:
    client = RawClient(port)
    try:
        client.send(client_setup(metadata=setup_metadata), *as_frames(skewing_reports("agent")))
        frame = client.recv()
        assert client.closed()
    finally:
        client.close()
    assert isinstance(frame, Error) and frame.stream_id == 0, frame
    return frame


@pytest.fixture(params=list(STRATEGIES))
def testbed(request, tmp_path):
    strategy = request.param
    with processes() as kids:
        kids += [start_server(sid, tmp_path) for sid in ("s1", "s2", "s3")]
        balancer = start_balancer(
            list(kids), tmp_path, "--strategy", strategy, *STRATEGIES[strategy],
            env=env_with(TOKEN),
        )  # fmt: skip
        kids.append(balancer)
        yield balancer, tmp_path / "balancer.log"


def test_forged_reports_change_no_pick_and_the_token_holder_s_drive(testbed):
    balancer, log_path = testbed
    agent_port = balancer.ready["agent_port"]
    assert even(before := picks(balancer)), before

    # No token, then a wrong one: refused at SETUP, before any report is read.
    for metadata, why in ((None, "no report token"), (bearer_metadata(WRONG), "a wrong")):
        frame = refused_setup(agent_port, metadata)
        assert frame.error_code == ErrorCode.REJECTED_SETUP, frame
        assert "report token" in frame.message and why in frame.message, frame.message
    # The right token, but reports claiming the servers' own in-band sources.
    forger = RawClient(agent_port)
    forger.send(
        client_setup(metadata=bearer_metadata(TOKEN)),
        *as_frames(skewing_reports("response"), 1),
        *as_frames(skewing_reports("push"), 7),
    )
    wait_for(lambda: counter(balancer, "agent_reports_bad_source") == 6, 5, "6 refusals")
    assert counter(balancer, "agent_connections_bad_token") == 2
    forger.send(RequestResponse(stream_id=13, data=b"{}"))  # still connected: answered
    reply = forger.recv()
    assert isinstance(reply, Error) and reply.stream_id == 13, reply

    watch_until = time.monotonic() + WATCH_S
    while time.monotonic() < watch_until:
        assert even(after := picks(balancer)), after  # the balancer serves, picks unchanged
    reports = [b["last_report"] for b in status_of(balancer)["backends"]]
    assert all(r is None or r["cpu_util"] is None for r in reports), reports

    # Logged the 1st, 2nd, 4th time, not the 3rd, 5th or 6th.
    text = log_path.read_text()
    assert "refused an agent connection with no report token (1 so far)" in text
    assert "refused an agent connection with a wrong report token (2 so far)" in text
    logged = re.findall(r"refused an agent-port report .* \((\d) so far\)", text)
    assert logged == ["1", "2", "4"], logged
    assert "from any peer" not in text

    # The same reports from the token holder as an agent's: nearly all go to s1.
    forger.send(*as_frames(skewing_reports("agent"), 15))
    wait_for(lambda: picks(balancer)["s1"] >= 0.9 * BATCH, 10, "the agent reports to skew picks")
    forger.close()
    assert counter(balancer, "agent_reports_bad_source") == 6


def start_agent(tmp_path: Path, sid: str, server: Child, port: int, token: str | None) -> Child:
    argv = lblab_command(
        "agent", "--server", sid, "--pid", str(server.pid), "--interval", "0.05",
        "--report-to", f"127.0.0.1:{port}",
    )  # fmt: skip
    return spawn(f"agent {sid}", argv, log_path=tmp_path / f"agent-{sid}.log", env=env_with(token))


def test_an_agent_with_the_token_reports_and_one_with_another_is_refused(tmp_path):
    """``lblab agent`` given the token in its environment reports to a dwrr balancer as
    before; one given another token is refused on every attempt and told why."""
    with processes() as kids:
        kids += [start_server(sid, tmp_path) for sid in ("s1", "s2")]
        s1, s2 = kids
        balancer = start_balancer(kids[:2], tmp_path, "--strategy", "dwrr", env=env_with(TOKEN))
        kids.append(balancer)
        port = balancer.ready["agent_port"]
        kids.append(start_agent(tmp_path, "s1", s1, port, TOKEN))
        kids.append(start_agent(tmp_path, "s2", s2, port, WRONG))

        def sources() -> dict[str, str | None]:
            backends = status_of(balancer)["backends"]
            return {b["id"]: (b["last_report"] or {}).get("source") for b in backends}

        wait_for(lambda: sources()["s1"] == "agent", 10, "s1's agent reports")
        wait_for(lambda: counter(balancer, "agent_connections_bad_token") >= 2, 10, "retries")
        assert sources()["s2"] is None
        assert counter(balancer, "agent_reports_bad_source") == 0
        agent_log = tmp_path / "agent-s2.log"
        wait_for(lambda: "report token" in agent_log.read_text(), 5, "the refusal's reason")
        assert sum(picks(balancer).values()) == BATCH


def test_without_a_token_the_port_takes_any_peer_and_says_so_once(tmp_path):
    with processes() as kids:
        kids.append(start_server("s1", tmp_path))
        balancer = start_balancer(kids[:1], tmp_path, "--strategy", "dwrr", env=env_with(None))
        kids.append(balancer)
        peer = RawClient(balancer.ready["agent_port"])
        peer.send(client_setup(), *as_frames(skewing_reports("agent")[:1]))

        def s1_source() -> str | None:
            return (status_of(balancer)["backends"][0]["last_report"] or {}).get("source")

        wait_for(lambda: s1_source() == "agent", 5, "the tokenless report")
        peer.close()
        text = (tmp_path / "balancer.log").read_text()
        assert text.count("the agent port takes load reports from any peer") == 1, text
        assert counter(balancer, "agent_connections_bad_token") == 0


def test_the_local_testbed_gives_each_run_a_fresh_token_in_the_environment_only(tmp_path):
    """``lblab run``'s testbed: both balancers take both agents' reports, so they share a
    token that appears in no command line and no fact the manifest records, and the next
    run gets another."""
    config = runconfig.resolve(
        None,
        {
            "run": {"strategies": ["dwrr"], "scenarios": ["sp+sr"]},
            "servers": [{"id": "s1"}, {"id": "s2"}],
            "weights": {"s1": 1, "s2": 1},
            "testbed": {"isolation": "off", "balancers": 2, "agent_interval": 0.05},
        },
        {},
    )
    testbed = LocalProcesses(config, tmp_path)
    assert LocalProcesses(config, tmp_path / "next").report_token != testbed.report_token
    try:
        testbed.start("dwrr")
        for node in testbed.nodes:

            def reported(node=node) -> bool:
                rows = status_of(node.child)["backends"]
                return all((b["last_report"] or {}).get("source") == "agent" for b in rows)

            wait_for(reported, 10, f"{node.name} to take both agents' reports")
            assert counter(node.child, "agent_connections_bad_token") == 0
            frame = refused_setup(node.agent_port, None)  # the balancer does want a token
            assert frame.error_code == ErrorCode.REJECTED_SETUP, frame
        token = testbed.report_token.encode()
        pids = [node.child.pid for node in testbed.nodes]
        pids += [p.agent.pid for p in testbed.servers.values() if p.agent]
        for pid in pids:
            assert token not in Path(f"/proc/{pid}/cmdline").read_bytes()
        assert testbed.report_token not in json.dumps(testbed.facts(), default=str)
    finally:
        testbed.stop()
