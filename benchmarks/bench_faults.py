"""Fault benchmark: what each fault does to the requests going through the balancer, and
what a killed or starved ``lblab run`` leaves behind.

``uv run python benchmarks/bench_faults.py [--seconds 6] [--clients 12] [--rate 800]
[--connections 2000] [--only kill,hang] [--json | --markdown]``

For each fault, a fresh testbed on loopback (three ``lblab server`` processes, 10 ms of
work each, behind ``lblab balancer --strategy rr --request-timeout 1s``) and
``--clients`` closed-loop clients (lblab's blocking RSocket client, the one the Locust
users drive, one thread and one connection each) for ``--seconds``; the fault starts
``FAULT_AT_S`` into the load:

================  ===================================================================
kill              SIGKILL s2
hang              SIGSTOP s2, SIGCONT 3 s later
slow              s2 does 10x the work of the others (from the start)
drain             SIGTERM s2 (it drains: CONNECTION_CLOSE, REJECTED for new requests)
overload          every server admits 4 requests (``--max-inflight 4``) for 3x the clients
garbage client    a raw socket writes random bytes and malformed frames every 50 ms
bad-body          a client sends ``{"work_bytes": -5}`` every 20 ms (its own errors are
                  not counted with the good clients')
admin churn       every 200 ms: remove s3, add it back, switch rr <-> lc
soak              no fault: the clients send ``--rate`` req/s together, paced, to servers
                  with 8 service slots (so 10 ms of work does not cap the rate); the
                  issue's soak is ``--only soak --seconds 90 --rate 800``
connection churn  one long-lived client at 100 req/s is the good client; from the fault
                  on, four threads open up to ``--connections`` short connections between
                  them (SETUP, one request, close; not counted with the good client)
restart           SIGTERM the balancer (it drains for up to 2 s) and start a new one on
                  the same ports
================  ===================================================================

Per fault it prints the requests sent, ok, errors by kind and by origin
(``lblab/failures.py``), **hung** (answered later than the balancer's deadline plus
0.5 s: must be 0), **lost** (no answer before the client's own deadline, 3 s: must be
0), **p99** of the answered requests sent before and after the fault starts, the
backends' ejections, **recover**: seconds from the fault's start to the end of the last
failed request (0 when nothing failed), the balancer's resident memory (**rss MB**:
before the load, when the fault starts, after the load) and open files (**fds**: before
and after the load; after means the clients closed and up to ``SETTLE_S`` for the
count to come back; for restart, the new balancer's), and **srv inflight**: the
requests the live servers still hold after the load (up to ``SETTLE_S`` to settle),
asked of each server itself, whose answer to a request carries its ``inflight``: must
be 0. ``notes`` says what a case adds.

Two cases drive the whole ``lblab run`` (``--preset tiny --scenarios sp+sr
--no-report``: two phases, rr then lc, of ``--seconds`` after 1 s of warm-up), run as
``python -m lblab`` with this interpreter in a session of its own:

===========  ========================================================================
kill-resume  SIGKILL the runner's process group halfway through the second phase's
             load; 3 s later count its processes still alive: those below it just
             before the kill, and any whose command line names the run directory or
             whose ``LBLAB_PARENT_PID`` is the dead runner; then ``lblab run --resume``.
             Prints those orphans, both exit codes, the rows (and failed rows) of the
             resumed phase and of its sibling in ``requests.parquet``, and how many of
             the resumed phase's rows were sent before the kill (left by the killed
             attempt: must be 0); whatever of the run is still alive at the end is
             killed (and counted).
full-disk    as root only: the run directory is on a 64 MB tmpfs, filled a third of
             the way through the second phase's load (fallocate, then writes until
             ENOSPC), so the first phase's results are there to keep. Prints the exit code, the last line of stderr, whether stderr holds
             a Traceback, the manifest's status, then with the space freed the exits of
             ``lblab report`` (0: it reads the folder) and ``lblab run --resume``.
===========  ========================================================================

Figures on a shared 2-core VM vary from run to run; the tables say what happened, not
how fast. ``--json`` prints the rows as JSON; ``--markdown`` only a stamped section of
``docs/results/benchmarks.md`` (the tables, the cases as described above, the terms).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson
import psutil
import pyarrow as pa
import pyarrow.parquet as pq

from lblab.analysis.nbserver import descendants
from lblab.errors import LblabError
from lblab.experiment.run_folders import phase_folder
from lblab.loadtests.records import started_at
from lblab.loadtests.rsocket_client import RSocketClient, classify_exception
from lblab.pages import table, this_script
from lblab.procs import PARENT_ENV, Child, lblab_command, spawn, stop
from lblab.results import MANIFEST
from lblab.scenarios import request_body
from lblab.stamp import Stamp, take
from lblab.wire.codec import encode_frame
from lblab.wire.frames import Setup
from lblab.wire.metadata import APPLICATION_JSON, COMPOSITE_METADATA, request_metadata

REQUEST_TIMEOUT_S = 1.0
HUNG_MARGIN_S = 0.5
"""A request answered later than the balancer's deadline plus this is hung."""
CLIENT_DEADLINE_S = 3.0
FAULT_AT_S = 1.5
WORK_DELAY_MS = 10
SETTLE_S = 3.0
"""After the load: how long the balancer's fds and the servers' in-flight counts get to
come back (closing connections and late answers are asynchronous)."""
CHURN_CLIENT_RATE = 100.0
"""Requests a second of the long-lived client beside the connection churn."""
CHURN_THREADS = 4
"""Threads opening the short connections (about 80 a second each on the busy 2-core VM)."""
GOOD_BODY = request_body(100, 1_000)
BAD_BODY = b'{"work_bytes": -5, "pad": ""}'
PROBE_BODY = request_body(0, 0)
WORK_METADATA = request_metadata("work")
"""The Locust users' routing metadata. Not imported from loadtests.rsocket_user: that
imports Locust, whose gevent monkey-patching deadlocks with the threads of this process."""

