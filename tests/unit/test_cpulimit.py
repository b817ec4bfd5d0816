"""CPU limiting: the duty cycle's arithmetic on a fake clock, quota sizing, method choice."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from lblab.errors import ConfigError
from lblab.servers import cpulimit
from lblab.servers.cpulimit import (
    DutyCycle,
    LimitMethod,
    apply_cpu_limit,
    process_cgroup,
    quota_for,
)


class FakeProcess:
    """A process whose CPU and wall clocks only move when told to."""

    def __init__(self) -> None:
        self.cpu = 0.0
        self.wall = 0.0

    def run(self, seconds: float) -> None:
        self.cpu += seconds
        self.wall += seconds

    def sleep(self, seconds: float) -> None:
        self.wall += seconds


def make_duty_cycle(proc: FakeProcess, share: float) -> DutyCycle:
    return DutyCycle(
        share, cpu_clock=lambda: proc.cpu, wall_clock=lambda: proc.wall, sleep=proc.sleep
    )


@pytest.mark.parametrize("share", [0.1, 0.25, 0.5, 1.0])
def test_duty_cycle_holds_the_average_cpu_at_its_share(share: float) -> None:
    proc = FakeProcess()
    duty = make_duty_cycle(proc, share)
    rng = random.Random(7)
    for _ in range(500):
        duty.wait()
        proc.run(rng.uniform(0.0001, 0.03))  # requests of 0.1 to 30 ms of CPU
        duty.wait()
    assert proc.cpu / proc.wall == pytest.approx(share, rel=0.02)


def test_a_long_request_is_stretched_to_cpu_over_share() -> None:
    proc = FakeProcess()
    duty = make_duty_cycle(proc, 0.25)
    proc.run(0.010)
    slept = duty.wait()
    # 10 ms of CPU at 0.25 CPU takes 40 ms; the 2.5 ms burst credit and the refill during
    # the run pay for part of it.
    assert slept == pytest.approx(0.040 - 0.010 - 0.0025 / 0.25, abs=1e-9)


def test_idle_time_earns_no_more_than_one_period_of_credit() -> None:
    proc = FakeProcess()
    duty = make_duty_cycle(proc, 0.5)
    proc.sleep(100.0)  # a long idle spell, settled before the work as the service does
    assert duty.wait() == 0.0
    proc.run(0.020)
    assert duty.wait() == pytest.approx((0.020 - 0.005 - 0.010) / 0.5)


def test_duty_cycle_rejects_a_non_positive_share() -> None:
    with pytest.raises(ConfigError, match="share must be > 0"):
        DutyCycle(0)


@pytest.mark.parametrize(
    ("share", "expected"),
    [
        (0.25, (10_000, 2_500)),
        (1.0, (10_000, 10_000)),
        (1.5, (10_000, 15_000)),
        (0.05, (20_000, 1_000)),
    ],
)
def test_quota_uses_10ms_periods_and_never_a_quota_below_1ms(
    share: float, expected: tuple[int, int]
) -> None:
    assert quota_for(share) == expected


def test_no_quota_means_no_limit() -> None:
    assert apply_cpu_limit(None, "s1", LimitMethod.AUTO).method is LimitMethod.NONE


def test_a_method_without_a_quota_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="needs --cpu-quota"):
        apply_cpu_limit(None, "s1", LimitMethod.DUTY_CYCLE)


def test_duty_cycle_method_gives_a_duty_cycle() -> None:
    limit = apply_cpu_limit(0.3, "s1", LimitMethod.DUTY_CYCLE)
    assert limit.method is LimitMethod.DUTY_CYCLE
    assert limit.duty_cycle is not None and limit.duty_cycle.share == 0.3
    limit.release()


def test_without_cgroup_v1_auto_falls_back_and_forced_cgroup_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cpulimit, "CGROUP_CPU_ROOT", tmp_path / "nonexistent")
    assert apply_cpu_limit(0.25, "s1", LimitMethod.AUTO).method is LimitMethod.DUTY_CYCLE
    with pytest.raises(ConfigError, match="use --cpu-limit duty-cycle"):
        apply_cpu_limit(0.25, "s1", LimitMethod.CGROUP)


def test_process_cgroup_reads_proc() -> None:
    assert process_cgroup(os.getpid()) is not None
    assert process_cgroup(2**22 + 12345) is None  # above pid_max: never a process
