"""CPU isolation on one machine: the servers get CPUs of their own, the harness the rest.

On one machine every CPU-second the harness spends (Locust, the balancer, the agents,
the runner) could be taken from the servers it measures, and then a ranking ranks the
harness. So a local run splits the machine's CPUs in two sets (``plan_layout``): the
*harness* set (``harness_cpus`` CPUs, by default a third of the machine and at least
one) and the *server* set (the rest). The servers' CPU quotas live inside the server
set; when they add up to more than it holds they are scaled down by one factor, which
keeps their ratios, and the factor is in the manifest and the report; a server without
a quota shares the server set unscaled. A preset that cannot fit (fewer than two CPUs,
a scaled quota below ``MIN_QUOTA``) is refused before anything runs, with what would
fit.

How the sets are enforced (``Isolation``), best first:

- ``cpuset``: the cgroup cpuset controller, v1 (``/sys/fs/cgroup/cpuset``) or v2 (the
  unified hierarchy with ``cpuset`` among its controllers), whichever the machine
  mounts; needs root. Two groups per run, ``lblab-harness-<pid>`` and
  ``lblab-servers-<pid>``; groups of a killed run are removed by the next one.
- ``affinity``: ``sched_setaffinity`` on every thread of each process, no root needed.
  The kernel keeps it as long as the process does not change it (ours never do).
- ``off``: no isolation (``[testbed] isolation = "off"``); the ``machine`` check then
  judges whether the harness took CPU from the servers.

The runner moves itself into the harness set before it starts anything, so every
process it starts (balancer, agents, Locust) is born there; each server is moved into
the server set once it is ready, its worker threads with it.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from lblab.errors import ConfigError
from lblab.experiment.runconfig import ISOLATION_METHODS

log = logging.getLogger(__name__)

MIN_QUOTA = 0.05
"""The smallest quota scaling may leave a server: below it a server's 10 ms quota
period holds under half a millisecond of work and throttling dominates its latency. (A
smaller quota given as such runs as given.)"""
CPUSET_V1 = Path("/sys/fs/cgroup/cpuset")
CGROUP_V2 = Path("/sys/fs/cgroup")
GROUP_PREFIX = "lblab-"


@dataclass(frozen=True, slots=True)
class CpuLayout:
    """Which CPUs the servers and the harness get, and the quotas inside them."""

    method: str  # cpuset-v1 | cpuset-v2 | affinity | off
    machine_cpus: tuple[int, ...]
    harness_cpus: tuple[int, ...]
    server_cpus: tuple[int, ...]
    quota_scale: float
    quotas: Mapping[str, float | None] = field(default_factory=dict)
    """Each server's quota as it runs (given x ``quota_scale``; None: unlimited)."""
    given: Mapping[str, float | None] = field(default_factory=dict)

    @property
    def isolated(self) -> bool:
        return self.method != "off"

    def facts(self) -> dict[str, Any]:
        """The manifest's ``cpu_layout``."""
        return {
            "method": self.method,
            "machine_cpus": list(self.machine_cpus),
            "harness_cpus": list(self.harness_cpus),
            "server_cpus": list(self.server_cpus),
            "quota_scale": self.quota_scale,
            "quotas": dict(self.quotas),
            "quotas_given": dict(self.given),
        }

    def describe(self) -> str:
        """One line for the terminal."""
        if not self.isolated:
            return f"no CPU isolation: servers and harness share CPUs {_cpus(self.machine_cpus)}"
        scaled = (
            f"; quotas scaled by {self.quota_scale:.3g} to fit (ratios kept)"
            if self.quota_scale != 1.0
            else ""
        )
        return (
            f"CPU isolation ({self.method}): servers on CPUs {_cpus(self.server_cpus)}, "
            f"harness on CPUs {_cpus(self.harness_cpus)}{scaled}"
        )


