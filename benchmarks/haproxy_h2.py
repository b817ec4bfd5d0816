"""HAProxy in HTTP mode with HTTP/2 on both sides: ``bench_balancer.py``'s in-class anchor.

HAProxy in TCP mode pins each client connection to one backend; lblab balances every
RSocket stream on its own. The like-for-like reference is HAProxy balancing every HTTP/2
stream on its own over multiplexed backend connections: ``mode http``, ``bind ... proto h2``,
``server ... proto h2``, ``balance roundrobin``, ``nbthread 1``, over three
``nghttpd --no-tls`` backends, driven by ``h2load -c 1 -m N`` (one client connection, N
streams in flight). Each request is a POST carrying the payload, answered with a file of
the payload's size (nghttpd reads the body and drops it): the payload crosses the proxy
both ways, as the raw-frame targets' echo does. ``method="GET"`` sends no body (the
setup measured by hand for issue 44). *Direct* for this target is the same h2load
straight to one nghttpd: h2load cannot spread one client over three hosts.

Flow control: nghttpd's receive windows are raised (``WINDOW_BITS``: 16 MB a stream, 1 GB
a connection) so a backend never throttles an upload; at its default 64 KB the direct
10 KB cell at 64 in flight ran at 0.6x the raised windows' throughput (one hand check,
2026-12-03, shared machine). HAProxy keeps its defaults (16 KB buffers, 64 KB initial
window): raising ``tune.h2.initial-window-size`` to 1 MB did not lower its CPU per 1 MB
request in the same check. RSocket's request-response has no such windows.

Here: the HAProxy config, the processes (started with deadlines, stopped with
``lblab.procs.stop``), one h2load run per cell and the parsing of its summary and its
per-request log (``--log-file``). ``bench_balancer.py`` takes the CPU over the measured
window (its ``CpuMeter``) and prints the tables.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lblab.procs import Child, ProcessFailed, dies_with_this_process, stop

TOOLS = ("haproxy", "h2load", "nghttpd")
PACKAGES = "haproxy nghttp2-client nghttp2-server"
"""Debian's packages of TOOLS (h2load is in nghttp2-client, nghttpd in nghttp2-server)."""
BACKENDS = 3
MARGIN_S = 0.25
"""h2load's measured phase starts this long before the window and ends this long after:
its start-up and its first and last requests stay outside the window."""
START_TIMEOUT_S = 10.0
WINDOW_BITS = (24, 30)
"""nghttpd's ``-w`` and ``-W``: its stream and connection receive windows, 2**N - 1 bytes."""


def missing_tools() -> str | None:
    """Why the target cannot run here, or None."""
    absent = [t for t in TOOLS if shutil.which(t) is None]
    if not absent:
        return None
    return f"{', '.join(absent)} not installed (apt-get install {PACKAGES}; scripts/setup installs them)"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def write_config(path: Path, port: int, backends: Sequence[int], streams: int = 100) -> str:
    """HAProxy's config: HTTP/2 in on ``port``, HTTP/2 out to ``backends`` round robin,
    one thread, no logging; ``streams`` concurrent streams per connection (HAProxy's
    default is 100: a cell with more in flight raises it). Written to ``path``; returned."""
    servers = "".join(f"    server n{i} 127.0.0.1:{p} proto h2\n" for i, p in enumerate(backends))
    text = (
        "global\n"
        "    maxconn 1000\n"
        "    nbthread 1\n"
        f"    tune.h2.max-concurrent-streams {streams}\n"
        "defaults\n"
        "    mode http\n"
        "    timeout connect 5s\n"
        "    timeout client 60s\n"
        "    timeout server 60s\n"
        "frontend fe\n"
        f"    bind 127.0.0.1:{port} proto h2\n"
        "    default_backend be\n"
        "backend be\n"
        "    balance roundrobin\n"
        f"{servers}"
    )
    path.write_text(text)
    return text


