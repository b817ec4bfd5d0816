"""Benchmark of the balancer node: what does forwarding through it cost?

``uv run python benchmarks/bench_balancer.py [--rounds 3] [--seconds 1.0] [--strategy rr]
[--baseline REV] [--h2-method POST|GET] [--strace] [--markdown]``

Three rsocket-py echo backends (``benchmarks/echo_backend.py``) and one raw-frame client
(``lblab.wire`` frames on asyncio, closed loop, pipelining): in one run, in interleaved
rounds, the client either spreads requests over the three backends itself ("direct")
or sends them all through ``lblab balancer`` ("through"); with ``--baseline REV`` also
through the balancer of git revision REV ("baseline", the same backends, its own
process: before and after a change in one run); through the two references in Python on
uvloop, ``benchmarks/relay.py`` (a bare byte relay: the runtime's floor, no parsing, no
per-request choice) and ``benchmarks/frame_router.py`` (the least a per-request frame
router does: walk, rewrite the stream id, round robin, write); through the same minimal
router compiled (``benchmarks/compiled_router``, Rust on epoll; built with ``cargo`` as the
run starts, left out with the reason when it cannot be); with ``haproxy`` on PATH
through HAProxy in TCP mode ("haproxy"), which pins each client connection to one
backend: the relay floor, not a bound.

The in-class anchor, ``benchmarks/haproxy_h2.py`` ("haproxy-h2"): HAProxy in HTTP mode
with HTTP/2 on both sides, balancing every stream on its own over multiplexed backend
connections as lblab balances RSocket streams, over three ``nghttpd --no-tls`` backends,
driven by ``h2load -c 1 -m N`` (each request a POST of the payload answered with a file of
its size; ``--h2-method GET``: the response only). Its "direct" ("h2-direct") is the same
h2load straight to one nghttpd, and its added latency and through / direct are against
that, not against the raw-frame client's direct. Left out, with the reason, when haproxy,
h2load or nghttpd is missing (``scripts/setup`` installs them).

For 100 B, 10 KB and 1 MB request-response payloads (echoed back), 1, 10 and 64 requests
in flight (``--in-flight``), it prints:

- added p50 / p99 latency (through minus its direct, medians over rounds),
- throughput ratio through / direct,
- CPU per request of the target's process: user + sys time over the measured window,
  and with a baseline each figure of "through" divided by the baseline's,
- the in-class rows: lblab's CPU per request beside HAProxy-h2's and the compiled
  router's, each against issue 44's bounds (lblab at most HAProxy-h2's at 1, 10 and 64
  in flight for 100 B and below it at 1 MB; lblab within 1.5x the compiled router's at
  1, 10 and 64 for 100 B), with HAProxy TCP's beside them as the relay floor,
- with ``--strace``, one more cell per proxy under strace (``benchmarks/strace_batching.py``):
  requests per read and per write system call on its client and backend sides, since
  the two clients batch differently (slow: strace stops the proxy at every call),
- and ``pick`` alone in microseconds per registered strategy (pure Python, no I/O).

The raw-frame client uses the same number of connections for every target
(``--connections``, default 3, one per backend when direct, one at 1 in flight) so
HAProxy TCP's connection-level balancing spreads; h2load uses one (``--connections 1``
gives lblab the same). Figures on a shared 2-core VM move +-15-25 % between runs:
compare within one run. ``--markdown`` prints only a stamped section of
``docs/results/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import haproxy_h2
import psutil
import strace_batching

from lblab import compiled
from lblab.balancer.framing import FrameProtocol
from lblab.pages import table, this_script
from lblab.procs import Child, lblab_command, spawn, stop
from lblab.stamp import Stamp, take
from lblab.wire.codec import encode_frame
from lblab.wire.codes import U32
from lblab.wire.frames import RequestResponse, Setup
from lblab.wire.metadata import APPLICATION_JSON, COMPOSITE_METADATA

HERE = Path(__file__).resolve().parent
SIZES = {"100B": 100, "10KB": 10_000, "1MB": 1_000_000}
IN_FLIGHT = (1, 10, 64)
"""Requests in flight per cell by default: one at a time, the presets' regime, and many."""
BOUND_AT = (1, 10, 64)
"""Where issue 44's bounds apply at 100 B (in flight); at 1 MB the HAProxy-h2 one applies
at every count measured."""
H2_BOUND = 1.0
"""Issue 44: lblab's CPU per request at most HAProxy-h2's (100 B), below it at 1 MB."""
COMPILED_BOUND = 1.5
"""Issue 44: lblab's CPU per request within this factor of the compiled router's (100 B)."""
TARGETS = (
    "direct", "through", "baseline", "relay", "router", "compiled", "haproxy",
    "h2-direct", "haproxy-h2",
)  # fmt: skip
DIRECT_OF = {"haproxy-h2": "h2-direct"}
"""The "direct" each target's added latency and through / direct are against."""
BASES = ("direct", "h2-direct")
"""The targets with nothing between client and backend."""
PYTHON_REFERENCES = {"relay": "relay.py", "router": "frame_router.py"}
"""The Python references every run measures: target name -> script in benchmarks/."""
COMPILED_ROUTER = HERE / "compiled_router"
"""The minimal router in Rust (a cargo project), measured when cargo can build it."""
REFERENCE_LABELS = {
    "relay": "bare relay",
    "router": "minimal router",
    "compiled": "compiled minimal router",
}
NAMES = {
    "direct": "direct",
    "through": "through lblab",
    "relay": "through a bare uvloop relay",
    "router": "through a minimal frame router",
    "compiled": "through the compiled minimal router",
    "haproxy": "through HAProxy TCP (relay floor)",
    "h2-direct": "direct, h2load to one nghttpd",
    "haproxy-h2": "through HAProxy HTTP/2",
}
"""Each target's name in the markdown tables (the baseline's names its revision)."""
PICK_WEIGHTS = {"s1": 1.0, "s2": 1.0, "s3": 7.0}
"""The backends of "pick alone" and their weights."""


# ---------------------------------------------------------------- raw-frame client


