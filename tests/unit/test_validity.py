"""Every validity check can pass and can fire (``lblab/validity.py``)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from lblab.validity import FAIL, NA, PASS, WARN, PhaseFacts, evaluate, summary_lines, worst
from lblab.windows import cpu_per_request_us

GOOD = PhaseFacts(
    window_s=10.0,
    requests_in_window=10_000,
    ok_in_window=10_000,
    ok_per_s_halves=(1000.0, 1010.0),
    ok_per_s_first_fifth=(1005.0, 1000.0),
    generator_cores=[0.30],
    balancer_cores=0.20,
    agents_cores=0.01,
    cores_left=1.5,
    samples_per_s={"s1": 3.9, "s2": 4.0},
    expected_samples_per_s=4.0,
    picks_in_window=10_000,
)


def _clocks(offset_ms: float, bound_ms: float, asked: int = 1) -> dict:
    """``loadtests.clocks`` as the master writes it: one worker measured of ``asked``."""
    far = {"loader": "far", "offset_ms": offset_ms, "bound_ms": bound_ms, "rounds": 5}
    return {"workers": {"w1": far}, "asked": asked}


def _disturbed(
    outside: float, steal: float, cpus: tuple[int, ...] = (1,), isolated: bool = True
) -> dict:
    """What the probe measured on the servers' CPUs (``loadtests.probe``)."""
    return {
        "server_cpus": cpus,
        "servers_isolated": isolated,
        "outside_cores": outside,
        "steal_cores": steal,
    }


def levels(facts: PhaseFacts) -> dict[str, str]:
    return {c.name: c.level for c in evaluate(facts)}


def test_a_clean_phase_passes_and_says_what_it_could_not_measure() -> None:
    got = levels(GOOD)
    assert got == {
        "generator": PASS,
        "open model": NA,
        "balancer": PASS,
        "machine": PASS,
        "accounting": PASS,
        "coverage": PASS,
        "steady state": PASS,
        "warm-up": PASS,
        "clocks": NA,
        "disturbance": NA,
        "capacity": NA,
    }
    assert worst(got.values()) == PASS


@pytest.mark.parametrize(
    ("change", "check", "level"),
    [
        ({"generator_cores": [0.3, 0.90]}, "generator", WARN),
        ({"generator_cores": [0.97]}, "generator", FAIL),
        ({"balancer_cores": 0.6}, "balancer", WARN),
        ({"balancer_cores": 0.95}, "balancer", FAIL),
        ({"cores_left": 0.55}, "machine", WARN),  # 0.51 used of 0.55
        ({"cores_left": 0.4}, "machine", FAIL),
        ({"cores_left": 0.0}, "machine", FAIL),
        ({"unaccounted": 3}, "accounting", FAIL),
        ({"no_backend": 200}, "accounting", WARN),
        ({"failures_by_origin": {"client": 150}}, "accounting", WARN),
        ({"samples_per_s": {"s1": 2.0, "s2": 4.0}}, "coverage", WARN),
        ({"picks_in_window": 5_000}, "coverage", WARN),
        ({"ok_per_s_halves": (1000.0, 850.0)}, "steady state", WARN),
        ({"ok_per_s_halves": (1000.0, 600.0)}, "steady state", FAIL),
        ({"ok_per_s_first_fifth": (700.0, 1000.0)}, "warm-up", WARN),
        ({"offered_rps": 1000.0, "sent_per_s": 900.0, "interarrival_ms": 1.0}, "open model", WARN),
        (
            {
                "offered_rps": 1000.0,
                "sent_per_s": 1000.0,
                "interarrival_ms": 1.0,
                "send_lag_p99_ms": 0.5,
            },
            "open model",
            WARN,
        ),
        ({"loaders": 2}, "clocks", WARN),
        ({"loaders": 2, "latency_p50_ms": 20.0, "clocks": _clocks(1.0, 2.5)}, "clocks", WARN),
        ({"loaders": 2, "latency_p50_ms": 20.0, "clocks": _clocks(30.0, 0.5)}, "clocks", FAIL),
        # imprecise, not shown to be off: |offset| + bound past the p50, |offset| - bound not
        ({"loaders": 2, "latency_p50_ms": 5.3, "clocks": _clocks(2.4, 3.2)}, "clocks", WARN),
        ({"loaders": 2, "latency_p50_ms": 20.0, "clocks": _clocks(0.2, 0.3, 2)}, "clocks", WARN),
        ({"loaders": 2, "clocks": _clocks(6.0, 0.5)}, "clocks", WARN),
        (_disturbed(outside=0.06, steal=0.0), "disturbance", WARN),
        (_disturbed(outside=0.02, steal=0.04), "disturbance", WARN),
        (_disturbed(outside=0.10, steal=0.06), "disturbance", FAIL),
        # 0.3 of 4 server CPUs: 7.5 %
        (_disturbed(outside=0.25, steal=0.05, cpus=(4, 5, 6, 7)), "disturbance", WARN),
        # without isolation the servers' CPUs are all the run's, shared with the harness
        (_disturbed(outside=0.40, steal=0.0, cpus=(0, 1), isolated=False), "disturbance", FAIL),
        ({"offered_capacity": (95.0, 100.0)}, "capacity", WARN),
        ({"offered_capacity": (130.0, 100.0)}, "capacity", FAIL),
    ],
)
def test_each_check_fires(change: dict, check: str, level: str) -> None:
    facts = replace(GOOD, **change)
    assert levels(facts)[check] == level
    line = next(ln for ln in summary_lines([("x rr rep 1", evaluate(facts))]) if check in ln)
    assert line.startswith(f"x rr rep 1: {check} {level}:")


