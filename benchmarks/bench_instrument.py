"""The instrument's own error: what lblab adds to a request's latency at 100, 1,000 and
5,000 req/s, open and closed, beside vegeta's for the same HTTP load and beside the
physical floor, a bare loopback round trip.

    uv run python benchmarks/bench_instrument.py [--seconds 15] [--warmup 2]
        [--rates 100,1000,5000] [--delay-ms 20] [--round-trips 20000] [--markdown]

- lblab: one real ``lblab run`` of an experiment file this script writes: three
  ``lblab server`` processes that sleep a fixed ``--delay-ms`` per request (workers and
  max_inflight so wide that they never queue; a request of 100 B with no work), ``rr``,
  one phase per load: open Poisson at each rate, and closed with ``rate x delay`` users
  (the users that would give that rate if the harness added nothing). Per phase, its
  manifest's ``measured`` facts: the harness's time (latency - server_ms: the client,
  Locust, the balancer, loopback twice, and a late send's lag), the servers' time
  outside their work slot, the open model's send lag, and the achieved rate; each
  marked against issue 47's targets (harness at most 0.3 ms at p50 and 1.5 ms at p99,
  sends late by at most 0.5 ms at p99, up to 1,000 req/s).
- vegeta (v12.13.0, built on demand into ``~/.cache/lblab/vegeta`` with the go
  command; without go or the module proxy the script says so and measures the rest)
  against ``benchmarks/http_echo_server.py --delay-ms`` at the same loads: constant
  rate (vegeta has no Poisson pacer) and, closed, ``-rate=0`` with as many workers as
  lblab's users. The server sleeps the same delay, so the load is alike (as many
  requests in flight, as many connections), and says its own time for each request in
  a ``Server-Timing`` header that vegeta records: latency minus that time is vegeta's
  error as lblab's harness time is lblab's. Its latency minus the nominal delay is
  beside it (the server's timer fires up to a millisecond early or late: event loops
  keep time in whole milliseconds). vegeta times a request from when its worker took
  it, not from when it was due, so a late send is not in its figures; lblab's are.
  vegeta is pinned to the CPU lblab gives its harness and the server to the servers'.
- the floor: a blocking TCP ping-pong of 100 B on 127.0.0.1 (``loopback_pingpong.c``,
  built with ``cc`` when there is one, and the same in Python), both ends on one CPU
  and across the harness's and the servers' CPUs. A request through lblab crosses
  loopback twice (client to balancer, balancer to server) each way.

Percentiles are numpy's (linear) over the measured window's successful requests. One
run of each on a shared 2-core VM: the tails move with the machine. ``--markdown``
prints a stamped section of ``docs/results/benchmarks.md`` (progress on stderr).
"""

from __future__ import annotations

import argparse
import base64
import csv
import os
import re
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lblab import manifest
from lblab.pages import table, this_script
from lblab.procs import lblab_command, spawn, stop
from lblab.stamp import Stamp, take
from lblab.windows import INSIDE, WINDOW_COLUMN

HERE = Path(__file__).resolve().parent
VEGETA_MODULE = "github.com/tsenart/vegeta/v12@v12.13.0"
TARGET_HARNESS_P50_MS = 0.3
TARGET_HARNESS_P99_MS = 1.5
TARGET_SEND_LAG_P99_MS = 0.5
TARGET_UP_TO_RATE = 1000
"""Issue 47's targets on the local testbed, which hold up to this rate (req/s)."""
SERVERS = 3
SERVER_SLOTS = 256
"""Each server's workers and max_inflight: 5,000 req/s of 20 ms is 100 in flight over
the three, so none ever queues."""
BODY_BYTES = 100
REACHED = 0.95
"""A load is reached when its achieved rate is at least this share of the asked one."""
BUILD_TIMEOUT_S = 600
PING_SERVER_TIMEOUT_S = 30


@dataclass(frozen=True)
class Load:
    """One load: ``open`` at ``rate`` req/s, or ``closed`` with ``users`` (the users that
    give ``rate`` if nothing but the servers' delay took time)."""

    model: str
    rate: int
    users: int = 0

    @property
    def name(self) -> str:
        return f"open-{self.rate}" if self.model == "open" else f"closed-{self.users}"

    @property
    def label(self) -> str:
        if self.model == "open":
            return f"open {self.rate:,} req/s"
        return f"closed {self.users} users (~{self.rate:,} req/s)"

    @property
    def targeted(self) -> bool:
        return self.rate <= TARGET_UP_TO_RATE

    def reached(self, achieved: float) -> bool:
        """Whether ``achieved`` req/s is the open load's rate (a closed load has no rate
        to reach: its users send as fast as the answers come)."""
        return self.model == "closed" or achieved >= REACHED * self.rate


