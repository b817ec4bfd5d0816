"""What else ran on the experiment's CPUs, from ``/proc/stat`` snapshots and the
experiment's processes (``lblab/loadtests/probe.py``): the pure computation."""

from __future__ import annotations

from typing import Any

import pytest

from lblab.experiment.presets import load_preset
from lblab.experiment.runconfig import resolve
from lblab.experiment.validity import phase_checks
from lblab.loadtests.probe import (
    Jiffies,
    ProcessSamples,
    disturbance,
    own_cpu,
    parse_proc_stat,
)
from lblab.manifest import PhaseEntry
from lblab.windows import Window

# Two snapshots 2 s apart at USER_HZ = 100 (200 ticks a CPU): user nice system idle iowait
# irq softirq steal guest guest_nice. CPU 0 (the harness's) slept 30 ticks (idle + iowait),
# 40 went to irq and softirq and 10 to steal: busy 120 (0.6 cores). CPU 1 (the servers')
# slept 4, 2 softirq, 4 steal: busy 190 (0.95 cores). Their user + system ticks (190 and
# 160) say otherwise, as they do on a tickless kernel: they are not read.
BEFORE = """cpu  3000 20 800 9000 10 5 40 50 0 0
cpu0 1000 10 400 5000 5 5 20 30 0 0
cpu1 2000 10 400 4000 5 0 20 20 0 0
intr 1434042 0 0 0
ctxt 99
btime 1700000000
"""
AFTER = """cpu  3300 20 850 9029 15 25 62 64 0 0
cpu0 1150 10 440 5025 10 25 40 40 0 0
cpu1 2150 10 410 4004 5 0 22 24 0 0
intr 1434099 0 0 0
ctxt 120
btime 1700000000
"""
HARNESS, SERVERS = frozenset({0}), frozenset({1})


def test_parse_reads_each_cpu_s_idle_interrupt_and_steal_time_and_not_the_total() -> None:
    assert parse_proc_stat(BEFORE) == {0: Jiffies(5005, 25, 30), 1: Jiffies(4005, 20, 20)}


def test_busy_is_the_time_not_idle_when_the_ticks_do_not_add_up() -> None:
    # A tickless kernel, 2 s: CPU 1 slept 1.2 s, but its user + system ticks say 1.3 s
    # (250 ticks in 200). The servers ran 0.8 s, so nothing else did; counted from the
    # user + system ticks, 0.25 cores would be outside (a failed check).
    before = parse_proc_stat("cpu1 1000 0 300 1000 0 0 0 0 0 0")
    after = parse_proc_stat("cpu1 1100 0 330 1120 0 0 0 0 0 0")
    d = disturbance(before, after, 2.0, {SERVERS: 0.8}, HARNESS, hz=100)
    assert d["servers"]["busy_cores"] == pytest.approx(0.4)
    assert d["servers"]["outside_cores"] == pytest.approx(0.0)


def test_isolated_servers_cpus_show_what_else_ran_there() -> None:
    # The servers used 0.70 cores, the harness 0.50: 0.25 cores ran beside the servers.
    own = {SERVERS: 1.4, HARNESS: 1.0}
    d = disturbance(parse_proc_stat(BEFORE), parse_proc_stat(AFTER), 2.0, own, HARNESS, hz=100)
    assert d["isolated"] and d["seconds"] == 2.0
    servers, harness, everything = d["servers"], d["harness"], d["all"]
    assert servers["cpus"] == [1] and harness["cpus"] == [0] and everything["cpus"] == [0, 1]
    assert servers["busy_cores"] == pytest.approx(0.95)
    assert servers["experiment_cores"] == pytest.approx(0.70)
    assert servers["outside_cores"] == pytest.approx(0.25)
    assert servers["steal_cores"] == pytest.approx(0.02)
    assert harness["outside_cores"] == pytest.approx(0.60 - 0.50)
    assert harness["steal_cores"] == pytest.approx(0.05)
    assert everything["outside_cores"] == pytest.approx(1.55 - 1.20)
    assert everything["steal_cores"] == pytest.approx(0.07)


def test_without_isolation_the_servers_share_every_cpu_of_the_run() -> None:
    own = {HARNESS | SERVERS: 2.4}
    both = HARNESS | SERVERS
    d = disturbance(parse_proc_stat(BEFORE), parse_proc_stat(AFTER), 2.0, own, both, hz=100)
    assert not d["isolated"]
    assert d["servers"] is d["all"] and d["harness"] is d["all"]
    assert d["all"]["cpus"] == [0, 1]
    assert d["all"]["outside_cores"] == pytest.approx(1.55 - 1.20)


def test_a_process_allowed_on_both_sets_counts_against_each_a_lower_bound() -> None:
    # 0.2 cores of a process that may run anywhere: process accounting cannot say where,
    # so each set's outside figure assumes it ran there (never more outside than sure).
    own = {SERVERS: 1.4, HARNESS: 1.0, HARNESS | SERVERS: 0.4}
    d = disturbance(parse_proc_stat(BEFORE), parse_proc_stat(AFTER), 2.0, own, HARNESS, hz=100)
    assert d["servers"]["outside_cores"] == pytest.approx(0.25 - 0.20)
    assert d["harness"]["outside_cores"] == pytest.approx(0.10 - 0.20)
    assert d["all"]["outside_cores"] == pytest.approx(0.35 - 0.20)  # exact on the union