class BenchConnection(FrameProtocol):
    """One client connection: sends pre-built request frames, times each answer."""

    __slots__ = ("driver", "next_sid", "pending")

    def __init__(self, driver: Driver) -> None:
        super().__init__(0xFFFFFF)
        self.driver = driver
        self.pending: dict[int, float] = {}
        self.next_sid = 1

    def connection_made(self, transport):  # type: ignore[no-untyped-def]
        self.transport = transport
        setup = Setup(
            keepalive_ms=30_000,
            max_lifetime_ms=120_000,
            metadata_mime=COMPOSITE_METADATA,
            data_mime=APPLICATION_JSON,
        )
        transport.write(encode_frame(setup))

    def send(self) -> None:
        sid = self.next_sid
        self.next_sid = sid + 2
        frame = bytearray(self.driver.template)
        U32.pack_into(frame, 3, sid)
        self.pending[sid] = time.perf_counter()
        self.transport.write(frame)  # type: ignore[union-attr]

    def on_frame(self, pos: int, length: int, sid: int, frame_type: int, flags: int) -> bool:
        t0 = self.pending.pop(sid, None)
        if t0 is not None and not flags & 0x80:  # ignore fragments but the last
            self.driver.done(self, time.perf_counter() - t0, frame_type == 0x0A)
        elif t0 is not None:
            self.pending[sid] = t0
        return True

    def protocol_error(self, exc):  # type: ignore[no-untyped-def]
        raise exc


@dataclass
class Driver:
    """Closed loop: each answer triggers the next request on the same connection."""

    template: bytes
    measuring: bool = False
    stopping: bool = False
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    inflight: int = 0

    def done(self, conn: BenchConnection, latency: float, ok: bool) -> None:
        self.inflight -= 1
        if self.measuring:
            if ok:
                self.latencies.append(latency)
            else:
                self.errors += 1
        if self.stopping:
            if not self.inflight:
                self.idle.set()
            return
        self.inflight += 1
        conn.send()


async def measure_cell(
    addresses: list[tuple[str, int]],
    size: int,
    concurrency: int,
    seconds: float,
    pid: int | None,
    testbed: Sequence[int] = (),
) -> dict[str, float]:
    """One cell: ``concurrency`` requests kept in flight over ``addresses`` for ``seconds``.

    ``cpu_us`` is process ``pid``'s CPU per request over the measured window (nan without
    one); ``machine_us`` adds that of this process (the client) and of ``testbed``'s
    pids (the backends): what the whole testbed spends per request."""
    loop = asyncio.get_running_loop()
    data = b'{"pad": "' + b"x" * max(0, size - 11) + b'"}'
    driver = Driver(encode_frame(RequestResponse(stream_id=1, data=data)))
    conns = []
    for host, port in addresses:
        _, conn = await loop.create_connection(lambda: BenchConnection(driver), host, port)
        conns.append(conn)
    for i in range(concurrency):
        driver.inflight += 1
        conns[i % len(conns)].send()
    await asyncio.sleep(min(0.3, seconds / 3))  # warm up
    meter = CpuMeter(pid, [os.getpid(), *testbed])
    meter.start()
    driver.measuring = True
    await asyncio.sleep(seconds)
    driver.measuring = False
    meter.stop()
    driver.stopping = True
    try:
        await asyncio.wait_for(driver.idle.wait(), 30)
    except TimeoutError:
        print("warning: answers missing at the end of a round", file=sys.stderr)
    for conn in conns:
        conn.transport.close()
    return cell_figures(sorted(driver.latencies), driver.errors, meter)


class CpuMeter:
    """User + system time over a measured window, of the target's process ``pid`` (None:
    no target, direct) and of ``others`` (the client and the backends: with the target,
    the whole testbed)."""

    def __init__(self, pid: int | None, others: Sequence[int]) -> None:
        self.proc = psutil.Process(pid) if pid else None
        self.others = [psutil.Process(p) for p in others]
        self.t0 = self.t1 = 0.0
        """The window, epoch seconds (``time.time``)."""
        self.elapsed = 0.0
        self._start: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)
        self._stop = self._start

    def _sample(self) -> tuple[float, float, float, float]:
        user, system = self.proc.cpu_times()[:2] if self.proc else (0.0, 0.0)
        others = sum(_cpu_seconds(p) for p in self.others)
        return user, system, others, time.perf_counter()

    def start(self) -> None:
        self._start = self._sample()
        self.t0 = time.time()

    def stop(self) -> None:
        self._stop = self._sample()
        self.t1 = time.time()
        self.elapsed = self._stop[3] - self._start[3]

    def figures(self, n: int) -> dict[str, float]:
        """``cpu_us`` and ``sys_us``: the target's CPU per request over the window (nan
        without a target); ``machine_us``: the target's and the others' together."""
        user, system, others = (b - a for a, b in zip(self._start[:3], self._stop[:3], strict=True))
        nan = float("nan")
        return {
            "cpu_us": 1e6 * (user + system) / n if n and self.proc else nan,
            "sys_us": 1e6 * system / n if n and self.proc else nan,
            "machine_us": 1e6 * (user + system + others) / n if n else nan,
        }


