"""CPU during a phase: the harness's own processes, and what took CPU from outside.

The runner calls ``sample`` on its tick (every 0.25 s) and, after the phase, ``cores``
reads from the samples nearest inside the measured window:

- each watched process's CPU (user + system, psutil), by group: Locust, the balancer,
  the agents (``watch``), in cores. A process that exits or cannot be read has no figure.
- ``disturbance``: CPU that processes outside the experiment and the hypervisor (steal)
  took from the CPUs the experiment ran on, per set of CPUs (``disturbance()``).

**The experiment** is this process (the runner) and every descendant of it: Locust, the
balancer, the agents, the servers and their children. Each sample lists the machine's
pids and tracks the new ones whose parent is tracked (a process joins a tree only by
birth; the runner is tracked from the start); the others are remembered as foreign and
not read again. For each tracked process it reads its CPU time and the CPUs it may run
on (its affinity, which isolation sets: ``loadtests/isolation.py``), and from
``/proc/stat`` each CPU's user + nice + system and steal jiffies.

**What is computed**, over the samples nearest inside the window (``seconds`` apart),
for a set of CPUs C:

    busy(C)       = sum over c in C of (seconds - (idle + iowait + irq + softirq + steal)
                    / USER_HZ) / seconds
    steal(C)      = sum over c in C of steal / USER_HZ / seconds
    experiment(C) = CPU seconds of the experiment's processes that may run on C / seconds
    outside(C)    = busy(C) - experiment(C)

all in cores. A process's CPU time says how much it ran, not on which CPU, only where it
may: so outside(C) is a lower bound of what else ran on C, exact when every experiment
process allowed on C is allowed nowhere else. That holds for ``all`` (every CPU any
experiment process may use) and, under isolation, for ``servers`` (the CPUs of the
processes placed off the runner's own set: only the servers are) and ``harness`` (the
runner's own CPUs). Without isolation the three are the same set.

Why busy is the time a CPU was not idle, and not its user + nice + system: on a kernel
that accounts CPU time by the tick (``CONFIG_TICK_CPU_ACCOUNTING``, this project's VM) and
stops the tick on idle CPUs (``NO_HZ``), ``/proc/stat``'s user and system are whole ticks
charged to whatever ran when a tick came, while idle and iowait are the exact time the CPU
slept. A CPU whose tasks run in bursts shorter than a tick, as throttled servers do, gets
ticks that do not add up to the time that passed. Measured on this project's 2-core VM in
32 phases of 3 s (sp+sr and mp+mr, three servers at 0.25-0.5 CPU quotas on CPU 1):
user + nice + system minus the servers' own CPU time was -0.19 to +0.14 cores (sd 0.076),
enough to fail a phase's check on a machine running nothing else; the time CPU 1 was not
idle minus the servers' CPU time was -0.015 to +0.026 (sd 0.010). A process's CPU time
(``/proc/PID/stat``) is scaled to its exact run time, so both sides are exact.

Why irq and softirq are taken out: with IRQ time accounting the kernel charges interrupt
time to no process, so the experiment's own loopback softirq work would count as outside;
without it a task's CPU time holds the softirq work done in its context, and the irq and
softirq fields are the ticks that fell in it, so taking them out can only make outside
smaller. Guest time is inside user and nice: a virtual machine on this host is outside.

**Limits.** (1) Outside can be understated by interrupt work done for other processes
and, on a kernel without IRQ time accounting, by the experiment's in-process softirq time
(on this project's VM the harness's CPU, where Locust and the balancer do the loopback's
softirq work, read -0.01 to -0.05 cores outside at 0.2-0.4 cores busy in a quiet run);
it is overstated by the CPU of an experiment process in the quarter second before it
exits (no sample sees it), by kernel threads working for the experiment (writeback of its
files) and by interrupts that wake an idle CPU for it (the wake-up of a server by the
balancer's send: a few microseconds each, inside the +0.026 above). (2) The counters'
1/100 s steps add at most 2 of them per process and 3 per CPU: 0.01 cores over a 3 s
window for one CPU and a handful of processes. On a kernel that never stops the tick,
idle is counted in ticks too, and the ticks then add up to the time that passed. (3) A
pid of the experiment reused within 0.25 s by a stranger, or the reverse, is misread
(pids are allocated in turn, so this needs the pid space to wrap).

**Cost**, measured on this project's 2-core VM with 94 processes on the machine, 13 of
them the experiment's: 0.6 ms of CPU per sample (listing the pids 0.08 ms, ``/proc/stat``
0.03 ms, 22 us per tracked process for its CPU times and affinity), 0.25 % of one core at
4 samples a second, on the harness's CPUs. The first sample of a run pays about 0.1 ms
for each pid on the machine to tell the experiment's from the others (9 ms here).
"""