def loads(rates: list[int], delay_ms: float) -> list[Load]:
    """Open at each rate, then closed with ``rate x delay`` users (at least 1) each."""
    closed = [Load("closed", r, max(1, round(r * delay_ms / 1000))) for r in rates]
    return [Load("open", r) for r in rates] + closed


@dataclass(frozen=True)
class LblabCell:
    """One phase of the lblab run: its load, achieved rate, ``measured`` facts (ms),
    verdict and the names of the checks it failed."""

    load: Load
    achieved: float
    measured: dict[str, float | None]
    verdict: str
    failed: tuple[str, ...] = ()
    after_send: tuple[float, float] | None = None
    """The harness's time after the request left, p50 and p99 (ms): without a late
    send's lag, as vegeta times its requests."""

    def fact(self, name: str) -> float | None:
        value = self.measured.get(name)
        return None if value is None else float(value)

    def misses(self) -> list[str]:
        """The issue's targets this cell misses, in words ([] when it meets them all)."""
        bounds = [
            ("harness p50", "harness_p50_ms", TARGET_HARNESS_P50_MS),
            ("harness p99", "harness_p99_ms", TARGET_HARNESS_P99_MS),
        ]
        if self.load.model == "open":
            bounds.append(("send lag p99", "send_lag_p99_ms", TARGET_SEND_LAG_P99_MS))
        out = []
        for words, key, bound in bounds:
            value = self.fact(key)
            if value is None:
                out.append(f"{words} not measured")
            elif value > bound:
                out.append(f"{words} {value:.2f} > {bound}")
        return out

    def verdict_words(self) -> str:
        if not self.load.targeted:
            return f"(targets up to {TARGET_UP_TO_RATE:,} req/s)"
        missed = self.misses()
        return "meets" if not missed else "misses: " + ", ".join(missed)


@dataclass(frozen=True)
class VegetaCell:
    """vegeta at one load: achieved rate (ok/s), latency p50/p99, the same minus the
    server's own time per request, in ms, and its failed requests."""

    load: Load
    achieved: float
    latency: tuple[float, float]
    own: tuple[float, float]
    failed: int


@dataclass(frozen=True)
class Floor:
    """A loopback ping-pong's round trips: p50 and p99 in microseconds."""

    program: str
    placement: str
    round_trips: int
    p50_us: float
    p99_us: float


@dataclass
class InstrumentBench:
    seconds: float
    warmup: float
    delay_ms: float
    lblab: list[LblabCell]
    floors: list[Floor]
    vegeta: list[VegetaCell] = field(default_factory=list)
    vegeta_note: str = ""
    """Why vegeta did not run (empty when it did)."""


def quantiles(values: np.ndarray) -> tuple[float, float]:
    p50, p99 = np.quantile(values, [0.5, 0.99])
    return float(p50), float(p99)


# ------------------------------------------------------------------ CPUs


def harness_and_server_cpus() -> tuple[set[int], set[int]]:
    """The CPUs for the load generator and for the servers, as lblab's local testbed
    splits a 2-core machine: the first CPU for the harness, the others for the servers
    (one CPU: both on it)."""
    cpus = sorted(os.sched_getaffinity(0))
    return {cpus[0]}, set(cpus[1:]) or {cpus[0]}


