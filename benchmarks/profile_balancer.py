"""Where the balancer's time goes per request: a sampling profile and its system calls.

``uv run python benchmarks/profile_balancer.py [--seconds 5] [--in-flight 1,10,64]
[--strategy rr] [--markdown]``

The testbed of ``bench_balancer.py``: three echo backends, ``lblab balancer``, the
raw-frame client on 3 connections, 100-byte requests, closed loop. For each number of
requests in flight, four passes of ``--seconds`` each, so one tool's overhead does not
bend another's figure:

1. **plain**: requests per second and the balancer's CPU per request (user + sys of its
   process over the window);
2. **py-spy** (``py-spy record --nonblocking``, 500 Hz, on the balancer): the share of its
   CPU samples by the module of the innermost frame (where the time is spent, not who
   called it), and the functions with the most samples;
3. **strace** (``strace -c -f``, on the balancer): system calls per request, by call;
   ``epoll_wait`` calls per request are the event loop's wake-ups. Under ptrace the
   balancer runs several times slower, so this pass gives counts, not times.
4. **perf** (``perf record -e cpu-clock``, on the balancer, when ``perf`` is installed
   and allowed): the balancer's CPU by where it ran, the kernel, the interpreter
   (libpython), uvloop, other C extensions, as shares and as microseconds per request
   (the pass's own CPU per request times the share), and the symbols with the most
   samples. This is the split py-spy cannot give: py-spy sees Python frames only, so it
   charges the kernel's time in a system call and the interpreter's own work to the
   innermost Python frame (``flush_out`` holds the ``writev``; ``Runner.run`` holds
   uvloop, ``epoll_wait`` and every read), and code compiled to C has no frame at all.

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

from bench_balancer import IN_FLIGHT, in_flight_counts, measure_cell, start_testbed, stop_testbed

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
    perf_cpu_us: float = 0.0
    """CPU per request during the perf pass (perf attached)."""
    by_place: dict[str, float] = field(default_factory=dict)
    """perf's share (%) of the balancer's samples by where they ran (``place_of``)."""
    by_symbol: dict[str, float] = field(default_factory=dict)

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


PLACES = ("the kernel", "the interpreter (libpython)", "uvloop", "other C extensions", "libc")


def place_of(dso: str) -> str:
    """perf's shared object as where the time went (``PLACES``, or ``other``)."""
    if dso.startswith("[kernel") or dso.startswith("[vdso"):
        return PLACES[0]
    if dso.startswith("libpython") or dso.startswith("python3"):
        return PLACES[1]
    if dso.startswith("loop.cpython"):
        return PLACES[2]
    if ".cpython-" in dso:
        return PLACES[3]
    if dso.startswith("libc.") or dso.startswith("libc-"):
        return PLACES[4]
    return "other"


def read_perf(data: Path, key: str) -> dict[str, float]:
    """``perf report --sort KEY``'s shares (%) by KEY (``dso`` or ``sym``)."""
    out = subprocess.run(
        ["perf", "report", "--stdio", "--no-children", "-g", "none", "--sort", key, "-i", str(data)],
        capture_output=True, text=True, check=True, timeout=120,
    ).stdout  # fmt: skip
    return parse_perf_report(out)


def parse_perf_report(text: str) -> dict[str, float]:
    """Rows ``  23.37%  [.] _PyEval_EvalFrameDefault`` as {name: share}; comments skipped."""
    shares: collections.Counter[str] = collections.Counter()
    for line in text.splitlines():
        share, _, name = line.strip().partition(" ")
        if not line.startswith("#") and share.endswith("%"):
            try:
                shares[name.strip()] += float(share[:-1])
            except ValueError:
                continue
    return dict(shares)


