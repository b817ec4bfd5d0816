"""How much load one Locust process makes, what lblab's recording costs, and lblab's
RSocket user's CPU per request against Locust's own FastHttpUser.

    uv run python benchmarks/bench_loadgen.py [--seconds 5] [--rounds 2] [--users 8] [--markdown]

Against ``benchmarks/echo_server.py`` (a uvloop responder that does no work, so the client is the
bottleneck), 100 B requests, interleaved rounds:

- raw: the blocking ``RSocketClient`` in this process, one request at a time;
- locust: one headless Locust process with ``loadtests/locustfile.py`` (the runner's,
  with per-request records and progress files), closed model, no think time;
- bare: the same Locust users without the recorder (a locustfile that only imports
  them), to price the recording: overhead = 1 - locust / bare;
- fasthttp: one headless Locust process with Locust's own ``FastHttpUser``
  (``fasthttp_locustfile.py``), the same users, closed model, no think time, POSTing the
  same 100 B body to ``benchmarks/http_echo_server.py`` (uvloop, keep-alive, answers with
  the request's body and does no work): the figure Locust's users know;
- agent: one ``lblab agent`` sampling the echo server every 0.25 s into a balancer's
  agent port, as a share of one core.

CPU % is user + system time of the measured process over its wall time (100 % = one
core); CPU per request is that time over the requests it made, in microseconds, and
the script prints the ratio of the lblab RSocket user's (with records) to the
FastHttpUser's, measured in the same run. (The RSocket echo answers 86 B of JSON, the
HTTP echo the 100 B body: the same size to within 14 B.) Figures on a shared 2-core VM
are indicative: run the rounds interleaved and compare within one run. ``--markdown``
prints only a stamped section of ``docs/results/benchmarks.md`` (the rounds' lines on
stderr).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from lblab.experiment.runconfig import LoadConfig
from lblab.loadtests import loadgen
from lblab.loadtests.loadspec import LoadSpec
from lblab.loadtests.record_table import read_records
from lblab.loadtests.rsocket_client import RSocketClient
from lblab.pages import table, this_script
from lblab.procs import lblab_command, spawn, stop
from lblab.scenarios import builtin_scenario, request_body
from lblab.stamp import Stamp, take
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
    port: int,
    seconds: float,
    users: int,
    folder: Path,
    locustfile: Path | None,
    http_user: str | None = None,
) -> tuple[float, float]:
    """(requests/s, CPU %) of one Locust process over its load period: the runner's
    ``ClosedLoopUser`` from ``locustfile`` (None: the runner's), or its ``http_user``
    against an HTTP server on ``port``."""
    spec = LoadSpec(
        run_id="bench",
        scenario=builtin_scenario("sp+sr"),
        strategy="none",
        replication=1,
        request_timeout=5,
        duration=seconds,
        records_dir=str(folder),
    )
    load = LoadConfig(users=users, spawn_rate=users * 10)
    argv = loadgen.command_line(spec, load, "127.0.0.1", port)
    if locustfile is not None:
        argv[argv.index("-f") + 1] = str(locustfile)
    if http_user is not None:
        argv[argv.index("--host") + 1] = f"http://127.0.0.1:{port}"
        argv[-1] = http_user
    run = loadgen.LocustRun([loadgen.launch("locust", argv, folder / "locust.log")])
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


CLIENTS = {
    "raw": "raw client, sequential",
    "locust": "Locust + lblab records",
    "bare": "Locust, no recording",
    "fasthttp": "Locust FastHttpUser, HTTP",
}
HTTP_USER = "EchoHttpUser"
"""The user class of ``fasthttp_locustfile.py``."""


@dataclass
class LoadgenBench:
    users: int
    seconds: float
    results: dict[str, list[tuple[float, float]]]
    """(requests/s, CPU %) per round, per client of ``CLIENTS``."""
    counts: list[tuple[int, int | None]]
    """(records written, Locust's own count) of each round's recorded run."""
    agent_share: float
    """The agent's CPU, % of one core."""

    def rate(self, name: str) -> float:
        return statistics.median(r for r, _ in self.results[name])

    def cpu(self, name: str) -> float:
        return statistics.median(c for _, c in self.results[name])

    @property
    def overhead_pct(self) -> float:
        """Throughput lost to recording: 1 - locust / bare, in %."""
        return 100 * (1 - self.rate("locust") / self.rate("bare"))

    def cpu_us(self, name: str) -> float:
        """CPU per request, microseconds: CPU % of a core over requests/s."""
        return 10_000 * self.cpu(name) / self.rate(name)

    @property
    def fasthttp_ratio(self) -> float:
        """lblab's RSocket user's (with records) CPU per request over FastHttpUser's."""
        return self.cpu_us("locust") / self.cpu_us("fasthttp")


def measure(seconds: float, rounds: int, users: int, say: Callable[[str], None]) -> LoadgenBench:
    """The interleaved rounds and the agent; ``say`` gets a line per round."""
    here = Path(__file__).parent
    echo = spawn("echo", [sys.executable, str(here / "echo_server.py")])
    port = int(echo.ready["port"])
    http_echo = spawn("http-echo", [sys.executable, str(here / "http_echo_server.py")])
    http_port = int(http_echo.ready["port"])
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in CLIENTS}
    counts: list[tuple[int, int | None]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            bare_file = Path(tmp) / "bare_locustfile.py"
            bare_file.write_text(BARE_LOCUSTFILE)
            for r in range(rounds):
                results["raw"].append(bench_raw(port, seconds))
                folder = Path(tmp) / f"rec{r}"
                results["locust"].append(bench_locust(port, seconds, users, folder, None))
                rows = read_records(folder).num_rows
                counted = loadgen.locust_request_count(folder)
                counts.append((rows, counted))
                results["bare"].append(
                    bench_locust(port, seconds, users, Path(tmp) / f"bare{r}", bare_file)
                )
                results["fasthttp"].append(
                    bench_locust(
                        http_port,
                        seconds,
                        users,
                        Path(tmp) / f"fasthttp{r}",
                        here / "fasthttp_locustfile.py",
                        HTTP_USER,
                    )
                )
                say(f"round {r + 1}: records {rows}, Locust counted {counted}")
            agent_share = bench_agent(echo.pid, seconds)
    finally:
        stop(http_echo)
        stop(echo)
    return LoadgenBench(users, seconds, results, counts, agent_share)


def print_text(bench: LoadgenBench) -> None:
    print(f"\n100 B request-response against benchmarks/echo_server.py, {bench.users} Locust users")
    print(f"{'client':<28}{'req/s':>10}{'CPU %':>8}{'CPU us/req':>12}")
    for name in CLIENTS:
        print(
            f"{CLIENTS[name]:<28}{bench.rate(name):>10.0f}{bench.cpu(name):>8.0f}"
            f"{bench.cpu_us(name):>12.0f}"
        )
    print(f"recording overhead: {bench.overhead_pct:+.1f} % of throughput")
    ratio = bench.fasthttp_ratio
    print(f"CPU per request, lblab RSocket user (with records) / FastHttpUser: {ratio:.2f}x")
    print(f"agent (0.25 s interval): {bench.agent_share:.1f} % of one core")


def markdown(bench: LoadgenBench, stamp: Stamp, command: str) -> str:
    """The section of ``docs/results/benchmarks.md``: stamp, tables, how to read them."""
    clients = [
        {
            "client": label,
            "requests/s": f"{bench.rate(name):,.0f}",
            "CPU % of one core": f"{bench.cpu(name):.0f}",
        }
        for name, label in CLIENTS.items()
    ]
    costs = [
        (
            "recording overhead (1 - with records / no recording)",
            f"{bench.overhead_pct:+.1f} % of throughput",
        ),
        # Locust with records first: the figure the others are read against.
        *(
            (f"CPU per request, {CLIENTS[name]}", f"{bench.cpu_us(name):.0f} us")
            for name in ["locust", *(n for n in CLIENTS if n != "locust")]
        ),
        (
            "CPU per request, lblab RSocket user with records / FastHttpUser",
            f"{bench.fasthttp_ratio:.2f}x",
        ),
        ("`lblab agent`, 0.25 s interval", f"{bench.agent_share:.1f} % of one core"),
    ]
    short = [(rows, counted) for rows, counted in bench.counts if rows != counted]
    records = (
        f"In every round the records written matched Locust's own count ({bench.counts[-1][0]:,} "
        "in the last)."
        if not short
        else "Records written differ from Locust's own count in "
        + ", ".join(f"{rows:,} vs {counted or 0:,}" for rows, counted in short)
        + " (records vs counted)."
    )
    rounds = len(bench.counts)
    return "\n".join(
        [
            "## The load generator's cost",
            "",
            stamp.markdown(command),
            "",
            "100 B request-response against `benchmarks/echo_server.py` (it does no work, so "
            f"the client is the bottleneck), {bench.users} Locust users in one process, closed "
            f"loop; medians of {rounds} interleaved round(s) of {bench.seconds:g} s. CPU % is "
            "the measured process's user + system time over its wall time (100 % = one core).",
            "",
            *table(["client", "requests/s", "CPU % of one core"], clients),
            "",
            *table(["cost", "measured"], costs),
            "",
            f"One Locust process with lblab's records sends {bench.rate('locust'):,.0f} "
            f"requests a second at {bench.cpu('locust'):.0f} % of a core; recording changes "
            f"its throughput by {-bench.overhead_pct:+.1f} % against the same users without "
            f"it. {records}",
            "",
            f"Per request it spends {bench.fasthttp_ratio:.2f}x the CPU of Locust's own "
            f"FastHttpUser ({bench.cpu_us('locust'):.0f} vs {bench.cpu_us('fasthttp'):.0f} us), "
            "which POSTs the same 100 B to `benchmarks/http_echo_server.py` at "
            f"{bench.rate('fasthttp'):,.0f} requests a second in the same rounds.",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--users", type=int, default=8)
    parser.add_argument(
        "--markdown",
        action="store_true",
        help="print only a stamped section of docs/results/benchmarks.md (rounds on stderr)",
    )
    args = parser.parse_args()
    if not args.markdown:
        print_text(measure(args.seconds, args.rounds, args.users, lambda s: print(s, flush=True)))
        return
    command = this_script()
    stamp = take()
    bench = measure(
        args.seconds, args.rounds, args.users, lambda s: print(s, file=sys.stderr, flush=True)
    )
    print(markdown(bench, stamp, command))


if __name__ == "__main__":
    main()
