"""Limiting a server to a share of one CPU: a cgroup v1 quota, or an in-process duty cycle.

cgroup (preferred, needs root and a writable ``/sys/fs/cgroup/cpu``): the server puts
its whole process (``cgroup.procs`` moves every thread) into
``/sys/fs/cgroup/cpu/lblab-<id>-<pid>`` with ``cpu.cfs_period_us = 10000`` and
``cpu.cfs_quota_us = share * 10000``. The 10 ms period matters: with the default
100 ms a throttled server adds up to ~80 ms of tail latency (docs/FIELD-NOTES.md, "Linux facilities"). It also
joins a cpuacct group of the same name so the agent can read ``cpuacct.usage``. On
exit it moves back to the root groups and removes both directories; groups left by a
killed server (its pid gone, no tasks) are removed by the next server that starts.

duty cycle (fallback, anywhere): a token bucket over the process's own CPU time. The
budget refills at ``share`` CPU-seconds per wall second, is charged the CPU the process
used, holds at most one 10 ms period's worth of credit, and every worker settles it
before and after a request's work (so idle gaps and work fall in separate intervals)
and sleeps off any debt, so the process averages ``share`` of a CPU. A request's work
cannot be cut into slices mid-``json.dumps``, so a long request runs at full speed and
then pays its debt before it answers: its service time is stretched to ``cpu / share``
as under a quota, only coarser. It counts all the process's CPU (framing included),
as a cgroup does.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from lblab.errors import ConfigError

log = logging.getLogger(__name__)

CGROUP_CPU_ROOT = Path("/sys/fs/cgroup/cpu")
CGROUP_CPUACCT_ROOT = Path("/sys/fs/cgroup/cpuacct")
PERIOD_US = 10_000
MIN_QUOTA_US = 1_000  # the kernel refuses a cfs quota below 1 ms
MIN_SLEEP_S = 100e-6  # below this a sleep costs more in wake-up than it pays back
CGROUP_PREFIX = "lblab-"


class LimitMethod(StrEnum):
    AUTO = "auto"
    CGROUP = "cgroup"
    DUTY_CYCLE = "duty-cycle"
    NONE = "none"


class DutyCycle:
    """Token bucket over process CPU time; ``wait()`` sleeps while the budget is in debt.

    Clocks and sleep are injected for tests. Thread-safe: workers call ``wait`` at once.
    """

    def __init__(
        self,
        share: float,
        *,
        burst_s: float = PERIOD_US / 1e6,
        cpu_clock: Callable[[], float] = time.process_time,
        wall_clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if share <= 0:
            raise ConfigError(f"duty-cycle share must be > 0, not {share}")
        self.share = share
        self._burst = share * burst_s
        self._cpu, self._wall, self._sleep = cpu_clock, wall_clock, sleep
        self._lock = threading.Lock()
        self._budget = self._burst
        self._last_cpu = cpu_clock()
        self._last_wall = wall_clock()

    def debt_s(self) -> float:
        """Wall seconds to sleep before the budget is back to zero (0 when in credit)."""
        with self._lock:
            cpu, wall = self._cpu(), self._wall()
            refill = self.share * (wall - self._last_wall)
            self._budget = min(self._burst, self._budget + refill - (cpu - self._last_cpu))
            self._last_cpu, self._last_wall = cpu, wall
            debt = -self._budget / self.share
            # A debt too small to sleep for stays in the budget and is paid next time.
            return debt if debt > MIN_SLEEP_S else 0.0

    def set_share(self, share: float) -> None:
        """From now on refill at ``share`` CPU-seconds per wall second (``capacity``)."""
        if share <= 0:
            raise ConfigError(f"duty-cycle share must be > 0, not {share}")
        self.debt_s()  # settle at the old share up to now; a debt stays owed
        with self._lock:
            self._burst *= share / self.share
            self._budget = min(self._budget, self._burst)
            self.share = share

    def wait(self) -> float:
        """Sleep until the budget is not in debt; returns the seconds slept."""
        slept = 0.0
        while (debt := self.debt_s()) > 0:
            self._sleep(debt)
            slept += debt
        return slept


@dataclass
class CpuLimit:
    """The limit in force: its method, the cgroup name if any, and the duty cycle if any."""

    method: LimitMethod
    share: float | None = None
    cgroup: str | None = None
    duty_cycle: DutyCycle | None = None
    _release: Callable[[], None] | None = field(default=None, repr=False)

    def set_share(self, share: float) -> None:
        """Change the limit to ``share`` CPUs at runtime (the ``capacity`` timeline event):
        the cgroup's quota is rewritten, or the duty cycle refills at the new share. A
        server started without a limit has none to change (``ConfigError``)."""
        if self.cgroup is not None:
            _set_quota(CGROUP_CPU_ROOT / self.cgroup, share)
        elif self.duty_cycle is not None:
            self.duty_cycle.set_share(share)
        else:
            raise ConfigError("this server runs without a CPU limit (no --cpu-quota) to change")
        self.share = share
        log.info("cpu limit: now %.3f CPU", share)

    def release(self) -> None:
        """Undo the limit (leave and remove the cgroup). Safe to call twice."""
        if self._release is not None:
            release, self._release = self._release, None
            release()


def cgroup_available() -> bool:
    return (CGROUP_CPU_ROOT / "cpu.cfs_quota_us").exists() and os.access(CGROUP_CPU_ROOT, os.W_OK)


def quota_for(share: float) -> tuple[int, int]:
    """``(period_us, quota_us)`` for a share: 10 ms periods, longer only below 0.1 CPU."""
    period = max(PERIOD_US, math.ceil(MIN_QUOTA_US / share))
    return period, round(share * period)


def apply_cpu_limit(share: float | None, server_id: str, method: LimitMethod) -> CpuLimit:
    """Limit this process to ``share`` CPUs by ``method`` (AUTO: cgroup if possible)."""
    if share is None:
        if method in (LimitMethod.CGROUP, LimitMethod.DUTY_CYCLE):
            raise ConfigError(f"--cpu-limit {method} needs --cpu-quota")
        return CpuLimit(LimitMethod.NONE)
    if method is LimitMethod.NONE:
        raise ConfigError("--cpu-limit none contradicts --cpu-quota; drop one of them")
    if method is LimitMethod.AUTO:
        method = LimitMethod.CGROUP if cgroup_available() else LimitMethod.DUTY_CYCLE
    if method is LimitMethod.CGROUP:
        if not cgroup_available():
            raise ConfigError(
                f"--cpu-limit cgroup needs root and a writable {CGROUP_CPU_ROOT} (cgroup v1); "
                "use --cpu-limit duty-cycle or auto"
            )
        name = f"{CGROUP_PREFIX}{server_id}-{os.getpid()}"
        _remove_stale_groups()
        _join_cgroup(name, share)
        log.info("cpu limit: cgroup %s, %.3f CPU (period %d us)", name, share, quota_for(share)[0])
        return CpuLimit(method, share, name, _release=lambda: _leave_cgroup(name))
    log.info("cpu limit: in-process duty cycle, %.3f CPU", share)
    return CpuLimit(method, share, duty_cycle=DutyCycle(share))


def _join_cgroup(name: str, share: float) -> None:
    cpu_dir = CGROUP_CPU_ROOT / name
    cpu_dir.mkdir(exist_ok=True)
    _set_quota(cpu_dir, share)
    (cpu_dir / "cgroup.procs").write_text(str(os.getpid()))
    if CGROUP_CPUACCT_ROOT.is_dir() and os.access(CGROUP_CPUACCT_ROOT, os.W_OK):
        acct_dir = CGROUP_CPUACCT_ROOT / name
        acct_dir.mkdir(exist_ok=True)
        (acct_dir / "cgroup.procs").write_text(str(os.getpid()))


def _set_quota(cpu_dir: Path, share: float) -> None:
    """Write ``share``'s period and quota (``quota_for``)."""
    period, quota = quota_for(share)
    (cpu_dir / "cpu.cfs_period_us").write_text(str(period))
    (cpu_dir / "cpu.cfs_quota_us").write_text(str(quota))


