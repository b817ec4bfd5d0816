"""The hard cases' metrics (``analysis/hard_cases.py``) and the servers' capacity
(``simulator/capacity.py``), on figures worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from lblab.analysis.hard_cases import (
    Conditions,
    disturbance,
    hard_case_metrics,
    load_deviation,
    recovery_s,
)
from lblab.experiment.runconfig import ServerSpec
from lblab.simulator.capacity import Capacity, server_capacity

RATE = 200  # requests/s: bins of 1 s hold 200


def _phase(
    slow_from: float, slow_to: float, seconds: float = 20.0
) -> tuple[np.ndarray, np.ndarray]:
    """Sends every 5 ms; answered in 10 ms, or 100 ms while ``slow_from <= t < slow_to``."""
    t = np.arange(0, seconds, 1 / RATE)
    answer = np.where((t >= slow_from) & (t < slow_to), 0.1, 0.01)
    return t, answer


def _events(start: float, end: float) -> list[dict]:
    return [
        {"t": start, "t_done": start, "action": "slow", "duration": end - start},
        {"t": end, "t_done": end, "action": "slow"},
    ]


def test_recovery_is_counted_from_the_faults_end_to_the_first_bin_back() -> None:
    t, answer = _phase(5.0, 12.0)  # the queue drains at once: back in the first bin
    assert recovery_s(t, answer, _events(5.0, 10.0)) == pytest.approx(2.0)


def test_a_phase_back_at_the_faults_end_recovers_in_no_time() -> None:
    t, answer = _phase(5.0, 10.0)
    assert recovery_s(t, answer, _events(5.0, 10.0)) == 0.0


def test_a_phase_that_never_recovers_gets_a_lower_bound() -> None:
    t, answer = _phase(5.0, 30.0)
    got = recovery_s(t, answer, _events(5.0, 10.0))
    assert got == pytest.approx(t.max() - 10.0)


def test_failures_count_as_never_answered() -> None:
    t, answer = _phase(0.0, 0.0)
    answer = np.where((t >= 10) & (t < 13) & (np.arange(len(t)) % 20 == 0), np.inf, answer)
    # 5 % failures for 3 s after the end: the p99 is infinite until 13 s
    assert recovery_s(t, answer, _events(5.0, 10.0)) == pytest.approx(3.0)


def test_one_good_bin_alone_is_not_a_recovery() -> None:
    t, answer = _phase(5.0, 16.0)
    answer = np.where((t >= 11) & (t < 12), 0.01, answer)  # a lucky second at 11 s
    assert recovery_s(t, answer, _events(5.0, 10.0)) == pytest.approx(6.0)


def test_no_fault_or_no_baseline_gives_no_recovery() -> None:
    t, answer = _phase(5.0, 10.0)
    assert math.isnan(recovery_s(t, answer, []))
    assert math.isnan(recovery_s(t, answer, _events(0.05, 10.0)))  # 10 requests before it


def test_a_cold_start_and_a_spike_end_their_duration_after_they_fire() -> None:
    events = [
        {"t": 3.0, "t_done": 3.5, "action": "add"},
        {"t": 3.5, "t_done": 3.5, "action": "cold", "duration": 4.0},
        {"t": 4.0, "t_done": 4.0, "action": "spike", "duration": 1.0},
    ]
    assert disturbance(events) == (3.0, 7.5)
    assert disturbance([{"t": 1.0, "ok": False, "action": "kill"}]) is None


def test_load_deviation_is_the_share_that_would_have_to_move() -> None:
    capacity = {"s1": 100.0, "s2": 300.0}
    proportional = pd.Series(["s1"] * 25 + ["s2"] * 75)
    assert load_deviation(proportional, capacity) == pytest.approx(0.0)
    even = pd.Series(["s1"] * 50 + ["s2"] * 50)
    assert load_deviation(even, capacity) == pytest.approx(0.25)
    assert load_deviation(pd.Series(["s1"] * 10 + [None] * 5), capacity) == pytest.approx(0.75)
    assert math.isnan(load_deviation(even, {}))


def test_success_counts_only_answers_within_the_timeout() -> None:
    requests = pd.DataFrame(
        {
            "run_id": "r", "strategy": "rr", "scenario": "c", "replication": 1,
            "t_sent": [0.0, 1.0, 2.0, 3.0],
            "latency_ms": [10.0, 900.0, 2500.0, 5.0],
            "ok": [True, True, True, False],
            "server": ["s1", "s1", "s2", "s2"],
        }
    )  # fmt: skip
    found = hard_case_metrics(requests, {("r", "c", "rr", 1): Conditions(timeout_s=1.0)})
    assert found.loc[0, "success_rate"] == pytest.approx(0.5)
    assert math.isnan(found.loc[0, "load_deviation"])  # no capacities recorded


def test_a_servers_capacity_is_its_cpu_or_its_slots_bound() -> None:
    assert server_capacity(ServerSpec(id="a", cpu_quota=0.5), 0.01) == pytest.approx(50.0)
    # one slot held 10 ms of work plus a 10 ms sleep: 50/s; four slots, CPU-bound at 100/s
    assert server_capacity(ServerSpec(id="b", delay_ms=10), 0.01) == pytest.approx(50.0)
    assert server_capacity(ServerSpec(id="c", delay_ms=10, workers=4), 0.01) == pytest.approx(100.0)
    # a quota above a core is one core: the slots' work runs under one GIL
    assert server_capacity(ServerSpec(id="d", cpu_quota=2.0), 0.01) == pytest.approx(100.0)
    assert math.isinf(server_capacity(ServerSpec(id="e"), 0.0))


def test_the_preflight_says_when_the_load_is_past_capacity() -> None:
    under = Capacity("sp+sr", {"s1": 100.0, "s2": 100.0}, 150.0, "json")
    assert under.utilization == pytest.approx(0.75) and not under.overloaded
    assert "offers 150 req/s (75% of it)" in under.describe()
    over = Capacity("sp+sr", {"s1": 100.0}, 150.0, "json")
    assert over.overloaded and "past what they can serve" in over.describe()
    closed = Capacity("sp+sr", {"s1": 100.0}, None, "json")
    assert closed.utilization is None and "closed model" in closed.describe()
