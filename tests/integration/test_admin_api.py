"""The admin API against a live balancer: token, status codes, self-loops, ids, hostile HTTP.

One echo backend behind a balancer whose token comes from ``LBLAB_ADMIN_TOKEN``; raw
sockets send the malformed requests a client library would refuse to build.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import subprocess
import time
from collections import Counter

import pytest
from balancer_testbed import admin, processes, rsocket_client, start_echo, status_of, wait_for
from rsocket.payload import Payload

from lblab.balancer.input_checks import TOKEN_ENV, check_admin_bind
from lblab.errors import ConfigError
from lblab.loadtests.admin_client import AdminClient, AdminError
from lblab.procs import lblab_command, spawn

TOKEN = "test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def testbed(tmp_path_factory):
    logs = tmp_path_factory.mktemp("admin")
    echo = start_echo("e0", logs)
    with processes(echo) as kids:
        argv = lblab_command(
            "balancer", "--port", "0", "--admin-port", "0", "--agent-port", "0",
            "--backend", f"e0=127.0.0.1:{echo.ready['port']}",
        )  # fmt: skip
        balancer = spawn(
            "balancer",
            argv,
            log_path=logs / "lblab.balancer.log",
            env={**os.environ, TOKEN_ENV: TOKEN},
        )
        kids.append(balancer)
        yield balancer, echo


def http(port: int, data: bytes, *, half_close: bool = False, timeout: float = 10) -> int:
    """Send raw bytes to the admin port; the status code of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 "), answer[:200]
    return int(answer.split(b" ", 2)[1])


