"""Chart functions on edge cases: they return a drawable Figure, never raise; and they
mark exactly the values that include a phase that failed a validity check.

Empty tables, a strategy with zero successes, a server missing from one strategy, and a
single replication are built directly as small frames (what analysis.metrics returns).
The marks are read off the matplotlib artists: a bar's hatch and alpha, a line's style.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable

import pandas as pd
import pytest
from matplotlib.figure import Figure

from lblab.analysis.metrics import (
    FAILED_COLUMNS,
    latency_box_stats,
    latency_curves,
    pool,
    unit_metrics,
)
from lblab.analysis.report import charts, tables
from lblab.analysis.run import answer, winner_frame

NAN = math.nan
NO_FAILED = pd.DataFrame(columns=FAILED_COLUMNS)
LEGEND_LINE = "hatched: includes a phase that failed a validity check (left out of the answer)"


def _render(fig: Figure) -> str:
    """Draw to PNG (catches errors only raised at draw time); return the figure's text:
    its title, its axes' titles and texts, and every legend's lines."""
    assert isinstance(fig, Figure)
    fig.savefig(io.BytesIO(), format="png", dpi=40)
    legends = [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]
    texts = [
        *(t for ax in fig.axes for t in [*ax.texts, ax.title]),
        *(t for legend in legends for t in legend.get_texts()),
        *([fig._suptitle] if fig._suptitle else []),
    ]
    return " ".join(t.get_text() for t in texts)


EMPTY_POOLED = pd.DataFrame(columns=["strategy", "scenario", "metric", "mean", "lo", "hi", "n"])
EMPTY_SERVERS = pd.DataFrame(
    columns=["strategy", "scenario", "server", "metric", "mean", "lo", "hi", "n"]
)

EMPTY_CASES: list[tuple[str, Callable[[], Figure]]] = [
    ("matrix", lambda: charts.matrix_heatmaps(EMPTY_POOLED, "requests", NO_FAILED)),
    ("bars", lambda: charts.comparison_bars(EMPTY_POOLED, "throughput_rps", NO_FAILED)),
    ("cpu", lambda: charts.cpu_over_time(pd.DataFrame(columns=["scenario"]), "sp+sr", NO_FAILED)),
    ("boxes", lambda: charts.latency_by_server(pd.DataFrame(), NO_FAILED)),
    ("curves", lambda: charts.latency_percentiles(pd.DataFrame(columns=["scenario"]), NO_FAILED)),
    ("share", lambda: charts.server_share(EMPTY_SERVERS, NO_FAILED)),
    ("winners", lambda: charts.winner_table(winner_frame([]))),
    ("failures", lambda: charts.failure_kinds(EMPTY_POOLED, NO_FAILED)),
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
    text = _render(charts.matrix_heatmaps(edge_frames["pooled"], "latency_mean_ms", NO_FAILED))
    assert "lc" in text and "-" in text  # lc's cell has no latency and shows a dash
    assert "7.0" in text and "5.0" in text  # rr: (5 + 7 + 9) / 3; wrr: (4 + 6) / 2
    _render(charts.matrix_heatmaps(edge_frames["pooled"], "failure_rate", NO_FAILED))


def test_bars_with_one_replication_say_no_ci(edge_frames: dict[str, pd.DataFrame]) -> None:
    text = _render(charts.comparison_bars(edge_frames["pooled"], "throughput_rps", NO_FAILED))
    assert "one replication: no CI" in text


def test_boxes_and_curves_with_missing_servers(edge_frames: dict[str, pd.DataFrame]) -> None:
    boxes = edge_frames["boxes"]
    assert set(boxes["strategy"]) == {"rr", "wrr"}  # lc had no success to draw
    _render(charts.latency_by_server(boxes, NO_FAILED))
    _render(charts.latency_percentiles(edge_frames["curves"], NO_FAILED))


def test_winner_table_and_failures(edge_frames: dict[str, pd.DataFrame]) -> None:
    table = winner_frame([c.to_dict() for c in answer(edge_frames["units"])])
    assert _render(charts.winner_table(table)) is not None
    assert "failure" in _render(charts.failure_kinds(edge_frames["pooled"], NO_FAILED)).lower()


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
    assert "no data" not in _render(charts.cpu_over_time(cpu, "sp+sr", NO_FAILED))
    assert "no data" in _render(charts.cpu_over_time(cpu, "lp+lr", NO_FAILED))


# The run: in sp+sr dwrr's bar is the tallest (2540 ok/s against lc's 1907), but
# its phase 1 failed a check, so the answer names lc; lp+lr serves 11-34 ok/s.
THROUGHPUT = {
    ("sp+sr", "rr"): 1500.0,
    ("sp+sr", "lc"): 1907.0,
    ("sp+sr", "dwrr"): 2540.0,
    ("lp+lr", "rr"): 11.0,
    ("lp+lr", "lc"): 34.0,
    ("lp+lr", "dwrr"): 20.0,
}
FAILED = pd.DataFrame(
    [("x", "sp+sr", "dwrr", 1, "disturbance fail: made up")], columns=FAILED_COLUMNS
)
MARKED = {("sp+sr", "dwrr")}


def _pooled() -> pd.DataFrame:
    rows = [
        (strategy, scenario, metric, v * scale, v * scale * 0.9, v * scale * 1.1, 3)
        for (scenario, strategy), v in THROUGHPUT.items()
        for metric, scale in (("throughput_rps", 1.0), ("failure_rate_timeout", 1e-5))
    ]
    return pd.DataFrame(rows, columns=["strategy", "scenario", "metric", "mean", "lo", "hi", "n"])


def _bars(fig: Figure) -> dict[tuple[str, str], list]:
    """Each panel's bars by (panel title, the strategy under them on the x axis)."""
    found: dict[tuple[str, str], list] = {}
    for ax in fig.axes:
        names = [t.get_text() for t in ax.get_xticklabels()]
        for patch in ax.patches:
            at = round(patch.get_x() + patch.get_width() / 2)
            found.setdefault((ax.get_title(), names[at]), []).append(patch)
    return found


