"""The twin prices a server by its CPU only where its quota was its limit (``simulator/twin/model.py``)."""

from __future__ import annotations

import pandas as pd
import pytest

from lblab.experiment.runconfig import resolve
from lblab.manifest import Manifest
from lblab.simulator.twin.model import (
    U_MAX,
    FrontEnd,
    _demand_scale,
    _fit_front,
    _quota_binds,
    _work_mean,
    _work_model,
)
from lblab.simulator.twin.testbed import file_testbed


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


def _per_server(rows: list[tuple[str, str, int, float, float, float]]) -> pd.DataFrame:
    """(strategy, server, answers, answers/s, mean slot ms, mean front_ms) rows of one
    scenario, replication 1."""
    columns = ["strategy", "server", "ok", "ok_per_s", "slot_ms", "front_ms"]
    frame = pd.DataFrame(rows, columns=columns)
    return frame.assign(run_id="run", scenario="sp+sr", replication=1)


def _front(u: float) -> float:
    return 1.0 + 2.0 * u / (1.0 - u)


def test_the_front_end_grows_with_the_free_servers_load_and_ignores_the_throttled() -> None:
    # s3 free at utilisations 0.2, 0.5, 0.8 (answers/s x slot), front = 1 + 2 u / (1 - u);
    # the throttled s1's 9 ms are its stalls, priced by its quota: not in the fit.
    per_server = _per_server(
        [("r", "s3", 300, 400.0, 0.5, _front(0.2)), ("lc", "s3", 300, 1000.0, 0.5, _front(0.5)),
         ("wrr", "s3", 300, 1600.0, 0.5, _front(0.8)), ("r", "s1", 300, 340.0, 1.0, 9.0)]
    )  # fmt: skip
    front = _fit_front(pd.DataFrame({"front_ms": [5.0]}), per_server, {"s1": True, "s3": False})
    assert (front.client_ms, front.slope_ms) == (pytest.approx(1.0), pytest.approx(2.0))
    assert front.server_ms(0.5) == pytest.approx(2.0)
    assert front.server_ms(1.0) == front.server_ms(U_MAX) == pytest.approx(2.0 * 0.95 / 0.05)


def test_without_a_spread_of_load_or_with_a_falling_fit_the_front_end_is_flat() -> None:
    units = pd.DataFrame({"front_ms": [5.5, 4.0]})
    same_load = _per_server(
        [(st, "s3", 300, 1000.0, 0.5, f) for st, f in (("r", 2.0), ("rr", 3.0), ("lc", 4.0))]
    )
    assert _fit_front(units, same_load, {"s3": False}) == FrontEnd(3.0)
    falling = _per_server([("r", "s3", 300, 400.0, 0.5, 6.0), ("rr", "s3", 300, 1000.0, 0.5, 4.0),
                           ("lc", "s3", 300, 1600.0, 0.5, 2.0)])  # fmt: skip
    assert _fit_front(units, falling, {"s3": False}) == FrontEnd(4.0)
    # Every quota bound: the median front end of all requests, as measured per unit.
    assert _fit_front(units, same_load, {"s3": True}) == FrontEnd(4.75)


def test_a_throttled_server_is_priced_by_an_unthrottled_servers_work() -> None:
    # s1's own slots include stalls (a tenth of them 9 ms); s3 did the same work in 0.5 ms.
    rows = pd.DataFrame(
        [("sp+sr", "s1", 100, 100, 9.0 if i % 10 == 0 else 0.5) for i in range(100)]
        + [("sp+sr", "s3", 100, 100, 0.5)] * 100
        + [("mp+mr", "s3", 100, 100, 7.0)] * 100,
        columns=["scenario", "server", "package_bytes", "work_bytes", "service_ms"],
    )
    work = _work_model(rows, "sp+sr", ["s3"])
    assert work is not None and set(work.samples[(100, 100)]) == {0.0005}
    assert _work_mean(rows, "sp+sr", "s1", work) == pytest.approx(0.5)
    assert _work_model(rows, "sp+sr", []) is None


def test_the_cpu_per_answer_comes_from_the_units_where_the_quota_bound() -> None:
    # Below its quota (76 %) a server's CPU per answer is higher (less batching): not the cap.
    units = _units([76.0, 100.0, 100.0], [200.0, 342.0, 342.0])
    assert _demand_scale(units, 0.25, 0.5) == pytest.approx(0.25 / 342 * 1000 / 0.5)


def test_the_twin_uses_the_live_servers_quota_period() -> None:
    servers = [{"id": "s1", "cpu_quota": 0.25}, {"id": "s2"}]
    config = resolve(None, {"servers": servers, "weights": {"s1": 1, "s2": 1}}, {})
    s1, s2 = file_testbed(Manifest(run_id="r", config=config.raw)).servers
    assert (s1.cpu_quota, s1.quota_period) == (0.25, 0.01)  # cgroup and duty cycle: 10 ms
    assert s2.cpu_quota is None
