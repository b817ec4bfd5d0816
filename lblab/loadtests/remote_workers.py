"""Locust workers on a loader host for a master on another one: ``lblab locust-workers``.

Distributed Locust across hosts: the runner on the first loader starts a master per
phase (``lblab run --locust-master-bind HOST:PORT --expect-workers N``); every loader
host keeps ``--processes`` workers connected to that address with this command (the
ansible loader role runs it as the service ``lblab-locust-worker``).

Why a keeper and not a plain ``locust --worker``: a Locust 2.47 worker quits when its
master quits (the master sends ``quit`` at the end of ``-t``; ``WorkerRunner`` then kills
its greenlets and the process exits), and the runner starts one master per phase. So
each worker serves one phase, and this process relaunches it ``RELAUNCH_DELAY_S`` after
it exits, ready for the next master. A worker started before its master exists waits
for it (Locust retries the connection for 5 minutes, then exits and is relaunched).

Each worker writes its request records under ``--records-root`` on this host
(``loadtests.records.local_folder``), rows labelled ``loader = --loader``; the run's
collect step merges them once fetched (``lblab run --collect``). SIGTERM or SIGINT stops
the workers (they flush their records) and exits 0.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lblab.loadtests.loadgen import worker_command
from lblab.loadtests.records import LOADER_ENV, RECORDS_ROOT_ENV
from lblab.procs import dies_with_this_process

log = logging.getLogger(__name__)

# A master exits ~0.5 s after it tells its workers to quit (MasterRunner.quit). A worker
# relaunched sooner could greet that dying master and never be known to the next one
# (which ignores heartbeats from workers it has not acknowledged) until Locust's 60 s
# heartbeat timeout. Relaunching 2 s later leaves the old master time to go.
RELAUNCH_DELAY_S = 2.0
# A worker that fails this soon after its start is probably failing for good (bad
# install, bad address): back off up to MAX_BACKOFF_S instead of spinning.
QUICK_FAILURE_S = 5.0
MAX_BACKOFF_S = 30.0
TICK_S = 0.2
STOP_TIMEOUT_S = 15.0  # workers let in-flight requests finish (--stop-timeout) and flush


@dataclass
class _Slot:
    """One worker position: the running process, or when to start the next one."""

    index: int
    popen: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    due: float = 0.0  # monotonic time of the next launch
    delay: float = RELAUNCH_DELAY_S


class _Stop(Exception):
    pass


def keep_workers(master: tuple[str, int], processes: int, loader: str, records_root: Path) -> int:
    """Keep ``processes`` Locust workers connected to ``master`` until SIGTERM/SIGINT."""
    env = {**os.environ, LOADER_ENV: loader, RECORDS_ROOT_ENV: str(records_root)}
    argv = worker_command(*master)
    slots = [_Slot(i) for i in range(processes)]

    def on_signal(signum: int, frame: Any) -> None:
        raise _Stop

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    log.info(
        "keeping %d Locust worker(s) for master %s:%d (loader %s, records under %s)",
        processes, *master, loader, records_root,
    )  # fmt: skip
    try:
        while True:
            now = time.monotonic()
            for slot in slots:
                _tend(slot, argv, env, now)
            time.sleep(TICK_S)
    except _Stop:
        pass
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        _stop_all([s.popen for s in slots if s.popen is not None])
    return 0


def _tend(slot: _Slot, argv: list[str], env: dict[str, str], now: float) -> None:
    """Note an exited worker and schedule its relaunch; launch one that is due."""
    if slot.popen is not None:
        code = slot.popen.poll()
        if code is None:
            return
        lived = now - slot.started
        if code != 0 and lived < QUICK_FAILURE_S:
            slot.delay = min(slot.delay * 2, MAX_BACKOFF_S)
        else:
            slot.delay = RELAUNCH_DELAY_S
        log.info(
            "worker %d exited with code %s after %.0fs; relaunching in %.0fs",
            slot.index, code, lived, slot.delay,
        )  # fmt: skip
        slot.popen, slot.due = None, now + slot.delay
    if now >= slot.due:
        # Same process group as this keeper: a signal to the group (the supervisor's
        # stop, Ctrl-C) reaches the workers too; a keeper killed alone takes them along.
        slot.popen = subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, preexec_fn=dies_with_this_process()
        )
        slot.started = now


def _stop_all(popens: list[subprocess.Popen[bytes]]) -> None:
    """SIGTERM (a repeat is harmless), wait for the records to be flushed, then SIGKILL."""
    for p in popens:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    for p in popens:
        try:
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            log.warning(
                "worker pid %d did not stop within %.0fs; killing it", p.pid, STOP_TIMEOUT_S
            )
            p.kill()
            p.wait(timeout=5)
