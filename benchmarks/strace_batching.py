"""Requests per read and per write system call of a proxy, on its client and backend sides.

``bench_balancer.py --strace`` runs one more cell per proxy with the proxy under
``strace -f -p PID -ttt -e trace=<reads and writes>`` and keeps the calls made inside
that cell's measured window. Not ``strace -c``: its sums are over every descriptor and
cannot tell the client side from the backend side, so the calls are traced one by one
(to a file, without their data) and sorted by descriptor: *client side*, the connections
accepted on the proxy's listening port; *backend side*, its connections to the backends
(psutil's view of the proxy's sockets, sampled through the cell). Reads are
read/recvfrom/readv/recvmsg, writes write/sendto/writev/sendmsg, each counted whether it
moved data or failed (EAGAIN), as ``strace -c`` counts them; the failed ones are also
counted apart. strace stops the process at every call: a traced cell is slower than a
measured one and is not one of the measured rounds.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import subprocess
import threading
from collections import Counter
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil

READS = ("read", "recvfrom", "readv", "recvmsg")
WRITES = ("write", "sendto", "writev", "sendmsg")
KINDS = {**dict.fromkeys(READS, "read"), **dict.fromkeys(WRITES, "write")}
SIDES = ("client", "backend")
ATTACH_TIMEOUT_S = 10.0

_CALL = re.compile(r"^(?:\d+\s+)?(\d+\.\d+)\s+(\w+)\((\d+),(.*)$")
"""A call as ``strace -f -ttt -o FILE`` writes it: [pid] epoch name(fd, ... ) = result;
``<... name resumed>`` lines have no descriptor and are counted where the call started."""


def missing() -> str | None:
    """Why ``--strace`` cannot run here, or None."""
    return None if shutil.which("strace") else "strace is not installed (apt-get install strace)"


@dataclass
class Batching:
    """The reads and writes of one traced cell, by side."""

    requests: int
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(side, "read" or "write") -> calls."""
    failed: Counter[tuple[str, str]] = field(default_factory=Counter)
    """Of them, the calls that returned -1 (EAGAIN: nothing there yet)."""

    def per_call(self, side: str, kind: str) -> float:
        """Requests per call: above 1, one call carries several requests."""
        calls = self.calls[side, kind]
        return self.requests / calls if calls and self.requests else float("nan")

    def failed_per_request(self) -> float:
        return sum(self.failed.values()) / self.requests if self.requests else float("nan")


def calls_in(text: str, t0: float, t1: float) -> Iterator[tuple[str, int, bool]]:
    """(call, descriptor, failed) of each read or write started in ``[t0, t1]`` (epoch s)."""
    for line in text.splitlines():
        m = _CALL.match(line)
        if m is None or m.group(2) not in KINDS or not t0 <= float(m.group(1)) <= t1:
            continue
        yield m.group(2), int(m.group(3)), bool(re.search(r"\) = -1 ", m.group(4)))


def count(text: str, t0: float, t1: float, sides: dict[int, str], requests: int) -> Batching:
    """The calls of ``text`` in the window, by ``sides`` (descriptor -> side)."""
    out = Batching(requests)
    for call, fd, failed in calls_in(text, t0, t1):
        side = sides.get(fd)
        if side is None:
            continue
        out.calls[side, KINDS[call]] += 1
        if failed:
            out.failed[side, KINDS[call]] += 1
    return out


class Tracer:
    """strace attached to ``pid`` for one cell, and the sides of its descriptors."""

    def __init__(
        self, pid: int, listen_port: int, backend_ports: Collection[int], out: Path
    ) -> None:
        self.pid = pid
        self.listen_port = listen_port
        self.backend_ports = set(backend_ports)
        self.out = out
        self.sides: dict[int, str] = {}
        self._done = threading.Event()
        self._attached = threading.Event()
        self._stderr: list[str] = []
        self._threads: list[threading.Thread] = []
        self.popen: subprocess.Popen[str] | None = None

    def start(self) -> None:
        """Attach (waiting for strace's word that it did), then sample the sockets."""
        argv = ["strace", "-f", "-p", str(self.pid), "-ttt", "-s", "0", "-o", str(self.out)]
        argv += ["-e", "trace=" + ",".join(KINDS)]
        self.popen = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        self._threads = [
            threading.Thread(target=self._read_stderr, daemon=True),
            threading.Thread(target=self._sample_sockets, daemon=True),
        ]
        self._threads[0].start()
        if not self._attached.wait(ATTACH_TIMEOUT_S):
            self._stop_strace()
            raise RuntimeError(f"strace did not attach to {self.pid}: {self._stderr[-3:]}")
        self._threads[1].start()

    def finish(self, t0: float, t1: float, requests: int) -> Batching:
        """Detach, then the calls of the window ``[t0, t1]`` (epoch s) by side."""
        self._stop_strace()
        text = self.out.read_text(errors="replace") if self.out.exists() else ""
        self.out.unlink(missing_ok=True)  # a 1 MB cell's trace runs to tens of MB
        return count(text, t0, t1, self.sides, requests)

    def _stop_strace(self) -> None:
        self._done.set()
        if self.popen is not None and self.popen.poll() is None:
            self.popen.send_signal(signal.SIGINT)  # strace detaches and flushes its file
            try:
                self.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(timeout=5)
        for t in self._threads:
            if t.is_alive():
                t.join(timeout=2)

    def _read_stderr(self) -> None:
        assert self.popen is not None and self.popen.stderr is not None
        for line in self.popen.stderr:
            self._stderr.append(line.strip())
            if "attached" in line:
                self._attached.set()

    def _sample_sockets(self) -> None:
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(self.pid)
            while not self._done.is_set():
                for c in proc.net_connections("tcp"):
                    if c.fd < 0 or not c.raddr:
                        continue
                    if c.laddr.port == self.listen_port:
                        self.sides[c.fd] = "client"
                    elif c.raddr.port in self.backend_ports:
                        self.sides[c.fd] = "backend"
                self._done.wait(0.2)
