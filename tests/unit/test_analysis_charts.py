"""Chart functions on edge cases: they return a drawable Figure, never raise.

Empty tables, a strategy with zero successes, a server missing from one strategy, and a
single replication are built directly as small frames (what analysis.metrics returns).
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable

import pandas as pd
import pytest
from matplotlib.figure import Figure

from lblab.analysis import charts
from lblab.analysis.answer import answer
from lblab.analysis.metrics import latency_box_stats, latency_curves, pool, unit_metrics
from lblab.analysis.winners import winner_frame

NAN = math.nan


def _render(fig: Figure) -> str:
    """Draw to PNG (catches errors only raised at draw time); return the figure's text."""
    assert isinstance(fig, Figure)
    fig.savefig(io.BytesIO(), format="png", dpi=40)
    return " ".join(t.get_text() for ax in fig.axes for t in [*ax.texts, ax.title])


EMPTY_POOLED = pd.DataFrame(columns=["strategy", "scenario", "metric", "mean", "lo", "hi", "n"])
EMPTY_SERVERS = pd.DataFrame(
    columns=["strategy", "scenario", "server", "metric", "mean", "lo", "hi", "n"]
)

EMPTY_CASES: list[tuple[str, Callable[[], Figure]]] = [
    ("matrix", lambda: charts.matrix_heatmaps(EMPTY_POOLED, "requests")),
    ("bars", lambda: charts.comparison_bars(EMPTY_POOLED, "throughput_rps")),
    ("cpu", lambda: charts.cpu_over_time(pd.DataFrame(columns=["scenario"]), "sp+sr")),
    ("boxes", lambda: charts.latency_by_server(pd.DataFrame())),
    ("curves", lambda: charts.latency_percentiles(pd.DataFrame(columns=["scenario"]))),
    ("share", lambda: charts.server_share(EMPTY_SERVERS)),
    ("winners", lambda: charts.winner_table(winner_frame([]))),
    ("failures", lambda: charts.failure_kinds(EMPTY_POOLED)),
]


@pytest.mark.parametrize(("name", "make"), EMPTY_CASES, ids=[c[0] for c in EMPTY_CASES])
def test_empty_input_draws_a_no_data_figure(name: str, make: Callable[[], Figure]) -> None:
    assert "no data" in _render(make())


def _requests(strategy: str, rep: int, rows: list[tuple[float, bool, str | None]]) -> list[dict]:
    return [
        {
            "run_id": "x",
            "strategy": strategy,
            "scenario": "sp+sr",
            "replication": rep,
            "t_sent": float(i),
            "latency_ms": ms,
            "ok": ok,
            "error_kind": None if ok else "rejected",
            "error_origin": None if ok else "server",
            "server": server,
        }
        for i, (ms, ok, server) in enumerate(rows)
    ]


@pytest.fixture(scope="module")
def edge_frames() -> dict[str, pd.DataFrame]:
    """rr: one replication, s1 and s2; lc: zero successes; wrr: s3 only (s1, s2 missing)."""
    rows = [
        *_requests("rr", 1, [(5.0, True, "s1"), (7.0, True, "s2"), (9.0, True, "s1")]),
        *_requests("lc", 1, [(1.0, False, None), (2.0, False, None)]),
        *_requests("wrr", 1, [(4.0, True, "s3"), (6.0, True, "s3")]),
    ]
    requests = pd.DataFrame(rows)
    units = unit_metrics(requests)
    return {
        "requests": requests,
        "units": units,
        "pooled": pool(units),
        "boxes": latency_box_stats(requests),
        "curves": latency_curves(requests),
    }


def test_heatmap_with_a_zero_success_strategy(edge_frames: dict[str, pd.DataFrame]) -> None:
    text = _render(charts.matrix_heatmaps(edge_frames["pooled"], "latency_mean_ms"))
    assert "lc" in text and "-" in text  # lc's cell has no latency and shows a dash
    assert "7.0" in text and "5.0" in text  # rr: (5 + 7 + 9) / 3; wrr: (4 + 6) / 2
    _render(charts.matrix_heatmaps(edge_frames["pooled"], "failure_rate"))


def test_bars_with_one_replication_say_no_ci(edge_frames: dict[str, pd.DataFrame]) -> None:
    text = _render(charts.comparison_bars(edge_frames["pooled"], "throughput_rps"))
    assert "one replication: no CI" in text


def test_boxes_and_curves_with_missing_servers(edge_frames: dict[str, pd.DataFrame]) -> None:
    boxes = edge_frames["boxes"]
    assert set(boxes["strategy"]) == {"rr", "wrr"}  # lc had no success to draw
    _render(charts.latency_by_server(boxes))
    _render(charts.latency_percentiles(edge_frames["curves"]))


def test_winner_table_and_failures(edge_frames: dict[str, pd.DataFrame]) -> None:
    table = winner_frame([c.to_dict() for c in answer(edge_frames["units"])])
    assert _render(charts.winner_table(table)) is not None
    assert "failure" in _render(charts.failure_kinds(edge_frames["pooled"])).lower()


def test_cpu_over_time_for_an_absent_scenario() -> None:
    cpu = pd.DataFrame(
        {
            "run_id": ["x"],
            "strategy": ["rr"],
            "scenario": ["sp+sr"],
            "replication": [1],
            "server": ["s1"],
            "t_rel": [0.0],
            "cpu_percent": [50.0],
        }
    )
    assert "no data" not in _render(charts.cpu_over_time(cpu, "sp+sr"))
    assert "no data" in _render(charts.cpu_over_time(cpu, "lp+lr"))
