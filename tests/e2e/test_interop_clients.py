"""Other RSocket libraries than rsocket-py, through the balancer and at a server.

DESIGN.md's wire contract: "Any compliant RSocket client (rsocket-py, rsocket-java,
rsocket-js) must work through the balancer." rsocket-py is the suite's own client; here
rsocket-java 1.1.5 (``interop/java``) and rsocket-js 0.0.27 (``interop/js``) each run
their fixed list of checks against real ``lblab server`` processes, through a real
``lblab balancer`` and at one server directly (the direct run tells a balancer's fault
from the library's or the server's). A client prints one JSON line per check,
``{"check": name, "ok": bool, "detail": "..."}``; each client's source says what its
checks do. ``interop/build`` builds both (``scripts/setup`` runs it; the module runs it
too, a no-op when nothing changed) and fails, naming what is missing, without a JDK,
Maven, node or npm: then these tests fail with that message, never skip.

After every run the balancer has nothing outstanding and no process logged a traceback.
A client closed with 32 requests outstanding (a ``dispose`` mode of each client, at a
balancer over one server slowed to 2 s a request) leaves the balancer with none
outstanding within seconds, where serving them would take a minute.

Two of the checks are there for bugs the probes of 2026-11-27 found: the balancer
refused rsocket-java's default data MIME (``default_data_mime``) and closed the
connection on rsocket-js 0.0.27's METADATA_PUSH, which it sends without the METADATA flag
(``metadata_push``); both fail against the balancer of 5aec9b9, before the fixes.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lblab.procs import Child
from tests.integration.balancer_testbed import (
    processes,
    start_balancer,
    start_server,
    status_of,
    wait_for,
)

ROOT = Path(__file__).resolve().parents[2]
INTEROP = ROOT / "interop"
BUILD_TIMEOUT_S = 100
"""A build with Maven's and npm's caches empty took 11 s here (32 MB from Maven Central),
one with them warm 3 s; when nothing changed it does nothing (20 ms)."""
RUN_TIMEOUT_S = 60
"""A client bounds each wait at 10 s; a whole run takes 1-2 s."""

JAVA_CHECKS = (
    "request_response",
    "request_response_routed",
    "concurrent_64",
    "large_1mb",
    "large_1mb_mtu_64",
    "invalid_body",
    "request_stream",
    "request_channel",
    "fire_and_forget",
    "metadata_push",
    "default_data_mime",
    "resume_rejected",
)
JS_CHECKS = (
    "request_response",
    "request_response_routed",
    "concurrent_64",
    "large_1mb",
    "invalid_body",
    "request_stream",
    "request_channel",
    "fire_and_forget",
    "metadata_push",
)
"""rsocket-js 0.0.27 has no fragmentation, no default data MIME and no resumption to offer."""
CHECKS = {"java": JAVA_CHECKS, "js": JS_CHECKS}

DISPOSED = 32
"""Requests a client in ``dispose`` mode leaves outstanding (``DISPOSED`` in each client)."""
SLOW_MS = 2000
"""The slow server's time per request: it serves one at a time, so the 32 take a minute."""


@pytest.fixture(scope="module")
def built() -> None:
    try:
        result = subprocess.run(
            [str(INTEROP / "build")],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"interop/build did not finish within {BUILD_TIMEOUT_S} s: {exc.stderr}")
    if result.returncode != 0:
        pytest.fail(f"interop/build failed (exit {result.returncode}):\n{result.stderr}")


def command(client: str, host: str, port: int, *mode: str) -> list[str]:
    if client == "java":
        target = INTEROP / "java" / "target"
        classpath = f"{target / 'classes'}:{(target / 'classpath.txt').read_text().strip()}"
        return [
            "java",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            classpath,
            "lblab.interop.Client",
            host,
            str(port),
            *mode,
        ]
    return ["node", str(INTEROP / "js" / "client.js"), host, str(port), *mode]


@dataclass
class Rig:
    logs: Path
    servers: list[Child]
    balancer: Child
    slow_balancer: Child
    """Over one server at ``SLOW_MS`` a request, for the dispose tests."""