RUN_ARGS = ("run", "--preset", "tiny", "--scenarios", "sp+sr", "--no-report")
"""The ``lblab run`` of the run cases: two phases (rr, then lc) of ``tiny``'s 4 users."""
RUN_START_S = 120.0
"""Deadline for a run to start a phase's load (testbed, earlier phases, Locust)."""
RUN_END_S = 180.0
"""Deadline for a run (or ``lblab report``) to end, beyond its phases' own length."""
ORPHAN_WAIT_S = 3.0
"""How long after the runner's SIGKILL its processes are counted (they check for their
owner once a second)."""
TMPFS_MB = 64
FILL_CHUNK = 1 << 16
T = TypeVar("T")


@dataclass
class Outcome:
    t_sent: float
    elapsed: float
    kind: str | None
    origin: str | None


@dataclass
class Footprint:
    """The balancer's resident memory (MiB) and open file descriptors."""

    rss_mb: float
    fds: int

    @classmethod
    def of(cls, child: Child) -> Footprint | None:
        """None once the process is gone."""
        try:
            proc = psutil.Process(child.pid)
            return cls(proc.memory_info().rss / 2**20, proc.num_fds())
        except psutil.Error:
            return None


@dataclass
class Testbed:
    servers: list[Child]
    balancer: Child
    log_dir: Path
    notes: list[str] = field(default_factory=list)

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


def start_balancer(
    servers: list[Child], log_dir: Path, port: int = 0, admin_port: int = 0
) -> Child:
    args = ["balancer", "--port", str(port), "--admin-port", str(admin_port), "--strategy", "rr"]
    args += ["--request-timeout", f"{REQUEST_TIMEOUT_S:g}s"]
    for s in servers:
        args += ["--backend", f"{s.ready['id']}=127.0.0.1:{s.ready['port']}"]
    return spawn("balancer", lblab_command(*args), log_path=log_dir / "lblab.balancer.log")


@contextlib.contextmanager
def testbed(log_dir: Path, server_args: dict[str, list[str]]) -> Iterator[Testbed]:
    servers: list[Child] = []
    bed: Testbed | None = None
    try:
        for sid in ("s1", "s2", "s3"):
            argv = lblab_command(
                "server", "--id", sid, "--port", "0", "--delay-ms", str(WORK_DELAY_MS),
                *server_args.get(sid, []),
            )  # fmt: skip
            servers.append(spawn(sid, argv, log_path=log_dir / f"{sid}.log"))
        bed = Testbed(servers, start_balancer(servers, log_dir), log_dir)
        yield bed
    finally:
        for child in [*([bed.balancer] if bed else []), *servers]:
            with contextlib.suppress(Exception):
                os.kill(child.pid, signal.SIGCONT)
            stop(child, timeout=5)


def client_loop(
    port: int, stop_at: float, body: bytes, out: list[Outcome], interval: float = 0.0
) -> None:
    """Requests on one connection until ``stop_at``: back to back, or due every
    ``interval`` seconds (a late one goes at once)."""
    client = RSocketClient("127.0.0.1", port)
    due = time.monotonic()
    while (now := time.monotonic()) < stop_at:
        if due > now:
            time.sleep(min(due, stop_at) - now)
            continue
        due += interval
        out.append(request(client, body))
    client.close()