def test_a_cpu_gone_offline_is_left_out() -> None:
    after = parse_proc_stat(AFTER)
    del after[1]
    d = disturbance(parse_proc_stat(BEFORE), after, 2.0, {SERVERS: 1.4}, HARNESS, hz=100)
    assert d["servers"]["cpus"] == [] and d["servers"]["busy_cores"] == 0.0


def samples(*points: tuple[float, float, frozenset[int]]) -> ProcessSamples:
    s = ProcessSamples()
    for t, cpu, cpus in points:
        s.times.append(t)
        s.cpu.append(cpu)
        s.cpus.append(cpus)
    return s


def test_own_cpu_counts_inside_the_window_by_where_each_process_may_run() -> None:
    server = samples((9.0, 5.0, SERVERS), (10.0, 5.5, SERVERS), (12.0, 6.5, SERVERS))
    harness = samples((9.0, 1.0, HARNESS), (10.0, 1.2, HARNESS), (12.0, 2.0, HARNESS))
    # Restarted inside the window: first sampled after it began (on the harness's CPUs,
    # 0.9 s of start-up), then moved to the servers' and ran 0.3 s more.
    restarted = samples((11.0, 0.9, HARNESS), (12.0, 1.2, SERVERS))
    # Gone before the window, and one whose last step ends after it.
    gone = samples((9.0, 3.0, HARNESS))
    late = samples((10.0, 0.0, SERVERS), (12.0, 0.5, SERVERS), (13.0, 9.0, SERVERS))
    own = own_cpu([server, harness, restarted, gone, late], 10.0, 12.0)
    assert own == pytest.approx({SERVERS: 1.0 + 0.3 + 0.5, HARNESS: 0.8 + 0.9})


def test_own_cpu_of_a_process_sampled_once_at_the_window_start_is_nothing() -> None:
    assert own_cpu([samples((10.0, 4.0, SERVERS))], 10.0, 12.0) == {}


def _phase(harness_cpu: dict[str, Any]) -> PhaseEntry:
    """A phase of 100 requests, all ok, in a 2 s window, with what the probe measured."""
    return PhaseEntry(
        key="r1-000-sp_sr-rr",
        scenario="sp+sr",
        strategy="rr",
        replication=1,
        window=Window(100.0, 102.0),
        measured={"requests_in_window": 100, "ok_in_window": 100},
        harness_cpu=harness_cpu,
    )


def test_phase_checks_judge_the_servers_cpus_and_not_an_external_testbeds() -> None:
    own = {SERVERS: 1.4, HARNESS: 1.0}
    before, after = parse_proc_stat(BEFORE), parse_proc_stat(AFTER)
    measured = disturbance(before, after, 2.0, own, HARNESS, hz=100)
    entry = _phase({"locust": [0.2], "balancer": [0.1], "disturbance": measured})
    local = resolve(load_preset("tiny"), {}, {})
    external = resolve(
        load_preset("tiny"),
        {"testbed": {"kind": "external", "balancer": "10.0.0.1:7000"}},
        {"run": {"strategies": ["rr"]}},
    )
    judged = {}
    for config in (local, external):
        load = config.loads[config.scenarios[0].name]
        checks = phase_checks(entry, config, load, [], 100, 1.0)["verdicts"]
        judged[config.testbed.kind] = next(c for c in checks if c["name"] == "disturbance")
    assert judged["local"]["level"] == "fail"  # 0.25 outside + 0.02 steal of CPU 1
    assert judged["local"]["figure"].startswith("outside 0.25 cores, steal 0.02 cores on the ")
    assert judged["external"]["level"] == "n/a"


def test_others_on_the_harness_cpus_are_a_disturbance_too() -> None:
    # The servers' CPU held only the servers (0.95 cores, 2 % steal); on the harness's
    # CPU the experiment used 0.2 cores of 0.6 busy: a hog there slows Locust and the
    # balancer (measured: -20 % throughput in sp+sr, unflagged before this check).
    own = {SERVERS: 1.9, HARNESS: 0.4}
    measured = disturbance(
        parse_proc_stat(BEFORE), parse_proc_stat(AFTER), 2.0, own, HARNESS, hz=100
    )
    entry = _phase({"locust": [0.1], "balancer": [0.05], "disturbance": measured})
    config = resolve(load_preset("tiny"), {}, {})
    load = config.loads[config.scenarios[0].name]
    checks = phase_checks(entry, config, load, [], 100, 1.0)["verdicts"]
    (check,) = [c for c in checks if c["name"] == "disturbance"]
    assert check["level"] == "fail"
    assert check["figure"].endswith("; outside 0.40, steal 0.05 on the harness's 0 (45%)")
    assert "(2% of them)" in check["figure"]
    assert check["why"].startswith(
        "processes outside the experiment and the hypervisor took 45% of the harness's CPUs"
    )
