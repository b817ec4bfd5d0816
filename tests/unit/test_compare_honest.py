"""``lblab compare`` is honest: a cell whose offered load or capacity differs is "not
comparable", the sentence on what changed never says "the same" while something differs,
both runs' checks stand beside every difference, and the runs' agreement (throughput
within 10 %, reversed resolved pairs, Kendall tau) is right on runs with known answers."""

from __future__ import annotations

import copy
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from rich.console import Console

from lblab.analysis.compare import (
    Report,
    RunSide,
    compare,
    compare_sides,
    headline,
    make_side,
    print_report,
    render_html,
    what_changed,
)
from lblab.analysis.synthetic import write_synthetic_run
from lblab.manifest import from_json

STRATEGIES = ("r", "rr", "wrr")
SCENARIOS = ("sp+sr", "mp+mr")
BLOCKS = 4
NOISE = (1.0, 1.01, 0.99, 1.005)
"""Each block's throughput is the cell's mean times this: small, so every pair with a
real difference is resolved."""


def live_manifest(run_id: str, rate: float = 8000.0, **config: Any) -> dict[str, Any]:
    """A live run's manifest with an open load, three servers' quotas as they ran, and
    every phase passing its checks."""
    return {
        "run_id": run_id,
        "simulated": False,
        "config": {
            "run": {"seed": 1, "duration": "10s"},
            "load": {"model": "open", "rate": rate, "arrival": "constant"},
            "strategy_options": {},
            **config,
        },
        "testbed": {"cpu_layout": {"quotas": {"s1": 0.25, "s2": 0.25, "s3": 1.0}}},
        "phases": [
            phase(scenario, strategy, k)
            for scenario in SCENARIOS
            for strategy in STRATEGIES
            for k in range(1, BLOCKS + 1)
        ],
    }


def phase(scenario: str, strategy: str, replication: int, **levels: str) -> dict[str, Any]:
    """A phase entry whose checks pass except ``levels`` (check name -> level)."""
    checks = ["generator", "balancer", "disturbance", "steady state"]
    verdicts = [
        {"name": c, "level": levels.get(c, "pass"), "figure": "-", "why": "-"} for c in checks
    ]
    worst = "fail" if "fail" in levels.values() else "warn" if "warn" in levels.values() else "pass"
    return {
        "key": f"r{replication}-{scenario}-{strategy}",
        "scenario": scenario,
        "strategy": strategy,
        "replication": replication,
        "verdicts": verdicts,
        "verdict": worst,
    }


def units(throughput: dict[tuple[str, str], float]) -> pd.DataFrame:
    """One row per (strategy, scenario) x block; throughput from ``throughput``, the other
    headline metrics alike for every strategy (so no pair is resolved on them)."""
    rows = [
        {
            "run_id": "x",
            "strategy": s,
            "scenario": c,
            "replication": k + 1,
            "throughput_rps": mean * NOISE[k],
            "latency_mean_ms": 10.0,
            "latency_p95_ms": 20.0,
            "failure_rate": 0.0,
            "cpu_imbalance": 1.2,
        }
        for (s, c), mean in throughput.items()
        for k in range(BLOCKS)
    ]
    return pd.DataFrame(rows)


def side(
    label: str,
    throughput: dict[tuple[str, str], float],
    manifest: dict[str, Any],
    winners: list[dict[str, Any]] | None = None,
) -> RunSide:
    return make_side(label, Path(label), from_json(manifest), units(throughput), winners)


def grid(*means: float) -> dict[tuple[str, str], float]:
    """``grid(r, rr, wrr, ...)``: the throughput of each strategy, scenario by scenario."""
    cells = [(s, c) for c in SCENARIOS for s in STRATEGIES]
    return dict(zip(cells, means, strict=True))


BASE = grid(100, 200, 300, 100, 200, 300)


def terminal(report: Report) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    print_report(report, console)
    return console.file.getvalue()  # type: ignore[attr-defined]


