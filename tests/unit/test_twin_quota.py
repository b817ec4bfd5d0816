"""The twin prices a server by its CPU only where its quota was its limit (``simulator/twin.py``)."""

from __future__ import annotations

import pandas as pd
import pytest

from lblab.simulator.twin import _demand_scale, _quota_binds


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
