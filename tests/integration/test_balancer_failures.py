"""Failures through the live balancer: killed backends, draining backends, timeouts.

Real ``lblab server`` processes behind a real ``lblab balancer``; load from rsocket-py
clients. The rules under test (docs/DESIGN.md, "Reliability rules"): every request ends in a
response or an error within its deadline; a REJECTED request is replayed elsewhere, so a
draining server loses nothing; in-flight accounting returns to zero after errors.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import dataclass

import pytest
from balancer_testbed import (
    processes,
    rsocket_client,
    start_balancer,
    start_server,
    status_of,
    wait_for,
)
from rsocket.payload import Payload

from lblab.procs import stop

pytestmark = pytest.mark.slow

WORK = b'{"work_bytes": 200, "pad": ""}'
CLIENT_DEADLINE_S = 10.0
"""The client's own deadline: longer than the balancer's --request-timeout, so hitting
it means the balancer let a request hang."""


@dataclass
class Result:
    t_sent: float
    ok: bool
    error: str | None


async def load(port: int, stop_at: float, concurrency: int, results: list[Result]) -> None:
    """``concurrency`` request loops on one connection until ``stop_at`` (monotonic)."""
    async with rsocket_client(port) as client:

        async def loop() -> None:
            while time.monotonic() < stop_at:
                t = time.monotonic()
                try:
                    await asyncio.wait_for(
                        client.request_response(Payload(WORK)), CLIENT_DEADLINE_S
                    )
                    results.append(Result(t, True, None))
                except TimeoutError:
                    results.append(Result(t, False, "client deadline: the balancer let it hang"))
                except Exception as exc:  # the error the balancer sent, recorded
                    results.append(Result(t, False, str(exc)))

        await asyncio.gather(*(loop() for _ in range(concurrency)))


async def load_with_event(port, duration, concurrency, at, action):
    """Run load for ``duration`` s and call ``action()`` ``at`` s in; returns (results, t_action)."""
    results: list[Result] = []
    start = time.monotonic()
    task = asyncio.create_task(load(port, start + duration, concurrency, results))
    await asyncio.sleep(at)
    t_action = time.monotonic()
    await asyncio.get_running_loop().run_in_executor(None, action)
    await asyncio.wait_for(task, duration + CLIENT_DEADLINE_S + 5)
    return results, t_action


@pytest.mark.slow
def test_killed_backend_mid_load_fails_fast_then_recovers(tmp_path):
    servers = [start_server(f"s{i}", tmp_path, "--delay-ms", "20") for i in (1, 2, 3)]
    with processes(*servers) as kids:
        balancer = start_balancer(servers, tmp_path, "--strategy", "rr", "--request-timeout", "5s")
        kids.append(balancer)
        victim = servers[1]
        results, t_kill = asyncio.run(
            load_with_event(
                balancer.ready["port"], 2.5, 24, 0.8, lambda: os.kill(victim.pid, signal.SIGKILL)
            )
        )
        assert not [r for r in results if r.error and "client deadline" in r.error]
        failed = [r for r in results if not r.ok]
        assert all("backend s2 connection lost" in (r.error or "") for r in failed), failed[:3]
        later = [r for r in results if r.t_sent > t_kill + 0.5]
        assert len(later) > 50 and all(r.ok for r in later)
        status = wait_for(
            lambda: (s := status_of(balancer))["outstanding"] == 0 and s, 5, "inflight back to 0"
        )
        before_restart_picks = {b["id"]: b["picks"] for b in status["backends"]}["s2"]
        assert [b["inflight"] for b in status["backends"]] == [0, 0, 0]
        assert {b["id"]: b["state"] for b in status["backends"]}["s2"] == "down"

        # The same server back on its port: the balancer reconnects and it rejoins.
        kids.append(start_server("s2", tmp_path, "--port", str(victim.ready["port"])))
        wait_for(
            lambda: {b["id"]: b["state"] for b in status_of(balancer)["backends"]}["s2"] == "up",
            10,
            "s2 reconnected",
        )
        results, _ = asyncio.run(load_with_event(balancer.ready["port"], 0.5, 6, 0.1, lambda: None))
        assert results and all(r.ok for r in results)
        picks = {b["id"]: b["picks"] for b in status_of(balancer)["backends"]}
        assert picks["s2"] > before_restart_picks


@pytest.mark.slow
def test_draining_backend_loses_no_request(tmp_path):
    servers = [start_server(f"s{i}", tmp_path, "--delay-ms", "15") for i in (1, 2, 3)]
    with processes(*servers) as kids:
        balancer = start_balancer(servers, tmp_path, "--strategy", "rr")
        kids.append(balancer)
        victim = servers[2]
        results, _ = asyncio.run(
            load_with_event(balancer.ready["port"], 2.5, 24, 0.8, lambda: stop(victim, timeout=8))
        )
        assert victim.popen.returncode == 0  # it drained cleanly
        failed = [r for r in results if not r.ok]
        assert not failed, f"{len(failed)} of {len(results)} failed, e.g. {failed[:3]}"
        assert len(results) > 200
        status = status_of(balancer)
        assert status["outstanding"] == 0
        assert status["replays"] > 0  # the draining server's REJECTED answers were replayed
        assert {b["id"]: b["state"] for b in status["backends"]}["s3"] == "down"


def test_timeout_answers_the_client_and_cancels_the_backend_stream(tmp_path):
    slow = start_server("s1", tmp_path, "--delay-ms", "1500")
    with processes(slow) as kids:
        balancer = start_balancer([slow], tmp_path, "--request-timeout", "300ms")
        kids.append(balancer)

        async def go():
            async with rsocket_client(balancer.ready["port"]) as client:
                t = time.monotonic()
                with pytest.raises(Exception, match=r"timed out after 0\.3 s") as info:
                    await asyncio.wait_for(client.request_response(Payload(WORK)), 5)
                return time.monotonic() - t, info

        elapsed, _ = asyncio.run(go())
        assert 0.25 < elapsed < 1.0
        status = status_of(balancer)
        assert status["outstanding"] == 0 and status["timeouts"] == 1
        assert status["backends"][0]["errors"] == 1


def test_no_backend_available_is_rejected_at_once(tmp_path):
    server = start_server("s1", tmp_path)
    with processes(server) as kids:
        balancer = start_balancer([server], tmp_path)
        kids.append(balancer)
        stop(server, timeout=8)
        wait_for(lambda: status_of(balancer)["backends"][0]["state"] == "down", 5, "s1 down")

        async def go():
            async with rsocket_client(balancer.ready["port"]) as client:
                t = time.monotonic()
                with pytest.raises(Exception, match="no backend available"):
                    await asyncio.wait_for(client.request_response(Payload(WORK)), 5)
                return time.monotonic() - t

        assert asyncio.run(go()) < 0.5