def rows(report: Report, metric: str = "throughput_rps") -> dict[tuple[str, str], Any]:
    (c,) = report.comparisons
    return {(d.strategy, d.scenario): d for d in c.differences if d.metric == metric}


# ------------------------------------------------------------------ not comparable


def test_a_higher_offered_rate_makes_every_difference_not_comparable() -> None:
    faster = {cell: 1.05 * v for cell, v in BASE.items()}  # +5 %, far beyond the noise
    same_rate = compare_sides(
        [side("a", BASE, live_manifest("a")), side("b", faster, live_manifest("b"))]
    )
    assert {d.verdict for d in rows(same_rate).values()} == {"better"}

    report = compare_sides(
        [side("a", BASE, live_manifest("a")), side("b", faster, live_manifest("b", 8400.0))]
    )
    for d in report.comparisons[0].differences:
        assert d.verdict == "not comparable" and not d.significant, d
        assert d.not_comparable == ("offered rate 8000 vs 8400",)
    (c,) = report.comparisons
    assert headline(c).startswith("b vs a: not comparable: offered rate 8000 vs 8400")
    assert "better" not in headline(c).replace("better or worse", "")
    assert c.count("better") == 0 and c.agreement.cells == 0
    assert c.agreement.not_comparable == len(BASE)
    out = terminal(report)
    assert "not comparable: offered rate 8000 vs 8400" in out
    assert "better" not in out.replace("better or worse", "")
    page = render_html(report)
    assert "not comparable: offered rate 8000 vs 8400" in page
    assert "better (significant)" not in page


def test_capacity_and_options_make_only_their_cells_not_comparable() -> None:
    faster = {cell: 1.05 * v for cell, v in BASE.items()}
    scaled = live_manifest("b")
    scaled["testbed"]["cpu_layout"]["quotas"] = {"s1": 0.167, "s2": 0.167, "s3": 0.667}
    report = compare_sides([side("a", BASE, live_manifest("a")), side("b", faster, scaled)])
    assert {d.not_comparable for d in rows(report).values()} == {
        ("server CPU quotas as run s1 0.25, s2 0.25, s3 1 vs s1 0.167, s2 0.167, s3 0.667",)
    }

    tuned = live_manifest("b", strategy_options={"wrr": {"smooth": "false"}})
    report = compare_sides([side("a", BASE, live_manifest("a")), side("b", faster, tuned)])
    verdicts = {cell: d.verdict for cell, d in rows(report).items()}
    assert verdicts == {cell: "not comparable" if cell[0] == "wrr" else "better" for cell in BASE}
    assert rows(report)[("wrr", "sp+sr")].not_comparable == (
        "strategy options defaults vs smooth=false",
    )
    (c,) = report.comparisons
    assert [ch.key for ch in c.conditions] == ["strategy options (wrr)"]
    assert c.agreement.cells == 4 and c.agreement.not_comparable == 2


def test_a_longer_phase_or_more_users_is_not_comparable() -> None:
    closed = {"model": "closed", "users": 10, "think_time": [0, 0], "spawn_rate": 10}
    a = live_manifest("a", load=closed)
    b = live_manifest("b", load={**closed, "users": 12})
    for p in b["phases"]:
        p["duration_s"] = 20.0
    report = compare_sides([side("a", BASE, a), side("b", BASE, b)])
    assert set(rows(report)[("r", "sp+sr")].not_comparable) == {
        "users 10 vs 12",
        "phase length 10 s vs 20 s",
    }


# ------------------------------------------------------------------ what changed