def cell_figures(latencies: Sequence[float], errors: int, meter: CpuMeter) -> dict[str, float]:
    """A cell's figures from its answered requests' ``latencies`` (seconds, sorted) over
    ``meter``'s window; ``t0``/``t1`` are the window (epoch seconds)."""
    n = len(latencies)
    return {
        "n": n,
        "rps": n / meter.elapsed if meter.elapsed else float("nan"),
        "p50_ms": 1000 * latencies[n // 2] if n else float("nan"),
        "p99_ms": 1000 * latencies[min(n - 1, int(n * 0.99))] if n else float("nan"),
        **meter.figures(n),
        "errors": errors,
        "t0": meter.t0,
        "t1": meter.t1,
    }


def measure_h2_cell(
    bed: haproxy_h2.H2Bed, size: str, concurrency: int, seconds: float, through: bool, log: Path
) -> dict[str, float]:
    """One HAProxy-h2 cell (``through``) or its direct: h2load for ``seconds`` plus its
    margins, the CPU taken over a window inside its measured phase, and the requests of
    its log that ended in that window. The testbed is h2load and the three nghttpd."""
    run = haproxy_h2.start_h2load(
        bed.url(size, through), concurrency, seconds, min(0.3, seconds / 3), log, bed.body(size)
    )
    try:
        meter = CpuMeter(bed.haproxy.pid if through and bed.haproxy else None, [run.pid, *bed.pids])
        time.sleep(max(0.0, run.opens_at - time.monotonic()))
        meter.start()
        time.sleep(seconds)
        meter.stop()
    except BaseException:
        run.popen.kill()
        raise
    summary, lines = run.finish()
    latencies, bad, warning = haproxy_h2.in_window(lines, meter.t0, meter.t1)
    if warning:
        print(f"warning: {warning} ({size}, {concurrency} in flight)", file=sys.stderr)
    failed = sum(int(summary.get(k, 0)) for k in ("failed", "errored", "timeout"))
    return cell_figures(latencies, bad + failed, meter)


def _cpu_seconds(proc: psutil.Process) -> float:
    user, system = proc.cpu_times()[:2]
    return user + system


# ---------------------------------------------------------------- the testbed


@dataclass
class Baseline:
    """Another git revision's tree, ready to run beside this one."""

    rev: str
    env: dict[str, str]
    """This environment with the tree first on the path (and not the working directory)."""
    runs_as: str
    """"compiled", or "plain Python" and why."""

    @property
    def label(self) -> str:
        return f"{self.rev} ({self.runs_as})"


def export_revision(rev: str, into: Path, plain: bool = False) -> Baseline:
    """The source tree of git revision ``rev`` (``git archive``), to run with this
    environment's dependencies, and its per-request path compiled as ``scripts/setup``
    would (its own ``scripts/compile``, where it has one): a compiled tree measured
    against a baseline left as plain Python would credit the compiler to the change.
    ``plain``: no build, and the tree runs as plain Python (what compiling gains)."""
    into.mkdir(parents=True)
    repo = HERE.parent
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", rev],
        capture_output=True,
        check=False,
        timeout=60,
    )
    if archive.returncode:
        raise SystemExit(f"--baseline {rev}: {archive.stderr.decode().strip()}")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True, timeout=60)
    env = {**os.environ, "PYTHONPATH": str(into), "PYTHONSAFEPATH": "1"}
    if plain:
        return Baseline(rev, {**env, compiled.OFF_ENV: "1"}, "plain Python, as asked")
    script = into / "scripts" / "compile"
    if not script.exists():
        return Baseline(rev, env, "plain Python: no scripts/compile then")
    print(f"(building {rev}'s compiled path ...)", file=sys.stderr)
    built = subprocess.run(
        [sys.executable, str(script)],
        cwd=into,
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
    )
    if built.returncode:
        tail = "\n".join((built.stdout + built.stderr).splitlines()[-5:])
        print(f"({rev}'s compile failed; it runs as plain Python:\n{tail})", file=sys.stderr)
        return Baseline(rev, env, "plain Python: its compile failed")
    return Baseline(rev, env, "compiled")


def start_testbed(
    workdir: Path,
    strategy: str,
    with_haproxy: bool,
    baseline: Baseline | None = None,
    references: bool = True,
) -> dict[str, object]:
    """Three echo backends, lblab's balancer over them, and what is compared with it:
    the references (``reference_commands``) unless ``references`` is False, a baseline
    tree's balancer, HAProxy."""
    backends = [
        spawn(
            f"e{i}",
            [sys.executable, str(HERE / "echo_backend.py"), "--id", f"e{i}"],
            log_path=workdir / f"e{i}.log",
        )
        for i in range(3)
    ]
    args = ["balancer", "--port", "0", "--strategy", strategy]
    for b in backends:
        args += ["--backend", f"{b.ready['id']}=127.0.0.1:{b.ready['port']}"]
    balancer = spawn("balancer", lblab_command(*args), log_path=workdir / "lblab.balancer.log")
    commands = reference_commands() if references else {}
    bed: dict[str, object] = {"backends": backends, "balancer": balancer, "references": commands}
    for name, argv in commands.items():
        bed[name] = spawn(
            name,
            [*argv, *(f"127.0.0.1:{b.ready['port']}" for b in backends)],
            log_path=workdir / f"{name}.log",
        )
    if baseline is not None:
        bed["baseline"] = spawn(
            "baseline balancer",
            lblab_command(*args),
            log_path=workdir / "baseline.log",
            env=baseline.env,
        )
    if with_haproxy:
        bed["haproxy"] = start_haproxy(workdir, backends)
    return bed


def reference_commands() -> dict[str, list[str]]:
    """The argv of each reference this machine can run (the backends' HOST:PORT follow):
    the Python ones always, the compiled router when cargo builds it."""
    commands = {
        name: [sys.executable, str(HERE / script)] for name, script in PYTHON_REFERENCES.items()
    }
    binary = build_compiled_router()
    if binary is not None:
        commands["compiled"] = [str(binary)]
    return commands


def build_compiled_router() -> Path | None:
    """``cargo build --release`` of ``benchmarks/compiled_router`` (a few seconds the first
    time, then nothing to do); its binary, or None with the reason on stderr."""
    cargo = shutil.which("cargo")
    if cargo is None:
        print("(cargo is not installed: no compiled minimal router reference)", file=sys.stderr)
        return None
    manifest = COMPILED_ROUTER / "Cargo.toml"
    try:
        done = subprocess.run(
            [cargo, "build", "--release", "--locked", "--quiet", "--manifest-path", str(manifest)],
            capture_output=True,
            text=True,
            timeout=600,
        )
    except subprocess.TimeoutExpired:
        print("(cargo build of the compiled router took over 600 s: left out)", file=sys.stderr)
        return None
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        print(f"(the compiled router did not build, left out:\n{tail})", file=sys.stderr)
        return None
    return COMPILED_ROUTER / "target" / "release" / "lblab-compiled-router"


