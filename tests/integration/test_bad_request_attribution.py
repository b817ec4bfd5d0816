"""The issue's case, live: bodies nested past the server's JSON parser are the client's error.

Before, 60 such bodies through ``lblab balancer --strategy rr`` to two healthy servers
came back as 60 ``server fault: ... RecursionError`` answers with 60 tracebacks in the
servers' logs, and ejected both servers once (30 consecutive faults each, five eject).
Every body of every shape is fuzzed the same way in
``tests/property/test_fault_attribution.py``.
"""

from __future__ import annotations

import json

from balancer_testbed import (
    RawClient,
    client_setup,
    processes,
    start_balancer,
    start_server,
    status_of,
)

from lblab.failures import SERVER_FAULT_PREFIX, classify_error
from lblab.wire.codes import ErrorCode
from lblab.wire.frames import Error, Payload, RequestResponse

DEPTH = 5000
DEEP = b'{"work_bytes": 100, "pad": ' + b"[" * DEPTH + b"]" * DEPTH + b"}"
GOOD = b'{"work_bytes": 100, "pad": ""}'
BODIES = 60


def test_sixty_deeply_nested_bodies_are_client_errors_and_eject_nothing(tmp_path):
    servers = [start_server(name, tmp_path) for name in ("s1", "s2")]
    with processes(*servers) as kids:
        balancer = start_balancer(servers, tmp_path, "--strategy", "rr")
        kids.append(balancer)
        client = RawClient(balancer.ready["port"])
        client.send(
            client_setup(),
            *(RequestResponse(stream_id=2 * i + 1, data=DEEP) for i in range(BODIES)),
        )
        errors = [client.recv(timeout=10) for _ in range(BODIES)]
        for error in errors:
            assert isinstance(error, Error), error
            assert error.error_code == ErrorCode.APPLICATION_ERROR, error
            assert not error.message.startswith(SERVER_FAULT_PREFIX), error.message
            assert "request body nests arrays or objects deeper" in error.message, error.message
            assert classify_error(error.error_code, error.message) == ("application", "server")
        rows = status_of(balancer)["backends"]
        assert [(r["id"], r["faults"], r["ejections"], r["state"]) for r in rows] == [
            ("s1", 0, 0, "up"),
            ("s2", 0, 0, "up"),
        ], rows
        assert [r["errors"] for r in rows] == [BODIES // 2, BODIES // 2]  # each server answered

        first = 2 * BODIES + 1
        client.send(*(RequestResponse(stream_id=first + 2 * i, data=GOOD) for i in range(10)))
        answers = [client.recv(timeout=10) for _ in range(10)]
        assert all(isinstance(a, Payload) for a in answers), answers
        assert {json.loads(a.data)["server"] for a in answers} == {"s1", "s2"}
        client.close()
        for name in ("s1", "s2"):
            log = (tmp_path / f"{name}.log").read_text()
            assert "Traceback" not in log and "work failed" not in log, log[-2000:]