def _hatched(patch) -> bool:
    """Marked: hatched and faded; unmarked: neither."""
    if patch.get_hatch():
        assert patch.get_hatch() == charts.HATCH and patch.get_alpha() == charts.FADED
        return True
    assert patch.get_alpha() is None
    return False


@pytest.mark.parametrize(
    ("metric", "make"),
    [
        (
            "throughput_rps",
            lambda failed: charts.comparison_bars(_pooled(), "throughput_rps", failed),
        ),
        ("failure kinds", lambda failed: charts.failure_kinds(_pooled(), failed)),
    ],
)
def test_bars_hatch_exactly_the_failed_cells(
    metric: str, make: Callable[[pd.DataFrame], Figure]
) -> None:
    fig = make(FAILED)
    bars = _bars(fig)
    assert set(bars) == set(THROUGHPUT), metric
    hatched = {key for key, patches in bars.items() if all(_hatched(p) for p in patches)}
    assert hatched == MARKED
    assert not any(_hatched(p) for key, ps in bars.items() if key not in MARKED for p in ps)
    assert LEGEND_LINE in _render(fig)
    clean = make(NO_FAILED)
    assert not any(_hatched(p) for ps in _bars(clean).values() for p in ps)
    assert "hatched" not in _render(clean)


def test_each_scenario_has_its_own_y_axis() -> None:
    fig = charts.comparison_bars(_pooled(), "throughput_rps", FAILED)
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_title()}
    assert set(panels) == {"sp+sr", "lp+lr"}
    for ax in panels.values():
        assert ax.get_shared_y_axes().get_siblings(ax) == [ax]
    # lp+lr's 34 ok/s fills most of its panel instead of being a sliver under sp+sr's 2540.
    assert 34 * 1.1 <= panels["lp+lr"].get_ylim()[1] < 60
    assert panels["sp+sr"].get_ylim()[1] >= 2540 * 1.1
    assert panels["sp+sr"].get_ylim()[0] == panels["lp+lr"].get_ylim()[0] == 0


def test_heatmap_hatches_the_failed_cell_only() -> None:
    pooled = pd.DataFrame(
        [(s, c, "throughput_rps", v, NAN, NAN, 1) for (c, s), v in THROUGHPUT.items()],
        columns=["strategy", "scenario", "metric", "mean", "lo", "hi", "n"],
    )
    fig = charts.matrix_heatmaps(pooled, "throughput_rps", FAILED)
    cells = {
        (ax.get_title(), (round(p.get_y() + 0.5), round(p.get_x() + 0.5)))
        for ax in fig.axes
        for p in ax.patches
        if _hatched(p)
    }
    assert cells == {("dwrr", (0, 0))}  # row s (100 B), column s (10 KB): sp+sr
    assert LEGEND_LINE in _render(fig)
    assert "hatched" not in _render(charts.matrix_heatmaps(pooled, "throughput_rps", NO_FAILED))