def start_haproxy(workdir: Path, backends: list[Child]) -> tuple[subprocess.Popen[bytes], int]:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    servers = "\n".join(f"    server {b.ready['id']} 127.0.0.1:{b.ready['port']}" for b in backends)
    cfg = workdir / "haproxy.cfg"
    cfg.write_text(
        "global\n    maxconn 1000\n    nbthread 1\n"
        "defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 60s\n    timeout server 60s\n"
        f"frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n"
        f"backend be\n    balance roundrobin\n{servers}\n"
    )
    proc = subprocess.Popen(["haproxy", "-f", str(cfg)], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return proc, port
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("haproxy did not start")


def stop_testbed(bed: dict[str, object]) -> None:
    if "haproxy" in bed:
        proc, _ = bed["haproxy"]  # type: ignore[misc]
        proc.terminate()
        proc.wait(5)
    stop(bed["balancer"])  # type: ignore[arg-type]
    for name in bed["references"]:  # type: ignore[attr-defined]
        stop(bed[name])  # type: ignore[arg-type]
    if "baseline" in bed:
        stop(bed["baseline"])  # type: ignore[arg-type]
    for b in bed["backends"]:  # type: ignore[attr-defined]
        stop(b)


# ---------------------------------------------------------------- pick alone


def pick_costs(iterations: int) -> dict[str, float]:
    """Microseconds per ``strategy.pick`` over 3 backends, per registered strategy."""
    from lblab.balancer.pool import BackendSpec, Pool
    from lblab.balancer.strategies.base import RequestView
    from lblab.balancer.strategies.registry import make_strategy, strategy_names

    out = {}
    weights = PICK_WEIGHTS
    for name in strategy_names():
        strategy = make_strategy(name, rng=random.Random(1), weights=weights)
        pool = Pool([BackendSpec(k, w) for k, w in weights.items()], strategy)
        request = RequestView(request_id=1, routing_key=b"user-42", client_address="127.0.0.1")
        views = pool.views
        pick = strategy.pick
        t0 = time.perf_counter()
        for i in range(iterations):
            pick(views, request, i * 1e-4)
        out[name] = 1e6 * (time.perf_counter() - t0) / iterations
    return out


# ---------------------------------------------------------------- main


@dataclass
class BalancerBench:
    """Every cell's rounds, and pick alone."""

    strategy: str
    rounds: int
    seconds: float
    baseline: str | None
    """The baseline's revision and how its code ran, e.g. ``HEAD (compiled)``."""
    targets: list[str]
    sizes: list[str]
    in_flight: list[int]
    results: dict[tuple[str, int, str], list[dict[str, float]]]
    picks: dict[str, float]
    """Microseconds per ``strategy.pick`` over 3 backends."""
    load: tuple[float, float, float]
    """The load average at the end of the measurements."""
    left_out: dict[str, str] = field(default_factory=dict)
    """Target -> why it was not measured (a tool missing)."""
    h2_method: str = "POST"
    traces: dict[tuple[str, int, str], strace_batching.Batching] = field(default_factory=dict)
    """With ``--strace``: each proxy's traced cell."""

    def med(self, size: str, conc: int, target: str, key: str) -> float:
        return statistics.median(r[key] for r in self.results[(size, conc, target)])

    def errors(self, size: str, conc: int, target: str) -> int:
        return int(sum(r["errors"] for r in self.results[(size, conc, target)]))

    @property
    def with_haproxy(self) -> bool:
        return "haproxy" in self.targets

    @property
    def in_class(self) -> bool:
        """lblab has something in its class to be compared with: HAProxy-h2, the compiled router."""
        return "through" in self.targets and bool({"haproxy-h2", "compiled"} & set(self.targets))


def left_out_targets(baseline: str | None) -> dict[str, str]:
    """The targets this machine cannot measure, each with its reason (the compiled router
    says its own when its build is tried)."""
    out = {}
    if not baseline:
        out["baseline"] = "no --baseline"
    if shutil.which("haproxy") is None:
        out["haproxy"] = "haproxy is not installed (apt-get install haproxy)"
    h2 = haproxy_h2.missing_tools()
    if h2:
        out["h2-direct"] = out["haproxy-h2"] = h2
    return out


def measure(args: argparse.Namespace) -> BalancerBench:
    """The testbed's interleaved rounds, with ``--strace`` a traced cell per proxy, then
    pick alone."""
    left_out = left_out_targets(args.baseline)
    with_haproxy = "haproxy" not in left_out
    if args.strace and (why := strace_batching.missing()):
        print(f"(--strace: {why}; no traced cells)", file=sys.stderr)
        args.strace = False
    sizes = [s for s in args.sizes.split(",") if s]
    in_flight = in_flight_counts(args.in_flight)
    workdir = Path(tempfile.mkdtemp(prefix="bench-balancer-"))
    baseline = (
        export_revision(args.baseline, workdir / "baseline-tree", args.plain_baseline)
        if args.baseline
        else None
    )
    bed = start_testbed(workdir, args.strategy, with_haproxy, baseline)
    h2: haproxy_h2.H2Bed | None = None
    try:
        if "haproxy-h2" not in left_out:
            h2 = haproxy_h2.start_bed(
                workdir / "h2", {s: SIZES[s] for s in sizes}, args.h2_method,
                streams=max(100, *in_flight),
            )  # fmt: skip
    except BaseException:
        stop_testbed(bed)
        raise
    references: dict[str, list[str]] = bed["references"]  # type: ignore[assignment]
    if "compiled" not in references:
        left_out["compiled"] = "cargo could not build it (the reason is above)"
    measured = {"direct", "through", *references}
    measured |= {t for t in ("haproxy", "baseline") if t not in left_out}
    measured |= {"h2-direct", "haproxy-h2"} if h2 is not None else set()
    targets = [t for t in TARGETS if t in measured]
    balancer: Child = bed["balancer"]  # type: ignore[assignment]
    backends: list[Child] = bed["backends"]  # type: ignore[assignment]
    direct = [("127.0.0.1", b.ready["port"]) for b in backends]
    addresses = {
        "direct": direct,
        "through": [("127.0.0.1", balancer.ready["port"])] * args.connections,
    }
    pids = {"direct": None, "through": balancer.pid}
    for name in bed["references"]:  # type: ignore[attr-defined]
        reference: Child = bed[name]  # type: ignore[assignment]
        addresses[name] = [("127.0.0.1", reference.ready["port"])] * args.connections
        pids[name] = reference.pid
    if args.baseline:
        old: Child = bed["baseline"]  # type: ignore[assignment]
        addresses["baseline"] = [("127.0.0.1", old.ready["port"])] * args.connections
        pids["baseline"] = old.pid
    if with_haproxy:
        proc, port = bed["haproxy"]  # type: ignore[misc]
        addresses["haproxy"] = [("127.0.0.1", port)] * args.connections
        pids["haproxy"] = proc.pid
    results: dict[tuple[str, int, str], list[dict[str, float]]] = {}
    traces: dict[tuple[str, int, str], strace_batching.Batching] = {}
    pick_direct = random.Random(0)  # which echo server a 1-in-flight "direct" cell uses
    backend_pids = [b.pid for b in backends]
    h2_log = workdir / "h2load.tsv"

    async def cell(target: str, size_name: str, conc: int, seconds: float) -> dict[str, float]:
        if target in ("h2-direct", "haproxy-h2"):
            assert h2 is not None
            return measure_h2_cell(h2, size_name, conc, seconds, target == "haproxy-h2", h2_log)
        addrs = addresses[target]
        if conc == 1:
            addrs = addrs[:1] if target != "direct" else [pick_direct.choice(direct)]
        return await measure_cell(
            addrs, SIZES[size_name], conc, seconds, pids[target], backend_pids
        )

    def tracer(target: str, size_name: str, conc: int) -> strace_batching.Tracer:
        out = workdir / f"strace-{target}-{size_name}-{conc}.txt"
        if target == "haproxy-h2":
            assert h2 is not None and h2.haproxy is not None
            return strace_batching.Tracer(h2.haproxy.pid, h2.port, h2.backend_ports, out)
        ports = [int(b.ready["port"]) for b in backends]
        return strace_batching.Tracer(pids[target], addresses[target][0][1], ports, out)  # type: ignore[arg-type]

    async def run_all() -> None:
        for size_name in sizes:
            for conc in in_flight:
                seconds = args.seconds * (2 if size_name == "1MB" else 1)
                for _ in range(args.rounds):
                    for target in targets:
                        r = await cell(target, size_name, conc, seconds)
                        results.setdefault((size_name, conc, target), []).append(r)
        if not args.strace:
            return
        for size_name in sizes:
            for conc in in_flight:
                seconds = args.seconds * (2 if size_name == "1MB" else 1)
                for target in targets:
                    if target in BASES:
                        continue
                    traced = tracer(target, size_name, conc)
                    traced.start()
                    try:
                        r = await cell(target, size_name, conc, seconds)
                    except BaseException:
                        traced.finish(0.0, 0.0, 0)
                        raise
                    key = (size_name, conc, target)
                    traces[key] = traced.finish(r["t0"], r["t1"], int(r["n"]))

    try:
        import uvloop

        uvloop.run(run_all())
    finally:
        if h2 is not None:
            h2.stop()
        stop_testbed(bed)
    load = os.getloadavg()
    picks = pick_costs(args.pick_iterations)
    return BalancerBench(
        args.strategy,
        args.rounds,
        args.seconds,
        baseline.label if baseline else None,
        targets,
        sizes,
        in_flight,
        results,
        picks,
        load,
        {t: why for t, why in left_out.items() if t not in ("baseline", "h2-direct")},
        args.h2_method,
        traces,
    )


def _print_rows(rows: Sequence[dict[str, object]]) -> None:
    """Each row on one line, ``key value`` pairs (``-`` for a missing value)."""
    for row in rows:
        print("  " + "  ".join(f"{k} {'-' if v is None else v}" for k, v in row.items()))


def print_text(bench: BalancerBench) -> None:
    med, sizes, targets = bench.med, bench.sizes, bench.targets
    load1, load5, _ = bench.load
    print(
        f"\nbalancer strategy {bench.strategy}; {bench.rounds} interleaved rounds of "
        f"{bench.seconds:g} s per cell; medians; host has {os.cpu_count()} CPUs, load "
        f"average {load1:.1f} (1 min) {load5:.1f} (5 min) at the end: above 1 the machine "
        "was shared and the figures are indicative; haproxy-h2's added latency and ratio "
        "are against h2-direct (h2load straight to one nghttpd)\n"
    )
    header = f"{'size':>5} {'inflight':>8} {'target':>10} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'+p50 ms':>8} {'+p99 ms':>8} {'ratio':>6} {'CPU us/req':>10} {'of it sys':>9}"
    print(header)
    print("-" * len(header))
    for size in sizes:
        for conc in bench.in_flight:
            for target in targets:
                base = DIRECT_OF.get(target, "direct")
                rps = med(size, conc, target, "rps")
                p50 = med(size, conc, target, "p50_ms")
                p99 = med(size, conc, target, "p99_ms")
                cpu = med(size, conc, target, "cpu_us")
                sys_us = med(size, conc, target, "sys_us")
                added = target not in BASES
                errors = bench.errors(size, conc, target)
                print(
                    f"{size:>5} {conc:>8} {target:>10} {rps:>9.0f} {p50:>8.3f} {p99:>8.3f} "
                    + (
                        f"{p50 - med(size, conc, base, 'p50_ms'):>+8.3f} "
                        f"{p99 - med(size, conc, base, 'p99_ms'):>+8.3f} "
                        f"{rps / med(size, conc, base, 'rps'):>6.2f} {cpu:>10.1f} {sys_us:>9.1f}"
                        if added
                        else f"{'':>8} {'':>8} {'':>6} {'':>10} {'':>9}"
                    )
                    + (f"  errors={errors}" if errors else "")
                )
    if bench.baseline:
        print(f"\nthrough / baseline ({bench.baseline}), medians; CPU below 1 is cheaper now:")
        print(f"{'size':>5} {'inflight':>8} {'req/s':>7} {'+p50':>7} {'CPU/req':>8}")
        for row in baseline_ratios(bench):
            print(
                f"{row['size']:>5} {row['inflight']:>8} {row['req/s']:>7.2f} "
                f"{row['+p50']:>7.2f} {row['CPU/req']:>8.2f}"
            )
    if bench.in_class:
        print(
            "\nlblab in its class, medians (issue 44's bounds: 'yes' where the medians meet "
            "them, and how many rounds did; HAProxy TCP is the relay floor, not a bound):"
        )
        _print_rows(inclass_rows(bench))
    for target, why in bench.left_out.items():
        print(f"\n({target} left out: {why})")
    if bench.traces:
        print(
            "\nrequests per system call under strace (one traced cell per proxy after the "
            "rounds, slowed by strace; all calls counted, EAGAIN included):"
        )
        _print_rows(trace_rows(bench))
    print("\npick alone, us per call over 3 backends:")
    for name, us in bench.picks.items():
        print(f"  {name:>18} {us:6.2f}")


def baseline_ratios(bench: BalancerBench) -> list[dict[str, object]]:
    """Per size and in-flight count: through / baseline of req/s, added p50 and CPU/req
    (medians; nan where the baseline added no latency)."""
    med = bench.med
    rows: list[dict[str, object]] = []
    for size in bench.sizes:
        for conc in bench.in_flight:
            direct_p50 = med(size, conc, "direct", "p50_ms")
            added_now = med(size, conc, "through", "p50_ms") - direct_p50
            added_then = med(size, conc, "baseline", "p50_ms") - direct_p50
            rows.append(
                {
                    "size": size,
                    "inflight": conc,
                    "req/s": med(size, conc, "through", "rps") / med(size, conc, "baseline", "rps"),
                    "+p50": added_now / added_then if added_then > 0 else float("nan"),
                    "CPU/req": med(size, conc, "through", "cpu_us")
                    / med(size, conc, "baseline", "cpu_us"),
                }
            )
    return rows


def inclass_rows(bench: BalancerBench) -> list[dict[str, object]]:
    """Per size and in flight: lblab's CPU per request against HAProxy-h2's and the
    compiled router's, each with issue 44's bound where it has one (HAProxy-h2: at most
    its CPU at ``BOUND_AT`` for 100 B, below it at 1 MB; the compiled router: within
    ``COMPILED_BOUND`` at ``BOUND_AT`` for 100 B), HAProxy TCP's beside them as the relay
    floor, and lblab's added p50 / p99 and through / direct against HAProxy-h2's (each
    against its own direct)."""
    med, targets = bench.med, bench.targets
    rows: list[dict[str, object]] = []
    for size in bench.sizes:
        for conc in bench.in_flight:
            row: dict[str, object] = {
                "size": size,
                "in flight": conc,
                "CPU us/req lblab": finite(med(size, conc, "through", "cpu_us"), 1),
            }
            at = size == "100B" and conc in BOUND_AT
            if "haproxy-h2" in targets:
                strict = size == "1MB"
                bound = H2_BOUND if at or strict else None
                row |= _against(bench, size, conc, "haproxy-h2", "HAProxy-h2", bound, strict)
            if "compiled" in targets:
                bound = COMPILED_BOUND if at else None
                row |= _against(bench, size, conc, "compiled", "compiled router", bound, False)
            if "haproxy" in targets:
                row["CPU us/req HAProxy TCP (relay floor)"] = finite(
                    med(size, conc, "haproxy", "cpu_us"), 1
                )
            if "haproxy-h2" in targets:
                for q in ("p50", "p99"):
                    added = [
                        med(size, conc, t, f"{q}_ms") - med(size, conc, d, f"{q}_ms")
                        for t, d in (("through", "direct"), ("haproxy-h2", "h2-direct"))
                    ]
                    row[f"added {q} ms lblab / HAProxy-h2"] = f"{added[0]:.3f} / {added[1]:.3f}"
                ratio = [
                    med(size, conc, t, "rps") / med(size, conc, d, "rps")
                    for t, d in (("through", "direct"), ("haproxy-h2", "h2-direct"))
                ]
                row["through/direct lblab / HAProxy-h2"] = f"{ratio[0]:.2f} / {ratio[1]:.2f}"
            rows.append(row)
    return rows


def _against(
    bench: BalancerBench,
    size: str,
    conc: int,
    other: str,
    label: str,
    bound: float | None,
    strict: bool,
) -> dict[str, object]:
    """lblab's CPU per request over ``other``'s: the medians', its range over the rounds,
    and the verdict on ``bound`` (``strict``: below it, else at most it)."""
    med = bench.med
    ratio = med(size, conc, "through", "cpu_us") / med(size, conc, other, "cpu_us")
    by_round = round_ratios(bench, size, conc, other)

    def met(r: float) -> bool:
        return r < bound if strict else r <= bound  # type: ignore[operator]

    verdict = None
    if bound is not None:
        verdict = (
            f"{'<' if strict else '<='} {bound:g}x: {_met(met(ratio))} "
            f"({_rounds_met([met(r) for r in by_round])})"
        )
    return {
        f"CPU us/req {label}": finite(med(size, conc, other, "cpu_us"), 1),
        f"lblab / {label}": finite(ratio, 2),
        f"lblab / {label} by round": _span(by_round),
        f"bound vs {label}": verdict,
    }


def trace_rows(bench: BalancerBench) -> list[dict[str, object]]:
    """Each traced cell: requests per read and per write call on each side, and the
    calls that failed (EAGAIN) per request."""
    rows: list[dict[str, object]] = []
    for (size, conc, target), b in bench.traces.items():
        rows.append(
            {
                "size": size,
                "in flight": conc,
                "target": target,
                "requests": b.requests,
                **{
                    f"req per {kind}, {side}": _per_call(b.per_call(side, kind))
                    for side in strace_batching.SIDES
                    for kind in ("read", "write")
                },
                "failed calls per req": finite(b.failed_per_request(), 2),
            }
        )
    return rows


def _per_call(value: float) -> object:
    """Two decimals, or two significant digits below 0.1 (a 1 MB request takes dozens of
    calls: 0.016 requests per call, not 0.02)."""
    return finite(value, 2) if math.isnan(value) or value >= 0.1 else f"{value:.2g}"


def through_reading(bench: BalancerBench, size: str, conc: int) -> str:
    """How far the whole testbed's CPU per request explains through / direct: with the
    cores saturated, throughput through a target is about its direct's times its direct's
    testbed CPU per request over the target's (docs/FIELD-NOTES.md, "Speeds")."""
    med = bench.med
    direct = med(size, conc, "direct", "machine_us")
    parts = []
    for target, label in (
        ("through", "lblab"),
        ("haproxy", "HAProxy TCP"),
        ("compiled", "the compiled router"),
        ("haproxy-h2", "HAProxy-h2"),
    ):
        if target not in bench.targets:
            continue
        base = DIRECT_OF.get(target, "direct")
        spent = med(size, conc, target, "machine_us")
        before = med(size, conc, base, "machine_us")
        measured = med(size, conc, target, "rps") / med(size, conc, base, "rps")
        own = f" against h2load's direct {before:.1f} us" if base != "direct" else ""
        parts.append(
            f"{label} {spent:.1f} us{own} ({before / spent:.2f} predicted, {measured:.2f} measured)"
        )
    return (
        f"The testbed spends {direct:.1f} us of CPU per request direct at {conc} in flight, "
        f"through {', '.join(parts)}: on saturated cores, through / direct is that ratio."
    )


def inclass_reading(bench: BalancerBench) -> str:
    """lblab's CPU per request over HAProxy-h2's and the compiled router's at 100 B, in
    one sentence, with HAProxy TCP's as the floor."""
    med, counts = bench.med, bench.in_flight
    parts = []
    for other, label in (("haproxy-h2", "HAProxy-h2's"), ("compiled", "the compiled router's")):
        if other in bench.targets:
            ratios = " / ".join(
                f"{med('100B', c, 'through', 'cpu_us') / med('100B', c, other, 'cpu_us'):.2f}"
                for c in counts
            )
            parts.append(f"{ratios}x {label}")
    text = (
        f"Per request (100 B), lblab's CPU is {' and '.join(parts)} at "
        f"{' / '.join(map(str, counts))} in flight."
    )
    if "haproxy" in bench.targets:
        floor = " / ".join(f"{med('100B', c, 'haproxy', 'cpu_us'):.1f}" for c in counts)
        text += (
            f" HAProxy TCP, which pins each connection to a backend and routes nothing per "
            f"request, spends {floor} us: the relay floor."
        )
    return text


def _met(ok: bool) -> str:
    return "yes" if ok else "no"


def round_ratios(bench: BalancerBench, size: str, conc: int, other: str) -> list[float]:
    """lblab's CPU per request over ``other``'s in each round: the targets of a round run
    one after another, so a round's ratio compares like with like where the medians of a
    noisy cell may not."""
    rounds = zip(
        bench.results[(size, conc, "through")], bench.results[(size, conc, other)], strict=True
    )
    return [t["cpu_us"] / o["cpu_us"] for t, o in rounds if o["cpu_us"] > 0]


def _span(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}" if values else "-"


def _rounds_met(met: list[bool]) -> str:
    return f"{sum(met)} of {len(met)} rounds"


def in_flight_counts(text: str) -> list[int]:
    """``--in-flight 1,10,64`` as a list of positive counts, or a usage error."""
    try:
        counts = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1 or max(counts) > 4096:
        raise SystemExit(f"--in-flight {text!r}: give counts from 1 to 4096, e.g. 1,10,64")
    return counts


def finite(value: object, digits: int | None = None) -> object:
    """``value`` for a markdown cell: None for nan, rounded to ``digits`` decimals if given."""
    if isinstance(value, float):
        if math.isnan(value):
            return None
        return value if digits is None else f"{value:,.{digits}f}"
    return value


def markdown(bench: BalancerBench, stamp: Stamp, command: str) -> str:
    """The section of ``docs/results/benchmarks.md``: stamp, tables, how to read them."""
    med = bench.med
    names = {**NAMES, "baseline": f"through lblab at `{bench.baseline}`"}
    cells = []
    for size in bench.sizes:
        for conc in bench.in_flight:
            for target in bench.targets:
                base = {
                    k: med(size, conc, DIRECT_OF.get(target, "direct"), k)
                    for k in ("rps", "p50_ms", "p99_ms")
                }
                row = {
                    k: med(size, conc, target, k)
                    for k in ("rps", "p50_ms", "p99_ms", "cpu_us", "sys_us", "machine_us")
                }
                added = target not in BASES
                cells.append(
                    {
                        "size": size,
                        "in flight": conc,
                        "target": names[target],
                        "req/s": finite(row["rps"], 0),
                        "p50 ms": finite(row["p50_ms"], 3),
                        "p99 ms": finite(row["p99_ms"], 3),
                        "added p50 ms": finite(row["p50_ms"] - base["p50_ms"], 3)
                        if added
                        else None,
                        "added p99 ms": finite(row["p99_ms"] - base["p99_ms"], 3)
                        if added
                        else None,
                        "req/s / direct": finite(row["rps"] / base["rps"], 2) if added else None,
                        "CPU us/req": finite(row["cpu_us"], 1) if added else None,
                        "of it kernel": finite(row["sys_us"], 1) if added else None,
                        "testbed CPU us/req": finite(row["machine_us"], 1),
                        "errors": bench.errors(size, conc, target) or None,
                    }
                )
    columns = list(cells[0]) if cells else ["size"]
    h2 = "haproxy-h2" in bench.targets
    lines = [
        "## The balancer's cost per request",
        "",
        stamp.markdown(command),
        "",
        f"Three echo backends (`benchmarks/echo_backend.py`) and one raw-frame client, closed "
        f"loop, request-response echoing the payload, "
        f"{', '.join(map(str, bench.in_flight))} request(s) in flight: *direct* spreads the "
        "requests over the backends itself, the others send them all through one balancer (`--strategy "
        f"{bench.strategy}`), HAProxy, or a reference: two in Python on uvloop, a bare "
        "relay (`benchmarks/relay.py`: each client connection pinned to one backend, no "
        "parsing, no per-request choice: what the runtime costs before any logic runs) and a "
        "minimal frame router (`benchmarks/frame_router.py`: lblab's frame walk, a stream-id "
        "rewrite, round robin per request and a write at once, none of lblab's rules: the "
        "gap to lblab is what those rules cost)"
        + (
            ", and the same minimal router compiled (`benchmarks/compiled_router`, Rust on "
            "epoll, writes batched per poll iteration: what per-request routing costs with no "
            "interpreter in the path)"
            if "compiled" in bench.targets
            else ""
        )
        + (
            ". HAProxy in TCP mode pins each client connection to one backend and routes "
            "nothing per request: the relay floor, not a bound"
            if bench.with_haproxy
            else ""
        )
        + (
            ". In its class, HAProxy in HTTP mode with HTTP/2 on both sides "
            "(`benchmarks/haproxy_h2.py`: `bind ... proto h2`, `server ... proto h2`, "
            "`balance roundrobin`, one thread) balances every stream on its own over "
            "multiplexed connections to three `nghttpd --no-tls`, driven by `h2load -c 1 -m N` "
            "(one connection, N streams in flight"
            + (
                ", each request a POST of the payload answered with a file of its size"
                if bench.h2_method == "POST"
                else ", each request a GET of a file of the payload's size"
            )
            + "); its direct is the same h2load straight to one nghttpd, and its added "
            "latency and req/s / direct are against that one"
            if h2
            else ""
        )
        + f". Medians of {bench.rounds} interleaved "
        f"round(s) of {bench.seconds:g} s per cell (1MB: twice that). *added* is through minus direct; "
        "*req/s / direct* the throughput ratio; *CPU us/req* the balancer process's user + "
        "system time per request over the measured window, *of it kernel* the system time; "
        "*testbed CPU us/req* adds the client's and the backends': what the whole machine "
        "spends per request.",
        "",
        *table(columns, cells),
    ]
    weights = ", ".join(f"{w:g}" for w in PICK_WEIGHTS.values())
    if bench.in_class:
        against = inclass_rows(bench)
        lines += [
            "",
            "lblab in its class, in the same rounds (medians), against issue 44's bounds: "
            f"CPU per request at most HAProxy-h2's at {', '.join(map(str, BOUND_AT))} in flight "
            f"(100 B) and below it at 1 MB; within {COMPILED_BOUND:g}x the compiled minimal "
            f"router's at {', '.join(map(str, BOUND_AT))} (100 B). HAProxy TCP's is beside them as "
            "the relay floor, not a bound (issue 20's bounds against it are dropped). Beside each "
            "verdict, how many rounds met the bound, each round's lblab against the other "
            "target's cell of that round (*by round* is the ratio's range):",
            "",
            *table(list(against[0]), against),
        ]
    if bench.traces:
        traced = trace_rows(bench)
        lines += [
            "",
            "Requests per system call, one cell per proxy after the rounds with the proxy "
            "under strace (`--strace`, `benchmarks/strace_batching.py`; slowed by it): "
            "reads are read/recvfrom/readv/recvmsg, writes write/sendto/writev/sendmsg, "
            "*client* the connections accepted from the client, *backend* those to the "
            "backends; every call counts, EAGAIN included (*failed calls per req*). "
            "*requests* are those the cell answered in its window: a cell strace slowed "
            "below one answer has no figures:",
            "",
            *table(list(traced[0]), traced),
        ]
    if bench.baseline:
        ratios = [
            {
                "size": r["size"],
                "in flight": r["inflight"],
                "req/s ratio": finite(r["req/s"], 2),
                "added p50 ratio": finite(r["+p50"], 2),
                "CPU/req ratio": finite(r["CPU/req"], 2),
            }
            for r in baseline_ratios(bench)
        ]
        lines += [
            "",
            f"Through this tree's balancer / through the balancer of `{bench.baseline}` (the same "
            "backends, in the same rounds); below 1 in *CPU/req ratio* is cheaper now:",
            "",
            *table(list(ratios[0]), ratios),
        ]
    lines += [
        "",
        "`pick` alone (`strategy.pick`, pure Python, no I/O), microseconds per call over "
        f"{len(PICK_WEIGHTS)} backends (weights {weights}):",
        "",
        *table(["strategy", "us per pick"], [(n, finite(us, 2)) for n, us in bench.picks.items()]),
    ]
    reading: list[str] = []
    if "100B" in bench.sizes:
        size, conc = "100B", bench.in_flight[-1]
        ratio = med(size, conc, "through", "rps") / med(size, conc, "direct", "rps")
        added_p50 = med(size, conc, "through", "p50_ms") - med(size, conc, "direct", "p50_ms")
        cpu = med(size, conc, "through", "cpu_us")
        if 1 in bench.in_flight:
            one = med(size, 1, "through", "p50_ms") - med(size, 1, "direct", "p50_ms")
            reading.append(
                f"With 100 B payloads the balancer adds {one:.3f} ms to the median of a lone "
                "request."
            )
        reading.append(
            f"At {conc} in flight (100 B) it passes {ratio:.2f} of direct's throughput, adding "
            f"{added_p50:.3f} ms at p50, for {cpu:.1f} us of its CPU per request."
        )
        reading.append(through_reading(bench, size, conc))
        if bench.in_class:
            reading.append(inclass_reading(bench))
    for target, why in bench.left_out.items():
        reading.append(f"Left out, {names.get(target, target)}: {why}.")
    reading.append("Compare within one run: figures move +-15-25 % between runs on a 2-core VM.")
    return "\n".join([*lines, "", " ".join(reading)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0, help="measured time per cell")
    parser.add_argument("--strategy", default="rr")
    parser.add_argument("--connections", type=int, default=3)
    parser.add_argument("--sizes", default=",".join(SIZES), help="subset of 100B,10KB,1MB")
    parser.add_argument(
        "--in-flight",
        default=",".join(map(str, IN_FLIGHT)),
        help="requests in flight per cell, a comma list (default %(default)s)",
    )
    parser.add_argument("--pick-iterations", type=int, default=200_000)
    parser.add_argument(
        "--baseline",
        metavar="REV",
        help="also measure the balancer of this git revision, compiled as scripts/setup would",
    )
    parser.add_argument(
        "--plain-baseline",
        action="store_true",
        help="run the baseline as plain Python (--baseline HEAD: what compiling gains)",
    )
    parser.add_argument(
        "--h2-method",
        choices=("POST", "GET"),
        default="POST",
        help="haproxy-h2's requests: POST carries the payload both ways like the echo, GET "
        "only in the response (default %(default)s)",
    )
    parser.add_argument(
        "--strace",
        action="store_true",
        help="after the rounds, one more cell per proxy under strace: requests per read and "
        "per write call on its client and backend sides (slow)",
    )
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="print only a stamped section of docs/results/benchmarks.md",
    )
    args = parser.parse_args()
    if not args.markdown:
        print_text(measure(args))
        return
    command = this_script()
    stamp = take()
    print(markdown(measure(args), stamp, command))


if __name__ == "__main__":
    main()