def test_nothing_differs_is_the_only_case_that_says_the_same() -> None:
    same = compare_sides([side("a", BASE, live_manifest("a")), side("b", BASE, live_manifest("b"))])
    (c,) = same.comparisons
    assert "are the same" in what_changed(c)


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (lambda m: m["config"]["run"].update(seed=2), "run.seed"),  # a config key only
        (lambda m: m["config"]["load"].update(rate=8400.0), "offered rate (every cell)"),
        (lambda m: m.update(host={"hostname": "elsewhere"}), "host"),  # a fact
        (lambda m: m.update(simulated=True), "kind"),  # a live run against a simulated one
    ],
)
def test_the_sentence_never_says_the_same_when_anything_differs(change: Any, key: str) -> None:
    b = live_manifest("b")
    change(b)
    report = compare_sides([side("a", BASE, live_manifest("a")), side("b", BASE, b)])
    (c,) = report.comparisons
    listed = [ch.key for ch in [*c.facts, *c.conditions, *c.config]]
    assert key in listed
    sentence = what_changed(c)
    assert "the same" not in sentence and key in sentence, sentence
    page, out = render_html(report), terminal(report)
    assert "the same" not in page and "the same" not in out
    assert key in out


# ------------------------------------------------------------------ checks beside


def test_a_failed_check_stands_beside_its_difference() -> None:
    faster = {cell: 1.05 * v for cell, v in BASE.items()}
    b = live_manifest("b")
    b["phases"][0] = phase("sp+sr", "r", 1, disturbance="fail", **{"steady state": "warn"})
    report = compare_sides([side("a", BASE, live_manifest("a")), side("b", faster, b)])
    d = rows(report)[("r", "sp+sr")]
    assert d.baseline_checks.level == "pass" and d.other_checks.level == "fail"
    assert d.other_checks.text() == ("fail in 1 of 4 phases: disturbance (and warn: steady state)")
    assert d.verdict == "better" and d.failed_check  # shown, not hidden: the reader judges
    (c,) = report.comparisons
    assert "(1 of the significant ones rest on phases that failed a check)" in headline(c)
    out = terminal(report)
    assert "b failed: disturbance" in out and "fail 1/4" in out
    page = render_html(report)
    assert "<td class='text fail'>fail in 1 of 4 phases: disturbance" in page
    assert "checks: a pass; b fail in 1 of 4 phases: disturbance" in page  # the sentence


# ------------------------------------------------------------------ agreement


def winners(cells: dict[str, tuple[str, list[str]]]) -> list[dict[str, Any]]:
    """``winners.json`` cells: scenario -> (verdict, strategies) on throughput."""
    return [
        {"scenario": c, "metric": "throughput_rps", "verdict": v, "strategies": s}
        for c, (v, s) in cells.items()
    ]


def test_agreement_on_runs_with_known_answers() -> None:
    # sp+sr: r +5 %, rr +12.5 %, wrr -20 %: the order holds. mp+mr: r 0 %, rr +50 %,
    # wrr -33 %: rr and wrr swap places.
    other = grid(105, 225, 240, 100, 300, 200)
    a = side(
        "a", BASE, live_manifest("a"),
        winners({"sp+sr": ("winner", ["wrr"]), "mp+mr": ("winner", ["wrr"])}),
    )  # fmt: skip
    b = side(
        "b", other, live_manifest("b"),
        winners({"sp+sr": ("tie", ["wrr", "rr"]), "mp+mr": ("winner", ["rr"])}),
    )  # fmt: skip
    (c,) = compare_sides([a, b]).comparisons
    g = c.agreement
    assert g.cells == 6 and g.not_comparable == 0
    assert dict(g.within) == {0.10: 2, 0.15: 3}
    taus = {r.scenario: r.tau for r in g.rankings}
    assert taus["sp+sr"] == pytest.approx(1.0) and taus["mp+mr"] == pytest.approx(1 / 3)
    assert {r.scenario: r.other for r in g.rankings}["mp+mr"] == ("rr", "wrr", "r")
    # Every throughput pair is resolved in both runs; only rr vs wrr on mp+mr reverses.
    assert len(g.resolved_by_both) == 6 and g.resolved_by_one == 0
    assert [(p.scenario, p.metric, p.a, p.b) for p in g.reversed] == [
        ("mp+mr", "throughput_rps", "rr", "wrr")
    ]
    # The winners are the files' (b's sp+sr "tie" is what its file says, not recomputed).
    calls = {w.scenario: (w.baseline, w.other, w.agree) for w in g.winners}
    assert calls == {
        "sp+sr": ("wrr wins", "tie: wrr, rr", "different"),
        "mp+mr": ("wrr wins", "rr wins", "different"),
    }
    text = "\n".join(
        [terminal(Report([a, b], ["throughput_rps"], [c])), render_html(Report([a, b], [], [c]))]
    )
    assert "within 10 %: 2 (33%), within 15 %: 3 (50%)" in text
    assert "reversed: 1" in text and "sp+sr +1.00 (3 strategies), mp+mr +0.33" in text


