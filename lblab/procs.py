"""Child processes with a readiness handshake and deadlines on every wait.

Every long-running lblab process (server, agent, balancer) prints exactly one line
``lblab-ready {json}`` on stdout once it serves, e.g.
``lblab-ready {"role": "server", "id": "s1", "port": 7001, "pid": 123, "cpu_limit": "cgroup"}``.
``spawn`` starts such a process and returns its parsed readiness facts, so a test or
the runner can bind port 0 and learn the real port. ``stop`` sends SIGTERM, waits up to a
deadline, then SIGKILLs the process group: nothing is left behind. A process learns to
stop from ``stop_on_signals`` (SIGTERM or SIGINT, the ones ``stop`` sends).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

READY_PREFIX = "lblab-ready "
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
"""What asks a long-running lblab process to stop cleanly (drain, flush, exit 0)."""


PARENT_ENV = "LBLAB_PARENT_PID"
"""Set by ``spawn`` for its child: the pid of the process that owns it."""
PARENT_CHECK_S = 1.0


def stop_on_signals(loop: asyncio.AbstractEventLoop) -> asyncio.Event:
    """An event that ``STOP_SIGNALS`` set: what a process's main coroutine waits on.

    A process started by ``spawn`` also stops when its owner is gone (checked every
    ``PARENT_CHECK_S``): a runner killed with SIGKILL, or a test killed at its timeout,
    cannot stop its servers, agents and balancer, and they would run on unowned,
    loading the machine for every later run. Started by hand or by a supervisor, the
    process has no owner to watch and runs until told to stop."""
    stop = asyncio.Event()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    owner = os.environ.get(PARENT_ENV, "")
    if owner.isdigit() and int(owner) == os.getppid():
        _watch_owner(loop, int(owner), stop)
    return stop


def _watch_owner(loop: asyncio.AbstractEventLoop, owner: int, stop: asyncio.Event) -> None:
    def check() -> None:
        if os.getppid() != owner:  # reparented: the owner exited
            stop.set()
        else:
            loop.call_later(PARENT_CHECK_S, check)

    loop.call_later(PARENT_CHECK_S, check)


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def dies_with_this_process() -> Callable[[], None]:
    """A ``preexec_fn`` for ``subprocess.Popen``: the child is SIGKILLed the moment the
    calling thread's process dies, however it dies (Linux ``PR_SET_PDEATHSIG``).

    For children that cannot watch their owner themselves: Locust runs on gevent and
    does not notice its parent going, so a runner killed with SIGKILL left it sending
    to a dead balancer and writing records into the phase a later ``--resume`` reran.
    A child that has nothing to save once its owner is gone needs no grace. If the
    owner died between the fork and the ``prctl``, the child exits at once. Call it in
    the thread that starts the child and outlives it (the signal follows the thread)."""
    owner = os.getpid()
    libc = ctypes.CDLL(None, use_errno=True)  # loaded before the fork: nothing to load after

    def preexec() -> None:
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != owner:
            os._exit(1)

    return preexec


def announce_ready(role: str, **facts: Any) -> None:
    """Print the readiness line (called by the process itself, once it serves)."""
    facts = {"role": role, "pid": os.getpid(), **facts}
    sys.stdout.write(READY_PREFIX + json.dumps(facts) + "\n")
    sys.stdout.flush()


class ProcessFailed(RuntimeError):
    """A child exited or missed its readiness deadline; the message includes its last output."""


@dataclass
class Child:
    name: str
    popen: subprocess.Popen[bytes]
    ready: dict[str, Any] = field(default_factory=dict)
    log_path: Path | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None


def lblab_command(*args: str) -> list[str]:
    """argv that runs ``lblab ARGS`` with this interpreter (no reliance on PATH)."""
    return [sys.executable, "-m", "lblab", *args]


def spawn(
    name: str,
    argv: Sequence[str],
    *,
    ready_timeout: float = 20.0,
    log_path: Path | None = None,
    env: dict[str, str] | None = None,
) -> Child:
    """Start ``argv`` in its own process group and wait for its readiness line.

    stdout lines after the readiness line and all of stderr go to ``log_path`` (or are
    discarded). Raises ``ProcessFailed`` with the output seen so far if the process exits
    or stays silent past ``ready_timeout`` seconds.
    """
    log = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - handed to the child
    popen = subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=log,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env={**(os.environ if env is None else env), PARENT_ENV: str(os.getpid())},
    )
    if log_path:
        log.close()  # type: ignore[union-attr]
    child = Child(name, popen, log_path=log_path)
    try:
        return _await_ready(child, ready_timeout, log_path)
    except BaseException:  # a deadline, a failed start, or Ctrl-C: no orphan is left
        stop(child, timeout=2)
        raise


def _await_ready(child: Child, ready_timeout: float, log_path: Path | None) -> Child:
    name, popen = child.name, child.popen
    seen: list[str] = []
    deadline = time.monotonic() + ready_timeout
    assert popen.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(popen.stdout, selectors.EVENT_READ)
    buf = b""
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ProcessFailed(
                    f"{name} did not report ready within {ready_timeout:.0f}s; output: {seen[-10:]}"
                    + _log_tail(log_path)
                )
            if not sel.select(timeout=min(remaining, 0.5)):
                if popen.poll() is not None:
                    raise ProcessFailed(
                        f"{name} exited with code {popen.returncode} before it was ready; "
                        f"output: {seen[-10:]}" + _log_tail(log_path)
                    )
                continue
            chunk = os.read(popen.stdout.fileno(), 65536)
            if not chunk:
                popen.wait(timeout=5)
                raise ProcessFailed(
                    f"{name} exited with code {popen.returncode} before it was ready; "
                    f"output: {seen[-10:]}" + _log_tail(log_path)
                )
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for raw in lines:
                line = raw.decode("utf-8", "replace")
                if line.startswith(READY_PREFIX):
                    child.ready = json.loads(line[len(READY_PREFIX) :])
                    _drain_stdout_to(popen, log_path)
                    return child
                seen.append(line)
    finally:
        sel.close()


def _drain_stdout_to(popen: subprocess.Popen[bytes], log_path: Path | None) -> None:
    """Keep reading the child's stdout in a daemon thread so it never blocks on a full pipe."""
    import threading

    stdout = popen.stdout
    assert stdout is not None

    def pump() -> None:
        # Blocking reads: a child's start-up code may have left the pipe non-blocking
        # (seen as a BlockingIOError in this thread under load).
        os.set_blocking(stdout.fileno(), True)
        with open(log_path, "ab") if log_path else open(os.devnull, "wb") as out:
            for chunk in iter(lambda: os.read(stdout.fileno(), 65536), b""):
                out.write(chunk)
                out.flush()

    threading.Thread(target=pump, name="stdout-pump", daemon=True).start()


def _log_tail(log_path: Path | None, lines: int = 15) -> str:
    if not log_path or not log_path.exists():
        return ""
    tail = log_path.read_text(errors="replace").splitlines()[-lines:]
    return "\n--- last lines of " + str(log_path) + " ---\n" + "\n".join(tail)


def stop(child: Child, timeout: float = 10.0, sig: int = signal.SIGTERM) -> int | None:
    """Signal the child's process group, wait up to ``timeout``, then SIGKILL the group."""
    if child.popen.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.popen.pid, sig)
        try:
            child.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.popen.pid, signal.SIGKILL)
            child.popen.wait(timeout=5)
    return child.popen.returncode