def _leave_cgroup(name: str) -> None:
    for root in (CGROUP_CPU_ROOT, CGROUP_CPUACCT_ROOT):
        group = root / name
        if not group.is_dir():
            continue
        try:
            (root / "cgroup.procs").write_text(str(os.getpid()))
            group.rmdir()
        except OSError as exc:
            log.warning("could not remove cgroup %s: %s", group, exc)


def _remove_stale_groups() -> None:
    """Remove ``lblab-<id>-<pid>`` groups whose pid is gone and that hold no task."""
    for root in (CGROUP_CPU_ROOT, CGROUP_CPUACCT_ROOT):
        if not root.is_dir():
            continue
        for group in root.glob(CGROUP_PREFIX + "*-*"):
            pid = group.name.rsplit("-", 1)[1]
            if not pid.isdigit() or Path("/proc", pid).exists():
                continue
            try:
                if not (group / "cgroup.procs").read_text().strip():
                    group.rmdir()
                    log.info("removed stale cgroup %s", group)
            except OSError as exc:
                log.warning("could not remove stale cgroup %s: %s", group, exc)


def cgroup_share(name: str) -> float | None:
    """CPUs a cgroup v1 group may use (quota / period), or None when unlimited."""
    group = CGROUP_CPU_ROOT / name
    quota = int((group / "cpu.cfs_quota_us").read_text())
    period = int((group / "cpu.cfs_period_us").read_text())
    return None if quota <= 0 else quota / period


def process_cgroup(pid: int, controller: str = "cpu") -> str | None:
    """The pid's group in a cgroup v1 hierarchy, relative to its root ('' for the root)."""
    try:
        lines = Path("/proc", str(pid), "cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return path.lstrip("/")
    return None
