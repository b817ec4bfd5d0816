"""Where the balancer's time goes per request: a sampling profile and its system calls.

``uv run python benchmarks/profile_balancer.py [--seconds 5] [--in-flight 1,10,64]
[--strategy rr] [--markdown]``

The testbed of ``bench_balancer.py``: three echo backends, ``lblab balancer``, the
raw-frame client on 3 connections, 100-byte requests, closed loop. For each number of
requests in flight, three passes of ``--seconds`` each, so one tool's overhead does not
bend another's figure:

1. **plain**: requests per second and the balancer's CPU per request (user + sys of its
   process over the window);
2. **py-spy** (``py-spy record --nonblocking``, 500 Hz, on the balancer): the share of its
   CPU samples by the module of the innermost frame (where the time is spent, not who
   called it), and the functions with the most samples;
3. **strace** (``strace -c -f``, on the balancer): system calls per request, by call;
   ``epoll_wait`` calls per request are the event loop's wake-ups. Under ptrace the
   balancer runs several times slower, so this pass gives counts, not times.

``--markdown`` prints a stamped section of ``docs/results/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_balancer import measure_cell, start_testbed, stop_testbed

from lblab.pages import table, this_script
from lblab.procs import Child
from lblab.stamp import Stamp, take

SIZE = 100
SAMPLE_HZ = 500
TOP_FUNCTIONS = 12
_FRAME = re.compile(r"^(?P<func>.*?) \((?P<file>[^:()]+)(?::\d+)?\)$")
_STRACE_ROW = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(?P<calls>\d+)\s+(?:\d+\s+)?(?P<name>\w+)$")


@dataclass
class Cell:
    """What the three passes measured at one number of requests in flight."""

    in_flight: int
    rps: float = 0.0
    cpu_us: float = 0.0
    sys_us: float = 0.0
    samples: int = 0
    by_module: dict[str, int] = field(default_factory=dict)
    by_function: dict[str, int] = field(default_factory=dict)
    requests_traced: int = 0
    syscalls: dict[str, int] = field(default_factory=dict)

    def per_request(self, calls: int) -> float:
        return calls / self.requests_traced if self.requests_traced else float("nan")


LOOP_C = "uvloop, in C (the loop, socket reads and writes)"
"""Samples whose innermost Python frame is ``asyncio.Runner.run``: uvloop's own C code
runs below it, so its time (and the system calls it makes) shows up there."""


def module_of(path: str, func: str = "") -> str:
    """A frame's file as a short name: ``lblab/balancer/router.py`` -> ``balancer/router``;
    other code by its top package (``asyncio``, ``uvloop``); no file: ``(native)``."""
    if func == "Runner.run" and path.endswith("asyncio/runners.py"):
        return LOOP_C
    if not path:
        return "(native)"
    for marker in ("site-packages/", "/lib/python3."):
        if marker in path:
            path = path.split(marker)[-1]
            path = path.split("/", 1)[1] if marker == "/lib/python3." and "/" in path else path
    if path.startswith("lblab/"):
        return path.removeprefix("lblab/").removesuffix(".py")
    return path.split("/")[0].removesuffix(".py")


def read_folded(path: Path) -> tuple[int, dict[str, int], dict[str, int]]:
    """py-spy's raw (folded) stacks: total samples, samples by module and by function of
    the innermost frame."""
    total, modules, functions = 0, collections.Counter[str](), collections.Counter[str]()
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        leaf = stack.split(";")[-1]
        match = _FRAME.match(leaf)
        func, file = (match["func"], match["file"]) if match else (leaf, "")
        total += n
        modules[module_of(file, func)] += n
        functions[f"{func} ({module_of(file, func)})"] += n
    return total, dict(modules), dict(functions)


def read_strace(path: Path) -> dict[str, int]:
    """``strace -c``'s summary: calls by system call."""
    calls: dict[str, int] = {}
    for line in path.read_text().splitlines():
        match = _STRACE_ROW.match(line)
        if match and match["name"] != "total":
            calls[match["name"]] = int(match["calls"])
    return calls


