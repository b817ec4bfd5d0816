"""``lblab twin --format markdown`` (``analysis/twin/report.twin_markdown``): the section of
docs/results/twin.md shows the figures twin.json holds, cell by cell, and the same ones
the report's HTML shows.

The twin report here is built by the twin's own comparison
(``simulator/twin/compare.py``) from pooled figures chosen so that every cell's error,
ranking and reversed pair is known by hand; its model is what the section reads of it."""

from __future__ import annotations

from typing import Any

import pandas as pd

from lblab.analysis.twin import (
    ModelServer,
    TooShort,
    TwinModel,
    TwinReport,
    TwinScale,
    twin_markdown,
)
from lblab.analysis.twin.report import _cells_table, _plain_words, _rank_table, _scale_table
from lblab.simulator.twin.compare import compare, scale_ranks, summary
from lblab.simulator.twin.measure import FIGURES
from lblab.simulator.twin.testbed import Testbed as TwinTestbed
from lblab.simulator.twin.testbed import TwinScenario
from lblab.stamp import Stamp

STRATEGIES = ("rr", "lc", "wrr")
STAMP = Stamp("abc1234", "2026-01-01 00:00 UTC", 2, (0.5, 0.4, 0.3))
COMMAND = "lblab twin results/quick-1 --scale 100 --format markdown"


def _pooled(figures: dict[tuple[str, str], tuple[float, float, float]]) -> pd.DataFrame:
    """Pooled figures per (scenario, strategy): (throughput, mean, p95), each with a 95 %
    interval of +-5 % (apart where the figures differ by more than 10 %)."""
    rows = []
    for (scenario, strategy), values in figures.items():
        row: dict[str, Any] = {"scenario": scenario, "strategy": strategy}
        for f, v in zip(FIGURES, values, strict=True):
            row |= {f: v, f + "_lo": v * 0.95, f + "_hi": v * 1.05}
        rows.append(row)
    return pd.DataFrame(rows)


MEASURED = {
    ("sp+sr", "rr"): (100.0, 50.0, 100.0),
    ("sp+sr", "lc"): (200.0, 25.0, 50.0),
    ("sp+sr", "wrr"): (150.0, 33.0, 70.0),
    ("lp+lr", "rr"): (10.0, 900.0, 2000.0),
    ("lp+lr", "lc"): (10.0, 900.0, 2000.0),
    ("lp+lr", "wrr"): (10.0, 900.0, 2000.0),
}
SIMULATED = {
    ("sp+sr", "rr"): (110.0, 52.0, 150.0),  # +10 %, p95 +50 %: a latency miss
    ("sp+sr", "lc"): (160.0, 26.0, 55.0),  # -20 %: a throughput miss, below wrr
    ("sp+sr", "wrr"): (170.0, 30.0, 71.0),  # +13 %
    ("lp+lr", "rr"): (10.0, 910.0, 2100.0),
    ("lp+lr", "lc"): (10.05, 905.0, 2050.0),
    ("lp+lr", "wrr"): (9.98, 900.0, 2000.0),  # the three tie within 1 %: no ranking
}
SCALED = {
    ("sp+sr", "rr"): (3500.0, 60.0, 160.0),
    ("sp+sr", "lc"): (5000.0, 30.0, 60.0),
    ("sp+sr", "wrr"): (6000.0, 28.0, 70.0),
    ("lp+lr", "rr"): (330.0, 900.0, 2000.0),
    ("lp+lr", "lc"): (340.0, 900.0, 2000.0),
    ("lp+lr", "wrr"): (320.0, 900.0, 2000.0),
}


def _twin(scales: bool) -> TwinReport:
    testbed = TwinTestbed(
        servers=(),
        strategies=STRATEGIES,
        strategy_options={},
        scenarios=tuple(TwinScenario(name, (), closed=True) for name in ("sp+sr", "lp+lr")),
        replications=2,
        seed=1,
        deadline=None,
        report_period=0.25,
        warmup_fraction=0.2,
    )
    measured, simulated = _pooled(MEASURED), _pooled(SIMULATED)
    # as make_twin marks them from the run's manifest
    flags = {(s, sc.name): ["machine warn"] for s in ("lc",) for sc in testbed.scenarios}
    cells, ranks = compare(testbed, measured, simulated, flags)
    scaled = TwinScale(
        servers=100,
        dir="twin/scale-100",
        replications=1,
        requests_per_phase={},
        too_short_for_agent_reports={
            "sp+sr": TooShort(window_s=0.1, strategies=("dwrr",), agent_periods=0.4)
        },
        figures=(),
        rank=scale_ranks(testbed, simulated, measured, _pooled(SCALED)),
    )
    return TwinReport(
        run="results/quick-1",
        run_id="quick-1",
        simulated_input=False,
        created=0.0,
        wall_seconds=12.5,
        model=TwinModel(servers=_servers(3), scenarios={}, deadline_s=None, replications=2),
        cells=cells,
        rank=ranks,
        scales=(scaled,) if scales else (),
        summary=summary(cells, ranks),
    )


