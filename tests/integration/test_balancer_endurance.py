"""Endurance through the live balancer: a soak, connection churn, the balancer replaced.

Real ``lblab server`` processes behind a real ``lblab balancer`` on loopback; the load
comes from lblab's blocking RSocket client (the one the Locust users drive), one thread
and one connection per client, every loop bounded in requests and in time. What must
hold (docs/DESIGN.md, "Reliability rules"): under a steady load the balancer's memory
stays bounded and its open files come back to where they were; hundreds of short
connections beside a long-lived client cost that client nothing; a balancer stopped
under load and replaced on the same port leaves no request hanging and no request
held on a server.

A server's in-flight count is read from the server itself: a request sent straight to
it is answered with ``inflight``, the requests it still holds besides this one.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import psutil
import pytest
from balancer_testbed import processes, start_balancer, start_server, status_of, wait_for

from lblab.errors import LblabError
from lblab.loadtests.rsocket_client import RSocketClient
from lblab.procs import Child, stop
from lblab.scenarios import request_body
from lblab.wire.metadata import request_metadata

pytestmark = pytest.mark.slow

WORK = request_body(100, 1_000)
ROUTE = request_metadata("work")
REQUEST_TIMEOUT_S = 1.0
"""The balancer's ``--request-timeout``: every request is answered or failed by then."""
CLIENT_DEADLINE_S = 5.0
"""The client's own deadline, well past the balancer's: hitting it means a request hung."""
HUNG_S = REQUEST_TIMEOUT_S + 1.0
"""Longer than this without an answer or an error is a hung request (1 s of slack for a
busy 2-core machine)."""
SERVER_ARGS = ("--delay-ms", "2", "--workers", "4")
"""2 ms of work in 4 slots: 2,000 req/s a server, so a few hundred req/s never queue."""
BALANCER_ARGS = ("--strategy", "rr", "--request-timeout", f"{REQUEST_TIMEOUT_S:g}s")


@dataclass(frozen=True, slots=True)
class Sent:
    t_sent: float  # monotonic
    elapsed: float
    error: str | None  # None: answered


def paced_client(
    port: int, rate: float, start: float, stop_at: float | Callable[[], float], out: list[Sent]
) -> None:
    """One connection sending ``rate`` requests a second, due at ``start + k / rate``,
    until ``stop_at`` (monotonic; a callable is asked before each request); a late
    request goes at once. A failed request is recorded and the next one reconnects."""
    client = RSocketClient("127.0.0.1", port)
    end = stop_at if callable(stop_at) else lambda: stop_at
    try:
        for k in itertools.count():
            if start + k / rate >= end():
                break
            wait = start + k / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            t = time.monotonic()
            try:
                client.request_response(WORK, ROUTE, CLIENT_DEADLINE_S)
                error = None
            except LblabError as exc:  # timeout, lost connection, an ERROR frame
                error = f"{type(exc).__name__}: {exc}"
            out.append(Sent(t, time.monotonic() - t, error))
    finally:
        client.close()


def short_connections(port: int, count: int, stop_at: float, out: list[str | None]) -> None:
    """``count`` connections (until ``stop_at`` at most), each SETUP, one request, close;
    ``out`` gets each one's error (None: answered)."""
    for _ in range(count):
        if time.monotonic() > stop_at:
            return
        client = RSocketClient("127.0.0.1", port)
        try:
            client.request_response(WORK, ROUTE, CLIENT_DEADLINE_S)
            out.append(None)
        except LblabError as exc:
            out.append(f"{type(exc).__name__}: {exc}")
        finally:
            client.close()


def run_threads(targets: list[Callable[[], None]], deadline_s: float) -> None:
    """Run each target in a thread and join them all within ``deadline_s``."""
    threads = [threading.Thread(target=t, daemon=True) for t in targets]
    for t in threads:
        t.start()
    end = time.monotonic() + deadline_s
    for t in threads:
        t.join(max(0.0, end - time.monotonic()))
    assert not any(t.is_alive() for t in threads), f"load still running after {deadline_s} s"


def footprint(child: Child) -> tuple[float, int]:
    """The process's resident memory (MiB) and open file descriptors."""
    proc = psutil.Process(child.pid)
    return proc.memory_info().rss / 2**20, proc.num_fds()


def server_inflight(server: Child) -> int:
    """The requests the server holds, asked of the server itself (not the balancer)."""
    client = RSocketClient("127.0.0.1", server.ready["port"])
    try:
        response = client.request_response(request_body(0, 0), None, CLIENT_DEADLINE_S)
    finally:
        client.close()
    return int(orjson.loads(response.data)["inflight"])


def servers_idle(servers: list[Child]) -> bool:
    return all(server_inflight(s) == 0 for s in servers)


def fds_back_to(child: Child, baseline: int) -> bool:
    return footprint(child)[1] <= baseline


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


@contextlib.contextmanager
def endurance_testbed(log_dir: Path) -> Iterator[tuple[list[Child], Child, list[Child]]]:
    """Three servers behind an ``rr`` balancer; (servers, balancer, every child to stop)."""
    with processes() as kids:
        servers = [start_server(f"s{i}", log_dir, *SERVER_ARGS) for i in (1, 2, 3)]
        kids.extend(servers)
        balancer = start_balancer(servers, log_dir, *BALANCER_ARGS)
        kids.append(balancer)
        yield servers, balancer, kids