from __future__ import annotations

import bisect
import os
import time
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import psutil

from lblab.windows import Window

USER_HZ = os.sysconf("SC_CLK_TCK")
"""The unit of ``/proc/stat``'s counters, per second."""
PROC_STAT = Path("/proc/stat")


class Jiffies(NamedTuple):
    """One CPU's counters from ``/proc/stat``, in USER_HZ ticks since boot."""

    idle: int
    """idle + iowait: the time the CPU slept (exact on a kernel that stops the tick)."""
    interrupt: int
    """irq + softirq: interrupt time, left out of busy (the module's account says why)."""
    steal: int
    """Time the hypervisor ran something else while this virtual CPU wanted to run."""


def parse_proc_stat(text: str) -> dict[int, Jiffies]:
    """Each CPU's counters from the ``cpuN`` lines of ``/proc/stat`` (``proc(5)``: user
    nice system idle iowait irq softirq steal guest guest_nice)."""
    out = {}
    for line in text.splitlines():
        if line.startswith("cpu") and line[3:4].isdigit():
            name, _user, _nice, _system, idle, iowait, irq, softirq, steal, *_ = line.split()
            out[int(name[3:])] = Jiffies(
                int(idle) + int(iowait), int(irq) + int(softirq), int(steal)
            )
    return out


def read_proc_stat() -> dict[int, Jiffies] | None:
    """This machine's per-CPU counters now (None: no ``/proc/stat``, not Linux)."""
    try:
        return parse_proc_stat(PROC_STAT.read_text())
    except OSError:
        return None


def disturbance(
    before: Mapping[int, Jiffies],
    after: Mapping[int, Jiffies],
    seconds: float,
    own: Mapping[frozenset[int], float],
    runner_cpus: frozenset[int],
    hz: float = USER_HZ,
) -> dict[str, Any]:
    """What else ran on the experiment's CPUs between two ``/proc/stat`` snapshots
    ``seconds`` apart (the module's formulas), given ``own``: the CPU seconds the
    experiment's processes used meanwhile, summed by the CPUs each may run on, and the
    runner's own CPUs. ``isolated``: some experiment process (a server) was placed off
    the runner's CPUs; ``servers`` and ``harness`` are then those sets, else both are
    ``all``."""
    servers = frozenset[int]().union(*(cpus for cpus in own if not cpus & runner_cpus))

    def scope(cpus: frozenset[int]) -> dict[str, Any]:
        present = sorted(c for c in cpus if c in before and c in after)
        # Every field of Jiffies is time the CPU did no task's work.
        not_busy = sum(sum(after[c]) - sum(before[c]) for c in present) / hz / seconds
        busy = len(present) - not_busy
        experiment = sum(s for where, s in own.items() if where & cpus) / seconds
        return {
            "cpus": present,
            "busy_cores": busy,
            "experiment_cores": experiment,
            "outside_cores": busy - experiment,
            "steal_cores": sum(after[c].steal - before[c].steal for c in present) / hz / seconds,
        }

    everything = scope(runner_cpus.union(*own))
    return {
        "seconds": seconds,
        "isolated": bool(servers),
        "all": everything,
        "servers": scope(servers) if servers else everything,
        "harness": scope(runner_cpus) if servers else everything,
    }


@dataclass(slots=True)
class ProcessSamples:
    """One process's samples: when, its CPU seconds (user + system), where it may run."""

    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    cpus: list[frozenset[int]] = field(default_factory=list)

    def inside(self, lo: float, hi: float) -> range:
        """The indices of its samples from ``lo`` to ``hi``."""
        return range(bisect.bisect_left(self.times, lo), bisect.bisect_right(self.times, hi))