@pytest.mark.parametrize(
    ("change", "check"),
    [
        (
            {
                "offered_rps": 1000.0,
                "sent_per_s": 990.0,
                "interarrival_ms": 10.0,
                "send_lag_p99_ms": 0.5,
            },
            "open model",
        ),
        ({"loaders": 2, "latency_p50_ms": 20.0, "clocks": _clocks(-1.0, 0.5)}, "clocks"),
        (_disturbed(outside=0.03, steal=0.01), "disturbance"),
        # below zero: the counters' imprecision, judged as none
        (_disturbed(outside=-0.08, steal=0.04), "disturbance"),
        ({"offered_capacity": (64.0, 100.0)}, "capacity"),
    ],
)
def test_checks_that_need_their_facts_pass_when_given_good_ones(change: dict, check: str) -> None:
    assert levels(replace(GOOD, **change))[check] == PASS


def test_counting_noise_does_not_warn_on_a_short_phase() -> None:
    # 2 s window: 50 vs 40 ok in the halves is 20 % apart but within 3 sigma of chance.
    short = replace(
        GOOD, window_s=2.0, ok_per_s_halves=(50.0, 40.0), ok_per_s_first_fifth=(50.0, 40.0)
    )
    assert levels(short)["steady state"] == PASS
    assert levels(short)["warm-up"] == PASS


def test_worst_level_wins() -> None:
    assert worst([PASS, WARN, NA]) == WARN
    assert worst([PASS, FAIL, WARN]) == FAIL
    assert worst([NA, NA]) == NA and worst([]) == NA


def test_disturbance_says_how_much_where_and_what_to_do() -> None:
    isolated, shared = (
        next(c for c in evaluate(replace(GOOD, **measured)) if c.name == "disturbance")
        for measured in (
            _disturbed(0.42, 0.03),
            _disturbed(0.1, 0.0, cpus=(0, 1), isolated=False),
        )
    )
    assert isolated.figure == (
        "outside 0.42 cores, steal 0.03 cores on the servers' CPUs 1 (45% of them)"
    )
    assert "stop other work on the machine" in isolated.why and "rerun" in isolated.why
    assert shared.figure.endswith("on the CPUs servers and harness shared 0,1 (5% of them)")
    assert shared.level == PASS  # at the line, not past it


def test_the_balancer_check_gives_its_cpu_per_request() -> None:
    (check,) = [c for c in evaluate(GOOD) if c.name == "balancer"]
    assert check.figure == "20% of a core, 200 us/request"  # 0.2 cores x 10 s / 10,000
    assert cpu_per_request_us(0.2, 10.0, 10_000) == pytest.approx(200.0)
    assert math.isnan(cpu_per_request_us(0.2, 10.0, 0))  # no request in the window


def test_the_windows_own_swings_do_not_warn_and_a_drift_still_does() -> None:
    # The fresh-clone quick run's sp+sr r rep 1: halves 15 % apart, far beyond Poisson
    # counting noise (z 5.6), but the window's 0.3 s slices swing as much as that.
    swinging = (1900.0, 1650.0, 1850.0, 1700.0, 1760.0, 1400.0, 1650.0, 1350.0, 1700.0, 1450.0)
    a, b = sum(swinging[:5]) / 5, sum(swinging[5:]) / 5
    phase = replace(GOOD, window_s=3.0, ok_per_s_halves=(a, b), ok_per_s_bins=swinging)
    assert levels(phase)["steady state"] == PASS
    assert levels(replace(phase, ok_per_s_bins=None))["steady state"] == WARN  # Poisson only
    # A steady drift of the same size across the window: smooth slices, still a warning.
    drift = tuple(1900.0 - 40.0 * i for i in range(10))  # halves 1820 and 1620: 11 % apart
    a, b = sum(drift[:5]) / 5, sum(drift[5:]) / 5
    drifting = replace(GOOD, window_s=3.0, ok_per_s_halves=(a, b), ok_per_s_bins=drift)
    assert levels(drifting)["steady state"] == WARN
