"""What the instrument adds (issue 47): each phase's harness and outside-the-slot times
from its request rows, and the answer's resolved latency cells held to them."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from lblab.analysis.report import cell_checks, instrument_rows, instrument_section
from lblab.manifest import Manifest, PhaseEntry
from lblab.validity import FAIL, PASS, WARN, instrument_facts


def test_the_facts_split_each_latency_at_the_server() -> None:
    n = 101
    rows = pa.table(
        {
            "ok": [True] * n + [False],
            "latency_ms": [10.0 + i / 10 for i in range(n)] + [99.0],
            "server_ms": [8.0 + i / 20 for i in range(n)] + [None],
            "queue_ms": [1.0] * n + [None],
            "service_ms": [6.0] * n + [None],
            "send_lag_ms": [0.1 * i for i in range(n)] + [50.0],
        }
    )
    facts = instrument_facts(rows)
    # harness = 2 + i / 20 over i = 0..100: p50 at i = 50, p99 at i = 99; the failure has
    # no server time and is left out of both.
    assert facts["harness_p50_ms"] == pytest.approx(4.5)
    assert facts["harness_p99_ms"] == pytest.approx(6.95)
    # outside the slot = 1 + i / 20
    assert facts["outside_slot_p50_ms"] == pytest.approx(3.5)
    assert facts["send_lag_p50_ms"] == pytest.approx(5.05)  # 102 lags, the failure's too


def test_rows_without_server_times_have_no_harness_figures() -> None:
    rows = pa.table({"ok": [True], "latency_ms": [3.0], "queue_ms": [1.0], "service_ms": [1.0]})
    facts = instrument_facts(rows)
    assert facts["harness_p50_ms"] is None and facts["outside_slot_p99_ms"] is None


def _manifest(harness: dict[str, tuple[float, float]]) -> Manifest:
    """Two phases per strategy of sp+sr with the given (p50, p99) harness times."""
    phases = [
        PhaseEntry(
            key=f"r{rep}-{strategy}",
            scenario="sp+sr",
            strategy=strategy,
            replication=rep,
            measured={"harness_p50_ms": p50, "harness_p99_ms": p99},
        )
        for strategy, (p50, p99) in harness.items()
        for rep in (1, 2)
    ]
    return Manifest(run_id="t", phases=tuple(phases))


def _cell(metric: str, winner: str, runner_up: str, diff: float) -> dict[str, Any]:
    return {"scenario": "sp+sr", "metric": metric, "verdict": "winner",
            "strategies": [winner], "runner_up": runner_up, "difference": {"diff": -diff}}  # fmt: skip


def test_a_cell_the_harness_could_reverse_fails_and_a_sizeable_share_warns() -> None:
    manifest = _manifest({"lc": (0.4, 2.0), "dwrr": (0.5, 3.5), "rr": (0.45, 2.1)})
    rows = instrument_rows(manifest)
    assert {r["strategy"]: r["phases"] for r in rows} == {"lc": 2, "dwrr": 2, "rr": 2}
    cells = [
        _cell("latency_p95_ms", "lc", "dwrr", 1.2),  # p99s 2.0 and 3.5: 1.5 apart >= 1.2
        _cell("latency_p95_ms", "lc", "rr", 3.0),  # 0.1 apart; 2.1 >= half of 3.0
        _cell("latency_mean_ms", "lc", "rr", 5.0),  # the p50s: 0.45 < 2.5
        _cell("throughput_rps", "lc", "rr", 5.0),  # not a latency: not held
        {**_cell("latency_p95_ms", "lc", "rr", 3.0), "verdict": "tie"},  # not resolved
    ]
    checks = cell_checks(cells, rows)
    assert [(c["metric"], c["runner_up"], c["level"]) for c in checks] == [
        ("latency_p95_ms", "dwrr", FAIL),
        ("latency_p95_ms", "rr", WARN),
        ("latency_mean_ms", "rr", PASS),
    ]
    page = instrument_section(manifest, cells)
    assert "1 could be reversed by it, 1 have it as a sizeable part" in page
    assert "lc ahead of dwrr by 1.20 ms; the harness added 2.00 and 3.50 ms" in page


def test_a_run_without_server_times_says_so() -> None:
    manifest = Manifest(run_id="t", phases=(PhaseEntry(key="k", scenario="s", strategy="rr",
                                                       replication=1, measured={"x": 1}),))  # fmt: skip
    assert "carry no per-request server times" in instrument_section(manifest, [])
