"""Failure-aware load through the live balancer: peak-ewma's failure penalty and the
pool's success-rate ejection, over three real ``lblab server`` processes (each request
sleeps 10 ms) of which s1 answers half its requests with a server-fault error after 1 ms
(the ``fail`` action, told through the server's control file as the local testbed tells
it): the fast-failing server looks the quickest."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson
import pytest
from balancer_testbed import admin, processes, start_balancer, start_server, status_of, tell

from lblab.errors import ApplicationError
from lblab.failures import SERVER_FAULT_PREFIX
from lblab.loadtests.rsocket_client import RSocketClient
from lblab.procs import Child
from lblab.servers.behaviour import Failing, RateLimit
from lblab.servers.slowdown import Control
from lblab.wire.metadata import request_metadata

WORK = request_metadata("work")
BODY = orjson.dumps({"work_bytes": 100, "pad": ""})
REQUESTS = 200
CLIENTS = 4
"""At once: with requests in flight peak-ewma's load (cost x (in flight + 1)) spreads them
over backends of equal cost; one at a time it herds on whichever is a little cheaper."""


def picks(balancer: Child) -> dict[str, int]:
    return {row["id"]: row["picks"] for row in status_of(balancer)["backends"]}


def send_all(balancer: Child, n: int, clients: int = 1) -> list[str]:
    """``n`` requests from ``clients`` clients at once, each one at a time on its own
    connection; the failures' messages."""
    failed: list[str] = []

    def one_client(count: int) -> None:
        client = RSocketClient("127.0.0.1", balancer.ready["port"])
        try:
            for _ in range(count):
                try:
                    client.request_response(BODY, WORK, 10.0)
                except ApplicationError as exc:
                    failed.append(str(exc))
        finally:
            client.close()

    with ThreadPoolExecutor(clients) as pool:
        for done in [pool.submit(one_client, n // clients) for _ in range(clients)]:
            done.result(timeout=60)
    return failed


@pytest.fixture
def testbed(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[Child, Any]]:
    servers = [start_server(name, tmp_path, "--delay-ms", "10") for name in ("s1", "s2", "s3")]
    with processes(*servers) as kids:
        tell(servers[0], Control(fail=Failing(0.5, delay_ms=1.0)))
        balancer = start_balancer(servers, tmp_path, "--eject-after", "0", *request.param)
        kids.append(balancer)
        yield balancer, servers


@pytest.mark.parametrize("testbed", [("--strategy", "peak-ewma", "--seed", "3")], indirect=True)
def test_the_penalised_server_gets_fewer_picks_after_its_errors(testbed) -> None:
    balancer, _ = testbed
    before = picks(balancer)
    plain_failed = send_all(balancer, REQUESTS, CLIENTS)
    plain = {k: v - before[k] for k, v in picks(balancer).items()}
    code, body = admin(
        balancer, "PUT", "/strategy", {"name": "peak-ewma", "options": {"failure_penalty_ms": 5000}}
    )
    assert code == 200, body
    before = picks(balancer)
    aware_failed = send_all(balancer, REQUESTS, CLIENTS)
    aware = {k: v - before[k] for k, v in picks(balancer).items()}
    assert all(m.startswith(SERVER_FAULT_PREFIX) for m in plain_failed + aware_failed)
    # Plain: s1's successes keep its peak cost at 10 ms, as the others' (its 1 ms
    # failures hardly pull it down), so it takes a share like theirs.
    assert plain["s1"] >= REQUESTS // 6, plain
    assert len(plain_failed) >= REQUESTS // 20, len(plain_failed)
    # Penalised: after its first failure s1 costs 5 s (decaying over 10 s); the phase
    # takes about half a second, so it loses every pair it is drawn in.
    assert aware["s1"] <= 10 and aware["s1"] * 5 <= plain["s1"], (aware, plain)
    assert 1 <= len(aware_failed) <= 5, aware_failed
    assert sum(aware.values()) == REQUESTS


@pytest.mark.parametrize(
    "testbed",
    [
        (
            "--strategy",
            "rr",
            "--eject-base",
            "30s",
            "--success-rate-threshold",
            "80",
            "--success-rate-min-requests",
            "20",
        )
    ],
    indirect=True,
)
def test_a_low_success_rate_ejects_the_server_live(testbed) -> None:
    balancer, _ = testbed
    failed = send_all(balancer, 150)
    rows = {row["id"]: row for row in status_of(balancer)["backends"]}
    s1 = rows["s1"]
    # rr gives s1 every third request; at 20 outcomes its success rate (about 0.5) is
    # below 0.8 and it is ejected for 30 s, longer than the rest of the requests take.
    assert (s1["success_rate_ejections"], s1["ejections"]) == (1, 1), s1
    assert s1["state"] == "ejected", s1
    assert s1["picks"] == 20, s1
    assert rows["s2"]["picks"] + rows["s3"]["picks"] == 130
    assert len(failed) == s1["faults"] < 20
    assert rows["s2"]["ejections"] == rows["s3"]["ejections"] == 0


def test_a_rate_limited_servers_retry_after_keeps_it_out_live(tmp_path: Path) -> None:
    """s1 (no delay) admits 2 requests a second and says, with each REJECTED, how long
    until its next token; s2 takes 2 ms a request. The balancer hands the hint to
    peak-ewma, whose penalty is only 1 ms."""
    servers = [start_server("s1", tmp_path), start_server("s2", tmp_path, "--delay-ms", "2")]
    with processes(*servers) as kids:
        tell(servers[0], Control(reject=RateLimit(limit=2.0, burst=1.0)))
        balancer = start_balancer(servers, tmp_path, "--strategy", "peak-ewma", "--seed", "3")
        kids.append(balancer)
        code, body = admin(balancer, "PUT", "/strategy", {"name": "rr", "options": {}})
        assert code == 200, body
        # Warm both first: one slow first answer would price s1 above s2, and peak-ewma,
        # one request at a time, would keep to s2 for the whole phase (seen once in six).
        assert send_all(balancer, 20) == []
        seen = {}
        for max_retry_after_s in (0, 300):  # 0: no hint honoured
            options = {"failure_penalty_ms": 1, "max_retry_after_s": max_retry_after_s}
            code, body = admin(
                balancer, "PUT", "/strategy", {"name": "peak-ewma", "options": options}
            )
            assert code == 200, body
            before = picks(balancer)
            assert send_all(balancer, 150) == []  # every refusal replayed on s2
            seen[max_retry_after_s] = picks(balancer)["s1"] - before["s1"]
    # Ignored, a refusal costs s1 1 ms, under s2's 2 ms: it keeps being drawn and
    # refused. Honoured, each refusal costs up to its 500 ms wait: s1 is left alone.
    assert seen[300] <= 10 and seen[0] >= 40, seen


@pytest.fixture
def six_servers(tmp_path: Path) -> Iterator[Child]:
    servers = [start_server(f"s{n}", tmp_path, "--delay-ms", "10") for n in range(1, 7)]
    with processes(*servers) as kids:
        tell(servers[0], Control(fail=Failing(0.5, delay_ms=1.0)))
        balancer = start_balancer(
            servers, tmp_path, "--strategy", "rr", "--eject-after", "0", "--eject-base",
            "30s", "--success-rate-stdev-factor", "1.9", "--success-rate-window", "0.5s",
            "--success-rate-min-requests", "10",
        )  # fmt: skip
        kids.append(balancer)
        yield balancer


def test_a_server_far_below_the_others_success_rate_is_ejected_live(six_servers) -> None:
    failed = send_all(six_servers, 480, CLIENTS)
    rows = {row["id"]: row for row in status_of(six_servers)["backends"]}
    # rr gives each of the six a sixth; within a 0.5 s interval (4 clients, 10 ms a
    # request: about 200 requests) s1's rate (about 0.5) is far below the others' 1.0
    # (mean 0.92, sd 0.19, floor 0.56): it is ejected for 30 s, and only it.
    assert (rows["s1"]["outlier_ejections"], rows["s1"]["ejections"]) == (1, 1), rows["s1"]
    assert rows["s1"]["state"] == "ejected", rows["s1"]
    assert all(rows[f"s{n}"]["ejections"] == 0 for n in range(2, 7)), rows
    assert rows["s1"]["picks"] < 480 // 6, rows["s1"]
    assert 1 <= len(failed) < 480 // 12, len(failed)
