"""The CPU agent: samples one server's CPU and streams it to the balancer.

Every ``interval`` seconds it reads the server's cumulative CPU time (psutil
``cpu_times`` of the pid: all its threads, plus reaped children; or ``cpuacct.usage``
of its cgroup v1 group) and turns the difference into percent of the server's
allowance: a 0.25-CPU server that is saturated reads 100. The allowance is
``--allowance``, else the quota of the cgroup the server runs in, else one CPU (so a
duty-cycle server needs ``--allowance``, which the runner passes).

Each sample is appended to ``--out`` as a JSON line and flushed (results are written as
they come; a full disk drops samples whole, counted and logged once), and sent to the balancer's agent port as one REQUEST_FNF whose data is a
``LoadReport(source="agent")``. The connection (plain asyncio + ``lblab.wire``) is
re-made with jittered backoff whenever it drops; samples taken while it is down are
still written to the file and not sent. With ``--report-token`` (``LBLAB_REPORT_TOKEN``)
each SETUP carries the token as a Bearer entry of RSocket's authentication extension
(``lblab.wire.auth``), which a balancer with a token wants; a refused SETUP is logged
and retried with the same backoff. The agent exits 0 when the server is gone, or
on SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import orjson

from lblab.backoff import jittered_backoff
from lblab.config import check_id, check_range, check_token
from lblab.errors import ConfigError
from lblab.files import AppendLog
from lblab.loadreport import REPORT_TOKEN_ENV, LoadReport
from lblab.procs import announce_ready, stop_on_signals
from lblab.servers.cpulimit import (
    CGROUP_CPU_ROOT,
    CGROUP_CPUACCT_ROOT,
    cgroup_share,
    process_cgroup,
)
from lblab.wire.auth import bearer_metadata
from lblab.wire.codec import NEED_DATA
from lblab.wire.connection import Connection, ConnectionFailed, PeerClosed
from lblab.wire.frames import RequestFnf, Setup
from lblab.wire.metadata import APPLICATION_JSON, COMPOSITE_METADATA
from lblab.wire_asyncio import within

log = logging.getLogger(__name__)

KEEPALIVE_MS = 2_000
MAX_LIFETIME_MS = 10_000
CONNECT_TIMEOUT_S = 2.0
BACKOFF_MIN_S = 0.1
BACKOFF_MAX_S = 2.0
MAX_SEND_BUFFER = 1 << 20
"""Bytes queued toward a balancer that does not read; past this, samples are not sent."""
PID_MAX = 1 << 22
"""Linux's largest pid (``PID_MAX_LIMIT``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentConfig:
    server: str
    report_to: tuple[tuple[str, int], ...]
    """Every balancer's agent port: each gets every report, on its own connection."""
    pid: int | None = None
    cgroup: str | None = None
    interval_s: float = 0.25
    out: Path | None = None
    allowance: float | None = None
    report_token: str | None = field(default=None, repr=False)
    """Sent in each connection's SETUP; None: none is sent."""

    def __post_init__(self) -> None:
        check_id(self.server, "--server")
        if not self.report_to:
            raise ConfigError("--report-to: give the balancer's agent port, HOST:PORT")
        if (self.pid is None) == (self.cgroup is None):
            raise ConfigError("give exactly one of --pid PID or --cgroup NAME to measure")
        if self.pid is not None:
            check_range("--pid", self.pid, minimum=1, maximum=PID_MAX)
        if not 0.01 <= self.interval_s <= 60:
            raise ConfigError(f"--interval {self.interval_s}: give seconds in 0.01..60")
        if self.allowance is not None:
            # As --cpu-quota: below a hundredth of a CPU a sample is noise times 100.
            check_range("--allowance", self.allowance, minimum=0.01, maximum=4096)
        if self.report_token is not None:
            check_token(self.report_token, "--report-token", REPORT_TOKEN_ENV)


class CpuSource(Protocol):
    def cpu_seconds(self) -> float | None:
        """Cumulative CPU seconds, or None once the server is gone."""