@contextmanager
def pinned(cpus: set[int]) -> Iterator[None]:
    """This process on ``cpus`` for the block (children started inside inherit it)."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


# ------------------------------------------------------------------ lblab


def experiment_file(
    plan: list[Load], delay_ms: float, seconds: float, warmup: float, *, timeout_s: float = 10
) -> str:
    """The TOML of one ``lblab run``: a phase of ``rr`` per load over three sleeping
    servers, 100 B requests with no work."""
    cell = f'[{{name = "{BODY_BYTES}B", package = "{BODY_BYTES}B", work = "0B"}}]'
    lines = [
        'preset = "quick"',
        "",
        "[run]",
        'name = "instrument"',
        'strategies = ["rr"]',
        "scenarios = [" + ", ".join(f'"{load.name}"' for load in plan) + "]",
        f'duration = "{seconds:g}s"',
        f'warmup = "{warmup:g}s"',
        "replications = 1",
        "max_replications = 1",
        f'request_timeout = "{timeout_s:g}s"',
        "",
        "[weights]",
        *(f"s{i} = 1" for i in range(1, SERVERS + 1)),
    ]
    for i in range(1, SERVERS + 1):
        lines += [
            "",
            "[[servers]]",
            f'id = "s{i}"',
            f"workers = {SERVER_SLOTS}",
            f"max_inflight = {SERVER_SLOTS}",
            f"delay_ms = {delay_ms:g}",
            'delay_dist = "fixed"',
        ]
    for load in plan:
        lines += ["", f"[scenario_defs.{load.name}]", f"cells = {cell}", f'model = "{load.model}"']
        if load.model == "open":
            lines += [f"rate = {load.rate}", 'arrival = "poisson"']
        else:
            lines += [f"users = {load.users}", f"spawn_rate = {load.users}"]
    return "\n".join(lines) + "\n"


def run_lblab(
    plan: list[Load], delay_ms: float, seconds: float, warmup: float, workdir: Path
) -> list[LblabCell]:
    """One ``lblab run`` of ``experiment_file``; each phase's cell, in ``plan``'s order."""
    config = workdir / "instrument.toml"
    config.write_text(experiment_file(plan, delay_ms, seconds, warmup))
    out = workdir / "run"
    argv = lblab_command("run", "--config", str(config), "--out", str(out), "--no-report")
    timeout = len(plan) * (seconds + warmup + 30) + 120
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if done.returncode not in (0, 1):  # 1: a phase failed a check; its figures still count
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    phases = {p.scenario: p for p in manifest.load(out / "manifest.json").phases}
    requests = pq.read_table(out / "requests.parquet")
    cells = []
    for item in plan:
        p = phases.get(item.name)
        if p is None or p.status != "done":
            status = "missing" if p is None else f"{p.status}: {p.error}"
            raise SystemExit(f"{out}: phase {item.name} is {status}")
        cells.append(
            LblabCell(
                item,
                float(p.ok_per_s_window or 0.0),
                dict(p.measured),
                p.verdict or "n/a",
                tuple(c.name for c in p.checks_at("fail")),
                after_send(requests, item.name),
            )
        )
    return cells


def after_send(requests: pa.Table, scenario: str) -> tuple[float, float] | None:
    """p50 and p99 (ms) of ``latency - server_ms - max(send_lag, 0)`` over ``scenario``'s
    successful requests in its window: the harness's time from when a request left (an
    open-loop latency counts from the due time, so a late send's lag is in it; an early
    one left at once and counts from then)."""
    rows = requests.filter(
        pc.and_(
            pc.and_(pc.equal(requests["scenario"], scenario), requests["ok"]),
            pc.and_(pc.equal(requests[WINDOW_COLUMN], INSIDE), pc.is_valid(requests["server_ms"])),
        )
    )
    if not len(rows):
        return None
    lag = rows["send_lag_ms"].fill_null(0.0).to_numpy(zero_copy_only=False)
    latency = rows["latency_ms"].to_numpy(zero_copy_only=False)
    server = rows["server_ms"].to_numpy(zero_copy_only=False)
    return quantiles(latency - server - np.maximum(lag, 0.0))


# ------------------------------------------------------------------ vegeta


def cache_dir(name: str) -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "lblab" / name


def go_command() -> str | None:
    found = shutil.which("go")
    if found:
        return found
    fallback = Path("/usr/local/go/bin/go")
    return str(fallback) if fallback.exists() else None


def vegeta_binary(say: Callable[[str], None]) -> tuple[Path | None, str]:
    """vegeta, built into the cache on first use: (its path, "") or (None, why not and
    what to do)."""
    folder = cache_dir("vegeta")
    binary = folder / "vegeta"
    if binary.exists():
        return binary, ""
    build = f"GOBIN={folder} go install {VEGETA_MODULE}"
    go = go_command()
    if go is None:
        return None, f"no go command here: install Go (https://go.dev/dl/), then `{build}`"
    say(f"building vegeta: {build} ...")
    folder.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run(
            [go, "install", VEGETA_MODULE],
            env={**os.environ, "GOBIN": str(folder)},
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return None, f"`{build}` took over {BUILD_TIMEOUT_S} s; run it by hand, then rerun"
    if done.returncode != 0 or not binary.exists():
        last = done.stderr.strip().splitlines()[-1:] or ["no output"]
        return None, f"`{build}` failed ({last[0]}): fix that (the module proxy?), then rerun"
    return binary, ""


SERVER_TIMING = re.compile(rb"Server-Timing: total;dur=([0-9.]+)")


def vegeta_results(
    rows: Iterator[list[str]], warmup: float
) -> tuple[np.ndarray, np.ndarray, int, float]:
    """From vegeta's CSV results (unix ns, code, latency ns, ..., headers in base64 last),
    over the requests that started ``warmup`` s after the first: the successful ones'
    latency and server time (ms), the failed count, and the window's length (s)."""
    start, latency, server, failed = [], [], [], 0
    for row in rows:
        if row[1] != "200":
            failed += 1
            continue
        timing = SERVER_TIMING.search(base64.b64decode(row[11]))
        if timing is None:
            raise SystemExit("vegeta: an answer without Server-Timing: is the server --delay-ms?")
        start.append(int(row[0]))
        latency.append(int(row[2]) / 1e6)
        server.append(float(timing[1]))
    if not start:
        return np.empty(0), np.empty(0), failed, 0.0
    t = np.array(start)
    inside = t >= t.min() + warmup * 1e9
    window_s = float(t.max() - t.min()) / 1e9 - warmup
    return np.array(latency)[inside], np.array(server)[inside], failed, window_s


