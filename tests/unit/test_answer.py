"""The answer, paired within blocks: winners, ties by equivalence, what stays open."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from lblab.analysis.run import (
    TIE,
    UNRESOLVED,
    WINNER,
    answer,
    compare,
    label,
    read_answer,
    scenarios_to_settle,
    settled,
    unresolved_reasons,
    untrusted,
    verdict,
    winner_frame,
    write_answer,
)


def units(values: dict[str, list[float]], metric: str = "throughput_rps") -> pd.DataFrame:
    """One scenario; per strategy its metric in blocks 1, 2, ..."""
    rows = [
        {"run_id": "r", "scenario": "sp+sr", "strategy": s, "replication": k + 1, metric: v}
        for s, vs in values.items()
        for k, v in enumerate(vs)
    ]
    return pd.DataFrame(rows)


def only(cells: list, metric: str = "throughput_rps"):
    (cell,) = [c for c in cells if c.metric == metric]
    return cell


def test_a_drift_between_blocks_cancels_in_the_pairs() -> None:
    # The machine slows by half from block to block; wrr stays 5 % ahead of lc in each.
    lc = [1000.0, 700.0, 400.0, 900.0]
    wrr = [v * 1.05 for v in lc]
    cell = only(answer(units({"lc": lc, "wrr": wrr}), metrics=["throughput_rps"]))
    assert cell.verdict == WINNER and cell.strategies == ("wrr",)
    assert cell.difference["relative"] == pytest.approx(0.05 * sum(lc) / sum(lc), rel=1e-9)
    # Pooled means with their own intervals would overlap widely here.
    assert max(lc) > min(wrr) * 1.5


def test_strategies_within_the_margin_tie_by_two_one_sided_tests() -> None:
    base = [1000.0, 1010.0, 990.0, 1005.0, 995.0]
    near = [b * (1 + d) for b, d in zip(base, [0.01, -0.01, 0.0, 0.005, -0.005], strict=True)]
    cell = only(answer(units({"rr": base, "lc": near}), metrics=["throughput_rps"]))
    assert cell.verdict == TIE and set(cell.strategies) == {"rr", "lc"}
    assert settled([cell])


def test_a_noisy_pair_is_unresolved_and_says_why() -> None:
    cell = only(
        answer(units({"rr": [1000.0, 900.0, 1100.0], "lc": [950.0, 1150.0, 880.0]}),
               metrics=["throughput_rps"])
    )  # fmt: skip
    assert cell.verdict == UNRESOLVED and cell.open_pairs == 1
    assert "over 3 blocks" in cell.why and not settled([cell])


def test_another_block_runs_the_scenarios_still_undecided_then_those_with_open_pairs() -> None:
    decided = {"rr": [1000.0, 1010.0, 990.0], "lc": [1400.0, 1410.0, 1390.0]}
    noisy = {"rr": [1000.0, 900.0, 1100.0], "lc": [950.0, 1150.0, 880.0]}
    frame = pd.concat([units(decided), units(noisy).assign(scenario="mp+mr")])
    cells = answer(frame, metrics=["throughput_rps"])
    assert [c.verdict for c in cells] == [WINNER, UNRESOLVED]
    assert scenarios_to_settle(cells) == ["mp+mr"]
    # Every cell decided, a pair still open (r vs rr, both beaten by lc): that scenario.
    three = {**decided, "r": [1080.0, 950.0, 1020.0]}
    cells = answer(pd.concat([units(three), units(decided).assign(scenario="mp+mr")]),
                   metrics=["throughput_rps"])  # fmt: skip
    assert [c.verdict for c in cells] == [WINNER, WINNER] and cells[0].open_pairs > 0
    assert scenarios_to_settle(cells) == ["sp+sr"]
    assert scenarios_to_settle(answer(units(decided), metrics=["throughput_rps"])) == []


def test_one_block_has_no_interval() -> None:
    cell = only(answer(units({"rr": [1000.0], "lc": [2000.0]}), metrics=["throughput_rps"]))
    assert cell.verdict == UNRESOLVED and "no interval yet" in cell.why


def test_a_winner_must_beat_every_other_strategy_and_a_tie_group_can_lead() -> None:
    a = [100.0, 101.0, 99.0, 100.5]
    cells = answer(
        units({"a": a, "b": [x * 1.001 for x in a], "c": [x * 0.7 for x in a]}),
        metrics=["throughput_rps"],
    )
    cell = only(cells)
    assert cell.verdict == TIE and set(cell.strategies) == {"a", "b"}  # c resolved worse


def test_zero_failures_everywhere_is_a_tie_and_the_margin_is_absolute() -> None:
    cells = answer(
        units({"rr": [0.0, 0.0, 0.0], "lc": [0.0, 0.001, 0.0]}, "failure_rate"),
        metrics=["failure_rate"],
    )
    cell = only(cells, "failure_rate")
    assert cell.verdict == TIE  # within 0.5 percentage points


def test_failed_phases_leave_their_blocks_out_of_the_pair() -> None:
    frame = units({"rr": [100.0, 100.0, 100.0, 50.0], "lc": [90.0, 91.0, 89.0, 300.0]})
    cell = only(answer(frame, [("sp+sr", "lc", 4, "machine fail: 1.2 of 1.0")],
                       metrics=["throughput_rps"]))  # fmt: skip
    assert cell.verdict == WINNER and cell.strategies == ("rr",)
    assert cell.difference["blocks"] == 3 and "over 3 blocks" in cell.pairs[0]
    assert cell.left_out == (
        {"strategy": "lc", "replication": 4, "why": "machine fail: 1.2 of 1.0"},
    )


def test_compare_gives_the_t_interval_of_the_differences() -> None:
    p = compare("failure_rate", "a", "b", [0.12, 0.14], [0.10, 0.10], 0.05)
    # differences .02 and .04: mean .03, sd .01414, t(0.975, 1) = 12.706 -> half .12706
    assert p.diff == pytest.approx(0.03) and p.hi - p.diff == pytest.approx(0.12706, abs=1e-5)
    assert p.blocks == 2 and not p.resolved and not p.log
    ratio = compare("throughput_rps", "a", "b", [12.0, 24.0], [10.0, 20.0], 0.05)
    assert ratio.log and ratio.relative(ratio.diff) == pytest.approx(0.2)
    assert ratio.lo == pytest.approx(math.log(1.2)) == ratio.hi  # the same ratio: no spread
    assert ratio.resolved
    assert math.isnan(compare("x", "a", "b", [1.0], [math.nan], 0.05).diff)


def test_winners_json_round_trip_and_words(tmp_path: Path) -> None:
    lc = [1000.0, 700.0, 400.0]
    cells = answer(
        units({"lc": lc, "wrr": [v * 1.1 for v in lc], "rr": [v * 0.5 for v in lc]}),
        metrics=["throughput_rps"],
    )
    written = write_answer(tmp_path, cells, 0.05)
    data = json.loads((tmp_path / "winners.json").read_text())
    assert data["schema_version"] == 1 and data["cells"] == written
    read = read_answer(tmp_path)
    assert read == written
    (cell,) = read
    assert cell["verdict"] == "winner" and cell["strategies"] == ["wrr"]
    assert label(cell) == "wrr"
    assert winner_frame(read).iloc[0]["label"] == "wrr"
    words = verdict(read)
    assert "won by wrr in sp+sr (+10 % [" in words and "1 of 1" in words
    assert unresolved_reasons(read) == []


def test_a_foreign_winners_json_is_refused(tmp_path: Path) -> None:
    (tmp_path / "winners.json").write_text('{"schema_version": 99}')
    with pytest.raises(Exception, match="schema_version 99"):
        read_answer(tmp_path)


def test_an_unresolved_cell_where_every_mean_is_equal_leads_with_all_of_them() -> None:
    cell = only(answer(units({"rr": [0.0], "lc": [0.0], "r": [0.0]}, "failure_rate"),
                       metrics=["failure_rate"]), "failure_rate")  # fmt: skip
    assert cell.verdict == UNRESOLVED and set(cell.strategies) == {"rr", "lc", "r"}


def test_a_cell_whose_phases_all_failed_is_not_settled() -> None:
    frame = units({"rr": [100.0, 101.0], "lc": [90.0, 91.0]})
    dropped = [("sp+sr", s, r, "disturbance fail") for s in ("rr", "lc") for r in (1, 2)]
    cells = answer(frame, dropped, metrics=["throughput_rps"])
    assert only(cells).verdict == UNRESOLVED and only(cells).open_pairs == 0
    assert not settled(cells)
    # Another block runs it (a quick run beside a hog, every phase failed, once added
    # a block of no scenario).
    assert scenarios_to_settle(cells) == ["sp+sr"]
    assert untrusted(only(cells))
    # The paragraph says why nothing is decided, not "run more replications".
    words = verdict([c.to_dict() for c in cells])
    assert "Every phase was left out for failing its checks" in words
    assert "With one block" not in words


def test_a_strategy_whose_phases_all_failed_leaves_its_cell_unsettled() -> None:
    """Two strategies, one block, rr's phase left out: the cell holds wrr alone, which is
    not a run of one strategy. An adaptive run stopped here with "every pair is resolved"
    (a fresh-clone suite run, steal failing rr's phase); it must run another block."""
    frame = units({"rr": [100.0], "wrr": [101.0]})
    cells = answer(frame, [("sp+sr", "rr", 1, "disturbance fail")], metrics=["throughput_rps"])
    assert only(cells).verdict == UNRESOLVED and set(only(cells).means) == {"wrr"}
    assert not settled(cells)
    assert scenarios_to_settle(cells) == ["sp+sr"]


def test_one_strategy_has_nothing_to_decide_and_is_settled() -> None:
    cells = answer(units({"rr": [100.0, 101.0]}), metrics=["throughput_rps"])
    assert only(cells).why == "only one strategy" and settled(cells)
    assert not untrusted(only(cells))
    failed = answer(
        units({"rr": [100.0]}), [("sp+sr", "rr", 1, "disturbance fail")], metrics=["throughput_rps"]
    )
    assert untrusted(only(failed)) and not settled(failed)  # no pair, yet no trusted value


def test_a_latency_win_the_harness_could_reverse_is_flagged_in_winners_json(
    tmp_path: Path,
) -> None:
    # lc beats rr at p95 by 1 ms a block, while rr's requests spent 1.5 ms more in the
    # harness (p99) than lc's: the whole win may be the instrument's.
    lc = [10.0, 12.0, 11.0]
    cells = answer(
        units({"lc": lc, "rr": [v + 1.0 for v in lc]}, "latency_p95_ms"), metrics=["latency_p95_ms"]
    )
    assert cells[0].verdict == "winner" and cells[0].strategies == ("lc",)
    rows = [
        {"scenario": "sp+sr", "strategy": "lc", "harness_p50_ms": 0.4, "harness_p99_ms": 1.0},
        {"scenario": "sp+sr", "strategy": "rr", "harness_p50_ms": 0.4, "harness_p99_ms": 2.5},
    ]
    written = write_answer(tmp_path, cells, 0.05, rows)
    assert written[0]["instrument"] == {
        "level": "fail", "figure": "harness_p99_ms", "winner_ms": 1.0, "runner_up_ms": 2.5,
    }  # fmt: skip
    read = read_answer(tmp_path)
    assert read == written
    assert "The harness's own time could reverse lc over rr on" in verdict(read)
    # Harness times alike and small beside the difference: it passes, and nothing is said.
    calm = [dict(r, harness_p99_ms=0.1) for r in rows]
    passed = write_answer(tmp_path, cells, 0.05, calm)
    assert passed[0]["instrument"]["level"] == "pass"
    assert "could reverse" not in verdict(passed)
    # No harness figures (a simulated run, a run from before): no check at all.
    assert "instrument" not in write_answer(tmp_path, cells, 0.05)[0]