@pytest.mark.slow
def test_soak_keeps_memory_bounded_and_files_at_baseline(tmp_path: Path) -> None:
    """16 s at 300 req/s: RSS grows little after the warm-up, fds return, nothing held."""
    with endurance_testbed(tmp_path) as (servers, balancer, _):
        port = balancer.ready["port"]
        _, fds_before = footprint(balancer)
        sent: list[Sent] = []
        start = time.monotonic()
        seconds, clients, rate = 16.0, 4, 75.0
        stop_at = start + seconds
        warm: list[float] = []
        timer = threading.Timer(4.0, lambda: warm.append(footprint(balancer)[0]))
        timer.start()
        run_threads(
            [lambda: paced_client(port, rate, start, stop_at, sent) for _ in range(clients)],
            seconds + CLIENT_DEADLINE_S + 10,
        )
        timer.join(1)
        rss_end, _ = footprint(balancer)
        failed = [s for s in sent if s.error]
        assert not failed, f"{len(failed)} of {len(sent)} failed, e.g. {failed[:3]}"
        assert len(sent) > 0.8 * seconds * clients * rate
        assert max(s.elapsed for s in sent) < HUNG_S
        grown = rss_end - warm[0]
        assert grown < 10, f"balancer RSS grew {grown:.1f} MiB after the warm-up"
        wait_for(lambda: fds_back_to(balancer, fds_before), 5, "the balancer's fds at baseline")
        wait_for(lambda: servers_idle(servers), 5, "every server's in-flight count at 0")
        assert status_of(balancer)["outstanding"] == 0


@pytest.mark.slow
def test_short_connections_cost_a_long_lived_client_nothing(tmp_path: Path) -> None:
    """Two threads of up to 300 short connections each beside one long-lived client at
    100 req/s."""
    with endurance_testbed(tmp_path) as (servers, balancer, _):
        port = balancer.ready["port"]
        _, fds_before = footprint(balancer)
        steady: list[Sent] = []
        short: list[str | None] = []
        start = time.monotonic()
        stop_at = start + 8.0
        churn_from = start + 2.0  # the first 2 s are the long-lived client alone

        def churn() -> None:
            time.sleep(max(0.0, churn_from - time.monotonic()))
            short_connections(port, 300, stop_at, short)

        run_threads(
            [lambda: paced_client(port, 100.0, start, stop_at, steady), churn, churn],
            8.0 + CLIENT_DEADLINE_S + 10,
        )
        failed = [s for s in steady if s.error]
        assert not failed, f"{len(failed)} of {len(steady)} failed, e.g. {failed[:3]}"
        alone = [s.elapsed for s in steady if s.t_sent < churn_from]
        beside = [s.elapsed for s in steady if s.t_sent >= churn_from]
        assert len(beside) > 300
        assert p99(beside) < max(0.25, 5 * p99(alone)), (
            f"p99 {1000 * p99(beside):.0f} ms beside the churn, {1000 * p99(alone):.0f} ms alone"
        )
        assert len(short) > 300, f"only {len(short)} short connections were made"
        assert not [e for e in short if e], [e for e in short if e][:3]
        wait_for(lambda: fds_back_to(balancer, fds_before), 5, "the balancer's fds at baseline")
        wait_for(lambda: servers_idle(servers), 5, "every server's in-flight count at 0")


@pytest.mark.slow
def test_a_balancer_replaced_under_load_leaves_nothing_hanging(tmp_path: Path) -> None:
    """Stop the balancer 1.5 s into the load and start a new one on the same ports."""
    with endurance_testbed(tmp_path) as (servers, old, kids):
        port, admin_port = old.ready["port"], old.ready["admin_port"]
        sent: list[Sent] = []
        replaced: list[float] = []

        def replace() -> None:
            time.sleep(1.5)
            stop(old, timeout=10)
            same_ports = ("--port", str(port), "--admin-port", str(admin_port))
            kids.append(start_balancer(servers, tmp_path, *BALANCER_ARGS, *same_ports, name="new"))
            replaced.append(time.monotonic())

        start = time.monotonic()

        def stop_at() -> float:
            """5 s of load, and at least 2 s of it through the new balancer (it may take
            seconds to start on a busy machine); 15 s at most if it never starts."""
            return max(start + 5.0, replaced[0] + 2.0) if replaced else start + 15.0

        run_threads(
            [lambda: paced_client(port, 50.0, start, stop_at, sent) for _ in range(6)] + [replace],
            15.0 + CLIENT_DEADLINE_S + 20,
        )
        assert replaced, "the new balancer did not start"
        new = kids[-1]
        assert new.ready["port"] == port
        hung = [s for s in sent if s.elapsed >= HUNG_S]
        assert not hung, f"{len(hung)} requests took longer than {HUNG_S} s, e.g. {hung[:3]}"
        failed = [s for s in sent if s.error]
        # The stopping balancer refuses what comes after its SIGTERM (REJECTED: not
        # processed, retry elsewhere); the rest is the gap until the new one listens.
        stopping = "balancer/rejected: the balancer is stopping"
        assert all(
            "ConnectionLost" in (s.error or "") or stopping in (s.error or "") for s in failed
        ), failed[:5]
        after = [s for s in sent if s.t_sent > replaced[0] + 0.5]
        assert len(after) > 100 and not [s for s in after if s.error], after[:3]
        wait_for(lambda: servers_idle(servers), 5, "every server's in-flight count at 0")
        assert status_of(new)["outstanding"] == 0