def _servers(n: int) -> tuple[ModelServer, ...]:
    return tuple(
        ModelServer(
            id=f"s{i}",
            weight=1.0,
            workers=1,
            capacity=None,
            cpu_quota=None,
            fit="fixed:1ms",
            fit_r2=1.0,
            service_ms_mean={},
            samples=1,
        )
        for i in range(1, n + 1)
    )


def test_the_section_opens_with_its_stamp_and_says_how_many_cells_agree() -> None:
    lines = twin_markdown(_twin(scales=False), STAMP, COMMAND).splitlines()
    assert lines[0].startswith("<!-- Generated")
    assert lines[2] == (
        f"Produced by `{COMMAND}` at commit `abc1234` on 2026-01-01 00:00 UTC, 2 cores, "
        "load average 0.5 / 0.4 / 0.3."
    )
    assert "Run `quick-1` (live: 3 servers, 2 replications); its twin took 12.5 s." in lines
    words = next(line for line in lines if line.startswith("The simulator"))
    assert (
        "predicts the throughput of 5 of 6 strategy x scenario cells within 15% (worst "
        "error 20%); the mean latency of 6 and the p95 latency of 5 of them within it."
    ) in words
    assert "Its throughput misses by more than that in: lc / sp+sr." in words
    assert "In sp+sr it reverses no pair" not in words
    assert "It reverses measured differences the run resolves (intervals apart) in: " \
        "sp+sr: lc > wrr." in words  # fmt: skip
    assert "No ranking by throughput" in words and "in: lp+lr." in words


def test_each_scenario_is_one_row_of_throughput_cells_taus_and_reversed_pairs() -> None:
    lines = twin_markdown(_twin(scales=False), STAMP, COMMAND).splitlines()
    head = lines.index(
        "| scenario | rr | lc | wrr | tau by throughput | reversed by throughput "
        "| tau by mean latency | reversed by mean latency |"
    )
    assert lines[head + 2 :] == [
        # sp+sr: measured lc > wrr > rr, simulated wrr > lc > rr; by mean latency both
        # lc < wrr < rr (all three pairs resolved, none reversed).
        "| sp+sr | 100.0 / 110.0 (+10%) | 200.0 / 160.0 (-20%; machine warn) "
        "| 150.0 / 170.0 (+13%) | 0.33 | 1 of 3 (lc > wrr) | 1.00 | 0 of 3 |",
        # lp+lr: every strategy ties within 1 % and no interval is apart.
        "| lp+lr | 10.0 / 10.0 (+0%) | 10.0 / 10.1 (+0%; machine warn) | 10.0 / 10.0 (-0%) "
        "| n/a | 0 of 0 | n/a | 0 of 0 |",
    ]
    assert not any(line.startswith("## Does the ranking") for line in lines)


def test_the_ranking_at_scale_is_a_table_when_scales_were_run() -> None:
    text = twin_markdown(_twin(scales=True), STAMP, COMMAND)
    lines = text[text.index("## Does the ranking hold at scale?") :].splitlines()
    assert lines[4:8] == [
        "| scenario | 100 servers: ranking by throughput | tau vs twin | tau vs measured |",
        "|---|---|---|---|",
        "| sp+sr | wrr > lc > rr | 1.00 | 0.33 |",
        "| lp+lr | lc > rr > wrr | n/a | n/a |",
    ]
    assert lines[9].startswith("Strategies that follow the agents' CPU reports")
    assert "100 servers, sp+sr: the window lasted 0.1 simulated s (0.4 agent periods), " \
        "too short for dwrr." in lines[9]  # fmt: skip


def test_the_report_shows_the_same_figures_and_words() -> None:
    data = _twin(scales=True)
    section = _plain_words(data) + _cells_table(data) + _rank_table(data) + _scale_table(data)
    for shown in ("200.0</td><td>160.0</td>", "-20%", "machine warn", "1 of 3 (lc &gt; wrr)"):
        assert shown in section
    assert "wrr &gt; lc &gt; rr</td><td>1.00</td><td>0.33" in section
    assert "Its throughput misses by more than that in: lc / sp+sr." in section
    assert "the p95 latency of" not in section  # the report's table shows those cell by cell