def start_listening(
    name: str, argv: Sequence[str], port: int, log_path: Path, timeout: float = START_TIMEOUT_S
) -> Child:
    """``argv`` in its own process group, ready once ``port`` accepts a connection.

    ``lblab.procs.spawn`` waits for an ``lblab-ready`` line, which HAProxy and nghttpd do
    not print; the rest is the same: a deadline, the log's tail in the error, SIGKILL if
    this process dies, and ``stop`` for the whole group."""
    with open(log_path, "ab") as log:
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            preexec_fn=dies_with_this_process(),
        )
    child = Child(name, popen, ready={"port": port, "pid": popen.pid}, log_path=log_path)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if popen.poll() is not None:
            raise ProcessFailed(
                f"{name} exited with code {popen.returncode} before it listened" + _tail(log_path)
            )
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return child
        time.sleep(0.05)
    stop(child, timeout=2)
    raise ProcessFailed(f"{name} did not listen on {port} within {timeout:.0f}s" + _tail(log_path))


def _tail(log_path: Path, lines: int = 10) -> str:
    text = log_path.read_text(errors="replace") if log_path.exists() else ""
    return "; its log: " + " | ".join(text.splitlines()[-lines:]) if text else ""


@dataclass
class H2Bed:
    """Three nghttpd backends and HAProxy over them, and the files they serve."""

    workdir: Path
    method: str
    backends: list[Child]
    haproxy: Child | None = None
    sizes: dict[str, int] = field(default_factory=dict)

    @property
    def pids(self) -> list[int]:
        """The backends' pids (the testbed of a cell, with the client)."""
        return [b.pid for b in self.backends]

    @property
    def backend_ports(self) -> list[int]:
        return [int(b.ready["port"]) for b in self.backends]

    @property
    def port(self) -> int:
        assert self.haproxy is not None
        return int(self.haproxy.ready["port"])

    def url(self, size: str, through: bool) -> str:
        """Through HAProxy, or straight to the first nghttpd (*direct*)."""
        port = self.port if through else self.backend_ports[0]
        return f"http://127.0.0.1:{port}/{size}"

    def body(self, size: str) -> Path | None:
        """The request body h2load sends (``-d``), or None for GET."""
        return self.workdir / f"body-{size}" if self.method == "POST" else None

    def stop(self) -> None:
        if self.haproxy is not None:
            stop(self.haproxy, timeout=5)
        for b in self.backends:
            stop(b, timeout=5)


def start_bed(
    workdir: Path, sizes: Mapping[str, int], method: str = "POST", streams: int = 100
) -> H2Bed:
    """The files of ``sizes`` (name -> bytes), three nghttpd and HAProxy, each waited for
    with a deadline, then one request of each size through HAProxy: a broken setup fails
    here with its reason, not as a cell of errors."""
    if method not in ("GET", "POST"):
        raise ValueError(f"method {method!r}: GET or POST")
    workdir.mkdir(parents=True, exist_ok=True)
    docroot = workdir / "docroot"
    docroot.mkdir(exist_ok=True)
    for name, size in sizes.items():
        (docroot / name).write_bytes(b"x" * size)
        if method == "POST":
            (workdir / f"body-{name}").write_bytes(b"y" * size)
    bed = H2Bed(workdir, method, [], sizes=dict(sizes))
    try:
        for i in range(BACKENDS):
            port = free_port()
            argv = ["nghttpd", "--no-tls", "-a", "127.0.0.1", "-d", str(docroot)]
            argv += ["-w", str(WINDOW_BITS[0]), "-W", str(WINDOW_BITS[1])]
            argv += ["-m", str(streams), str(port)]
            bed.backends.append(start_listening(f"nghttpd n{i}", argv, port, workdir / f"n{i}.log"))
        port = free_port()
        cfg = workdir / "haproxy-h2.cfg"
        write_config(cfg, port, bed.backend_ports, streams)
        bed.haproxy = start_listening(
            "haproxy-h2", ["haproxy", "-f", str(cfg)], port, workdir / "haproxy-h2.log"
        )
        for name in sizes:
            check_serves(bed.url(name, through=True), bed.body(name))
    except BaseException:
        bed.stop()
        raise
    return bed


def check_serves(url: str, body: Path | None) -> None:
    """Three requests of ``url`` answered 2xx, or ProcessFailed with h2load's words."""
    argv = ["h2load", "-n", "3", "-c", "1", *(["-d", str(body)] if body else []), url]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    try:
        summary = parse_summary(done.stdout)
    except ValueError:
        summary = {}
    if summary.get("2xx") != 3:
        raise ProcessFailed(f"{url} did not answer 3 requests 2xx: {done.stdout[-400:]}")


# ---------------------------------------------------------------- h2load


