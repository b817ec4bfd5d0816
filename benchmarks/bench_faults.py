"""Fault benchmark: what each fault does to the requests going through the balancer.

``uv run python benchmarks/bench_faults.py [--seconds 6] [--clients 12] [--only kill,hang]``

For each fault, a fresh testbed on loopback (three ``lblab server`` processes, 10 ms of
work each, behind ``lblab balancer --strategy rr --request-timeout 1s``) and
``--clients`` closed-loop clients (lblab's blocking RSocket client, the one the Locust
users drive, one thread and one connection each) for ``--seconds``; the fault starts
``FAULT_AT_S`` into the load:

==============  =====================================================================
kill            SIGKILL s2
hang            SIGSTOP s2, SIGCONT 3 s later
slow            s2 does 10x the work of the others (from the start)
drain           SIGTERM s2 (it drains: CONNECTION_CLOSE, REJECTED for new requests)
overload        every server admits 4 requests (``--max-inflight 4``) for 3x the clients
garbage client  a raw socket writes random bytes and malformed frames every 50 ms
bad-body        a client sends ``{"work_bytes": -5}`` every 20 ms (its own errors are
                not counted with the good clients')
admin churn     every 200 ms: remove s3, add it back, switch rr <-> lc
==============  =====================================================================

Per fault it prints the requests sent, ok, errors by kind and by origin
(``lblab/failures.py``), **hung** (answered later than the balancer's deadline plus
0.5 s: must be 0), **lost** (no answer before the client's own deadline, 3 s: must be
0), the backends' ejections, and **recover**: seconds from the fault's start to the end
of the last failed request (0 when nothing failed). Figures on a shared 2-core VM
vary from run to run; the table says what happened, not how fast.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import socket
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson

from lblab.loadtests.rsocket_client import RSocketClient, classify_exception
from lblab.procs import Child, lblab_command, spawn, stop
from lblab.scenarios import request_body
from lblab.wire.codec import encode_frame
from lblab.wire.frames import Setup
from lblab.wire.metadata import APPLICATION_JSON, COMPOSITE_METADATA, request_metadata

REQUEST_TIMEOUT_S = 1.0
CLIENT_DEADLINE_S = 3.0
FAULT_AT_S = 1.5
WORK_DELAY_MS = 10
GOOD_BODY = request_body(100, 1_000)
BAD_BODY = b'{"work_bytes": -5, "pad": ""}'
WORK_METADATA = request_metadata("work")
"""The Locust users' routing metadata. Not imported from loadtests.rsocket_user: that
imports Locust, whose gevent monkey-patching deadlocks with the threads of this process."""


@dataclass
class Outcome:
    t_sent: float
    elapsed: float
    kind: str | None
    origin: str | None
    server: str | None


@dataclass
class Testbed:
    servers: list[Child]
    balancer: Child
    log_dir: Path
    extra_children: list[Child] = field(default_factory=list)

    @property
    def port(self) -> int:
        return int(self.balancer.ready["port"])

    def admin(self, method: str, path: str, body: object = None) -> tuple[int, object]:
        data = json.dumps(body).encode() if body is not None else None
        url = f"http://127.0.0.1:{self.balancer.ready['admin_port']}{path}"
        req = urllib.request.Request(url, data=data, method=method)
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status, json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()


@contextlib.contextmanager
def testbed(log_dir: Path, server_args: dict[str, list[str]]) -> Iterator[Testbed]:
    servers: list[Child] = []
    balancer = None
    try:
        for sid in ("s1", "s2", "s3"):
            argv = lblab_command(
                "server", "--id", sid, "--port", "0", "--delay-ms", str(WORK_DELAY_MS),
                *server_args.get(sid, []),
            )  # fmt: skip
            servers.append(spawn(sid, argv, log_path=log_dir / f"{sid}.log"))
        args = ["balancer", "--port", "0", "--admin-port", "0", "--strategy", "rr"]
        args += ["--request-timeout", f"{REQUEST_TIMEOUT_S:g}s"]
        for s in servers:
            args += ["--backend", f"{s.ready['id']}=127.0.0.1:{s.ready['port']}"]
        balancer = spawn("balancer", lblab_command(*args), log_path=log_dir / "lblab.balancer.log")
        bed = Testbed(servers, balancer, log_dir)
        yield bed
    finally:
        for child in [*(bed.extra_children if balancer else []), balancer, *servers]:
            if child is not None:
                with contextlib.suppress(Exception):
                    os.kill(child.pid, signal.SIGCONT)
                stop(child, timeout=5)


def client_loop(port: int, stop_at: float, body: bytes, out: list[Outcome]) -> None:
    client = RSocketClient("127.0.0.1", port)
    while time.monotonic() < stop_at:
        t = time.monotonic()
        server = None
        try:
            response = client.request_response(body, WORK_METADATA, CLIENT_DEADLINE_S)
            server = orjson.loads(response.data).get("server")
            exc: BaseException | None = None
        except Exception as e:  # classified below, as the Locust user does
            exc = e
            time.sleep(0.005)  # an instant error must not spin the loop
        kind, origin = classify_exception(exc)
        out.append(Outcome(t, time.monotonic() - t, kind, origin, server))
    client.close()


def garbage_loop(port: int, stop_at: float, rng: random.Random) -> None:
    """Random bytes, and SETUP followed by malformed frames, on fresh connections."""
    setup = encode_frame(
        Setup(
            keepalive_ms=10_000,
            max_lifetime_ms=60_000,
            metadata_mime=COMPOSITE_METADATA,
            data_mime=APPLICATION_JSON,
        )
    )
    while time.monotonic() < stop_at:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1) as s:
            s.settimeout(0.2)
            if rng.random() < 0.5:
                s.sendall(rng.randbytes(rng.randrange(1, 512)))
            else:
                s.sendall(setup + rng.randbytes(rng.randrange(9, 256)))
            with contextlib.suppress(OSError):
                s.recv(4096)
        time.sleep(0.05)


def run_fault(
    name: str, seconds: float, clients: int, log_root: Path
) -> tuple[list[Outcome], dict[str, int], float]:
    """Load one testbed through one fault; (good clients' outcomes, ejections, t_fault)."""
    server_args: dict[str, list[str]] = {}
    n_clients = clients
    if name == "slow":
        server_args["s2"] = ["--delay-ms", str(10 * WORK_DELAY_MS)]
    if name == "overload":
        server_args = {s: ["--max-inflight", "4"] for s in ("s1", "s2", "s3")}
        n_clients = 3 * clients
    log_dir = log_root / name.replace(" ", "-")
    log_dir.mkdir(parents=True, exist_ok=True)
    with testbed(log_dir, server_args) as bed:
        outcomes: list[Outcome] = []
        start = time.monotonic()
        stop_at = start + seconds
        threads = [
            threading.Thread(target=client_loop, args=(bed.port, stop_at, GOOD_BODY, outcomes))
            for _ in range(n_clients)
        ]
        for t in threads:
            t.start()
        time.sleep(FAULT_AT_S)
        t_fault = time.monotonic()
        inject(name, bed, stop_at)
        for t in threads:
            t.join(seconds + CLIENT_DEADLINE_S + 10)
        code, status = bed.admin("GET", "/status")
        ejections = (
            {b["id"]: b["ejections"] for b in status["backends"]}  # type: ignore[index]
            if code == 200
            else {}
        )
        return outcomes, ejections, t_fault - start


def inject(name: str, bed: Testbed, stop_at: float) -> None:
    victim = bed.servers[1]
    actions: dict[str, Callable[[], None]] = {
        "kill": lambda: os.kill(victim.pid, signal.SIGKILL),
        "hang": lambda: hang(victim, 3.0),
        "slow": lambda: None,
        "drain": lambda: os.kill(victim.pid, signal.SIGTERM),
        "overload": lambda: None,
        "garbage client": lambda: background(garbage_loop, bed.port, stop_at, random.Random(7)),
        "bad-body": lambda: background(client_loop, bed.port, stop_at, BAD_BODY, []),
        "admin churn": lambda: background(churn, bed, stop_at),
    }
    actions[name]()


def hang(victim: Child, seconds: float) -> None:
    os.kill(victim.pid, signal.SIGSTOP)
    threading.Timer(seconds, lambda: os.kill(victim.pid, signal.SIGCONT)).start()


def background(target: Callable[..., None], *args: object) -> None:
    threading.Thread(target=target, args=args, daemon=True).start()


def churn(bed: Testbed, stop_at: float) -> None:
    s3 = bed.servers[2]
    address = f"127.0.0.1:{s3.ready['port']}"
    names = ["lc", "rr"]
    k = 0
    while time.monotonic() < stop_at - 0.5:
        bed.admin("DELETE", "/backends/s3")
        time.sleep(0.1)
        bed.admin("POST", "/backends", {"id": "s3", "address": address})
        bed.admin("PUT", "/strategy", {"name": names[k % 2]})
        k += 1
        time.sleep(0.1)


def summarize(name: str, outcomes: list[Outcome], ejections: dict[str, int], t_fault: float):
    t0 = min((o.t_sent for o in outcomes), default=0.0)
    failed = [o for o in outcomes if o.kind is not None]
    kinds = Counter(o.kind for o in failed)
    origins = Counter(o.origin for o in failed)
    hung = sum(o.elapsed > REQUEST_TIMEOUT_S + 0.5 for o in outcomes)
    lost = sum(o.kind == "timeout" and o.origin == "client" for o in outcomes)
    last_failure_end = max((o.t_sent + o.elapsed - t0 for o in failed), default=None)
    recover = 0.0 if last_failure_end is None else max(last_failure_end - t_fault, 0.0)
    return {
        "fault": name,
        "sent": len(outcomes),
        "ok": len(outcomes) - len(failed),
        "errors by kind": dict(kinds),
        "errors by origin": dict(origins),
        "hung": hung,
        "lost": lost,
        "ejections": ejections,
        "recover_s": round(recover, 2),
    }


FAULTS = (
    "kill",
    "hang",
    "slow",
    "drain",
    "overload",
    "garbage client",
    "bad-body",
    "admin churn",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="Load per fault.")
    parser.add_argument("--clients", type=int, default=12, help="Good clients per fault.")
    parser.add_argument("--only", default="", help="Comma-separated faults (default: all).")
    parser.add_argument("--json", action="store_true", help="Print JSON rows, not a table.")
    args = parser.parse_args()
    chosen = [f.strip() for f in args.only.split(",") if f.strip()] or list(FAULTS)
    unknown = [f for f in chosen if f not in FAULTS]
    if unknown:
        parser.error(f"unknown fault(s) {unknown}; choose from {', '.join(FAULTS)}")
    if not args.seconds > FAULT_AT_S + 1 or args.clients < 1:
        parser.error(f"--seconds must exceed {FAULT_AT_S + 1:g} and --clients be >= 1")
    print(f"load average at start: {os.getloadavg()[0]:.2f} (2-core VM)", file=sys.stderr)
    rows = []
    with tempfile.TemporaryDirectory(prefix="lblab-faults-") as tmp:
        for name in chosen:
            outcomes, ejections, t_fault = run_fault(name, args.seconds, args.clients, Path(tmp))
            rows.append(summarize(name, outcomes, ejections, t_fault))
            print(f"{name}: done", file=sys.stderr)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print_table(rows)


def print_table(rows: list[dict]) -> None:
    def fmt(counts: dict) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "-"

    head = "| fault | sent | ok | errors by kind | errors by origin | hung | lost | ejections | recover s |"
    print(head)
    print("|" + "---|" * 9)
    for r in rows:
        ej = fmt({k: v for k, v in r["ejections"].items() if v})
        print(
            f"| {r['fault']} | {r['sent']} | {r['ok']} | {fmt(r['errors by kind'])} | "
            f"{fmt(r['errors by origin'])} | {r['hung']} | {r['lost']} | {ej} | "
            f"{r['recover_s']:.2f} |"
        )


if __name__ == "__main__":
    main()