def perf_usable() -> bool:
    """perf installed, and allowed to sample another process here."""
    if shutil.which("perf") is None:
        return False
    probe = subprocess.run(
        ["perf", "stat", "-e", "cpu-clock", "true"], capture_output=True, timeout=30
    )
    return probe.returncode == 0


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
    balancer: Child,
    address: tuple[str, int],
    in_flight: int,
    seconds: float,
    workdir: Path,
    with_perf: bool,
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

    if with_perf:
        data = workdir / f"perf-{in_flight}.data"
        sampler = attach(["perf", "record", "-e", "cpu-clock", "-F", "999", "-o", str(data),
                          "-p", str(balancer.pid)])  # fmt: skip
        await asyncio.sleep(1.0)  # perf attaches
        sampled = await measure_cell(addresses, SIZE, in_flight, seconds, balancer.pid)
        detach(sampler, "perf")
        cell.perf_cpu_us = sampled["cpu_us"]
        places: collections.Counter[str] = collections.Counter()
        for dso, share in read_perf(data, "dso").items():
            places[place_of(dso)] += share
        cell.by_place = dict(places)
        cell.by_symbol = read_perf(data, "sym")
    return cell


def measure(args: argparse.Namespace) -> list[Cell]:
    missing = [tool for tool in ("py-spy", "strace") if shutil.which(tool) is None]
    if missing:
        raise SystemExit(f"{' and '.join(missing)} not found: scripts/setup installs them")
    workdir = Path(tempfile.mkdtemp(prefix="profile-balancer-"))
    with_perf = perf_usable()
    if not with_perf:
        print("perf is not installed or not allowed here: no perf pass", file=sys.stderr)
    bed = start_testbed(workdir, args.strategy, with_haproxy=False, references=False)
    balancer: Child = bed["balancer"]  # type: ignore[assignment]
    address = ("127.0.0.1", int(balancer.ready["port"]))
    cells = []
    try:
        import uvloop

        for n in args.in_flight:
            print(f"profiling at {n} in flight ...", file=sys.stderr)
            cells.append(
                uvloop.run(profile(balancer, address, n, args.seconds, workdir, with_perf))
            )
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


def place_rows(cells: list[Cell]) -> list[list[object]]:
    """Per place: share and us per request at each in-flight count."""
    return [
        [
            place,
            *(
                f"{c.by_place.get(place, 0.0):.1f} % ({c.perf_cpu_us * c.by_place.get(place, 0.0) / 100:.1f} us)"
                for c in cells
            ),
        ]
        for place in (*PLACES, "other")
        if any(c.by_place.get(place) for c in cells)
    ]


def perf_section(cells: list[Cell]) -> list[str]:
    if not any(c.by_place for c in cells):
        return ["perf was not installed or not allowed: no split by where the time went.", ""]
    flights = [f"{c.in_flight} in flight" for c in cells]
    middle = cells[len(cells) // 2]
    top = sorted(middle.by_symbol.items(), key=lambda kv: -kv[1])[:TOP_FUNCTIONS]
    return [
        "Where the balancer's CPU ran (`perf record -e cpu-clock`, its shared objects), as a "
        "share of its samples and in microseconds per request of that pass (CPU per request "
        "with perf attached: "
        + ", ".join(f"{c.perf_cpu_us:.1f} us at {c.in_flight}" for c in cells)
        + "):",
        "",
        *table(["where", *flights], place_rows(cells)),
        "",
        f"The symbols with the most samples at {middle.in_flight} in flight (`[k]` kernel):",
        "",
        *table(["symbol", "share"], [[name, f"{share:.1f} %"] for name, share in top]),
        "",
    ]


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
        *perf_section(cells),
        "Share of the balancer's py-spy samples by the module of the innermost Python frame "
        "(what runs in C, the kernel included, is charged to the Python frame that called it):",
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
        for place, share in sorted(c.by_place.items(), key=lambda kv: -kv[1]):
            print(f"  perf {share:5.1f} % ({c.perf_cpu_us * share / 100:.1f} us)  {place}")
        calls = sum(c.syscalls.values())
        print(f"  system calls per request: {c.per_request(calls):.2f}")
        for name, n in sorted(c.syscalls.items(), key=lambda kv: -kv[1])[:6]:
            print(f"    {c.per_request(n):6.2f}  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="Load per pass.")
    parser.add_argument(
        "--in-flight",
        type=in_flight_counts,
        default=list(IN_FLIGHT),
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
