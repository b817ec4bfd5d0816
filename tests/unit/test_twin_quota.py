"""The twin prices a server by its CPU only where its quota was its limit (``simulator/twin.py``)."""

from __future__ import annotations

import pandas as pd
import pytest

from lblab.loadtests.runconfig import resolve
from lblab.simulator.twin import _demand_scale, _front_ms, _live_testbed, _quota_binds


def _units(cpu_percent: list[float], ok_per_s: list[float]) -> pd.DataFrame:
    return pd.DataFrame(
        {"ok": [100] * len(cpu_percent), "cpu_percent": cpu_percent, "ok_per_s": ok_per_s}
    )


def test_a_quota_binds_only_where_the_server_reached_it() -> None:
    assert _quota_binds(_units([60.0, 96.0], [300.0, 340.0]), 0.25)
    assert not _quota_binds(_units([60.0, 75.0], [300.0, 340.0]), 0.25)  # a busy machine
    assert not _quota_binds(_units([99.0], [340.0]), None)  # no quota
    assert not _quota_binds(_units([99.0], [340.0]), 1.0)  # a whole core: nothing to stall


def test_demand_is_cpu_per_answer_over_the_slot_time() -> None:
    # 0.25 CPU at 100 % for 342 answers/s: 0.731 ms of CPU per answer; slot 1.16 ms.
    units = _units([100.0, 100.0, 100.0], [342.0, 342.0, 342.0])
    assert _demand_scale(units, 0.25, 1.16) == pytest.approx(0.25 / 342 * 1000 / 1.16)


def test_without_enough_answers_the_quota_itself_is_the_scale() -> None:
    units = _units([100.0], [342.0]).assign(ok=[3])
    assert _demand_scale(units, 0.25, 1.16) == 0.25


def _per_server(rows: list[tuple[str, str, int, float]]) -> pd.DataFrame:
    """(strategy, server, answers, mean front_ms) rows of one scenario, replication 1."""
    frame = pd.DataFrame(rows, columns=["strategy", "server", "ok", "front_ms"])
    return frame.assign(run_id="run", scenario="sp+sr", replication=1)


def test_the_front_end_comes_from_the_servers_whose_quota_did_not_bind() -> None:
    # s1 throttled: its requests wait out stalls outside the slot too (9 ms); s3 free.
    per_server = _per_server(
        [("r", "s1", 300, 9.0), ("r", "s3", 300, 2.0),
         ("rr", "s1", 300, 8.0), ("rr", "s3", 100, 1.0), ("rr", "s3b", 300, 3.0)]
    )  # fmt: skip
    units = pd.DataFrame({"front_ms": [5.5, 4.0]})
    binds = {"s1": True, "s3": False, "s3b": False}
    # r: 2.0; rr: (100 * 1 + 300 * 3) / 400 = 2.5; the median of the two units.
    assert _front_ms(units, per_server, binds) == pytest.approx(2.25)
    # Every quota bound: all servers' front end, as measured per unit.
    assert _front_ms(units, per_server[per_server.server.eq("s1")], {"s1": True}) == 4.75


def test_the_twin_uses_the_live_servers_quota_period() -> None:
    servers = [{"id": "s1", "cpu_quota": 0.25}, {"id": "s2"}]
    config = resolve(None, {"servers": servers, "weights": {"s1": 1, "s2": 1}}, {})
    s1, s2 = _live_testbed({"config": config.raw}).servers
    assert (s1.cpu_quota, s1.quota_period) == (0.25, 0.01)  # cgroup and duty cycle: 10 ms
    assert s2.cpu_quota is None
