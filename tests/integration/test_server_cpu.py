"""--cpu-quota is real: a saturated 0.25-CPU server uses ~25 % of a CPU (psutil on its pid)
and serves a fraction of an unlimited server's rate, by cgroup and by duty cycle.

Figures are loose on purpose: the machine has 2 cores shared with other test runs.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from lblab.procs import Child, lblab_command, spawn, stop
from lblab.servers.cpulimit import CGROUP_CPU_ROOT, cgroup_available
from lblab.wire.codec import NEED_DATA, FrameDecoder, encode_frame
from lblab.wire.frames import Payload, RequestResponse, Setup
from lblab.wire.metadata import APPLICATION_JSON, COMPOSITE_METADATA

# quiet: a limited server's CPU and rate are asked of a machine that gives it its quota;
# beside the parallel pass a 0.25 quota got 0.149 of a CPU.
pytestmark = [pytest.mark.slow, pytest.mark.quiet]

QUOTA = 0.25
CONCURRENCY = 4
WARMUP_S = 0.4
WINDOW_S = 2.0
BODY = json.dumps({"work_bytes": 100_000, "pad": ""}).encode()  # ~3 ms of CPU unthrottled


def cpu_seconds(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


async def saturate(port: int, pid: int) -> tuple[float, float]:
    """Keep CONCURRENCY requests outstanding; return (responses/s, CPUs used) over WINDOW_S."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    setup = Setup(
        keepalive_ms=30_000,
        max_lifetime_ms=90_000,
        metadata_mime=COMPOSITE_METADATA,
        data_mime=APPLICATION_JSON,
    )
    writer.write(encode_frame(setup))
    decoder, proc, next_sid = FrameDecoder(), psutil.Process(pid), 1

    def send() -> None:
        nonlocal next_sid
        writer.write(encode_frame(RequestResponse(stream_id=next_sid, data=BODY)))
        next_sid += 2

    for _ in range(CONCURRENCY):
        send()
    warm_until = time.monotonic() + WARMUP_S
    started: float | None = None
    done, cpu0, now = 0, 0.0, 0.0
    while started is None or now - started < WINDOW_S:
        data = await asyncio.wait_for(reader.read(65536), 10)
        assert data, "the server closed the connection"
        decoder.receive_data(data)
        while (frame := decoder.next_frame()) is not NEED_DATA:
            assert isinstance(frame, Payload), frame
            done += 1
            send()
        now = time.monotonic()
        if started is None and now >= warm_until:
            started, cpu0, done = now, cpu_seconds(proc), 0
    cpus = (cpu_seconds(proc) - cpu0) / (now - started)
    writer.close()
    return done / (now - started), cpus


def start(tmp_path: Path, name: str, *args: str) -> Child:
    return spawn(
        name,
        lblab_command("server", "--id", name, "--port", "0", "--max-inflight", "64", *args),
        log_path=tmp_path / f"{name}.log",
    )


@pytest.fixture
def unlimited(tmp_path: Path) -> Iterator[Child]:
    """A server without a quota, saturated alongside the limited one as its reference."""
    child = start(tmp_path, "free")
    try:
        yield child
    finally:
        stop(child)


Measured = tuple[tuple[float, float], tuple[float, float]]


def saturate_both(limited: Child, free: Child) -> Measured:
    """Saturate the limited server and the unlimited reference in the same window.

    This VM's throughput per CPU-second drifts by up to 1.8x between windows seconds
    apart (an unlimited server measured 153-287 responses/s at 0.98 CPU, 2026-11-23), so
    a reference measured in another window cannot be compared with; one measured at the
    same time shares the drift.
    """

    async def both() -> Measured:
        limited_run = saturate(limited.ready["port"], limited.pid)
        free_run = saturate(free.ready["port"], free.pid)
        return await asyncio.gather(limited_run, free_run)

    return asyncio.run(both())


def check_limited(measured: Measured) -> None:
    """The quota holds, and the rate follows the CPU.

    On an idle machine the unlimited server gets a whole CPU and the limited one serves
    about a quarter of its rate. The rate per CPU-second is lower under a quota than
    without: a throttled server resumes on cold caches every 10 ms period. Measured side
    by side on a quiet machine (2026-11-23) the ratio was 0.57-0.85 for the cgroup; a
    server that burnt its quota without serving (spinning, waiting on the wrong clock)
    would be far below 0.45, one whose CPU is mismeasured far above 1.6.
    """
    (rate, cpus), (free_rate, free_cpus) = measured
    assert 0.15 <= cpus <= 0.30, f"{cpus:.3f} CPU used under a {QUOTA} quota"
    ratio = (rate / cpus) / (free_rate / free_cpus)
    assert 0.45 <= ratio <= 1.6, (
        f"{rate:.0f}/s on {cpus:.2f} CPU vs {free_rate:.0f}/s on {free_cpus:.2f} CPU unlimited"
    )
    if free_cpus >= 0.8:  # a whole CPU for the unlimited one: the 1/4 shows directly
        assert 0.12 <= rate / free_rate <= 0.4


def test_duty_cycle_limits_cpu_and_rate(tmp_path: Path, unlimited: Child) -> None:
    child = start(tmp_path, "dc", "--cpu-quota", str(QUOTA), "--cpu-limit", "duty-cycle")
    try:
        assert child.ready["cpu_limit"] == "duty-cycle" and child.ready["cgroup"] is None
        measured = saturate_both(child, unlimited)
    finally:
        stop(child)
    check_limited(measured)


@pytest.mark.root
@pytest.mark.skipif(not cgroup_available(), reason="needs root and cgroup v1 cpu")
def test_cgroup_limits_cpu_and_rate_and_the_agent_reads_100_percent(
    tmp_path: Path, unlimited: Child
) -> None:
    child = start(tmp_path, "cg", "--cpu-quota", str(QUOTA))
    agent: Child | None = None
    samples = tmp_path / "cpu.jsonl"
    try:
        assert child.ready["cpu_limit"] == "cgroup"
        group = CGROUP_CPU_ROOT / child.ready["cgroup"]
        assert (group / "cpu.cfs_quota_us").read_text().strip() == "2500"
        assert (group / "cpu.cfs_period_us").read_text().strip() == "10000"
        agent = spawn(
            "agent",
            lblab_command(
                "agent",
                "--server", "cg",
                "--cgroup", child.ready["cgroup"],
                "--report-to", "127.0.0.1:9",  # nobody listens: the agent keeps sampling
                "--out", str(samples),
            ),
            log_path=tmp_path / "agent.log",
        )  # fmt: skip
        assert agent.ready["allowance"] == QUOTA  # learnt from the cgroup
        t0 = time.time()
        measured = saturate_both(child, unlimited)
        t1 = time.time()
    finally:
        if agent is not None:
            stop(agent)
        stop(child)
    check_limited(measured)
    assert not group.exists(), "the server must remove its cgroup on exit"
    window = [
        s["cpu_percent"]
        for s in map(json.loads, samples.read_text().splitlines())
        if t0 + WARMUP_S + 0.3 <= s["t"] <= t1
    ]
    assert len(window) >= 4
    assert 70 <= statistics.median(window) <= 115, window