def request(client: RSocketClient, body: bytes) -> Outcome:
    t = time.monotonic()
    try:
        client.request_response(body, WORK_METADATA, CLIENT_DEADLINE_S)
        exc: BaseException | None = None
    except Exception as e:  # classified below, as the Locust user does
        exc = e
        time.sleep(0.005)  # an instant error must not spin the loop
    kind, origin = classify_exception(exc)
    return Outcome(t, time.monotonic() - t, kind, origin)


def short_connections(port: int, stop_at: float, count: int, out: list[Outcome]) -> None:
    """Up to ``count`` connections until ``stop_at``: each SETUP, one request, close."""
    for _ in range(count):
        if time.monotonic() >= stop_at:
            return
        client = RSocketClient("127.0.0.1", port)
        out.append(request(client, GOOD_BODY))
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


@dataclass
class Options:
    seconds: float
    clients: int
    rate: float
    connections: int


@dataclass
class FaultRun:
    outcomes: list[Outcome]
    t_fault: float
    ejections: dict[str, int]
    before: Footprint | None
    at_fault: Footprint | None
    after: Footprint | None
    server_inflight: dict[str, int | None]
    notes: list[str]


def clients_of(name: str, opts: Options) -> int:
    """The good clients of the fault ``name``."""
    return {"overload": 3 * opts.clients, "connection churn": 1}.get(name, opts.clients)


def run_fault(name: str, opts: Options, log_root: Path) -> FaultRun:
    """Load one testbed through one fault; the good clients' outcomes and the footprints."""
    server_args: dict[str, list[str]] = {}
    if name == "slow":
        server_args["s2"] = ["--delay-ms", str(10 * WORK_DELAY_MS)]
    if name == "overload":
        server_args = {s: ["--max-inflight", "4"] for s in ("s1", "s2", "s3")}
    if name == "soak":
        server_args = {s: ["--workers", "8"] for s in ("s1", "s2", "s3")}
    n_clients = clients_of(name, opts)
    interval = {"soak": opts.clients / opts.rate, "connection churn": 1 / CHURN_CLIENT_RATE}
    log_dir = log_root / name.replace(" ", "-")
    log_dir.mkdir(parents=True, exist_ok=True)
    with testbed(log_dir, server_args) as bed:
        before = Footprint.of(bed.balancer)
        outcomes: list[Outcome] = []
        start = time.monotonic()
        stop_at = start + opts.seconds
        loop_args = (bed.port, stop_at, GOOD_BODY, outcomes, interval.get(name, 0.0))
        threads = [threading.Thread(target=client_loop, args=loop_args) for _ in range(n_clients)]
        for t in threads:
            t.start()
        time.sleep(FAULT_AT_S)
        t_fault = time.monotonic()
        at_fault = Footprint.of(bed.balancer)
        threads += inject(name, bed, stop_at, opts)
        for t in threads:
            t.join(max(0.0, stop_at + CLIENT_DEADLINE_S + 10 - time.monotonic()))
        code, status = bed.admin("GET", "/status")
        ejections = (
            {b["id"]: b["ejections"] for b in status["backends"]}  # type: ignore[index]
            if code == 200
            else {}
        )
        baseline = before.fds if before else 0
        after = settled(
            lambda: Footprint.of(bed.balancer), lambda f: f is None or f.fds <= baseline
        )
        inflight = settled(
            lambda: servers_inflight(bed), lambda held: all(v == 0 for v in held.values())
        )
        return FaultRun(
            outcomes, t_fault - start, ejections, before, at_fault, after, inflight, bed.notes
        )


def settled(read: Callable[[], T], done: Callable[[T], bool]) -> T:
    """``read()`` again until ``done`` says it settled or ``SETTLE_S`` passed; the last value."""
    deadline = time.monotonic() + SETTLE_S
    value = read()
    while not done(value) and time.monotonic() < deadline:
        time.sleep(0.1)
        value = read()
    return value


def servers_inflight(bed: Testbed) -> dict[str, int | None]:
    """The requests each live server holds, asked of the server itself (None: no answer)."""
    held: dict[str, int | None] = {}
    for server in bed.servers:
        if not server.alive():
            continue
        client = RSocketClient("127.0.0.1", int(server.ready["port"]))
        try:
            response = client.request_response(PROBE_BODY, None, CLIENT_DEADLINE_S)
            held[server.name] = int(orjson.loads(response.data)["inflight"])
        except LblabError:
            held[server.name] = None
        finally:
            client.close()
    return held