def test_without_winners_json_the_answer_is_computed_as_the_report_would() -> None:
    a = side("a", BASE, live_manifest("a"))
    assert a.winners_from.startswith("computed")
    top = {(w["scenario"], w["metric"]): w for w in a.winners}
    assert top[("sp+sr", "throughput_rps")]["verdict"] == "winner"
    assert top[("sp+sr", "throughput_rps")]["strategies"] == ["wrr"]


def test_a_failed_phase_is_left_out_of_the_pairs_as_in_the_answer() -> None:
    # One block of b's rr x mp+mr failed a check; the pairs count 3 blocks for rr there.
    b = live_manifest("b")
    b["phases"][SCENARIOS.index("mp+mr") * 3 * BLOCKS + BLOCKS] = phase(
        "mp+mr", "rr", 1, disturbance="fail"
    )
    (c,) = compare_sides([side("a", BASE, live_manifest("a")), side("b", BASE, b)]).comparisons
    calls = {(p.scenario, p.a, p.b): p for p in c.agreement.resolved_by_both}
    assert "over 3 blocks" in calls[("mp+mr", "r", "rr")].other
    assert "over 4 blocks" in calls[("mp+mr", "r", "rr")].baseline


# ------------------------------------------------------------------ on disk


def test_two_synthetic_runs_on_disk(tmp_path: Path) -> None:
    """The whole path: folders, manifests, the terminal and the page."""
    runs = []
    for name, rate in (("before", 8000.0), ("after", 8400.0)):
        run = write_synthetic_run(
            tmp_path / name, strategies=("rr", "wrr"), scenarios=("sp+sr",), replications=2,
            rows_per_unit=100,
        )  # fmt: skip
        manifest = json.loads((run / "manifest.json").read_text())
        live = live_manifest(name, rate)
        live["phases"] = [phase("sp+sr", s, k) for s in ("rr", "wrr") for k in (1, 2)]
        live["phases"][0] = phase("sp+sr", "rr", 1, disturbance="fail")
        manifest.update(copy.deepcopy(live))
        (run / "manifest.json").write_text(json.dumps(manifest))
        runs.append(run)
    report = compare(runs)
    (c,) = report.comparisons
    assert all(d.verdict == "not comparable" for d in c.differences)
    assert all(math.isfinite(d.baseline) for d in c.differences if d.metric == "throughput_rps")
    out = terminal(report)
    assert "not comparable: offered rate 8000 vs 8400" in out
    assert "failed: disturbance (both)" in out
    assert "the same" not in what_changed(c)
    assert np.isclose(c.agreement.cells, 0)


def test_a_tie_is_the_same_whatever_order_its_strategies_come_in() -> None:
    tie = {"sp+sr": ("tie", ["wrr", "rr"]), "mp+mr": ("unresolved", ["wrr"])}
    a = side("a", BASE, live_manifest("a"), winners(tie))
    b = side("b", BASE, live_manifest("b"), winners({**tie, "sp+sr": ("tie", ["rr", "wrr"])}))
    (c,) = compare_sides([a, b]).comparisons
    assert {w.scenario: w.agree for w in c.agreement.winners} == {
        "sp+sr": "same",
        "mp+mr": "not settled in both",
    }