def run_vegeta(
    binary: Path, plan: list[Load], delay_ms: float, seconds: float, warmup: float, workdir: Path
) -> list[VegetaCell]:
    """vegeta at each load against the sleeping HTTP server."""
    harness, servers = harness_and_server_cpus()
    body = workdir / "body"
    body.write_bytes(b"x" * BODY_BYTES)
    server = spawn(
        "http-echo",
        [sys.executable, str(HERE / "http_echo_server.py"), "--delay-ms", f"{delay_ms:g}"],
    )
    cells = []
    try:
        os.sched_setaffinity(server.pid, servers)
        target = f"POST http://127.0.0.1:{server.ready['port']}/\n"
        for item in plan:
            results = workdir / f"vegeta-{item.name}.bin"
            pace = (
                [f"-rate={item.rate}/1s"]
                if item.model == "open"
                else ["-rate=0", f"-workers={item.users}", f"-max-workers={item.users}"]
            )
            argv = [
                str(binary), "attack", *pace, f"-duration={seconds + warmup:g}s",
                f"-body={body}", "-timeout=10s", f"-output={results}",
            ]  # fmt: skip
            with pinned(harness):
                subprocess.run(
                    argv, input=target, text=True, check=True, timeout=seconds + warmup + 60
                )
            encoded = subprocess.run(
                [str(binary), "encode", "--to", "csv", str(results)],
                capture_output=True, text=True, check=True, timeout=120,
            )  # fmt: skip
            latency, own, failed, window_s = vegeta_results(
                csv.reader(encoded.stdout.splitlines()), warmup
            )
            if not len(latency):
                raise SystemExit(f"vegeta at {item.label}: no successful request")
            cells.append(
                VegetaCell(
                    item,
                    len(latency) / window_s,
                    quantiles(latency - delay_ms),
                    quantiles(latency - own),
                    failed,
                )
            )
    finally:
        stop(server)
    return cells


# ------------------------------------------------------------------ the floor

PING_SERVER = """
import socket, sys
size = int(sys.argv[1])
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
conn, _ = listener.accept()
conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while True:
    data = conn.recv(size, socket.MSG_WAITALL)
    if len(data) < size:
        break
    conn.sendall(data)
"""
"""The Python echo end: prints its port, echoes ``size`` bytes at a time until closed."""
PING_WARMUP = 1000


