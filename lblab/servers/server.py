"""One JSON-work server process: config, CPU limit, listener, readiness, drain on SIGTERM.

SIGUSR1 applies a runtime change (the ``slow``, ``fail``, ``reject``, ``cold`` and
``capacity`` timeline events, ``servers/slowdown.py``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from dataclasses import dataclass

from lblab.admission import (
    MAX_CONNECTIONS,
    MAX_PENDING_SETUP,
    SETUP_TIMEOUT_S,
    check_limits,
)
from lblab.config import check_id, check_range
from lblab.errors import ConfigError
from lblab.procs import announce_ready, stop_on_signals
from lblab.servers.cpulimit import CpuLimit, LimitMethod, apply_cpu_limit
from lblab.servers.defaults import DEFAULT_MAX_INFLIGHT, DRAIN_TIMEOUT_S
from lblab.servers.protocol import ServerConnection
from lblab.servers.service import DELAY_DISTS, WorkService
from lblab.servers.slowdown import Control, read_control
from lblab.servers.state import ServerState
from lblab.wire.codes import ErrorCode
from lblab.wire_asyncio import within

log = logging.getLogger(__name__)

CLOSE_GRACE_S = 1.0
"""How long the closing ERROR frames get to reach the peers before the process exits."""

MAX_INFLIGHT = 1_000_000
"""Most requests a server admits at once; LEASE frames carry free slots in 31 bits."""
MAX_WORKERS = 1024
"""Most service slots (threads; CPU work shares one core, so more only cost memory)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ServerConfig:
    id: str
    port: int = 7001
    host: str = "127.0.0.1"
    cpu_quota: float | None = None
    cpu_limit: LimitMethod = LimitMethod.AUTO
    max_inflight: int = DEFAULT_MAX_INFLIGHT
    workers: int = 1
    delay_ms: float = 0.0
    delay_dist: str = "fixed"
    drain_timeout_s: float = DRAIN_TIMEOUT_S
    setup_timeout_s: float = SETUP_TIMEOUT_S
    max_connections: int = MAX_CONNECTIONS
    max_pending_setup: int = MAX_PENDING_SETUP

    def __post_init__(self) -> None:
        check_id(self.id, "--id")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"--port {self.port} is not a TCP port (0..65535; 0 picks one)")
        if self.cpu_quota is not None:
            check_range("--cpu-quota", self.cpu_quota, minimum=0.01, maximum=os.cpu_count() or 1)
        check_range("--max-inflight", self.max_inflight, minimum=1, maximum=MAX_INFLIGHT)
        if not 1 <= self.workers <= min(self.max_inflight, MAX_WORKERS):
            raise ConfigError(
                f"--workers {self.workers} must be in 1..--max-inflight ({self.max_inflight}) "
                f"and at most {MAX_WORKERS}"
            )
        check_range("--delay-ms", self.delay_ms, minimum=0, maximum=3_600_000)
        if self.delay_dist not in DELAY_DISTS:
            raise ConfigError(
                f"--delay-dist {self.delay_dist!r}: use one of {', '.join(DELAY_DISTS)} "
                "(fixed: every request sleeps --delay-ms; exp: exponential with that mean)"
            )
        check_range("--drain-timeout", self.drain_timeout_s, above=0, maximum=3600)
        check_limits(self.max_connections, self.max_pending_setup, self.setup_timeout_s)


def run_server(config: ServerConfig) -> int:
    """Serve until SIGTERM/SIGINT, drain, and return the exit code (0: drained cleanly)."""
    import uvloop

    limit = apply_cpu_limit(config.cpu_quota, config.id, config.cpu_limit)
    try:
        return uvloop.run(_serve(config, limit))
    finally:
        limit.release()


async def _serve(config: ServerConfig, limit: CpuLimit) -> int:
    loop = asyncio.get_running_loop()
    service = WorkService(
        config.workers, config.delay_ms, limit.duty_cycle, config.delay_dist, seed=config.id
    )
    state = ServerState(
        config.id,
        config.max_inflight,
        service,
        setup_timeout_s=config.setup_timeout_s,
        max_connections=config.max_connections,
        max_pending_setup=config.max_pending_setup,
    )
    try:
        listener = await loop.create_server(
            lambda: ServerConnection(state), config.host, config.port, reuse_address=True
        )
    except OSError as exc:
        raise ConfigError(f"cannot listen on {config.host}:{config.port}: {exc}") from exc
    stop = stop_on_signals(loop)
    loop.add_signal_handler(signal.SIGUSR1, _on_control, service, state, limit)
    port = listener.sockets[0].getsockname()[1]
    log.info(
        "server %s listening on %s:%d (workers %d, max-inflight %d, delay %.1f ms %s, "
        "cpu limit %s)",
        config.id,
        config.host,
        port,
        config.workers,
        config.max_inflight,
        config.delay_ms,
        config.delay_dist,
        limit.method,
    )
    announce_ready(
        "server",
        id=config.id,
        port=port,
        cpu_limit=str(limit.method),
        cgroup=limit.cgroup,
        cpu_quota=config.cpu_quota,
        workers=config.workers,
        max_inflight=config.max_inflight,
        delay_ms=config.delay_ms,
        delay_dist=config.delay_dist,
    )
    await stop.wait()
    log.info("draining: %d in flight, new requests are rejected", state.inflight)
    state.begin_drain()
    code = 0
    try:
        await within(config.drain_timeout_s, state.drained.wait())
    except TimeoutError:
        log.warning(
            "drain deadline of %.1fs passed with %d still in flight; exiting",
            config.drain_timeout_s,
            state.inflight,
        )
        code = 1
    listener.close()
    for conn in list(state.connections):
        conn.close_with_error(ErrorCode.CONNECTION_CLOSE, f"server {config.id} shut down")
    service.shutdown()
    await _closed(state, CLOSE_GRACE_S)
    log.info(
        "server %s stopped: %d served, %d rejected, %d bad requests, %d failed, %d probes",
        config.id,
        state.completed,
        state.rejected,
        state.bad_requests,
        state.failed,
        state.probes,
    )
    return code


def _on_control(service: WorkService, state: ServerState, limit: CpuLimit) -> None:
    """SIGUSR1: apply the changes the harness wrote (``servers/slowdown.py``)."""
    control = read_control(os.getpid())
    if control is not None:
        apply_control(control, service, state, limit)


def apply_control(
    control: Control, service: WorkService, state: ServerState, limit: CpuLimit
) -> None:
    """Each change ``control`` gives, from now on (on the event loop)."""
    if control.slow is not None:
        service.slowdown = control.slow
        log.info("slowdown: x%g + %g ms per request", control.slow.factor, control.slow.add_ms)
    if control.fail is not None:
        service.failing = control.fail
        log.info("failing: %g of requests, %g ms each", control.fail.rate, control.fail.delay_ms)
    if control.reject is not None:
        state.limiter = control.reject.bucket(time.monotonic())
        log.info("rate limit: %g requests/s (0: none)", control.reject.limit)
    if control.cold is not None:
        cold = control.cold.starting(time.perf_counter())
        service.cold = None if cold.factor == 1.0 else cold
        log.info("cold: x%g easing to x1 over %g s", cold.factor, cold.duration_s)
    if control.cpu_quota is not None:
        try:
            limit.set_share(control.cpu_quota)
        except (ConfigError, OSError) as exc:
            log.warning("capacity change to %g CPU ignored: %s", control.cpu_quota, exc)


async def _closed(state: ServerState, timeout: float) -> None:
    """Wait until every connection is gone, or ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while state.connections and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
