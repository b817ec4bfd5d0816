"""Benchmark of the balancer node: what does forwarding through it cost?

``uv run python benchmarks/bench_balancer.py [--rounds 3] [--seconds 1.0] [--strategy rr]
[--baseline REV]``

Three rsocket-py echo backends (``benchmarks/echo_backend.py``) and one raw-frame client
(``lblab.wire`` frames on asyncio, closed loop, pipelining): in one run, in interleaved
rounds, the client either spreads requests over the three backends itself ("direct")
or sends them all through ``lblab balancer`` ("through"); with ``--baseline REV`` also
through the balancer of git revision REV ("baseline", the same backends, its own
process: before and after a change in one run); with ``haproxy`` on PATH also through
HAProxy in TCP mode, as a reference. For 100 B, 10 KB and 1 MB request-response
payloads (echoed back), one request at a time and 64 in flight, it prints:

- added p50 / p99 latency (through minus direct, medians over rounds),
- throughput ratio through / direct,
- balancer CPU per request: user + sys time of its process over the measured window,
  and with a baseline each figure of "through" divided by the baseline's,
- and ``pick`` alone in microseconds per registered strategy (pure Python, no I/O).

The client uses the same number of connections for every target (``--connections``,
default 3, one per backend when direct) so HAProxy's connection-level balancing spreads.
Figures on a shared 2-core VM move +-15-25 % between runs: compare within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psutil

from lblab.balancer.framing import FrameProtocol
from lblab.procs import Child, lblab_command, spawn, stop
from lblab.wire.codec import encode_frame
from lblab.wire.codes import U32
from lblab.wire.frames import RequestResponse, Setup
from lblab.wire.metadata import APPLICATION_JSON, COMPOSITE_METADATA

HERE = Path(__file__).resolve().parent
SIZES = {"100B": 100, "10KB": 10_000, "1MB": 1_000_000}
CONCURRENCY = (1, 64)
TARGETS = ("direct", "through", "baseline", "haproxy")


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


async def measure(
    addresses: list[tuple[str, int]], size: int, concurrency: int, seconds: float, pid: int | None
) -> dict[str, float]:
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
    proc = psutil.Process(pid) if pid else None
    cpu0 = sum(proc.cpu_times()[:2]) if proc else 0.0
    t0 = time.perf_counter()
    driver.measuring = True
    await asyncio.sleep(seconds)
    driver.measuring = False
    elapsed = time.perf_counter() - t0
    cpu1 = sum(proc.cpu_times()[:2]) if proc else 0.0
    driver.stopping = True
    try:
        await asyncio.wait_for(driver.idle.wait(), 30)
    except TimeoutError:
        print("warning: answers missing at the end of a round", file=sys.stderr)
    for conn in conns:
        conn.transport.close()
    n = len(driver.latencies)
    lat = sorted(driver.latencies)
    return {
        "n": n,
        "rps": n / elapsed,
        "p50_ms": 1000 * lat[n // 2] if n else float("nan"),
        "p99_ms": 1000 * lat[min(n - 1, int(n * 0.99))] if n else float("nan"),
        "cpu_us": 1e6 * (cpu1 - cpu0) / n if n and proc else float("nan"),
        "errors": driver.errors,
    }


# ---------------------------------------------------------------- the testbed


def export_revision(rev: str, into: Path) -> Path:
    """The source tree of git revision ``rev`` (``git archive``), to run its balancer
    with this environment's dependencies."""
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
    return into