def inject(name: str, bed: Testbed, stop_at: float, opts: Options) -> list[threading.Thread]:
    """Start the fault; the threads it left running (joined before the case ends)."""
    victim = bed.servers[1]
    actions: dict[str, Callable[[], list[threading.Thread]]] = {
        "kill": lambda: kill(victim.pid, signal.SIGKILL),
        "hang": lambda: hang(victim, 3.0),
        "slow": list,
        "drain": lambda: kill(victim.pid, signal.SIGTERM),
        "overload": list,
        "garbage client": lambda: background(garbage_loop, bed.port, stop_at, random.Random(7)),
        "bad-body": lambda: background(client_loop, bed.port, stop_at, BAD_BODY, []),
        "admin churn": lambda: background(admin_churn, bed, stop_at),
        "soak": list,
        "connection churn": lambda: background(connection_churn, bed, stop_at, opts.connections),
        "restart": lambda: restart(bed),
    }
    return actions[name]()


def kill(pid: int, sig: int) -> list[threading.Thread]:
    os.kill(pid, sig)
    return []


def hang(victim: Child, seconds: float) -> list[threading.Thread]:
    os.kill(victim.pid, signal.SIGSTOP)
    threading.Timer(seconds, lambda: os.kill(victim.pid, signal.SIGCONT)).start()
    return []


def restart(bed: Testbed) -> list[threading.Thread]:
    """SIGTERM the balancer (it drains) and start a new one on the same ports."""
    t = time.monotonic()
    port, admin_port = bed.port, int(bed.balancer.ready["admin_port"])
    stop(bed.balancer, timeout=10)
    bed.balancer = start_balancer(bed.servers, bed.log_dir, port, admin_port)
    bed.notes.append(f"new balancer ready {time.monotonic() - t:.2f} s after SIGTERM")
    return []


def background(target: Callable[..., None], *args: object) -> list[threading.Thread]:
    thread = threading.Thread(target=target, args=args, daemon=True)
    thread.start()
    return [thread]


def admin_churn(bed: Testbed, stop_at: float) -> None:
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


def connection_churn(bed: Testbed, stop_at: float, count: int) -> None:
    """Up to ``count`` short connections from ``CHURN_THREADS`` threads beside the good
    client, until ``stop_at``; notes how many were made and how many failed."""
    made: list[Outcome] = []
    shares = [count // CHURN_THREADS + (i < count % CHURN_THREADS) for i in range(CHURN_THREADS)]
    threads = [
        threading.Thread(target=short_connections, args=(bed.port, stop_at, share, made))
        for share in shares
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, stop_at + CLIENT_DEADLINE_S + 5 - time.monotonic()))
    failed = Counter(o.kind for o in made if o.kind)
    bed.notes.append(f"{len(made)} short connections, failed: {fmt(failed)}")


def p99_ms(outcomes: Iterable[Outcome]) -> float | None:
    ordered = sorted(o.elapsed for o in outcomes if o.kind is None)
    if not ordered:
        return None
    return 1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def summarize(name: str, run: FaultRun) -> dict[str, object]:
    outcomes = run.outcomes
    t0 = min((o.t_sent for o in outcomes), default=0.0)
    failed = [o for o in outcomes if o.kind is not None]
    kinds = Counter(o.kind for o in failed)
    origins = Counter(o.origin for o in failed)
    hung = sum(o.elapsed > REQUEST_TIMEOUT_S + HUNG_MARGIN_S for o in outcomes)
    lost = sum(o.kind == "timeout" and o.origin == "client" for o in outcomes)
    last_failure_end = max((o.t_sent + o.elapsed - t0 for o in failed), default=None)
    recover = 0.0 if last_failure_end is None else max(last_failure_end - run.t_fault, 0.0)
    return {
        "fault": name,
        "sent": len(outcomes),
        "ok": len(outcomes) - len(failed),
        "errors by kind": dict(kinds),
        "errors by origin": dict(origins),
        "hung": hung,
        "lost": lost,
        "p99_ms_before_fault": p99_ms(o for o in outcomes if o.t_sent - t0 < run.t_fault),
        "p99_ms_after_fault": p99_ms(o for o in outcomes if o.t_sent - t0 >= run.t_fault),
        "ejections": run.ejections,
        "recover_s": round(recover, 2),
        "rss_mb": [
            None if f is None else round(f.rss_mb, 1) for f in (run.before, run.at_fault, run.after)
        ],
        "fds": [None if f is None else f.fds for f in (run.before, run.after)],
        "server_inflight": run.server_inflight,
        "notes": run.notes,
    }


# ---------------------------------------------------------------- whole runs