def h2load_argv(
    url: str,
    in_flight: int,
    seconds: float,
    warmup: float,
    log_file: Path,
    body: Path | None = None,
) -> list[str]:
    """One client connection with ``in_flight`` streams; the measured phase (``-D``)
    ``seconds`` plus a margin each side; every request of it logged to ``log_file``."""
    main = seconds + 2 * MARGIN_S
    return [
        "h2load",
        "-c", "1",
        "-t", "1",
        "-m", str(in_flight),
        f"--warm-up-time={round(warmup * 1000)}ms",
        f"--duration={round(main * 1000)}ms",
        f"--log-file={log_file}",
        *(["-d", str(body)] if body else []),
        url,
    ]  # fmt: skip


@dataclass
class H2Load:
    """A running h2load: its window opens ``opens_at`` (``time.monotonic``)."""

    popen: subprocess.Popen[str]
    log_file: Path
    opens_at: float
    timeout: float

    @property
    def pid(self) -> int:
        return self.popen.pid

    def finish(self) -> tuple[dict[str, float], list[LogLine]]:
        """Wait for the end (with a deadline), then its summary and its log."""
        try:
            out, _ = self.popen.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            out, _ = self.popen.communicate(timeout=5)
            raise ProcessFailed(f"h2load ran past {self.timeout:.0f} s: {out[-400:]}") from None
        try:
            summary = parse_summary(out)
        except ValueError as exc:
            raise ProcessFailed(f"h2load (exit {self.popen.returncode}): {exc}") from None
        return summary, parse_log(self.log_file.read_text())


def start_h2load(
    url: str,
    in_flight: int,
    seconds: float,
    warmup: float,
    log_file: Path,
    body: Path | None = None,
) -> H2Load:
    argv = h2load_argv(url, in_flight, seconds, warmup, log_file, body)
    log_file.unlink(missing_ok=True)  # h2load appends to it
    started = time.monotonic()
    popen = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=dies_with_this_process(),
    )
    opens = started + warmup + MARGIN_S
    return H2Load(popen, log_file, opens, timeout=warmup + seconds + 2 * MARGIN_S + 30)


_COUNTS = re.compile(r"(\d+) (total|started|done|succeeded|failed|errored|timeout|[1-5]xx)\b")


def parse_summary(text: str) -> dict[str, float]:
    """h2load's summary: ``req/s`` of its measured phase (``-D``), the request
    counts (``total``, ``succeeded``, ``failed``, ``errored``, ``timeout``) and the status
    classes (``2xx`` ... ``5xx``). ValueError if there is none (h2load failed)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("finished in "):
            m = re.search(r", ([\d.]+) req/s", line)
            if m:
                out["req/s"] = float(m.group(1))
        elif line.startswith(("requests:", "status codes:")):
            for count, name in _COUNTS.findall(line):
                out[name] = float(count)
    if "req/s" not in out or "succeeded" not in out:
        tail = " | ".join(text.strip().splitlines()[-3:])
        raise ValueError(f"no h2load summary in its output: {tail or 'nothing'}")
    return out


@dataclass(frozen=True)
class LogLine:
    """One request of h2load's ``--log-file``."""

    start: float
    """Epoch seconds."""
    status: int
    duration: float
    """Seconds."""

    @property
    def end(self) -> float:
        return self.start + self.duration


def parse_log(text: str) -> list[LogLine]:
    """h2load's per-request log: start (microseconds since the epoch), status code,
    microseconds to the end of the response, tab-separated; lines ordered by end."""
    lines = []
    for row in text.splitlines():
        parts = row.split("\t")
        if len(parts) < 3:
            continue
        with contextlib.suppress(ValueError):
            lines.append(LogLine(int(parts[0]) / 1e6, int(parts[1]), int(parts[2]) / 1e6))
    return lines


def in_window(log: Sequence[LogLine], t0: float, t1: float) -> tuple[list[float], int, str]:
    """The latencies (seconds, sorted) of the 2xx requests that ended in ``[t0, t1]``
    (epoch seconds), the count of the others that did, and a warning if the log does
    not cover the window (h2load's measured phase started late or ended early)."""
    ended = [x for x in log if t0 <= x.end <= t1]
    latencies = sorted(x.duration for x in ended if 200 <= x.status < 300)
    warning = ""
    if not log or min(x.end for x in log) > t0 or max(x.end for x in log) < t1:
        warning = "h2load's logged requests do not cover the measured window"
    return latencies, len(ended) - len(latencies), warning
