"""Failure semantics through the live balancer: what counts against a backend, and what not.

Real ``lblab server`` processes behind a real ``lblab balancer``, load from rsocket-py
clients. The rules under test (``balancer/pool.py``, ``balancer/health.py``):

- overload (servers answering REJECTED at ``--max-inflight``) is replayed elsewhere and
  never ejects a backend, so the pool keeps serving at the servers' capacity;
- an APPLICATION_ERROR about the client's own request ejects nothing;
- a hung backend (SIGSTOP) and a backend 150 times slower than the rest are ejected by
  missed keepalives and timeouts, new requests go elsewhere, no request waits past its
  deadline, and the hung one returns through slow start after SIGCONT;
- every error a client sees names its origin (``lblab/failures.py``).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import dataclass

import orjson
import pytest
from balancer_testbed import (
    processes,
    rsocket_client,
    start_balancer,
    start_server,
    status_of,
    wait_for,
)
from rsocket.exceptions import RSocketProtocolError
from rsocket.payload import Payload

from lblab.failures import classify_error
from lblab.wire.codes import ErrorCode

pytestmark = pytest.mark.slow

WORK = b'{"work_bytes": 200, "pad": ""}'
BAD_WORK = b'{"work_bytes": -5, "pad": ""}'


@dataclass
class Result:
    t_sent: float
    elapsed: float
    server: str | None
    error: str | None
    code: int | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


async def load(
    port: int, duration: float, concurrency: int, deadline_s: float, body: bytes = WORK
) -> list[Result]:
    """``concurrency`` request loops on one connection for ``duration`` seconds."""
    results: list[Result] = []
    stop_at = time.monotonic() + duration
    async with rsocket_client(port) as client:

        async def loop() -> None:
            while time.monotonic() < stop_at:
                t = time.monotonic()
                try:
                    response = await asyncio.wait_for(
                        client.request_response(Payload(body)), deadline_s
                    )
                    server = orjson.loads(response.data)["server"]
                    results.append(Result(t, time.monotonic() - t, server, None))
                except TimeoutError:
                    results.append(Result(t, time.monotonic() - t, None, "client deadline"))
                except RSocketProtocolError as exc:  # an ERROR frame other than APPLICATION_ERROR
                    code, message = int(exc.error_code), exc.data or ""
                    results.append(Result(t, time.monotonic() - t, None, message, code))
                except RuntimeError as exc:  # rsocket-py's APPLICATION_ERROR
                    code = ErrorCode.APPLICATION_ERROR
                    results.append(Result(t, time.monotonic() - t, None, str(exc), code))

        await asyncio.gather(*(loop() for _ in range(concurrency)))
    return results


def backends(balancer) -> dict[str, dict]:
    return {b["id"]: b for b in status_of(balancer)["backends"]}


@pytest.mark.quiet  # asks 3/4 of the servers' 600 req/s: beside the parallel pass it got 440
def test_overload_is_replayed_and_ejects_nothing(tmp_path):
    """30 concurrent requests on 3 servers that admit 4 each (the issue's case: before,
    every backend was ejected 3 times and 37 requests were served in 4 s)."""
    capacity_per_server = 4 / 0.020  # --max-inflight 4, 20 ms each
    servers = [
        start_server(f"s{i}", tmp_path, "--max-inflight", "4", "--workers", "4", "--delay-ms", "20")
        for i in (1, 2, 3)
    ]
    with processes(*servers) as kids:
        balancer = start_balancer(servers, tmp_path, "--strategy", "rr")
        kids.append(balancer)
        duration = 4.0
        results = asyncio.run(load(balancer.ready["port"], duration, 30, 10.0))
        ok = [r for r in results if r.ok]
        no_backend = [r for r in results if r.error and "no backend available" in r.error]
        state = backends(balancer)
        assert [b["ejections"] for b in state.values()] == [0, 0, 0], state
        assert [b["state"] for b in state.values()] == ["up", "up", "up"]
        assert len(no_backend) < 0.01 * len(results), (len(no_backend), len(results))
        rate = len(ok) / duration
        # At the servers' capacity: measured 92 % of it at load average 1.5 on 2 cores
        # (the bug: 9 req/s); 75 % leaves room for a busier machine.
        assert rate > 0.75 * 3 * capacity_per_server, rate
        assert {r.server for r in ok} == {"s1", "s2", "s3"}
        failed = [r for r in results if not r.ok]
        # What still fails was refused by the servers on every try: overload, from the server.
        assert all(
            classify_error(r.code or 0, r.error or "") == ("rejected", "server") for r in failed
        )
        assert status_of(balancer)["outstanding"] == 0


def test_a_clients_bad_requests_eject_no_backend(tmp_path):
    servers = [start_server(f"s{i}", tmp_path) for i in (1, 2)]
    with processes(*servers) as kids:
        balancer = start_balancer(servers, tmp_path, "--strategy", "first", "--eject-after", "3")
        kids.append(balancer)
        bad = asyncio.run(load(balancer.ready["port"], 1.0, 2, 5.0, body=BAD_WORK))
        assert len(bad) > 20 and not any(r.ok for r in bad)
        assert all(r.code == ErrorCode.APPLICATION_ERROR for r in bad)
        assert all("work_bytes must be >= " in (r.error or "") for r in bad), bad[:2]
        assert all(
            classify_error(r.code or 0, r.error or "") == ("application", "server") for r in bad
        )
        s1 = backends(balancer)["s1"]
        assert (s1["state"], s1["ejections"], s1["faults"]) == ("up", 0, 0)
        assert s1["errors"] == len(bad)
        good = asyncio.run(load(balancer.ready["port"], 0.3, 2, 5.0))
        assert good and {r.server for r in good} == {"s1"}  # `first` still sends to s1


@pytest.mark.slow
def test_a_hung_backend_is_ejected_and_comes_back_after_sigcont(tmp_path):
    servers = [start_server(f"s{i}", tmp_path, "--delay-ms", "10") for i in (1, 2, 3)]
    with processes(*servers) as kids:
        balancer = start_balancer(
            servers, tmp_path, "--strategy", "rr", "--request-timeout", "1s", "--eject-base", "1s"
        )
        kids.append(balancer)
        victim = servers[1]
        port = balancer.ready["port"]

        async def scenario() -> tuple[list[Result], float]:
            task = asyncio.create_task(load(port, 7.0, 6, 3.0))
            await asyncio.sleep(1.0)
            t_stop = time.monotonic()
            os.kill(victim.pid, signal.SIGSTOP)
            return await asyncio.wait_for(task, 20), t_stop

        try:
            results, t_stop = asyncio.run(scenario())
            state = backends(balancer)
        finally:
            os.kill(victim.pid, signal.SIGCONT)
        # No request waits past the balancer's deadline (1 s, ticks of 50 ms).
        assert max(r.elapsed for r in results) < 1.5, max(r.elapsed for r in results)
        assert not [r for r in results if r.error == "client deadline"]
        failed = [r for r in results if not r.ok]
        assert failed and all("balancer/timeout" in (r.error or "") for r in failed)
        assert all("backend s2" in (r.error or "") for r in failed)
        assert all(classify_error(r.code or 0, r.error or "")[1] == "balancer" for r in failed)
        # Detected within the hung rule (3 s of silence) or by consecutive timeouts; then
        # nothing new goes to s2: every late request succeeds.
        late = [r for r in results if r.t_sent > t_stop + 4.0]
        assert len(late) > 50 and all(r.ok for r in late), [r for r in late if not r.ok][:3]
        assert state["s2"]["ejections"] >= 1 and state["s2"]["state"] == "down"  # held out
        assert state["s1"]["ejections"] == state["s3"]["ejections"] == 0

        # SIGCONT: it answers again, its ejection runs out, slow start eases it back in.
        picks_before = backends(balancer)["s2"]["picks"]
        wait_for(lambda: backends(balancer)["s2"]["state"] == "up", 40, "s2 back up")
        after = asyncio.run(load(port, 1.5, 6, 3.0))
        assert after and all(r.ok for r in after)
        assert "s2" in {r.server for r in after}
        assert backends(balancer)["s2"]["picks"] > picks_before
        wait_for(lambda: status_of(balancer)["outstanding"] == 0, 5, "inflight back to 0")


@pytest.mark.slow
def test_a_much_slower_backend_is_ejected_by_its_timeouts(tmp_path):
    # A deadline 15 times the fast servers' service and a tenth of the slow one's: on a
    # busy machine (a stalled 20 ms answer took over 100 ms) only s3 still times out.
    fast = [start_server(f"s{i}", tmp_path, "--delay-ms", "20") for i in (1, 2)]
    slow = start_server("s3", tmp_path, "--delay-ms", "3000")
    with processes(*fast, slow) as kids:
        balancer = start_balancer(
            [*fast, slow], tmp_path, "--strategy", "rr", "--request-timeout", "300ms"
        )
        kids.append(balancer)
        t0 = time.monotonic()
        results = asyncio.run(load(balancer.ready["port"], 6.0, 6, 3.0))
        assert max(r.elapsed for r in results) < 1.0  # 300 ms deadline, 50 ms ticks
        failed = [r for r in results if not r.ok]
        assert failed and all("balancer/timeout" in (r.error or "") for r in failed)
        assert all("backend s3" in (r.error or "") for r in failed), [r.error for r in failed]
        # After the first ejection s3 gets only its probes when each ejection ends
        # (1 s, 2 s, 4 s ...): few requests fail, the rest go to s1 and s2.
        later = [r for r in results if r.t_sent > t0 + 2.0]
        assert sum(not r.ok for r in later) < 0.05 * len(later), sum(not r.ok for r in later)
        state = backends(balancer)
        assert state["s3"]["ejections"] >= 1 and state["s3"]["faults"] >= 5
        assert state["s1"]["ejections"] == state["s2"]["ejections"] == 0
        wait_for(lambda: status_of(balancer)["outstanding"] == 0, 5, "inflight back to 0")
