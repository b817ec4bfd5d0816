"""CPU of the harness's own processes during a phase: Locust, the balancer, the agents.

The runner samples each process's CPU time (user + system, psutil) on its tick; after
the phase, ``cores`` reads how much CPU each process used inside the measured window
(the samples nearest inside its bounds), in cores. A process that exits or cannot be
read simply has no figure.
"""

from __future__ import annotations

import bisect
import contextlib
import time
from collections.abc import Iterable, Mapping

import psutil

from lblab.windows import Window


class CpuProbe:
    def __init__(self) -> None:
        self._procs: dict[int, psutil.Process] = {}
        self._groups: dict[str, list[int]] = {}
        self._samples: dict[int, tuple[list[float], list[float]]] = {}

    def watch(self, groups: Mapping[str, Iterable[int]]) -> None:
        """Start a phase: sample these pids, by group name (previous samples dropped)."""
        self._groups = {name: list(pids) for name, pids in groups.items()}
        self._samples = {}
        self._procs = {}
        for pids in self._groups.values():
            for pid in pids:
                with contextlib.suppress(psutil.Error):
                    self._procs[pid] = psutil.Process(pid)
                    self._samples[pid] = ([], [])
        self.sample()

    def sample(self) -> None:
        now = time.time()
        for pid, proc in list(self._procs.items()):
            try:
                t = proc.cpu_times()
            except psutil.Error:
                del self._procs[pid]
                continue
            times, cpu = self._samples[pid]
            times.append(now)
            cpu.append(t.user + t.system)

    def cores(self, window: Window) -> dict[str, list[float]]:
        """Cores each watched process used inside ``window``, by group (needs two samples
        inside it; a process without them is left out)."""
        out: dict[str, list[float]] = {}
        for name, pids in self._groups.items():
            out[name] = []
            for pid in pids:
                times, cpu = self._samples.get(pid, ([], []))
                lo = bisect.bisect_left(times, window.start)
                hi = bisect.bisect_right(times, window.end) - 1
                if hi - lo >= 1 and times[hi] > times[lo]:
                    out[name].append((cpu[hi] - cpu[lo]) / (times[hi] - times[lo]))
        return out
