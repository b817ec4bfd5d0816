"""Request deadlines under gevent (``lblab/loadtests/deadlines.py``): the load generator's
client keeps them with one timer per process, and they must hold as socket timeouts did.

Each test runs a gevent-patched interpreter (as Locust's processes are) against a real
``lblab server`` that holds every answer 400 ms.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from lblab.procs import Child, lblab_command, spawn, stop

pytestmark = pytest.mark.slow

HELD_S = 0.4

PRELUDE = """
from gevent import monkey
monkey.patch_all()
import json, sys, time
import gevent
from gevent import timeout as gevent_timeout
from lblab.loadtests.deadlines import deadline_watch
from lblab.loadtests.rsocket_client import RSocketClient, RequestTimeout
from lblab.scenarios import request_body
from lblab.wire.metadata import request_metadata

PORT = int(sys.argv[1])
MD = request_metadata("work")

def timed(client, timeout, work=10):
    start = time.monotonic()
    try:
        body = json.loads(client.request_response(request_body(100, work), MD, timeout).data)
        return {"ok": body["work_bytes"], "s": time.monotonic() - start}
    except RequestTimeout:
        return {"timeout": True, "s": time.monotonic() - start}
"""


@pytest.fixture(scope="module")
def held_server() -> Iterator[Child]:
    args = ("--id", "s1", "--port", "0", "--delay-ms", str(HELD_S * 1000), "--workers", "16")
    child = spawn("server", lblab_command("server", *args))
    yield child
    stop(child, timeout=5)


def under_gevent(server: Child, body: str) -> Any:
    """Run ``body`` after PRELUDE in a gevent-patched interpreter; its last stdout line
    is JSON."""
    done = subprocess.run(
        [sys.executable, "-c", PRELUDE + body, str(server.ready["port"])],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_many_greenlets_time_out_at_their_deadline_and_keep_their_connections(
    held_server: Child,
) -> None:
    out = under_gevent(
        held_server,
        """
clients = [RSocketClient("127.0.0.1", PORT) for _ in range(8)]
def one(k):
    first = timed(clients[k], 0.1)
    # The same connection: this answer must be the second request's, not the late first.
    second = timed(clients[k], 5.0, work=1000 + k)
    return first, second
jobs = [gevent.spawn(one, k) for k in range(8)]
gevent.joinall(jobs, timeout=20)
print(json.dumps({"results": [j.value for j in jobs], "waiting": deadline_watch().waiting}))
""",
    )
    for k, (first, second) in enumerate(out["results"]):
        assert first["timeout"] and 0.1 <= first["s"] < 0.1 + 0.15, first
        assert second["ok"] == 1000 + k and second["s"] >= HELD_S, second
    assert out["waiting"] == 0


def test_an_earlier_deadline_after_a_later_one_still_ends_on_time(held_server: Child) -> None:
    # The one timer is armed for the first request's 3 s; the second's 0.15 s must move it.
    out = under_gevent(
        held_server,
        """
a, b = RSocketClient("127.0.0.1", PORT), RSocketClient("127.0.0.1", PORT)
a.connect(); b.connect()
slow = gevent.spawn(timed, a, 3.0)
gevent.sleep(0.05)
fast = gevent.spawn(timed, b, 0.15)
gevent.joinall([slow, fast], timeout=20)
print(json.dumps({"slow": slow.value, "fast": fast.value}))
""",
    )
    assert out["fast"]["timeout"] and 0.15 <= out["fast"]["s"] < 0.15 + 0.15, out
    assert out["slow"]["ok"] == 10 and HELD_S <= out["slow"]["s"] < 3.0, out


def test_a_killed_greenlet_leaves_no_deadline_behind(held_server: Child) -> None:
    # Locust stops its users by killing their greenlets mid-request.
    out = under_gevent(
        held_server,
        """
client = RSocketClient("127.0.0.1", PORT)
client.connect()
job = gevent.spawn(timed, client, 0.3)
gevent.sleep(0.05)
inside = deadline_watch().waiting
job.kill(timeout=5)
after_kill = deadline_watch().waiting
# Past the killed request's deadline, another greenlet's request is not disturbed.
gevent.sleep(0.4)
other = timed(RSocketClient("127.0.0.1", PORT), 5.0, work=77)
print(json.dumps({"inside": inside, "after_kill": after_kill, "other": other}))
""",
    )
    assert out["inside"] == 1 and out["after_kill"] == 0
    assert out["other"]["ok"] == 77


def test_a_request_under_gevent_arms_no_timer_of_its_own(held_server: Child) -> None:
    # The point of the one timer: gevent's per-wait Timeout is not started per request.
    out = under_gevent(
        held_server,
        """
started = []
real = gevent_timeout.Timeout._start_new_or_dummy
def counting(*args, **kwargs):
    started.append(1)
    return real(*args, **kwargs)
gevent_timeout.Timeout._start_new_or_dummy = staticmethod(counting)
client = RSocketClient("127.0.0.1", PORT)
client.connect()
before = len(started)
results = [timed(client, 5.0) for _ in range(3)]
print(json.dumps({"results": results, "timers": len(started) - before}))
""",
    )
    assert all(r["ok"] == 10 for r in out["results"])
    assert out["timers"] == 0