def start_testbed(
    workdir: Path, strategy: str, with_haproxy: bool, baseline: str | None = None
) -> dict[str, object]:
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
    bed: dict[str, object] = {"backends": backends, "balancer": balancer}
    if baseline is not None:
        tree = export_revision(baseline, workdir / "baseline-tree")
        bed["baseline"] = spawn(
            "baseline balancer",
            lblab_command(*args),
            log_path=workdir / "baseline.log",
            # The old tree first on the path, and not the working directory (this tree).
            env={**os.environ, "PYTHONPATH": str(tree), "PYTHONSAFEPATH": "1"},
        )
    if with_haproxy:
        bed["haproxy"] = start_haproxy(workdir, backends)
    return bed


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
    weights = {"s1": 1.0, "s2": 1.0, "s3": 7.0}
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0, help="measured time per cell")
    parser.add_argument("--strategy", default="rr")
    parser.add_argument("--connections", type=int, default=3)
    parser.add_argument("--sizes", default=",".join(SIZES), help="subset of 100B,10KB,1MB")
    parser.add_argument("--pick-iterations", type=int, default=200_000)
    parser.add_argument(
        "--baseline", metavar="REV", help="also measure the balancer of this git revision"
    )
    args = parser.parse_args()

    with_haproxy = shutil.which("haproxy") is not None
    targets = [
        t
        for t in TARGETS
        if (t != "haproxy" or with_haproxy) and (t != "baseline" or args.baseline)
    ]
    sizes = [s for s in args.sizes.split(",") if s]
    workdir = Path(tempfile.mkdtemp(prefix="bench-balancer-"))
    bed = start_testbed(workdir, args.strategy, with_haproxy, args.baseline)
    balancer: Child = bed["balancer"]  # type: ignore[assignment]
    backends: list[Child] = bed["backends"]  # type: ignore[assignment]
    direct = [("127.0.0.1", b.ready["port"]) for b in backends]
    addresses = {
        "direct": direct,
        "through": [("127.0.0.1", balancer.ready["port"])] * args.connections,
    }
    pids = {"direct": None, "through": balancer.pid}
    if args.baseline:
        old: Child = bed["baseline"]  # type: ignore[assignment]
        addresses["baseline"] = [("127.0.0.1", old.ready["port"])] * args.connections
        pids["baseline"] = old.pid
    if with_haproxy:
        proc, port = bed["haproxy"]  # type: ignore[misc]
        addresses["haproxy"] = [("127.0.0.1", port)] * args.connections
        pids["haproxy"] = proc.pid
    results: dict[tuple[str, int, str], list[dict[str, float]]] = {}
    pick_direct = random.Random(0)  # which echo server a 1-in-flight "direct" cell uses

    async def run_all() -> None:
        for size_name in sizes:
            for conc in CONCURRENCY:
                seconds = args.seconds * (2 if size_name == "1MB" else 1)
                for _ in range(args.rounds):
                    for target in targets:
                        addrs = addresses[target]
                        if conc == 1:
                            addrs = (
                                addrs[:1] if target != "direct" else [pick_direct.choice(direct)]
                            )
                        r = await measure(addrs, SIZES[size_name], conc, seconds, pids[target])
                        results.setdefault((size_name, conc, target), []).append(r)

    try:
        import uvloop

        uvloop.run(run_all())
    finally:
        stop_testbed(bed)

    def med(size: str, conc: int, target: str, key: str) -> float:
        return statistics.median(r[key] for r in results[(size, conc, target)])

    load1, load5, _ = os.getloadavg()
    print(
        f"\nbalancer strategy {args.strategy}; {args.rounds} interleaved rounds of "
        f"{args.seconds:g} s per cell; medians; host has {os.cpu_count()} CPUs, load "
        f"average {load1:.1f} (1 min) {load5:.1f} (5 min) at the end: above 1 the machine "
        "was shared and the figures are indicative\n"
    )
    header = f"{'size':>5} {'inflight':>8} {'target':>8} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'+p50 ms':>8} {'+p99 ms':>8} {'ratio':>6} {'CPU us/req':>10}"
    print(header)
    print("-" * len(header))
    for size in sizes:
        for conc in CONCURRENCY:
            base_rps = med(size, conc, "direct", "rps")
            base_p50 = med(size, conc, "direct", "p50_ms")
            base_p99 = med(size, conc, "direct", "p99_ms")
            for target in targets:
                rps = med(size, conc, target, "rps")
                p50 = med(size, conc, target, "p50_ms")
                p99 = med(size, conc, target, "p99_ms")
                cpu = med(size, conc, target, "cpu_us")
                added = target != "direct"
                errors = sum(r["errors"] for r in results[(size, conc, target)])
                print(
                    f"{size:>5} {conc:>8} {target:>8} {rps:>9.0f} {p50:>8.3f} {p99:>8.3f} "
                    + (
                        f"{p50 - base_p50:>+8.3f} {p99 - base_p99:>+8.3f} {rps / base_rps:>6.2f} {cpu:>10.1f}"
                        if added
                        else f"{'':>8} {'':>8} {'':>6} {'':>10}"
                    )
                    + (f"  errors={errors}" if errors else "")
                )
    if args.baseline:
        print(f"\nthrough / baseline ({args.baseline}), medians; CPU below 1 is cheaper now:")
        print(f"{'size':>5} {'inflight':>8} {'req/s':>7} {'+p50':>7} {'CPU/req':>8}")
        for size in sizes:
            for conc in CONCURRENCY:
                direct_p50 = med(size, conc, "direct", "p50_ms")
                added_now = med(size, conc, "through", "p50_ms") - direct_p50
                added_then = med(size, conc, "baseline", "p50_ms") - direct_p50
                print(
                    f"{size:>5} {conc:>8} "
                    f"{med(size, conc, 'through', 'rps') / med(size, conc, 'baseline', 'rps'):>7.2f} "
                    f"{added_now / added_then if added_then > 0 else float('nan'):>7.2f} "
                    f"{med(size, conc, 'through', 'cpu_us') / med(size, conc, 'baseline', 'cpu_us'):>8.2f}"
                )
    if not with_haproxy:
        print("\n(haproxy is not installed: no HAProxy reference rows)")
    print("\npick alone, us per call over 3 backends:")
    for name, us in pick_costs(args.pick_iterations).items():
        print(f"  {name:>18} {us:6.2f}")


if __name__ == "__main__":
    main()