def default_harness_cpus(machine: int) -> int:
    """A third of the machine, at least one: the harness's CPU per request was measured
    at about half the servers' in the cheapest cell (docs/FIELD-NOTES.md)."""
    return max(1, round(machine / 3))


def plan_layout(
    quotas: Mapping[str, float | None],
    *,
    method: str = "auto",
    harness_cpus: int | None = None,
    machine_cpus: Sequence[int] | None = None,
) -> CpuLayout:
    """Split the machine's CPUs and fit the servers' ``quotas`` (id -> CPUs, None for
    an unlimited server) into the server set; raises ``ConfigError`` with what would
    fit when they cannot."""
    if method not in ISOLATION_METHODS:
        raise ConfigError(
            f"testbed.isolation {method!r} is not one of {', '.join(ISOLATION_METHODS)}"
        )
    cpus = tuple(sorted(machine_cpus if machine_cpus is not None else os.sched_getaffinity(0)))
    if method == "off":
        return CpuLayout("off", cpus, cpus, cpus, 1.0, dict(quotas), dict(quotas))
    if len(cpus) < 2:
        raise ConfigError(
            f"CPU isolation needs at least 2 CPUs and this process may use {len(cpus)}; "
            'set [testbed] isolation = "off" to run with servers and harness sharing it'
        )
    harness = default_harness_cpus(len(cpus)) if harness_cpus is None else harness_cpus
    if not 1 <= harness <= len(cpus) - 1:
        raise ConfigError(
            f"testbed.harness_cpus = {harness}: give 1 to {len(cpus) - 1} of this machine's "
            f"{len(cpus)} CPUs (the servers need the rest)"
        )
    harness_set, server_set = cpus[:harness], cpus[harness:]
    # A server without a quota is not scaled: it shares the server set with the others
    # (a quota is a limit, not a reservation; the delay servers of ingram and linkerd
    # mostly sleep).
    limited = {k: q for k, q in quotas.items() if q is not None}
    room = float(len(server_set))
    demand = sum(limited.values())
    scale = 1.0 if demand <= room else room / demand
    running = {k: (None if q is None else q * scale) for k, q in quotas.items()}
    too_small = {
        k: q for k, q in running.items() if scale < 1.0 and q is not None and q < MIN_QUOTA
    }
    if too_small:
        # Server CPUs at which no quota scales below the minimum (or none scales at all).
        need = max(demand * min(1.0, MIN_QUOTA / quotas[k]) for k in too_small)  # type: ignore[operator]
        raise ConfigError(
            f"the servers' quotas add up to {demand:.2f} CPUs and the servers get "
            f"{len(server_set)} here: scaled by {scale:.3g} to fit, "
            f"{', '.join(f'{k} would get {q:.3f}' for k, q in too_small.items())} CPU, "
            f"under the {MIN_QUOTA} minimum; this preset needs about "
            f"{math.ceil(need) + harness} CPUs, or smaller ratios between its quotas"
        )
    return CpuLayout(_resolve(method), cpus, harness_set, server_set, scale, running, dict(quotas))


def _resolve(method: str) -> str:
    if method in ("auto", "cpuset"):
        found = cpuset_version()
        if found:
            return found
        if method == "cpuset":
            raise ConfigError(
                "testbed.isolation = cpuset needs root and a cgroup cpuset controller (v1 at "
                f"{CPUSET_V1}, or v2 with cpuset in {CGROUP_V2 / 'cgroup.controllers'}); "
                'use isolation = "affinity" or "auto"'
            )
    return "affinity"


def cpuset_version() -> str | None:
    """``cpuset-v1`` or ``cpuset-v2`` when this process may make cpuset groups."""
    if (CPUSET_V1 / "cpuset.cpus").exists() and os.access(CPUSET_V1, os.W_OK):
        return "cpuset-v1"
    with contextlib.suppress(OSError):
        controllers = (CGROUP_V2 / "cgroup.controllers").read_text().split()
        if "cpuset" in controllers and os.access(CGROUP_V2, os.W_OK):
            return "cpuset-v2"
    return None