def request(method: str, path: str, body: bytes = b"", *headers: str) -> bytes:
    head = [f"{method} {path} HTTP/1.1", "Host: x", f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def add(balancer, backend_id: str, address: str, token: str = TOKEN):
    client = AdminClient("127.0.0.1", balancer.ready["admin_port"], token=token)
    return client.add_backend(backend_id, address)


def test_changes_need_the_token_and_reads_do_not(testbed):
    balancer, _ = testbed
    port = balancer.ready["admin_port"]
    body = b'{"name": "rr"}'
    assert http(port, request("PUT", "/strategy", body)) == 401
    assert http(port, request("PUT", "/strategy", body, "Authorization: Bearer nope")) == 401
    assert http(port, request("PUT", "/strategy", body, f"Authorization: Basic {TOKEN}")) == 401
    assert http(port, request("DELETE", "/backends/e0")) == 401
    assert http(port, request("POST", "/backends", b"{}")) == 401
    assert http(port, request("PUT", "/strategy", body, f"Authorization: Bearer {TOKEN}")) == 200
    code, answer = admin(balancer, "PUT", "/strategy", {"name": "lc"})
    assert code == 401 and "Authorization: Bearer" in answer["error"]
    assert TOKEN not in answer["error"]
    assert status_of(balancer)["strategy"] == "rr"  # the refused change did not happen
    with pytest.raises(AdminError, match="HTTP 401"):
        AdminClient("127.0.0.1", port, token="x" * 20).set_strategy("lc")
    assert AdminClient("127.0.0.1", port, token=TOKEN).set_strategy("lc")["strategy"] == "lc"


def test_the_admin_client_takes_the_token_from_the_environment(testbed, monkeypatch):
    balancer, _ = testbed
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    assert AdminClient("127.0.0.1", balancer.ready["admin_port"]).set_strategy("rr")


def test_unknown_backend_is_404_and_unknown_paths_and_methods_are_404_405(testbed):
    balancer, _ = testbed
    port = balancer.ready["admin_port"]
    with pytest.raises(AdminError, match=r"HTTP 404.*no backend 'zz'"):
        AdminClient("127.0.0.1", port, token=TOKEN).remove_backend("zz")
    assert http(port, request("GET", "/nope")) == 404
    assert http(port, request("GET", "/strategy")) == 405
    assert http(port, request("POST", "/metrics")) == 405
    assert http(port, request("BREW", "/status")) == 405


def test_a_backend_pointing_at_the_balancer_itself_is_refused(testbed):
    balancer, _ = testbed
    ready = balancer.ready
    for address in (
        f"127.0.0.1:{ready['port']}",
        f"localhost:{ready['port']}",
        f"0.0.0.0:{ready['port']}",
        f"127.0.0.2:{ready['port']}",
        f"[::ffff:127.0.0.1]:{ready['port']}",
        f"127.0.0.1:{ready['admin_port']}",
        f"127.0.0.1:{ready['agent_port']}",
    ):
        with pytest.raises(AdminError, match=r"HTTP 400.*this balancer's own"):
            add(balancer, "loop", address)
    assert [b["id"] for b in status_of(balancer)["backends"]] == ["e0"]


def test_ids_and_hosts_cannot_inject_lines_and_any_added_id_can_be_deleted(testbed):
    balancer, echo = testbed
    address = f"127.0.0.1:{echo.ready['port']}"
    for bad in ('x"} 1\nlblab_fake 1', "a b", "", "s\u00e9", "x" * 65, "a/b", "a%0Ab"):
        with pytest.raises(AdminError, match=r"HTTP 400.*backend id"):
            add(balancer, bad, address)
    with pytest.raises(AdminError, match=r"HTTP 400.*not an IP address or a host name"):
        add(balancer, "h", "127.0.0.1\nlblab_fake 1:7001")
    code, metrics = admin(balancer, "GET", "/metrics")
    assert code == 200 and "lblab_fake" not in metrics
    odd = "A.z-0_9." + "x" * 56  # every allowed kind of character, 64 long
    add(balancer, odd, address)
    assert odd in [b["id"] for b in status_of(balancer)["backends"]]
    AdminClient("127.0.0.1", balancer.ready["admin_port"], token=TOKEN).remove_backend(odd)
    add(balancer, "s4", address)
    port = balancer.ready["admin_port"]
    assert http(port, request("DELETE", "/backends/%73%34", b"", *_auth())) == 200
    assert [b["id"] for b in status_of(balancer)["backends"]] == ["e0"]


def _auth() -> list[str]:
    return [f"{k}: {v}" for k, v in AUTH.items()]


MALFORMED = [
    (b"PUT /strategy HTTP/1.1\r\nContent-Length: -5\r\n\r\n", 400),
    (b"PUT /strategy HTTP/1.1\r\nContent-Length: +5\r\n\r\n{}", 400),
    (b"PUT /strategy HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400),
    (b"PUT /strategy HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", 413),
    (b"PUT /strategy HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 411),
    (b"GET /status HTTP/1.1\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n", 431),
    (b"GET /status HTTP/1.1\r\n" + b"X: y\r\n" * 200 + b"\r\n", 431),
    (b"\x00\x01\x02 garbage\r\n\r\n", 400),
    (b"GET /st\xe9tus HTTP/1.1\r\n\r\n", 400),
    (b"GET /status HTTP/9.9\r\n\r\n", 400),
    (b"GET status HTTP/1.1\r\n\r\n", 400),
    (b"GET /status HTTP/1.1\r\nno colon here\r\n\r\n", 400),
    (b"GET /status\r\n\r\n", 400),
    (b"GET /status HTTP/1.1\nHost: bare-lf\n\n", 200),
    (request("PUT", "/strategy", b"{not json", *_auth()), 400),
    (request("PUT", "/strategy", b'{"name": "\xff\xfe"}', *_auth()), 400),
    (request("PUT", "/strategy", b"[1, 2]", *_auth()), 400),
    (request("PUT", "/strategy", b'{"name": 5}', *_auth()), 400),
    (request("PUT", "/strategy", b'{"name": "rr", "options": [1]}', *_auth()), 400),
    (request("PUT", "/strategy", b'{"name": "rr", "options": {"tie": {}}}', *_auth()), 400),
    (request("PUT", "/strategy", b'{"name": "rr", "extra": 1}', *_auth()), 400),
    (request("PUT", "/strategy", b'{"name": "no-such"}', *_auth()), 400),
    (request("PUT", "/strategy", b"[" * 5000, *_auth()), 400),
    (request("POST", "/backends", b"{}", *_auth()), 400),
    (request("POST", "/backends", b'{"id": "s5", "address": 7}', *_auth()), 400),
    (request("POST", "/backends", b'{"id": "s5", "address": "h:0"}', *_auth()), 400),
    (request("POST", "/backends", b'{"id": "s5", "address": "a:1", "weight": -1}', *_auth()), 400),
    (
        request("POST", "/backends", b'{"id": "s5", "address": "a:1", "weight": 1e999}', *_auth()),
        400,
    ),
    (
        request("POST", "/backends", b'{"id": "s5", "address": "a:1", "weight": true}', *_auth()),
        400,
    ),
    (request("DELETE", "/backends/%ff", b"", *_auth()), 400),
]


@pytest.mark.slow
def test_every_malformed_request_gets_a_4xx_and_the_balancer_keeps_serving(testbed):
    balancer, _ = testbed
    port = balancer.ready["admin_port"]
    got = [(data[:40], http(port, data)) for data, _ in MALFORMED]
    assert got == [(data[:40], code) for data, code in MALFORMED]
    # a body shorter than its Content-Length, then the client stops sending
    assert (
        http(port, b"PUT /strategy HTTP/1.1\r\nContent-Length: 10\r\n\r\n{}", half_close=True)
        == 400
    )
    # a head that never ends is cut at the read deadline, not waited for
    t0 = time.monotonic()
    assert http(port, b"GET /status HTTP/1.1\r\nHost: x\r\n") == 408
    assert time.monotonic() - t0 < 8
    assert [b["id"] for b in status_of(balancer)["backends"]] == ["e0"]
    assert _serves(balancer)
    assert balancer.alive()
    assert "Traceback" not in balancer.log_path.read_text()


def _serves(balancer) -> bool:
    async def go() -> bytes:
        async with rsocket_client(balancer.ready["port"]) as client:
            answer = await client.request_response(Payload(b'{"ping": 1}'))
        return bytes(answer.data)

    return asyncio.run(asyncio.wait_for(go(), 10)) == b'{"ping": 1}'


def _lblab(*args: str, env_token: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    if env_token is not None:
        env[TOKEN_ENV] = env_token
    return subprocess.run(
        lblab_command(*args), env=env, capture_output=True, text=True, timeout=30, check=False
    )


def test_a_non_loopback_admin_without_a_token_refuses_to_start():
    with pytest.raises(ConfigError, match="--admin-token"):
        check_admin_bind("0.0.0.0", None)
    check_admin_bind("0.0.0.0", TOKEN)  # with a token it may
    check_admin_bind("::1", None)
    # 192.0.2.1 (TEST-NET-1) is not on this machine: were the check missing, the bind would
    # fail too, but with a different message.
    done = _lblab("balancer", "--port", "0", "--admin-port", "0", "--admin-host", "192.0.2.1")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "not a loopback address" in lines[0] and "--admin-token" in lines[0]
    done = _lblab("balancer", "--port", "0", "--admin-port", "0", env_token="short")
    assert done.returncode == 2 and "16-256 visible ASCII" in done.stderr, done.stderr


def test_a_command_line_backend_on_the_balancers_own_port_refuses_to_start():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = _lblab("balancer", "--port", str(port), "--backend", f"s1=localhost:{port}")
    assert done.returncode == 2 and "own port" in done.stderr, done.stderr
    done = _lblab("balancer", "--port", "0", "--backend", "a\nb=127.0.0.1:7001")
    assert done.returncode == 2 and "backend id" in done.stderr, done.stderr


FUZZ_SEEDS = [
    request("GET", "/status"),
    request("PUT", "/strategy", b'{"name": "rr", "options": {"tie": "first"}}', *_auth()),
    request("POST", "/backends", b'{"id": "s9", "address": "127.0.0.1:9", "weight": 2}', *_auth()),
    request("DELETE", "/backends/zz", b"", *_auth()),
]


def _mutate(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(out) + 1)
        kind = rng.randrange(4)
        if kind == 0 and at < len(out):
            out[at] = rng.randrange(256)
        elif kind == 1:
            out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif kind == 2:
            del out[at : at + rng.randint(1, 8)]
        else:
            out = out[:at]
    return bytes(out)


def test_mutated_requests_never_get_a_5xx_or_a_traceback(testbed):
    balancer, _ = testbed
    port = balancer.ready["admin_port"]
    rng = random.Random(11)
    codes = Counter()
    for i in range(300):
        data = _mutate(rng, FUZZ_SEEDS[i % len(FUZZ_SEEDS)])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)  # a cut request must end at once, not at a deadline
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        code = int(answer.split(b" ", 2)[1]) if answer else None  # None: nothing was sent
        assert code is None or code < 500, (data, answer[:300])
        codes[code] += 1
    assert codes[400] > 100  # the mutations did reach the parser's checks
    assert _serves(balancer)
    assert "Traceback" not in balancer.log_path.read_text()


def test_idle_connections_past_the_cap_get_503_and_free_their_slots_on_close(testbed):
    balancer, _ = testbed
    port = balancer.ready["admin_port"]
    idle = [socket.create_connection(("127.0.0.1", port), timeout=5) for _ in range(40)]
    try:
        answers = []
        for sock in idle[-8:]:  # the 33rd to 40th: answered at once, not held
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
            answers.append(answer.split(b"\r\n", 1)[0])
        assert answers == [b"HTTP/1.1 503 Service Unavailable"] * 8
    finally:
        for sock in idle:
            sock.close()
    t0 = time.monotonic()
    assert wait_for(lambda: http(port, request("GET", "/status")) == 200, 2, "a free slot")
    assert time.monotonic() - t0 < 2  # the closed ones freed their slots before the deadline