class PidSource:
    def __init__(self, pid: int) -> None:
        import psutil  # type: ignore[import-untyped]

        self._psutil = psutil
        try:
            self._proc = psutil.Process(pid)
        except psutil.NoSuchProcess:
            raise ConfigError(f"--pid {pid}: no such process") from None

    def cpu_seconds(self) -> float | None:
        psutil = self._psutil
        try:
            if self._proc.status() == psutil.STATUS_ZOMBIE:
                return None
            t = self._proc.cpu_times()
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            return None
        return t.user + t.system + t.children_user + t.children_system


class CgroupSource:
    def __init__(self, name: str) -> None:
        self._dir = CGROUP_CPUACCT_ROOT / name
        if not (self._dir / "cpuacct.usage").exists():
            raise ConfigError(f"--cgroup {name}: no cpuacct group at {self._dir}")

    def cpu_seconds(self) -> float | None:
        try:
            if not (self._dir / "cgroup.procs").read_text().strip():
                return None  # the group is empty: the server exited
            return int((self._dir / "cpuacct.usage").read_text()) / 1e9
        except OSError:
            return None  # the group was removed


def resolve_allowance(config: AgentConfig) -> float:
    """CPUs that count as 100 %: the flag, else the server's cgroup quota, else 1."""
    if config.allowance is not None:
        return config.allowance
    group = config.cgroup if config.cgroup is not None else process_cgroup(config.pid or 0)
    if group and (CGROUP_CPU_ROOT / group / "cpu.cfs_quota_us").exists():
        return cgroup_share(group) or 1.0
    return 1.0


class ReportLink:
    """One RSocket connection to the balancer's agent port, re-made with backoff.

    The connection's rules (SETUP, KEEPALIVEs, the balancer's max lifetime, stream ids)
    are ``lblab.wire.connection``'s; this moves its bytes over asyncio streams."""

    def __init__(self, host: str, port: int, server: str, token: str | None = None) -> None:
        self.host, self.port, self.server = host, port, server
        self._metadata = bearer_metadata(token) if token is not None else None
        self.sent = 0
        self.unsent = 0
        self.connects = 0
        self._writer: asyncio.StreamWriter | None = None
        self._rsocket: Connection | None = None
        self._rng = random.Random()

    def send(self, report: LoadReport) -> None:
        writer, rsocket = self._writer, self._rsocket
        if (
            writer is None
            or rsocket is None
            or writer.is_closing()
            or writer.transport.get_write_buffer_size() > MAX_SEND_BUFFER
        ):
            self.unsent += 1
            return
        rsocket.send(RequestFnf(stream_id=rsocket.next_stream_id(), data=report.to_json()))
        writer.write(rsocket.data_to_send())
        self.sent += 1

    async def run(self) -> None:
        """Keep a connection up until cancelled; a cancel always ends it (``within``)."""
        failures = 0
        while True:
            try:
                reader, writer = await within(
                    CONNECT_TIMEOUT_S, asyncio.open_connection(self.host, self.port)
                )
            except (OSError, TimeoutError) as exc:
                log.debug("balancer %s:%d unreachable: %s", self.host, self.port, exc)
                failures += 1
            else:
                failures = 0
                await self._serve(reader, writer)
            await asyncio.sleep(jittered_backoff(failures, BACKOFF_MIN_S, BACKOFF_MAX_S, self._rng))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        setup = Setup(
            keepalive_ms=KEEPALIVE_MS,
            max_lifetime_ms=MAX_LIFETIME_MS,
            metadata_mime=COMPOSITE_METADATA,
            data_mime=APPLICATION_JSON,
            metadata=self._metadata,
            data=orjson.dumps({"client": "lblab-agent", "server": self.server}),
        )
        loop = asyncio.get_running_loop()
        rsocket = Connection.connecting(setup, loop.time())
        writer.write(rsocket.data_to_send())
        self._writer, self._rsocket = writer, rsocket
        self.connects += 1
        log.info("reporting to %s:%d", self.host, self.port)
        ticks = asyncio.create_task(self._tick(rsocket, writer))
        try:
            await self._read(reader, writer, rsocket)
        except OSError as exc:
            log.info("connection to the balancer failed: %s", exc)
        finally:
            self._writer = self._rsocket = None
            ticks.cancel()
            writer.close()
        log.info("lost the balancer at %s:%d; reconnecting", self.host, self.port)

    async def _read(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, rsocket: Connection
    ) -> None:
        while data := await reader.read(65536):
            rsocket.receive_data(data)
            while (event := rsocket.next_event()) is not NEED_DATA:
                if isinstance(event, ConnectionFailed | PeerClosed):
                    writer.write(rsocket.data_to_send())
                    log.info("connection to the balancer ended: %s", event.message)
                    return
            writer.write(rsocket.data_to_send())

    async def _tick(self, rsocket: Connection, writer: asyncio.StreamWriter) -> None:
        """Our KEEPALIVEs when due; close when the balancer is silent beyond its lifetime."""
        loop = asyncio.get_running_loop()
        while not writer.is_closing():
            await asyncio.sleep(max(0.0, rsocket.next_tick_at - loop.time()))
            failed = rsocket.tick(loop.time())
            writer.write(rsocket.data_to_send())
            if failed is not None:
                log.info("closing the connection to the balancer: %s", failed.message)
                writer.close()