@pytest.fixture(scope="module")
def rig(built: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    logs = tmp_path_factory.mktemp("interop")
    # 64 concurrent requests straight at one server: above its default --max-inflight.
    fast = ("--max-inflight", "128")
    # Room for two dispose runs; stopped without waiting out the request it sleeps in.
    slow = ("--delay-ms", str(SLOW_MS), "--max-inflight", "64", "--drain-timeout", "0.1")
    with processes() as kids:
        kids += [start_server(sid, logs, *fast) for sid in ("s1", "s2")]
        kids.append(start_balancer(kids[:2], logs))
        kids.append(start_server("slow", logs, *slow))
        kids.append(start_balancer(kids[3:4], logs, name="slow-balancer"))
        yield Rig(logs, kids[:2], kids[2], kids[4])


def assert_nothing_left(bed: Rig, balancer: Child) -> None:
    """Nothing outstanding or in flight at ``balancer``, no traceback in any log."""

    def idle() -> dict[str, Any] | None:
        status = status_of(balancer)
        busy = status["outstanding"] or any(b["inflight"] for b in status["backends"])
        return None if busy else status

    try:
        wait_for(idle, 5, f"{balancer.name}: nothing outstanding")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; /status: {status_of(balancer)}") from None
    for log in sorted(bed.logs.glob("*.log")):
        text = log.read_text(errors="replace")
        assert "Traceback" not in text, f"{log.name} logged a traceback:\n{text[-3000:]}"


@pytest.mark.parametrize(
    ("client", "target"),
    [("java", "balancer"), ("java", "server"), ("js", "balancer"), ("js", "server")],
)
def test_client_passes_every_check(rig: Rig, client: str, target: str) -> None:
    at = rig.balancer if target == "balancer" else rig.servers[0]
    run = subprocess.run(
        command(client, "127.0.0.1", int(at.ready["port"])),
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    where = f"{client} client at the {target} (exit {run.returncode}; stderr: {run.stderr[-2000:]})"
    assert run.returncode == 0, f"{where}\n{run.stdout[-3000:]}"
    try:
        results = [json.loads(line) for line in run.stdout.splitlines() if line.strip()]
    except json.JSONDecodeError:
        raise AssertionError(f"{where}: a line that is not JSON in\n{run.stdout[-3000:]}") from None
    assert [r["check"] for r in results] == list(CHECKS[client]), f"{where}\n{run.stdout}"
    failed = [f"{r['check']}: {r['detail']}" for r in results if not r["ok"]]
    assert not failed, f"{where}: failed checks:\n" + "\n".join(failed)
    assert_nothing_left(rig, rig.balancer)


@pytest.mark.parametrize("client", ["java", "js"])
def test_a_client_closed_with_requests_outstanding_leaves_none(rig: Rig, client: str) -> None:
    balancer = rig.slow_balancer
    with subprocess.Popen(
        command(client, "127.0.0.1", int(balancer.ready["port"]), "dispose"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        try:
            line = first_line(proc, 20)
            assert json.loads(line) == {"sent": DISPOSED}, line
            wait_for(
                lambda: status_of(balancer)["outstanding"] == DISPOSED,
                10,
                f"the {DISPOSED} requests outstanding at the balancer",
            )
            assert proc.stdin is not None and proc.stderr is not None
            proc.stdin.close()  # the client closes its connection now
            assert proc.wait(timeout=RUN_TIMEOUT_S) == 0, proc.stderr.read()
        finally:
            proc.kill()  # no-op once it exited
    # Served, they would take DISPOSED x SLOW_MS: only the balancer's cancels end them now.
    assert_nothing_left(rig, balancer)


def first_line(proc: subprocess.Popen[bytes], timeout: float) -> str:
    """The first line of ``proc``'s output, read with a deadline."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    data = b""
    deadline = time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while b"\n" not in data:
            if not sel.select(max(0.0, deadline - time.monotonic())):
                raise AssertionError(f"no line from the client within {timeout} s: {data!r}")
            chunk = os.read(fd, 4096)
            if not chunk:
                raise AssertionError(f"the client exited (code {proc.wait()}) after {data!r}")
            data += chunk
    return data.split(b"\n", 1)[0].decode()