def own_cpu(
    processes: Iterable[ProcessSamples], lo: float, hi: float
) -> dict[frozenset[int], float]:
    """CPU seconds the experiment's processes used between the samples at ``lo`` and
    ``hi``, summed by the CPUs each may run on: each step between two of a process's
    samples counts under the CPUs it had at the later one (a server restarted by the
    timeline starts on the harness's CPUs and is then moved), and a process first sampled
    after ``lo`` was born since (every process alive is sampled), so all its CPU counts."""
    own: dict[frozenset[int], float] = defaultdict(float)
    for s in processes:
        span = s.inside(lo, hi)
        if not span:
            continue
        first = span[0]
        if s.times[first] > lo:
            own[s.cpus[first]] += s.cpu[first]
        for k in span[1:]:
            own[s.cpus[k]] += s.cpu[k] - s.cpu[k - 1]
    return dict(own)


class CpuProbe:
    """Samples the experiment's processes and the machine's CPUs (the module's account)."""

    def __init__(self) -> None:
        self._root = os.getpid()
        self._procs: dict[int, psutil.Process] = {self._root: psutil.Process(self._root)}
        """The experiment's live processes: the runner and its descendants, and any
        watched pid."""
        self._foreign: set[int] = set()
        self._groups: dict[str, list[int]] = {}
        self._series: dict[int, ProcessSamples] = {}
        self._times: list[float] = []
        self._stats: list[dict[int, Jiffies] | None] = []

    def watch(self, groups: Mapping[str, Iterable[int]]) -> None:
        """Start a phase: sample these pids, by group name (previous samples dropped)."""
        self._groups = {name: list(pids) for name, pids in groups.items()}
        self._series, self._times, self._stats = {}, [], []
        for pids in self._groups.values():
            for pid in pids:
                if pid not in self._procs:
                    try:
                        self._procs[pid] = psutil.Process(pid)
                    except psutil.Error:
                        continue
        self.sample()

    def sample(self) -> None:
        now = time.time()
        self._times.append(now)
        self._stats.append(read_proc_stat())
        self._discover()
        for pid, proc in list(self._procs.items()):
            try:
                t = proc.cpu_times()
                cpus = frozenset(proc.cpu_affinity())
            except psutil.Error:
                del self._procs[pid]
                continue
            s = self._series.setdefault(pid, ProcessSamples())
            s.times.append(now)
            s.cpu.append(t.user + t.system)
            s.cpus.append(cpus)

    def _discover(self) -> None:
        """Track the experiment's new processes: pids not seen before whose parent is
        tracked (parents first, so a child and grandchild born together are both found)."""
        pids = set(psutil.pids())
        self._foreign &= pids
        parents: dict[int, tuple[psutil.Process, int]] = {}
        for pid in pids - self._procs.keys() - self._foreign:
            try:
                proc = psutil.Process(pid)
                parents[pid] = (proc, proc.ppid())
            except psutil.Error:
                continue  # gone already
        born = [pid for pid, (_, ppid) in parents.items() if ppid in self._procs]
        while born:
            for pid in born:
                self._procs[pid] = parents.pop(pid)[0]
            born = [pid for pid, (_, ppid) in parents.items() if ppid in self._procs]
        self._foreign |= parents.keys()

    def cores(self, window: Window) -> dict[str, Any]:
        """Cores each watched process used inside ``window``, by group (needs two samples
        inside it; a process without them is left out), and under ``disturbance`` what
        else took CPU then (``disturbance()``; absent without two readable samples)."""
        out: dict[str, Any] = {}
        for name, pids in self._groups.items():
            out[name] = []
            for pid in pids:
                s = self._series.get(pid)
                span = s.inside(window.start, window.end) if s else range(0)
                if s and len(span) >= 2 and s.times[span[-1]] > s.times[span[0]]:
                    used = s.cpu[span[-1]] - s.cpu[span[0]]
                    out[name].append(used / (s.times[span[-1]] - s.times[span[0]]))
        lo = bisect.bisect_left(self._times, window.start)
        hi = bisect.bisect_right(self._times, window.end) - 1
        if hi > lo and self._times[hi] > self._times[lo]:
            before, after = self._stats[lo], self._stats[hi]
            root = self._series.get(self._root)
            if before is not None and after is not None and root is not None:
                t_lo, t_hi = self._times[lo], self._times[hi]
                out["disturbance"] = disturbance(
                    before,
                    after,
                    t_hi - t_lo,
                    own_cpu(self._series.values(), t_lo, t_hi),
                    root.cpus[root.inside(t_lo, t_hi)[-1]],
                )
        return out