def run_agent(config: AgentConfig) -> int:
    source: CpuSource = (
        PidSource(config.pid) if config.pid is not None else CgroupSource(config.cgroup or "")
    )
    allowance = resolve_allowance(config)
    return asyncio.run(_run(config, source, allowance))


async def _run(config: AgentConfig, source: CpuSource, allowance: float) -> int:
    stop = stop_on_signals(asyncio.get_running_loop())
    links = [
        ReportLink(host, port, config.server, config.report_token)
        for host, port in config.report_to
    ]
    link_tasks = [asyncio.create_task(link.run()) for link in links]
    out = AppendLog(config.out, log) if config.out else None
    prev_cpu, prev_wall = source.cpu_seconds(), time.monotonic()
    announce_ready(
        "agent",
        server=config.server,
        report_to=",".join(f"{host}:{port}" for host, port in config.report_to),
        allowance=allowance,
        measures=f"pid {config.pid}" if config.pid is not None else f"cgroup {config.cgroup}",
    )
    samples = 0
    try:
        next_at = prev_wall + config.interval_s
        while prev_cpu is not None:
            try:
                await within(max(0.0, next_at - time.monotonic()), stop.wait())
                break
            except TimeoutError:
                pass
            cpu, wall = source.cpu_seconds(), time.monotonic()
            next_at = max(next_at + config.interval_s, wall)
            if cpu is None:
                break
            percent = 100.0 * (cpu - prev_cpu) / ((wall - prev_wall) * allowance)
            prev_cpu, prev_wall = cpu, wall
            t = time.time()
            if out is not None:  # a full disk drops the sample, counted; sampling goes on
                sample = {"t": t, "server": config.server, "cpu_percent": round(percent, 2)}
                out.append(orjson.dumps(sample) + b"\n", 1)
            report = LoadReport(
                server=config.server, source="agent", t=t, cpu_util=round(percent / 100, 4)
            )
            for link in links:
                link.send(report)
            samples += 1
        if not stop.is_set():
            log.info("server %s is gone; agent exits", config.server)
    finally:
        for task in link_tasks:
            task.cancel()
        await asyncio.gather(*link_tasks, return_exceptions=True)
        if out is not None:
            out.close()
    log.info(
        "agent for %s: %d samples, %d sent, %d not sent, %d connections",
        config.server,
        samples,
        sum(link.sent for link in links),
        sum(link.unsent for link in links),
        sum(link.connects for link in links),
    )
    return 0
