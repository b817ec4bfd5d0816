"""A cgroup CPU quota in the simulator (``simulator/quota.py``): fast alone, capped loaded.

A server with 0.25 of a core and 1 ms of CPU per request answers a lone request in 1 ms
(the period's budget is there), caps at 250 answers a second under load (25 ms of CPU
per 100 ms period), and its agent reads the CPU it used over its allowance, as the
live agent reads the cgroup.
"""

from __future__ import annotations

import pyarrow.compute as pc
import pytest

from lblab.simulator.config import ServerGroup, SimConfig
from lblab.simulator.run import simulate
from lblab.simulator.service import parse_service
from lblab.simulator.workload import ClosedUsers


def _run(users: int, think: float, requests: int) -> tuple[float, float, float]:
    """(answers per second, mean latency ms, mean agent cpu %) of one quota server."""
    cfg = SimConfig(
        strategy="rr",
        servers=(ServerGroup(service=parse_service("fixed:1ms"), cpu_quota=0.25),),
        requests=requests,
        arrivals=ClosedUsers(users=users, think=think),
        deadline=None,
    )
    r = simulate(cfg)
    latency = pc.mean(r.requests["latency_ms"]).as_py()
    cpu = pc.mean(r.cpu["cpu_percent"]).as_py()
    return requests / r.sim_seconds, latency, cpu


def test_a_lone_request_runs_at_full_speed() -> None:
    _, latency, cpu = _run(users=1, think=0.05, requests=200)
    assert latency == pytest.approx(1.0, rel=1e-6)
    assert cpu == pytest.approx(100.0 * (1.0 / 51.0) / 0.25, rel=0.15)  # ~7.8 % of 0.25


def test_a_loaded_server_is_capped_at_quota_over_cpu_per_request() -> None:
    rate, latency, cpu = _run(users=8, think=0.0, requests=5000)
    assert rate == pytest.approx(250.0, rel=0.02)
    assert latency > 20.0  # 8 users queue behind a 25 %-of-the-time server
    assert cpu == pytest.approx(100.0, rel=0.02)


def test_no_quota_means_no_cap() -> None:
    cfg = SimConfig(
        strategy="rr",
        servers=(ServerGroup(service=parse_service("fixed:1ms")),),
        requests=2000,
        arrivals=ClosedUsers(users=8, think=0.0),
        deadline=None,
    )
    r = simulate(cfg)
    assert 2000 / r.sim_seconds == pytest.approx(1000.0, rel=0.02)


def test_a_request_crossing_a_period_start_that_rounds_back_ends() -> None:
    # At t = 256.02 s, t / 0.01 rounds to 25601.999999999996: a budget recomputed from t
    # landed back in the spent period and the loop never ended (a twin hung on it).
    import random

    from simpy import Environment

    from lblab.simulator.quota import CpuQuota
    from lblab.simulator.service import Fixed

    for start in (255.721224529, 256.02, 1e4 + 0.0299999999, 86_399.99):
        env = Environment(initial_time=start)
        quota = CpuQuota(Fixed(0.10379366706933507), env, 0.25, 0.01)
        wall = quota.sample(random.Random(1), 100, 100)
        # 0.104 s of CPU at 2.5 ms per 10 ms: about 41.5 periods, whatever the start.
        assert 0.40 <= wall <= 0.42, (start, wall)
        assert quota.used(start + wall) == pytest.approx(0.10379366706933507, rel=1e-9)