def test_share_and_boxes_hatch_the_failed_strategy() -> None:
    servers = pd.DataFrame(
        [(s, c, srv, "share", 0.5, NAN, NAN, 1) for c, s in THROUGHPUT for srv in ("s1", "s3")],
        columns=["strategy", "scenario", "server", "metric", "mean", "lo", "hi", "n"],
    )
    share = _bars(charts.server_share(servers, FAILED))
    assert {s for (_, s), ps in share.items() if all(_hatched(p) for p in ps)} == {"dwrr"}
    assert not any(_hatched(p) for (_, s), ps in share.items() if s != "dwrr" for p in ps)
    # Only sp+sr's dwrr failed: lp+lr's share alone has nothing to mark.
    alone = _bars(charts.server_share(servers, FAILED, scenario="lp+lr"))
    assert not any(_hatched(p) for ps in alone.values() for p in ps)
    boxes = pd.DataFrame(
        [
            (s, srv, 1.0, 2.0, 3.0, 4.0, 5.0, 3.0, 10)
            for s in ("rr", "dwrr")
            for srv in ("s1", "s3")
        ],
        columns=["strategy", "server", "whislo", "q1", "med", "q3", "whishi", "mean", "n"],
    )
    fig = charts.latency_by_server(boxes, FAILED)
    marked = {ax.get_title(): [_hatched(p) for p in ax.patches] for ax in fig.axes}
    assert marked == {"rr": [False, False], "dwrr": [True, True]}
    assert LEGEND_LINE in _render(fig)


def test_lines_of_failed_phases_are_dashed() -> None:
    curves = pd.DataFrame(
        [(s, c, p, p / 10) for c, s in THROUGHPUT for p in (50.0, 99.0)],
        columns=["strategy", "scenario", "percentile", "latency_ms"],
    )
    fig = charts.latency_percentiles(curves, FAILED)
    dashed = {
        (ax.get_title(), line.get_label())
        for ax in fig.axes
        for line in ax.get_lines()
        if line.get_linestyle() == "--"
    }
    assert dashed == MARKED
    assert "dashed: includes a phase that failed a validity check" in _render(fig)
    cpu = pd.DataFrame(
        [
            ("x", "dwrr", "sp+sr", rep, server, t, 10.0 * rep + i)
            for rep in (1, 2)
            for i, server in enumerate(("s1", "s3"))
            for t in (0.0, 1.0)
        ],
        columns=["run_id", "strategy", "scenario", "replication", "server", "t_rel", "cpu_percent"],
    )
    fig = charts.cpu_over_time(cpu, "sp+sr", FAILED)
    styles = {
        line.get_ydata()[0]: line.get_linestyle() for ax in fig.axes for line in ax.get_lines()
    }
    assert styles == {10.0: "--", 11.0: "--", 20.0: "-", 21.0: "-"}  # rep 1 failed, rep 2 passed
    assert "dashed: a phase that failed a validity check (left out of the answer)" in _render(fig)


def test_summary_table_marks_the_rows_that_include_a_failed_phase() -> None:
    table = tables.summary_table(_pooled(), FAILED, ["throughput_rps"])
    marked = [key for key in table.index if tables.MARK in key[1]]
    assert marked == [("sp+sr", f"dwrr {tables.MARK}")]
    assert ("lp+lr", "dwrr") in table.index
    units = pd.DataFrame(
        [(c, s, r) for c, s in THROUGHPUT for r in (1, 2)],
        columns=["scenario", "strategy", "replication"],
    )
    counts = tables.replication_counts(units, FAILED)
    assert counts.loc["dwrr", "sp+sr"] == "2 (1 failed)" and counts.loc["dwrr", "lp+lr"] == "2"
    assert tables.replication_counts(units, NO_FAILED).loc["dwrr", "sp+sr"] == 2


def test_winner_table_colours_each_cell_by_its_verdict() -> None:
    from matplotlib.colors import to_rgba

    from lblab.analysis.run import TIE, UNRESOLVED, WINNER

    cells = [
        {"scenario": "sp+sr", "metric": "throughput_rps", "verdict": WINNER, "strategies": ["lc"]},
        {
            "scenario": "lp+lr",
            "metric": "throughput_rps",
            "verdict": TIE,
            "strategies": ["lc", "rr"],
        },
        {
            "scenario": "variation",
            "metric": "throughput_rps",
            "verdict": UNRESOLVED,
            "strategies": ["rr"],
        },
    ]
    fig = charts.winner_table(winner_frame(cells))
    grid = fig.axes[0].tables[0].get_celld()
    shown = {
        grid[(row, 0)].get_text().get_text(): grid[(row, 0)].get_facecolor() for row in (1, 2, 3)
    }
    assert shown == {
        "lc": to_rgba(charts.VERDICT_COLOURS[WINNER]),
        "=lc/rr": to_rgba(charts.VERDICT_COLOURS[TIE]),
        "?rr": to_rgba(charts.VERDICT_COLOURS[UNRESOLVED]),
    }
    assert '"?": unresolved' in _render(fig)