def attach(argv: list[str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def detach(tool: subprocess.Popen[bytes], name: str) -> None:
    """Stop an attached tool (SIGINT: it writes its summary) and wait for it."""
    if tool.poll() is None:
        tool.send_signal(signal.SIGINT)
    try:
        _, err = tool.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        tool.kill()
        _, err = tool.communicate()
    if tool.returncode not in (0, -signal.SIGINT, 130):
        print(f"{name} exited {tool.returncode}: {err.decode()[-500:]}", file=sys.stderr)


async def profile(
    balancer: Child, address: tuple[str, int], in_flight: int, seconds: float, workdir: Path
) -> Cell:
    cell = Cell(in_flight)
    addresses = [address] * (1 if in_flight == 1 else 3)
    plain = await measure_cell(addresses, SIZE, in_flight, seconds, balancer.pid)
    cell.rps, cell.cpu_us, cell.sys_us = plain["rps"], plain["cpu_us"], plain["sys_us"]

    folded = workdir / f"pyspy-{in_flight}.txt"
    spy = attach(["py-spy", "record", "--nonblocking", "-r", str(SAMPLE_HZ), "-f", "raw",
                  "-o", str(folded), "-p", str(balancer.pid), "-d", str(int(seconds + 60))])  # fmt: skip
    await asyncio.sleep(1.0)  # py-spy attaches
    await measure_cell(addresses, SIZE, in_flight, seconds, None)
    detach(spy, "py-spy")
    cell.samples, cell.by_module, cell.by_function = read_folded(folded)

    summary = workdir / f"strace-{in_flight}.txt"
    trace = attach(["strace", "-c", "-f", "-o", str(summary), "-p", str(balancer.pid)])
    await asyncio.sleep(1.0)  # strace attaches
    traced = await measure_cell(addresses, SIZE, in_flight, seconds, None)
    detach(trace, "strace")
    cell.requests_traced = int(traced["n"])
    cell.syscalls = read_strace(summary)
    return cell


def measure(args: argparse.Namespace) -> list[Cell]:
    missing = [tool for tool in ("py-spy", "strace") if shutil.which(tool) is None]
    if missing:
        raise SystemExit(f"{' and '.join(missing)} not found: scripts/setup installs them")
    workdir = Path(tempfile.mkdtemp(prefix="profile-balancer-"))
    bed = start_testbed(workdir, args.strategy, with_haproxy=False)
    balancer: Child = bed["balancer"]  # type: ignore[assignment]
    address = ("127.0.0.1", int(balancer.ready["port"]))
    cells = []
    try:
        import uvloop

        for n in args.in_flight:
            print(f"profiling at {n} in flight ...", file=sys.stderr)
            cells.append(uvloop.run(profile(balancer, address, n, args.seconds, workdir)))
    finally:
        stop_testbed(bed)
    return cells


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f} %" if whole else "-"


def rows_by_module(cells: list[Cell], limit: int = 10) -> list[list[object]]:
    total: collections.Counter[str] = collections.Counter()
    for c in cells:
        total.update({m: n / max(c.samples, 1) for m, n in c.by_module.items()})
    return [
        [module, *(_share(c.by_module.get(module, 0), c.samples) for c in cells)]
        for module, _ in total.most_common(limit)
    ]


def syscall_rows(cells: list[Cell], limit: int = 8) -> list[list[object]]:
    total: collections.Counter[str] = collections.Counter()
    for c in cells:
        total.update({k: c.per_request(v) for k, v in c.syscalls.items()})
    rows: list[list[object]] = [
        ["all", *(round(c.per_request(sum(c.syscalls.values())), 2) for c in cells)]
    ]
    rows += [
        [name, *(round(c.per_request(c.syscalls.get(name, 0)), 2) for c in cells)]
        for name, _ in total.most_common(limit)
    ]
    return rows


def markdown(cells: list[Cell], args: argparse.Namespace, stamp: Stamp, command: str) -> str:
    flights = [f"{c.in_flight} in flight" for c in cells]
    lines = [
        "## Where the balancer's time goes",
        "",
        stamp.markdown(command),
        "",
        f"`lblab balancer --strategy {args.strategy}` over three echo backends, {SIZE}-byte "
        f"requests, closed loop, {args.seconds:g} s per pass.",
        "",
        *table(
            ["", *flights],
            [
                ["requests/s (plain pass)", *(round(c.rps) for c in cells)],
                ["balancer CPU us per request", *(round(c.cpu_us, 1) for c in cells)],
                ["of which in the kernel (sys)", *(round(c.sys_us, 1) for c in cells)],
                ["py-spy samples", *(c.samples for c in cells)],
            ],
        ),
        "",
        "Share of the balancer's CPU samples by the module of the innermost frame:",
        "",
        *table(["module", *flights], rows_by_module(cells)),
        "",
        "System calls per request (`strace -c`; `epoll_wait` is a wake-up of the loop):",
        "",
        *table(["system call", *flights], syscall_rows(cells)),
        "",
    ]
    middle = cells[len(cells) // 2]
    top = sorted(middle.by_function.items(), key=lambda kv: -kv[1])[:TOP_FUNCTIONS]
    lines += [
        f"The functions with the most samples at {middle.in_flight} in flight:",
        "",
        *table(["function (module)", "share"], [[f, _share(n, middle.samples)] for f, n in top]),
        "",
    ]
    return "\n".join(lines)


def print_text(cells: list[Cell]) -> None:
    for c in cells:
        print(
            f"\n{c.in_flight} in flight: {c.rps:.0f} req/s, {c.cpu_us:.1f} us CPU per request "
            f"({c.sys_us:.1f} in the kernel)"
        )
        for module, n in sorted(c.by_module.items(), key=lambda kv: -kv[1])[:10]:
            print(f"  {_share(n, c.samples):>7}  {module}")
        calls = sum(c.syscalls.values())
        print(f"  system calls per request: {c.per_request(calls):.2f}")
        for name, n in sorted(c.syscalls.items(), key=lambda kv: -kv[1])[:6]:
            print(f"    {c.per_request(n):6.2f}  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="Load per pass.")
    parser.add_argument(
        "--in-flight",
        type=lambda text: [int(x) for x in text.split(",") if x],
        default=[1, 10, 64],
        help="Requests in flight, comma separated.",
    )
    parser.add_argument("--strategy", default="rr")
    parser.add_argument("--markdown", action="store_true", help="Print a docs section.")
    args = parser.parse_args()
    stamp = take()
    cells = measure(args)
    if args.markdown:
        command = this_script()
        print(markdown(cells, args, stamp, command))
    else:
        print_text(cells)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