def python_pingpong(round_trips: int, client: set[int], server: set[int]) -> np.ndarray:
    """Round trips in ns of a blocking Python ping-pong of ``BODY_BYTES`` on loopback,
    the echo in its own process on ``server``, this end on ``client``."""
    with pinned(server):
        echo = subprocess.Popen(
            [sys.executable, "-c", PING_SERVER, str(BODY_BYTES)],
            stdout=subprocess.PIPE,
            text=True,
        )
    try:
        assert echo.stdout is not None
        ready, _, _ = select.select([echo.stdout], [], [], PING_SERVER_TIMEOUT_S)
        line = echo.stdout.readline() if ready else ""
        if not line.strip().isdigit():
            raise SystemExit(
                f"the Python loopback echo gave no port in {PING_SERVER_TIMEOUT_S} s "
                f"(it printed {line!r}): run `{sys.executable} -c` on PING_SERVER to see why"
            )
        port = int(line)
        out = np.empty(round_trips, dtype=np.int64)
        payload = b"x" * BODY_BYTES
        with pinned(client), socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for i in range(-PING_WARMUP, round_trips):
                t0 = time.perf_counter_ns()
                s.sendall(payload)
                got = s.recv(BODY_BYTES, socket.MSG_WAITALL)
                t1 = time.perf_counter_ns()
                if len(got) != BODY_BYTES:
                    raise SystemExit("the Python loopback echo closed early")
                if i >= 0:
                    out[i] = t1 - t0
        echo.wait(timeout=PING_SERVER_TIMEOUT_S)
        return out
    finally:
        if echo.poll() is None:
            echo.kill()
            echo.wait(timeout=PING_SERVER_TIMEOUT_S)


def c_pingpong(round_trips: int, client: set[int], server: set[int]) -> np.ndarray | None:
    """The same from ``loopback_pingpong.c``, built into the cache with ``cc``; None
    without a C compiler."""
    cc = shutil.which("cc")
    if cc is None:
        return None
    source = HERE / "loopback_pingpong.c"
    binary = cache_dir("loopback") / "loopback_pingpong"
    if not binary.exists() or binary.stat().st_mtime < source.stat().st_mtime:
        binary.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([cc, "-O2", "-o", str(binary), str(source)], check=True, timeout=120)
    done = subprocess.run(
        [str(binary), str(round_trips), str(BODY_BYTES), str(min(client)), str(min(server))],
        capture_output=True, text=True, check=True, timeout=PING_SERVER_TIMEOUT_S + round_trips / 1000,
    )  # fmt: skip
    return np.array([int(x) for x in done.stdout.split()], dtype=np.int64)


def floors(round_trips: int) -> list[Floor]:
    harness, servers = harness_and_server_cpus()
    placements = [("one CPU", harness, harness)]
    if servers != harness:
        placements.append(("across CPUs", harness, servers))
    out = []
    for words, client, server in placements:
        cpus = f"{words} ({min(client)}, {min(server)})"
        for program, ns in (
            ("C (`loopback_pingpong.c`)", c_pingpong(round_trips, client, server)),
            ("Python", python_pingpong(round_trips, client, server)),
        ):
            if ns is not None:
                p50, p99 = quantiles(ns / 1000)
                out.append(Floor(program, cpus, len(ns), p50, p99))
    return out


# ------------------------------------------------------------------ all of it


def measure(args: argparse.Namespace, say: Callable[[str], None]) -> InstrumentBench:
    plan = loads(args.rates, args.delay_ms)
    with tempfile.TemporaryDirectory(prefix="bench-instrument-") as tmp:
        workdir = Path(tmp)
        say(f"floor: {args.round_trips:,} round trips each ...")
        found = floors(args.round_trips)
        say(f"lblab run: {len(plan)} phases of {args.warmup:g} + {args.seconds:g} s ...")
        cells = run_lblab(plan, args.delay_ms, args.seconds, args.warmup, workdir)
        bench = InstrumentBench(args.seconds, args.warmup, args.delay_ms, cells, found)
        binary, bench.vegeta_note = vegeta_binary(say)
        if binary is not None:
            say(f"vegeta: {len(plan)} loads of {args.warmup:g} + {args.seconds:g} s ...")
            bench.vegeta = run_vegeta(
                binary, plan, args.delay_ms, args.seconds, args.warmup, workdir
            )
        else:
            say(f"vegeta not run: {bench.vegeta_note}")
    return bench


