"""The CPU agent as a real process, reporting to a real asyncio listener built on lblab.wire."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from lblab.errors import ConfigError
from lblab.loadreport import LoadReport
from lblab.procs import Child, lblab_command, spawn, stop
from lblab.servers.agent import AgentConfig
from lblab.wire.codec import NEED_DATA, FrameDecoder
from lblab.wire.frames import RequestFnf, Setup
from lblab.wire.metadata import APPLICATION_JSON

DEADLINE_S = 10.0


class ReportListener:
    """Stands in for the balancer's agent port: records SETUPs and the reports sent."""

    def __init__(self) -> None:
        self.setups: asyncio.Queue[Setup] = asyncio.Queue()
        self.reports: asyncio.Queue[LoadReport] = asyncio.Queue()
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self, port: int = 0) -> None:
        self._server = await asyncio.start_server(
            self._serve, "127.0.0.1", port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Close the listener and every connection, as a balancer that exits does."""
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        await self._server.wait_closed()
        self._writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        decoder = FrameDecoder()
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                decoder.receive_data(data)
                while (frame := decoder.next_frame()) is not NEED_DATA:
                    if isinstance(frame, Setup):
                        self.setups.put_nowait(frame)
                    elif isinstance(frame, RequestFnf):
                        self.reports.put_nowait(LoadReport.from_json(frame.data))

    async def next_report(self) -> LoadReport:
        return await asyncio.wait_for(self.reports.get(), DEADLINE_S)

    async def next_setup(self) -> Setup:
        return await asyncio.wait_for(self.setups.get(), DEADLINE_S)


@contextlib.contextmanager
def process(code: str) -> Iterator[subprocess.Popen[bytes]]:
    """A stand-in for a server process."""
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=5)


def start_agent(tmp_path: Path, pid: int, port: int, *args: str) -> Child:
    return spawn(
        "agent",
        lblab_command(
            "agent",
            "--server", "s1",
            "--pid", str(pid),
            "--report-to", f"127.0.0.1:{port}",
            "--out", str(tmp_path / "cpu.jsonl"),
            "--interval", "0.05",
            *args,
        ),
        log_path=tmp_path / "agent.log",
    )  # fmt: skip


def samples(tmp_path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (tmp_path / "cpu.jsonl").read_text().splitlines()]


def test_agent_reports_reconnects_and_exits_when_the_server_dies(tmp_path: Path) -> None:
    with process("import time; time.sleep(60)") as server:

        async def scenario() -> Child:
            listener = ReportListener()
            await listener.start()
            agent = start_agent(tmp_path, server.pid, listener.port, "--allowance", "0.5")
            assert agent.ready["role"] == "agent" and agent.ready["allowance"] == 0.5
            setup = await listener.next_setup()
            assert setup.data_mime == APPLICATION_JSON
            assert orjson.loads(setup.data) == {"client": "lblab-agent", "server": "s1"}
            for _ in range(3):
                report = await listener.next_report()
                assert report.source == "agent" and report.server == "s1"
                assert report.cpu_util is not None and 0 <= report.cpu_util < 0.2  # asleep
                assert abs(report.t - time.time()) < 60

            # The balancer restarts on the same port: the agent comes back to it.
            await listener.stop()
            written_while_down = len(samples(tmp_path))
            await listener.start(listener.port)
            await listener.next_setup()
            await listener.next_report()
            assert len(samples(tmp_path)) > written_while_down  # the file kept growing
            await listener.stop()
            return agent

        agent = asyncio.run(scenario())
        try:
            server.kill()
            server.wait(timeout=5)
            assert agent.popen.wait(timeout=DEADLINE_S) == 0  # server gone: agent exits 0
        finally:
            stop(agent)
    rows = samples(tmp_path)
    assert len(rows) >= 4
    assert all(set(row) == {"t", "server", "cpu_percent"} for row in rows)
    assert all(row["server"] == "s1" for row in rows)


def test_an_agent_reports_to_every_balancer_it_is_given(tmp_path: Path) -> None:
    """Several balancers (``--report-to`` twice, one a comma list): each gets every
    report on its own connection, and one that goes away does not stop the others."""
    with process("import time; time.sleep(60)") as server:

        async def scenario() -> None:
            listeners = [ReportListener() for _ in range(3)]
            for listener in listeners:
                await listener.start()
            a, b, c = (f"127.0.0.1:{listener.port}" for listener in listeners)
            agent = start_agent(tmp_path, server.pid, listeners[0].port, "--report-to", f"{b},{c}")
            try:
                assert agent.ready["report_to"] == f"{a},{b},{c}"
                for listener in listeners:
                    await listener.next_setup()
                    assert (await listener.next_report()).server == "s1"
                await listeners[0].stop()
                for listener in listeners[1:]:
                    for _ in range(3):
                        await listener.next_report()
            finally:
                stop(agent)
                for listener in listeners[1:]:
                    await listener.stop()

        asyncio.run(scenario())


def test_agents_whose_server_goes_while_their_link_reconnects_exit(tmp_path: Path) -> None:
    """The link is cancelled while connects are refused and retried: each agent exits.

    A cancel that coincided with a failed connect was once lost (the link went on
    reconnecting and the agent never finished stopping); tests/integration/
    test_cancel_race.py hits that moment hundreds of times, this checks whole agents."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        refused = sock.getsockname()[1]
    with process("import time; time.sleep(60)") as server:
        agents = []
        try:
            for i in range(3):
                (tmp_path / str(i)).mkdir()
                agents.append(
                    start_agent(tmp_path / str(i), server.pid, refused, "--interval", "0.01")
                )
            server.kill()
            server.wait(timeout=5)
            assert [a.popen.wait(timeout=DEADLINE_S) for a in agents] == [0, 0, 0]
        finally:
            for agent in agents:
                stop(agent)
    assert all("server s1 is gone; agent exits" in (tmp_path / str(i) / "agent.log").read_text()
               for i in range(3))  # fmt: skip


def test_agent_reads_cpu_as_percent_of_the_allowance(tmp_path: Path) -> None:
    with process("while True: pass") as busy:

        async def scenario() -> list[float]:
            listener = ReportListener()
            await listener.start()
            agent = start_agent(tmp_path, busy.pid, listener.port, "--allowance", "0.1")
            try:
                return [(await listener.next_report()).cpu_util or 0.0 for _ in range(8)]
            finally:
                stop(agent)
                await listener.stop()

        utils = asyncio.run(scenario())
    # A busy loop gets at least 0.2 CPU even on this shared 2-core machine: >= 2x of 0.1.
    assert statistics.median(utils) > 1.5, utils


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "exactly one of --pid PID or --cgroup NAME"),
        ({"pid": 1, "cgroup": "g"}, "exactly one of --pid PID or --cgroup NAME"),
        ({"pid": 1, "interval_s": 0}, "--interval 0: give seconds in 0.01..60"),
        ({"pid": 1, "allowance": 0}, "--allowance: 0 must be 0.01 or more"),
        ({"pid": 1, "allowance": 1e-300}, "--allowance: 1e-300 must be 0.01 or more"),
        ({"pid": 1 << 40}, "--pid: 1099511627776 must be at most 4194304"),
        ({"pid": 1, "server": "s 1"}, "--server: 's 1' is not an id"),
    ],
)
def test_agent_config_errors_name_the_flag(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        AgentConfig(**{"server": "s1", "report_to": (("127.0.0.1", 1),), **fields})  # type: ignore[arg-type]


def test_agent_refuses_a_missing_pid_with_exit_code_2() -> None:
    result = subprocess.run(
        lblab_command("agent", "--server", "s1", "--pid", "4194303", "--report-to", "127.0.0.1:1"),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2 and "--pid 4194303: no such process" in result.stderr