def lblab(args: list[str], log_dir: Path, name: str) -> subprocess.Popen[bytes]:
    """``lblab ARGS`` in a session of its own; stdout and stderr to ``log_dir/name.*``."""
    with open(log_dir / f"{name}.out", "ab") as out, open(log_dir / f"{name}.err", "ab") as err:
        return subprocess.Popen(
            lblab_command(*args), stdout=out, stderr=err, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip


def run_to_end(popen: subprocess.Popen[bytes], timeout: float) -> int | None:
    """The exit code, or None after SIGKILLing the process group at ``timeout``."""
    try:
        return popen.wait(timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGKILL)
        popen.wait(5)
        return None


def exit_text(code: int | None, timeout: float) -> str:
    return f"no exit within {timeout:.0f} s (killed)" if code is None else str(code)


def finish(popen: subprocess.Popen[bytes], timeout: float, log_dir: Path, name: str) -> str:
    """Wait for ``name`` to end: its exit, with its last stderr line when that is not 0."""
    code = run_to_end(popen, timeout)
    text = exit_text(code, timeout)
    return text if code in (0, None) else f"{text}: {stderr_facts(log_dir, name)[0]}"


def stderr_facts(log_dir: Path, name: str) -> tuple[str, bool]:
    """The last non-empty line of ``name``'s stderr, and whether it holds a Traceback."""
    text = (log_dir / f"{name}.err").read_text(errors="replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[-1][:240] if lines else "-"), "Traceback" in text


def wait_for_load(out: Path, index: int, runner: subprocess.Popen[bytes]) -> float | None:
    """Wait until phase ``index`` of the run in ``out`` sends requests; the epoch its load
    started, or None if the runner exited first or ``RUN_START_S`` passed."""
    deadline = time.monotonic() + RUN_START_S
    while time.monotonic() < deadline and runner.poll() is None:
        try:
            phase = json.loads((out / MANIFEST).read_text())["phases"][index]
            if phase["status"] == "running" and phase.get("attempt"):
                t = started_at(phase_folder(out, phase["key"], phase["attempt"]))
                if t is not None:
                    return t
        except (OSError, ValueError, KeyError, IndexError):
            pass  # not written yet
        time.sleep(0.2)
    return None


def run_family(out: Path, runner_pid: int) -> list[psutil.Process]:
    """Processes of the run in ``out``: their command line names ``out``, or their
    ``LBLAB_PARENT_PID`` is the runner (the runner itself and this process left out)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "environ"]):
        if proc.pid in (os.getpid(), runner_pid):
            continue
        cmdline, environ = proc.info["cmdline"] or [], proc.info["environ"] or {}
        if any(str(out) in arg for arg in cmdline) or environ.get(PARENT_ENV) == str(runner_pid):
            found.append(proc)
    return found


def alive(procs: Iterable[psutil.Process]) -> list[psutil.Process]:
    """Those still running (not a zombie, not a new process with a reused pid)."""
    unique = {p.pid: p for p in procs}.values()
    running = []
    for proc in unique:
        with contextlib.suppress(psutil.Error):
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                running.append(proc)
    return running


def role(proc: psutil.Process) -> str:
    """What a run's process is: server, agent, balancer, locust, ..."""
    try:
        argv = proc.cmdline()
    except psutil.Error:
        return "gone"
    if "locust" in argv[:3]:
        return "locust"
    if "lblab" in argv[:-1]:
        return argv[argv.index("lblab") + 1]
    return Path(argv[0]).name if argv else "?"


def describe(procs: list[psutil.Process]) -> str:
    return f"{len(procs)} ({fmt(Counter(role(p) for p in procs))})" if procs else "0"


def kill_all(procs: Iterable[psutil.Process]) -> int:
    """SIGKILL each of these processes (by pid, checked against reuse); how many."""
    killed = alive(procs)
    for proc in killed:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    return len(killed)


@dataclass
class PhaseRows:
    rows: int = 0
    failed: int = 0
    sent_before: int = 0  # sent before the epoch given to phase_rows


def phase_rows(out: Path, before: float) -> list[PhaseRows] | str:
    """The rows of each phase of the manifest in ``requests.parquet``, or why not."""
    columns = ["scenario", "strategy", "replication", "ok", "t_sent"]
    try:
        phases = json.loads((out / MANIFEST).read_text())["phases"]
        table = pq.read_table(out / "requests.parquet", columns=columns)
    except (OSError, ValueError, KeyError, pa.ArrowException) as exc:
        return f"unreadable: {type(exc).__name__}: {exc}"[:160]
    counts = {(p["scenario"], p["strategy"], p["replication"]): PhaseRows() for p in phases}
    for *key, ok, t_sent in zip(*(table[c].to_pylist() for c in columns), strict=True):
        phase = counts.get(tuple(key))
        if phase is not None:
            phase.rows += 1
            phase.failed += not ok
            phase.sent_before += t_sent < before
    return list(counts.values())


def kill_resume(seconds: float, log_dir: Path) -> dict[str, object]:
    out = log_dir / "run"
    runner = lblab([*RUN_ARGS, "--duration", f"{seconds:g}s", "--out", str(out)], log_dir, "run")
    family: list[psutil.Process] = []
    row: dict[str, object] = {"case": "kill-resume"}
    try:
        load_t0 = wait_for_load(out, 1, runner)
        if load_t0 is None:
            row["error"] = f"the second phase never sent (exit {runner.poll()}; see {log_dir})"
            return row
        time.sleep(max(0.0, load_t0 + (1 + seconds) / 2 - time.time()))
        family = descendants(runner.pid) + run_family(out, runner.pid)
        row["killed"] = f"{time.time() - load_t0:.1f} s into phase 2's load of {1 + seconds:g} s"
        t_kill = time.time()
        os.killpg(runner.pid, signal.SIGKILL)
        row["exit (killed run)"] = runner.wait(5)
        time.sleep(ORPHAN_WAIT_S)
        family += run_family(out, runner.pid)
        row["orphans alive 3 s after"] = describe(alive(family))
        resume = lblab(["run", "--resume", "--out", str(out), "--no-report"], log_dir, "resume")
        row["exit (resume)"] = finish(resume, 2 * (1 + seconds) + RUN_END_S, log_dir, "resume")
        rows = phase_rows(out, t_kill)
        if isinstance(rows, str):
            row["rows"] = rows
        else:
            resumed, sibling = rows[1], rows[0]
            row["rows of the resumed phase (failed)"] = f"{resumed.rows} ({resumed.failed})"
            row["rows of the resumed phase sent before the kill"] = resumed.sent_before
            row["rows of its sibling (failed)"] = f"{sibling.rows} ({sibling.failed})"
        return row
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(runner.pid, signal.SIGKILL)
        row["still alive at the end (killed)"] = kill_all(family + run_family(out, runner.pid))


def fill(path: Path) -> int:
    """Take every free byte of ``path``'s filesystem (fallocate what is free, then write
    until ENOSPC); the bytes taken."""
    st = os.statvfs(path.parent)
    free = st.f_bavail * st.f_frsize
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with contextlib.suppress(OSError):
            os.posix_fallocate(fd, 0, free)
        os.lseek(fd, 0, os.SEEK_END)
        chunk = b"\0" * FILL_CHUNK
        for _ in range(free // FILL_CHUNK + 64):  # what freed up since statvfs, bounded
            try:
                os.write(fd, chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                break
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


@contextlib.contextmanager
def tmpfs(mount_point: Path, size_mb: int) -> Iterator[Path]:
    mount_point.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(mount_point)],
        check=True, timeout=10, capture_output=True,
    )  # fmt: skip
    try:
        yield mount_point
    finally:
        done = subprocess.run(["umount", str(mount_point)], timeout=10, capture_output=True)
        if done.returncode != 0:  # something still holds a file there: detach it anyway
            subprocess.run(["umount", "-l", str(mount_point)], timeout=10, check=False)


def full_disk(seconds: float, log_dir: Path) -> dict[str, object]:
    row: dict[str, object] = {"case": "full-disk"}
    if os.geteuid() != 0:
        row["skipped"] = "needs root (mounts a tmpfs)"
        return row
    with tmpfs(log_dir / "disk", TMPFS_MB) as disk:
        out = disk / "run"
        runner = lblab(
            [*RUN_ARGS, "--duration", f"{seconds:g}s", "--out", str(out)], log_dir, "run"
        )
        try:
            load_t0 = wait_for_load(out, 1, runner)
            if load_t0 is None:
                row["error"] = f"the second phase never sent (exit {runner.poll()}; see {log_dir})"
                return row
            time.sleep(max(0.0, load_t0 + (1 + seconds) / 3 - time.time()))
            taken = fill(disk / "filler")
            row["filled"] = f"{taken / 2**20:.0f} MB, {time.time() - load_t0:.1f} s into phase 2"
            timeout = 2 * (1 + seconds) + RUN_END_S
            row["exit"] = exit_text(run_to_end(runner, timeout), timeout)
            row["last stderr line"], traceback = stderr_facts(log_dir, "run")
            row["Traceback in stderr"] = "yes" if traceback else "no"
            try:
                row["manifest status"] = json.loads((out / MANIFEST).read_text())["status"]
            except (OSError, ValueError, KeyError) as exc:
                row["manifest status"] = f"unreadable: {type(exc).__name__}"
            (disk / "filler").unlink()
            report = lblab(["report", str(out)], log_dir, "report")
            row["exit (lblab report, space freed)"] = finish(report, RUN_END_S, log_dir, "report")
            resume = lblab(["run", "--resume", "--out", str(out), "--no-report"], log_dir, "resume")
            row["exit (resume, space freed)"] = finish(resume, timeout, log_dir, "resume")
            return row
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(runner.pid, signal.SIGKILL)
            row["still alive at the end (killed)"] = kill_all(run_family(out, runner.pid))


FAULTS = (
    "kill",
    "hang",
    "slow",
    "drain",
    "overload",
    "garbage client",
    "bad-body",
    "admin churn",
    "soak",
    "connection churn",
    "restart",
)
RUN_CASES: dict[str, Callable[[float, Path], dict[str, object]]] = {
    "kill-resume": kill_resume,
    "full-disk": full_disk,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="Load per fault; run phases.")
    parser.add_argument("--clients", type=int, default=12, help="Good clients per fault.")
    parser.add_argument("--rate", type=float, default=800.0, help="soak: req/s of all clients.")
    parser.add_argument(
        "--connections", type=int, default=2000, help="connection churn: short connections."
    )
    parser.add_argument("--only", default="", help="Comma-separated cases (default: all).")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--json", action="store_true", help="Print JSON rows, not tables.")
    output.add_argument(
        "--markdown",
        action="store_true",
        help="Print only a stamped section of docs/results/benchmarks.md.",
    )
    args = parser.parse_args()
    cases = (*FAULTS, *RUN_CASES)
    chosen = [f.strip() for f in args.only.split(",") if f.strip()] or list(cases)
    unknown = [f for f in chosen if f not in cases]
    if unknown:
        parser.error(f"unknown case(s) {unknown}; choose from {', '.join(cases)}")
    if not args.seconds > FAULT_AT_S + 1 or args.clients < 1:
        parser.error(f"--seconds must exceed {FAULT_AT_S + 1:g} and --clients be >= 1")
    if not args.rate > 0 or args.connections < 0:
        parser.error("--rate must be > 0 and --connections >= 0")
    opts = Options(args.seconds, args.clients, args.rate, args.connections)
    command = this_script()
    stamp = take()
    print(f"load average at start: {os.getloadavg()[0]:.2f} (2-core VM)", file=sys.stderr)
    rows: list[dict[str, object]] = []
    run_rows: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="lblab-faults-") as tmp:
        for name in chosen:
            log_dir = Path(tmp) / name
            if name in RUN_CASES:
                log_dir.mkdir()
                run_rows.append(RUN_CASES[name](args.seconds, log_dir))
            else:
                rows.append(summarize(name, run_fault(name, opts, Path(tmp))))
            print(f"{name}: done", file=sys.stderr)
    if args.json:
        print(json.dumps(rows + run_rows, indent=1))
        return
    if args.markdown:
        print(markdown(rows, run_rows, opts, stamp, command))
        return
    if rows:
        print_table(rows)
    for row in run_rows:
        print_facts(row)


def fmt(counts: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "-"


COLUMNS = (
    "fault", "sent", "ok", "errors by kind", "errors by origin", "hung", "lost",
    "p99 ms before / after fault", "ejections", "recover s",
    "rss MB before / at fault / after", "fds before / after", "srv inflight", "notes",
)  # fmt: skip


def held(inflight: dict[str, int | None]) -> str:
    """The requests the servers hold, and which gave no answer."""
    total = sum(v for v in inflight.values() if v is not None)
    silent = [k for k, v in inflight.items() if v is None]
    return f"{total}" + (f" ({', '.join(silent)} no answer)" if silent else "")


def fault_cells(r: Mapping) -> dict[str, str]:
    """One fault's row of the table (``summarize``'s dict), a cell per ``COLUMNS``."""

    def num(value: float | None) -> str:
        return "-" if value is None else f"{value:.0f}"

    ej = fmt({k: v for k, v in r["ejections"].items() if v})
    rss = " / ".join("-" if v is None else f"{v:.1f}" for v in r["rss_mb"])
    fds = " / ".join("-" if v is None else str(v) for v in r["fds"])
    cells = (
        r["fault"], str(r["sent"]), str(r["ok"]), fmt(r["errors by kind"]),
        fmt(r["errors by origin"]), str(r["hung"]), str(r["lost"]),
        f"{num(r['p99_ms_before_fault'])} / {num(r['p99_ms_after_fault'])}", ej,
        f"{r['recover_s']:.2f}", rss, fds, held(r["server_inflight"]),
        "; ".join(r["notes"]) or "-",
    )  # fmt: skip
    return dict(zip(COLUMNS, cells, strict=True))


def print_table(rows: list[dict]) -> None:
    print("\n".join(table(COLUMNS, [fault_cells(r) for r in rows])))


def print_facts(row: dict[str, object]) -> None:
    print(f"\n| {row['case']} | |\n|---|---|")
    for key, value in row.items():
        if key != "case":
            print(f"| {key} | {value} |")


def cases_described(doc: str | None = __doc__) -> dict[str, str]:
    """What each case does, from the tables of this module's docstring (RST simple
    tables: a case name in the first column, its description beside it and on the
    indented lines below), with RST's ````code```` as markdown's ```code```."""
    described: dict[str, str] = {}
    width = 0
    inside = False
    name = ""
    for line in (doc or "").splitlines():
        border = re.fullmatch(r"(=+)\s+=+\s*", line)
        if border:
            inside = not inside
            width = len(border[1])
            continue
        if not inside or not line.strip():
            continue
        if line[:width].strip():
            name = line[:width].strip()
            described[name] = line[width:].strip()
        elif name:
            described[name] += " " + line.strip()
    return {k: v.replace("``", "`") for k, v in described.items()}


def markdown(
    rows: Sequence[Mapping],
    run_rows: Sequence[Mapping[str, object]],
    opts: Options,
    stamp: Stamp,
    command: str,
) -> str:
    """The section of ``docs/results/benchmarks.md``: stamp, the faults' table and the run
    cases' facts, what each case does and the terms, and whether the musts held."""
    what = cases_described()
    lines = [
        "## Faults under load",
        "",
        stamp.markdown(command),
        "",
        "Per fault, a fresh testbed on loopback: three `lblab server` processes with "
        f"{WORK_DELAY_MS} ms of work each behind `lblab balancer --strategy rr "
        f"--request-timeout {REQUEST_TIMEOUT_S:g}s`, and {opts.clients} closed-loop clients "
        "(lblab's blocking RSocket client, one thread and one connection each) for "
        f"{opts.seconds:g} s; the fault starts {FAULT_AT_S:g} s into the load.",
    ]
    if rows:
        lines += ["", *table(COLUMNS, [fault_cells(r) for r in rows])]
        lines += [
            "",
            f"*hung*: answered later than the balancer's deadline + {HUNG_MARGIN_S:g} s; "
            f"*lost*: no answer before the client's own {CLIENT_DEADLINE_S:g} s deadline; "
            "*recover*: seconds from the fault's start to the end of the last failed request "
            "(0 when nothing failed; for a fault that lasts the whole run, the run's end); "
            "*p99*: of the answered requests sent before and after the fault starts; "
            "*rss MB* and *fds*: the balancer's resident memory and open files (after: once "
            f"the clients closed, up to {SETTLE_S:g} s to settle); *srv inflight*: the requests "
            "the live servers still hold after the load, asked of each server. *hung*, *lost* "
            "and *srv inflight* must be 0.",
            "",
            *(
                f"- **{r['fault']}**{here(str(r['fault']), opts)}: {what.get(str(r['fault']), '')}"
                for r in rows
            ),
            "",
            musts(rows),
        ]
    for row in run_rows:
        case = str(row["case"])
        facts = [(key, value) for key, value in row.items() if key != "case"]
        lines += [
            "",
            f"**{case}** (a whole `lblab {' '.join(RUN_ARGS)} --duration {opts.seconds:g}s`): "
            + what.get(case, ""),
            "",
            *table([case, "result"], facts),
        ]
    return "\n".join(lines)


def here(name: str, opts: Options) -> str:
    """What the options made of a case whose description names them; "" for the rest."""
    if name == "overload":
        return f" ({clients_of(name, opts)} clients)"
    if name == "soak":
        return f" ({opts.rate:g} req/s)"
    if name == "connection churn":
        return f" (up to {opts.connections:,} short connections)"
    return ""


def musts(rows: Sequence[Mapping]) -> str:
    """One sentence: whether hung, lost and srv inflight were 0 in every case."""
    broken = []
    for r in rows:
        bad = [f"{key} {r[key]}" for key in ("hung", "lost") if r[key]]
        inflight = held(r["server_inflight"])
        if inflight != "0":
            bad.append(f"srv inflight {inflight}")
        if bad:
            broken.append(f"{r['fault']} ({', '.join(bad)})")
    if not broken:
        return f"*hung*, *lost* and *srv inflight* are 0 in all {len(rows)} case(s)."
    return f"Not 0 in {len(broken)} of {len(rows)} case(s): {'; '.join(broken)}."


if __name__ == "__main__":
    main()