def ms(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def lblab_rows(bench: InstrumentBench) -> list[dict[str, str]]:
    rows = []
    for c in bench.lblab:
        reached = c.load.reached(c.achieved)
        rows.append(
            {
                "load": c.load.label,
                "achieved req/s": f"{c.achieved:,.0f}" + ("" if reached else " (not reached)"),
                **{
                    f"{words} {q} ms": ms(c.fact(f"{key}_{q}_ms"))
                    for words, key in (
                        ("harness", "harness"),
                        ("outside slot", "outside_slot"),
                        ("send lag", "send_lag"),
                    )
                    for q in ("p50", "p99")
                },
                "targets": c.verdict_words(),
                "checks": c.verdict + (f" ({', '.join(c.failed)})" if c.failed else ""),
            }
        )
    return rows


def beside_rows(bench: InstrumentBench) -> list[dict[str, str]]:
    vegeta = {v.load: v for v in bench.vegeta}
    rows = []
    for c in bench.lblab:
        v = vegeta.get(c.load)
        row = {
            "load": c.load.label,
            "lblab req/s": f"{c.achieved:,.0f}",
            "lblab p50 ms": ms(c.fact("harness_p50_ms")),
            "lblab p99 ms": ms(c.fact("harness_p99_ms")),
            "lblab after the send p50 ms": ms(c.after_send and c.after_send[0]),
            "lblab after the send p99 ms": ms(c.after_send and c.after_send[1]),
            "vegeta req/s": "" if v is None else f"{v.achieved:,.0f}",
            "vegeta p50 ms": "" if v is None else ms(v.own[0]),
            "vegeta p99 ms": "" if v is None else ms(v.own[1]),
            f"vegeta latency - {bench.delay_ms:g} ms, p50": "" if v is None else ms(v.latency[0]),
            f"vegeta latency - {bench.delay_ms:g} ms, p99": "" if v is None else ms(v.latency[1]),
            "vegeta failed": "" if v is None else f"{v.failed:,}",
        }
        rows.append(row)
    return rows


def floor_rows(bench: InstrumentBench) -> list[dict[str, str]]:
    return [
        {
            "ping-pong": f.program,
            "CPUs (client, echo)": f.placement,
            "round trips": f"{f.round_trips:,}",
            "p50 us": f"{f.p50_us:.1f}",
            "p99 us": f"{f.p99_us:.1f}",
        }
        for f in bench.floors
    ]


def reading(bench: InstrumentBench) -> list[str]:
    """What the tables say, in sentences made from them."""
    out = []
    targeted = [c for c in bench.lblab if c.load.targeted]
    met = [c for c in targeted if not c.misses()]
    out.append(
        f"Up to {TARGET_UP_TO_RATE:,} req/s, {len(met)} of {len(targeted)} load(s) meet issue "
        f"47's targets (harness at most {TARGET_HARNESS_P50_MS} ms at p50 and "
        f"{TARGET_HARNESS_P99_MS} ms at p99, open-loop sends late by at most "
        f"{TARGET_SEND_LAG_P99_MS} ms at p99)."
    )
    short = [c for c in bench.lblab if not c.load.reached(c.achieved)]
    if short:
        out.append(
            "Not reached on this machine: "
            + "; ".join(f"{c.load.label}, {c.achieved:,.0f} req/s" for c in short)
            + "."
        )
    lagged = [
        (c, c.fact("send_lag_p99_ms"), c.fact("harness_p99_ms"), c.after_send)
        for c in bench.lblab
        if c.load.model == "open"
    ]
    if lagged:
        out.append(
            "Open, the harness's p99 against its p99 after the send (the rest is the sends' "
            "lag): "
            + "; ".join(
                f"{c.load.label} {ms(whole)} against {ms(after and after[1])} ms (sends "
                f"{ms(lag)} ms late at p99)"
                for c, lag, whole, after in lagged
            )
            + "."
        )
    closed = [c for c in bench.lblab if c.load.model == "closed"]
    if closed:
        out.append(
            "Closed, the users sent "
            + ", ".join(f"{100 * c.achieved / c.load.rate:.0f} %" for c in closed)
            + f" of users / {bench.delay_ms:g} ms (each waits for its answer: the harness's "
            "time and the servers' slow timers slow it)."
        )
    across = [f for f in bench.floors if f.placement.startswith("across") and "C" in f.program]
    if across:
        f = across[0]
        out.append(
            f"The floor, one loopback round trip across the harness's and the servers' CPUs in "
            f"C, is {f.p50_us / 1000:.3f} ms at p50 and {f.p99_us / 1000:.3f} ms at p99; a "
            "request through lblab makes two (client to balancer, balancer to server)."
        )
    out.append(
        "vegeta goes straight to its server; lblab's requests cross its balancer as well."
        if bench.vegeta
        else f"vegeta did not run: {bench.vegeta_note}."
    )
    if bench.vegeta:
        pairs = [
            (c, c.after_send, v)
            for c in bench.lblab
            for v in bench.vegeta
            if v.load == c.load and c.after_send is not None
        ]
        out.append(
            "lblab's harness time after the send over vegeta's error (latency - the server's "
            "own time), per load, p50 / p99: "
            + "; ".join(
                f"{c.load.label} {ratio(mine[0], v.own[0])} / {ratio(mine[1], v.own[1])}"
                for c, mine, v in pairs
            )
            + "."
        )
    return out


def ratio(a: float | None, b: float) -> str:
    return "n/a" if a is None or b <= 0 else f"{a / b:.1f}x"


def report(bench: InstrumentBench) -> list[str]:
    """The section's body: the three tables and what they say."""
    return [
        f"Three `lblab server`s sleeping a fixed {bench.delay_ms:g} ms (no work, never "
        f"queueing), 100 B requests, `rr`, one `lblab run` with a phase per load: "
        f"{bench.warmup:g} s of warm-up, {bench.seconds:g} s measured; open is Poisson, "
        "closed has `rate x delay` users. From each phase's manifest: the harness's time "
        "(latency - `server_ms`: client, Locust, balancer, loopback, a late send's lag), "
        "the servers' time outside their work slot, the open model's send lag; *targets* "
        "holds the harness's time and the send lag to issue 47's (up to 1,000 req/s); "
        "*checks* is the phase's verdict (the failed checks named).",
        "",
        *table(list(lblab_rows(bench)[0]), lblab_rows(bench)),
        "",
        "Beside vegeta v12.13.0 at the same loads (constant rate, and closed as "
        "`-rate=0` with as many workers as users) against `benchmarks/http_echo_server.py "
        f"--delay-ms {bench.delay_ms:g}`, pinned as lblab's harness and servers are: "
        "*vegeta p50/p99* is its latency minus the server's own time for each request "
        "(its `Server-Timing` header), which is what lblab's harness time is; its latency "
        f"minus the nominal {bench.delay_ms:g} ms is beside it. vegeta times a request "
        "from when its worker took it, lblab from when it was due: *lblab after the "
        "send* is lblab's harness time less a late send's lag (from requests.parquet), "
        "the figure to hold against vegeta's.",
        "",
        *table(list(beside_rows(bench)[0]), beside_rows(bench)),
        "",
        "The floor: a blocking TCP ping-pong of 100 B on 127.0.0.1, no event loop.",
        "",
        *table(list(floor_rows(bench)[0]), floor_rows(bench)),
        "",
        " ".join(reading(bench)),
    ]


def markdown(bench: InstrumentBench, stamp: Stamp, command: str) -> str:
    return "\n".join(
        ["## The instrument's own error", "", stamp.markdown(command), "", *report(bench)]
    )


def rate_list(text: str) -> list[int]:
    try:
        rates = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give whole req/s, e.g. 100,1000,5000"
        ) from None
    if not rates or min(rates) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give one rate or more, each 1 or more")
    return rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=15.0, help="measured time per load")
    parser.add_argument("--warmup", type=float, default=2.0, help="warm-up per load, s")
    parser.add_argument("--rates", type=rate_list, default=[100, 1000, 5000])
    parser.add_argument("--delay-ms", type=float, default=20.0, help="the servers' sleep")
    parser.add_argument("--round-trips", type=int, default=20_000, help="per floor ping-pong")
    parser.add_argument("--markdown", action="store_true", help="print a stamped section")
    args = parser.parse_args()
    if args.seconds <= 0 or args.warmup < 0 or args.delay_ms <= 0 or args.round_trips < 1:
        parser.error("--seconds and --delay-ms above 0, --warmup 0 or more, --round-trips 1+")
    names = [x.name for x in loads(args.rates, args.delay_ms)]
    if len(set(names)) != len(names):
        parser.error(
            f"--rates {args.rates} with --delay-ms {args.delay_ms:g} name a load twice "
            f"({', '.join(names)}): give rates whose closed users (rate x delay) differ"
        )
    command = this_script()
    stamp = take() if args.markdown else None
    bench = measure(args, lambda s: print(s, file=sys.stderr, flush=True))
    if stamp is not None:
        print(markdown(bench, stamp, command))
        return
    print("\n".join(report(bench)))


if __name__ == "__main__":
    main()
