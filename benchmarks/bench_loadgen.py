"""How much load one Locust process makes, and what lblab's recording costs.

    uv run python benchmarks/bench_loadgen.py [--seconds 5] [--rounds 2] [--users 8]

Against ``benchmarks/echo_server.py`` (a uvloop responder that does no work, so the client is the
bottleneck), 100 B requests, interleaved rounds:

- raw: the blocking ``RSocketClient`` in this process, one request at a time;
- locust: one headless Locust process with ``loadtests/locustfile.py`` (the runner's,
  with per-request records and progress files), closed model, no think time;
- bare: the same Locust users without the recorder (a locustfile that only imports
  them), to price the recording: overhead = 1 - locust / bare;
- agent: one ``lblab agent`` sampling the echo server every 0.25 s into a balancer's
  agent port, as a share of one core.

CPU % is user + system time of the measured process over its wall time (100 % = one
core). Figures on a shared 2-core VM are indicative: run the rounds interleaved and
compare within one run.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

from lblab.loadtests import loadgen
from lblab.loadtests.loadspec import LoadSpec
from lblab.loadtests.record_table import read_records
from lblab.loadtests.rsocket_client import RSocketClient
from lblab.loadtests.runconfig import LoadConfig
from lblab.procs import lblab_command, spawn, stop
from lblab.scenarios import builtin_scenario, request_body
from lblab.wire.metadata import request_metadata

BARE_LOCUSTFILE = """
from locust import events
from lblab.loadtests.rsocket_user import ClosedLoopUser  # noqa: F401

@events.init_command_line_parser.add_listener
def _(parser):
    parser.add_argument("--lblab-spec", default="")
"""


def cpu_seconds(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def bench_raw(port: int, seconds: float) -> tuple[float, float]:
    client = RSocketClient("127.0.0.1", port)
    body, md = request_body(100, 10_000), request_metadata()
    me = psutil.Process()
    c0, t0, n = cpu_seconds(me), time.perf_counter(), 0
    while time.perf_counter() - t0 < seconds:
        client.request_response(body, md, 5)
        n += 1
    wall = time.perf_counter() - t0
    client.close()
    return n / wall, 100 * (cpu_seconds(me) - c0) / wall


def bench_locust(
    port: int, seconds: float, users: int, folder: Path, locustfile: Path | None
) -> tuple[float, float]:
    """(requests/s, CPU %) of one Locust process over its load period."""
    spec = LoadSpec(
        run_id="bench",
        scenario=builtin_scenario("sp+sr"),
        strategy="none",
        replication=1,
        request_timeout=5,
        records_dir=str(folder),
    )
    load = LoadConfig(users=users, spawn_rate=users * 10)
    argv = loadgen.command_line(spec, load, "127.0.0.1", port, seconds)
    if locustfile is not None:
        argv[argv.index("-f") + 1] = str(locustfile)
    run = loadgen.LocustRun([loadgen._popen("locust", argv, folder / "locust.log")])
    proc = psutil.Process(run.main.pid)
    # CPU over the steady middle of the run; requests from Locust's own final count.
    time.sleep(1.5)
    c0, t0 = cpu_seconds(proc), time.perf_counter()
    time.sleep(seconds * 0.5)
    c1, t1 = cpu_seconds(proc), time.perf_counter()
    deadline = time.monotonic() + seconds + 30
    while not run.finished() and time.monotonic() < deadline:
        time.sleep(0.1)
    run.stop()
    total = loadgen.locust_request_count(folder) or 0
    return total / seconds, 100 * (c1 - c0) / (t1 - t0)


def bench_agent(echo_pid: int, seconds: float) -> float:
    bal = spawn(
        "balancer",
        lblab_command("balancer", "--port", "0", "--agent-port", "0", "--backend", "e=127.0.0.1:1"),
    )
    try:
        agent = spawn(
            "agent",
            lblab_command(
                "agent", "--server", "e", "--pid", str(echo_pid),
                "--report-to", f"127.0.0.1:{bal.ready['agent_port']}", "--interval", "0.25",
            ),
        )  # fmt: skip
        proc = psutil.Process(agent.pid)
        c0, t0 = cpu_seconds(proc), time.perf_counter()
        time.sleep(seconds)
        share = 100 * (cpu_seconds(proc) - c0) / (time.perf_counter() - t0)
        stop(agent)
        return share
    finally:
        stop(bal)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--users", type=int, default=8)
    args = parser.parse_args()
    echo = spawn("echo", [sys.executable, str(Path(__file__).with_name("echo_server.py"))])
    port = int(echo.ready["port"])
    results: dict[str, list[tuple[float, float]]] = {"raw": [], "locust": [], "bare": []}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            bare_file = Path(tmp) / "bare_locustfile.py"
            bare_file.write_text(BARE_LOCUSTFILE)
            for r in range(args.rounds):
                results["raw"].append(bench_raw(port, args.seconds))
                folder = Path(tmp) / f"rec{r}"
                results["locust"].append(bench_locust(port, args.seconds, args.users, folder, None))
                rows = read_records(folder).num_rows
                counted = loadgen.locust_request_count(folder)
                results["bare"].append(
                    bench_locust(port, args.seconds, args.users, Path(tmp) / f"bare{r}", bare_file)
                )
                print(f"round {r + 1}: records {rows}, Locust counted {counted}", flush=True)
            agent_share = bench_agent(echo.pid, args.seconds)
    finally:
        stop(echo)
    print(f"\n100 B request-response against benchmarks/echo_server.py, {args.users} Locust users")
    print(f"{'client':<28}{'req/s':>10}{'CPU %':>8}")
    for name, label in (
        ("raw", "raw client, sequential"),
        ("locust", "Locust + lblab records"),
        ("bare", "Locust, no recording"),
    ):
        rate = statistics.median(r for r, _ in results[name])
        cpu = statistics.median(c for _, c in results[name])
        print(f"{label:<28}{rate:>10.0f}{cpu:>8.0f}")
    rec = statistics.median(r for r, _ in results["locust"])
    bare = statistics.median(r for r, _ in results["bare"])
    rec_cpu = statistics.median(c for _, c in results["locust"])
    print(f"recording overhead: {100 * (1 - rec / bare):+.1f} % of throughput")
    print(f"Locust CPU per request: {10 * rec_cpu / rec * 1000:.0f} us (with records)")
    print(f"agent (0.25 s interval): {agent_share:.1f} % of one core")


if __name__ == "__main__":
    main()
