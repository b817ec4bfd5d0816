"""Small versions of the three reproductions: do the published findings hold in direction?"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from lblab.cli import app
from simulator.reproduce import cheetah, martins
from simulator.reproduce.ingram import DETERMINISTIC, reproduce_ingram, run_one
from simulator.service import LogNormal


@pytest.fixture(scope="module")
def ingram_rows():
    rows = reproduce_ingram(requests=(10, 100, 500), seeds=3)
    return {(r.algorithm, r.requests): r for r in rows}


@pytest.mark.parametrize("algorithm", DETERMINISTIC)
@pytest.mark.parametrize("requests", [10, 100, 500])
def test_ingram_deterministic_rows_are_within_3_percent(ingram_rows, algorithm, requests):
    row = ingram_rows[(algorithm, requests)]
    assert abs(row.total_diff_pct) <= 3.0
    assert abs(row.average_diff_pct) <= 3.0


@pytest.mark.parametrize("algorithm", ["dynamic-immediate", "dynamic-hybrid"])
@pytest.mark.parametrize("requests", [10, 100, 500])
def test_ingram_pushed_estimates_are_within_10_percent(ingram_rows, algorithm, requests):
    row = ingram_rows[(algorithm, requests)]
    assert abs(row.total_diff_pct) <= 10.0
    assert abs(row.average_diff_pct) <= 10.0


def test_ingram_as_coded_dynamic_lands_between_lc_and_rr_at_500(ingram_rows):
    # The report: smallestQueue 42.9 s < dynamic 65.5 s < sequential 70.2 s. Herding
    # makes single runs spread over 64-84 s: the median of 20 is the figure.
    (dyn,) = reproduce_ingram(requests=(500,), algorithms=("dynamic",), seeds=20)
    assert abs(dyn.total_diff_pct) <= 10.0
    assert ingram_rows[("lc", 500)].total_ms < dyn.total_ms < ingram_rows[("rr", 500)].total_ms
    # At 10 requests it sends all ten to the first server, like noBalancing.
    assert ingram_rows[("dynamic", 10)].total_ms == pytest.approx(
        ingram_rows[("first", 10)].total_ms, rel=0.005
    )


def test_ingram_ranks_as_published_where_the_gaps_exceed_the_spread(ingram_rows):
    for n in (10, 100, 500):
        rank = {a: ingram_rows[(a, n)].rank for a in ("first", "rr", "lc", "dynamic-immediate")}
        paper = {a: ingram_rows[(a, n)].paper_rank for a in rank}
        assert sorted(rank, key=rank.__getitem__) == sorted(paper, key=paper.__getitem__)
        best = {a for a in ingram_rows if a[1] == n and ingram_rows[a].rank <= 2}
        assert best == {("dynamic-immediate", n), ("dynamic-hybrid", n)}
    hybrid, immediate = (
        ingram_rows[("dynamic-hybrid", 100)],
        ingram_rows[("dynamic-immediate", 100)],
    )
    assert hybrid.total_ms < immediate.total_ms and hybrid.average_ms < immediate.average_ms


def test_ingram_string_comparison_is_what_slows_dynamic():
    # lblab's own dynamic compares numbers: in the same testbed it beats smallestQueue.
    numeric, _ = run_one("dynamic", 500, seed=1, as_coded=False)
    as_coded, _ = run_one("dynamic", 500, seed=1)
    lc, _ = run_one("lc", 500, seed=1)
    assert numeric < lc < as_coded


def test_cheetah_imbalance_p2c_far_below_rr_and_hash():
    rows = {
        r.strategy: r
        for r in cheetah.imbalance_study(
            servers=60, actives=[2400], duration=LogNormal(1.0, 1.0), seed=2
        )
    }
    hashed, rr, p2c, ll = (rows[s].excess_pct for s in ("maglev", "rr", "p2c", "lc"))
    assert p2c < rr / 2 and p2c < hashed / 3
    assert ll < p2c
    assert rr < hashed  # RR beats a uniform hash (paper: 1.2x)


def test_cheetah_consistent_hashing_breaks_fewer_connections():
    plan = cheetah.ScalingPlan(
        start_servers=10, add=3, drain=3, seconds=10.0, rate_low=300.0, rate_high=500.0
    )
    rows = {r.strategy: r for r in cheetah.broken_study(plan=plan, duration=LogNormal(0.3, 1.0))}
    assert rows["pinned"].broken == 0 and rows["pinned"].connections > 3000
    assert rows["ring-hash"].broken < rows["ip-hash"].broken / 2
    assert rows["maglev"].broken < rows["ip-hash"].broken / 2
    assert rows["ip-hash"].broken_pct > 1.0


def test_martins_lc_and_lrt_beat_rr_under_heterogeneity_at_high_rate():
    points = {
        (r.algorithm, r.heterogeneous): r.mean_service_ms
        for r in (
            martins.martins_point(algo, 150, het, seconds=8.0, seeds=1)
            for algo in ("rr", "lc", "lrt")
            for het in (False, True)
        )
    }
    assert points[("lc", True)] < points[("rr", True)] / 2
    assert points[("lrt", True)] < points[("rr", True)] / 2
    # Homogeneous nodes: the three stay alike.
    hom = [points[(a, False)] for a in ("rr", "lc", "lrt")]
    assert max(hom) < 1.3 * min(hom)


def test_reproduce_ingram_command_prints_json_rows():
    result = CliRunner().invoke(
        app,
        ["reproduce", "ingram", "--requests", "10", "--algorithms", "first,lc", "--format", "json"],
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [r["algorithm"] for r in rows] == ["first", "lc"]
    assert {
        "algorithm",
        "requests",
        "total_ms",
        "average_ms",
        "paper_total_ms",
        "paper_average_ms",
    } <= set(rows[0])


def test_reproduce_martins_command_writes_a_chart(tmp_path):
    result = CliRunner().invoke(
        app,
        [
            "reproduce",
            "martins",
            "--rates",
            "50",
            "--seconds",
            "2",
            "--seeds",
            "1",
            "--out",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 0, result.output
    assert (tmp_path / "martins.png").stat().st_size > 10_000
    assert len(json.loads((tmp_path / "martins.json").read_text())) == 6


def test_simulate_command_writes_a_results_dir(tmp_path):
    out = tmp_path / "run1"
    result = CliRunner().invoke(
        app,
        [
            "simulate",
            "--strategy",
            "p2c",
            "--strategy",
            "lc",
            "--servers",
            "5",
            "--requests",
            "2000",
            "--rate",
            "800",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["simulated"] is True and manifest["strategies"] == ["lc", "p2c"]
    assert (out / "requests.parquet").exists()
