"""A live server's work slot in the simulator: the CPU work, then the sleep.

A live ``lblab server`` (``servers/service.py``) runs each request in one of its
``--workers`` slots: the JSON work (CPU, under the cgroup quota if any), then the
``--delay-ms`` sleep (fixed, or exponential with that mean under ``--delay-dist exp``),
which holds the slot and takes no CPU; later requests queue behind a busy slot. The
slots are threads, so their CPU work is serialised by Python's GIL: a server never runs
more than one core, and several workers overlap only their sleeps.

``slot_model`` builds that from a ``ServerGroup``: with ``serial_cpu`` the work runs on
a ``CpuQuota`` (``simulator.quota``), the server's one serial CPU budget (its
``cpu_quota``, or a whole core), whose books the agent reads as the live one reads the
process's CPU; a ``sleep`` follows it in the slot (``Slept``). A group without either
is served as before: its ``service`` at its speed, on as many cores as workers, under a
quota only below one core.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from simpy import Environment

from lblab.simulator.config import ServerGroup
from lblab.simulator.quota import CpuQuota
from lblab.simulator.service import ServiceModel


@dataclass(frozen=True, slots=True)
class Slept:
    """A request's time in its slot: its ``work`` (from the moment it starts), then a
    ``sleep`` drawn from the server's own stream ``rng``."""

    work: ServiceModel | CpuQuota
    sleep: ServiceModel
    rng: random.Random

    @property
    def mean_s(self) -> float:
        return self.work.mean_s + self.sleep.mean_s

    def sample(self, rng: random.Random, work_bytes: int, package_bytes: int) -> float:
        return self.work.sample(rng, work_bytes, package_bytes) + self.sleep.sample(
            self.rng, work_bytes, package_bytes
        )

    def spec(self) -> str:
        return f"{self.work.spec()}, then sleeps {self.sleep.spec()}"


SlotModel = ServiceModel | CpuQuota | Slept


def slot_model(
    group: ServerGroup, env: Environment, sleep_rng: random.Random | None
) -> tuple[SlotModel, CpuQuota | None]:
    """What one server of ``group`` serves with, and the CPU budget the agent reads (None:
    it reads the busy workers). ``sleep_rng`` draws the sleeps (needed with a ``sleep``)."""
    quota = group.cpu_quota
    cpu: CpuQuota | None = None
    if group.serial_cpu:
        cpu = CpuQuota(group.service, env, 1.0 if quota is None else quota, group.quota_period)
    elif quota is not None and quota < 1:
        cpu = CpuQuota(group.service, env, quota, group.quota_period)
    work: ServiceModel | CpuQuota = group.service if cpu is None else cpu
    if group.sleep is None:
        return work, cpu
    if sleep_rng is None:
        raise ValueError("a server group with a sleep needs a stream to draw it from")
    return Slept(work, group.sleep, sleep_rng), cpu