class Isolation:
    """A ``CpuLayout`` in force: ``enter_harness`` moves this process into the harness
    set, ``place_server`` a server (with its threads and children) into the server set,
    ``release`` undoes both and removes the groups. Safe to release twice."""

    def __init__(self, layout: CpuLayout) -> None:
        self.layout = layout
        self._groups: dict[str, Path] = {}
        self._released = False

    def enter_harness(self) -> None:
        if not self.layout.isolated:
            return
        if self.layout.method.startswith("cpuset"):
            _remove_stale_groups(self._root())
            for name, cpus in (
                ("harness", self.layout.harness_cpus),
                ("servers", self.layout.server_cpus),
            ):
                self._groups[name] = self._make_group(name, cpus)
        self._place([os.getpid()], "harness")

    def place_server(self, pid: int) -> None:
        if not self.layout.isolated:
            return
        with contextlib.suppress(psutil.Error):
            children = [c.pid for c in psutil.Process(pid).children(recursive=True)]
            self._place([pid, *children], "servers")

    def release(self) -> None:
        if self._released or not self.layout.isolated:
            return
        self._released = True
        # Back to every CPU this process had, then the groups go (empty by then: the
        # servers and the harness's children have exited).
        if self._groups:
            _write(self._root() / "cgroup.procs", os.getpid())
            for group in self._groups.values():
                with contextlib.suppress(OSError):
                    group.rmdir()
        else:
            _set_affinity([os.getpid()], self.layout.machine_cpus)

    def _root(self) -> Path:
        return CPUSET_V1 if self.layout.method == "cpuset-v1" else CGROUP_V2

    def _make_group(self, name: str, cpus: Iterable[int]) -> Path:
        root = self._root()
        group = root / f"{GROUP_PREFIX}{name}-{os.getpid()}"
        group.mkdir(exist_ok=True)
        if self.layout.method == "cpuset-v1":
            # v1 refuses tasks until cpus and mems are set; the memory nodes are the root's.
            (group / "cpuset.mems").write_text((root / "cpuset.mems").read_text())
            (group / "cpuset.cpus").write_text(",".join(map(str, cpus)))
        else:
            with contextlib.suppress(OSError):  # already on, or set by the system
                (root / "cgroup.subtree_control").write_text("+cpuset")
            (group / "cpuset.cpus").write_text(",".join(map(str, cpus)))
        return group

    def _place(self, pids: Sequence[int], name: str) -> None:
        group = self._groups.get(name)
        if group is not None:
            for pid in pids:  # cgroup.procs moves every thread of the process
                _write(group / "cgroup.procs", pid)
        else:
            cpus = self.layout.harness_cpus if name == "harness" else self.layout.server_cpus
            _set_affinity(pids, cpus)


def _set_affinity(pids: Iterable[int], cpus: Iterable[int]) -> None:
    """Pin every thread of each process (a thread started before keeps its own mask)."""
    mask = set(cpus)
    for pid in pids:
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            continue  # gone
        for tid in tids:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, mask)


def _write(path: Path, pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        path.write_text(str(pid))


def _remove_stale_groups(root: Path) -> None:
    """Remove ``lblab-<set>-<pid>`` groups whose run is gone and that hold no task."""
    for group in [*root.glob(f"{GROUP_PREFIX}harness-*"), *root.glob(f"{GROUP_PREFIX}servers-*")]:
        pid = group.name.rsplit("-", 1)[1]
        if not pid.isdigit() or Path("/proc", pid).exists():
            continue
        with contextlib.suppress(OSError):
            if not (group / "cgroup.procs").read_text().strip():
                group.rmdir()
                log.info("removed the cpuset group %s of a run that is gone", group)


def _cpus(cpus: Sequence[int]) -> str:
    return ",".join(map(str, cpus))
