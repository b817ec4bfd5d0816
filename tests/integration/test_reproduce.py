"""Small versions of the three reproductions: do the published findings hold in direction?"""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from lblab.balancer.strategies.base import RequestView
from lblab.cli import app
from lblab.errors import ConfigError
from lblab.simulator.reproduce import cheetah, martins
from lblab.simulator.reproduce.ingram import DETERMINISTIC, reproduce_ingram, run_one
from lblab.simulator.service import LogNormal


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
    rows = json.loads(result.output)["tables"]["ingram"]
    assert [r["algorithm"] for r in rows] == ["first", "lc"]
    assert {
        "algorithm",
        "requests",
        "total_ms",
        "average_ms",
        "paper_total_ms",
        "paper_average_ms",
    } <= set(rows[0])


def test_reproduce_ingram_lblab_strategies_flag_runs_the_numeric_dynamic():
    def dynamic_total(*flags: str) -> float:
        args = ["reproduce", "ingram", "--requests", "500", "--algorithms", "dynamic"]
        result = CliRunner().invoke(app, [*args, "--seeds", "1", "--format", "json", *flags])
        assert result.exit_code == 0, result.output
        (row,) = json.loads(result.output)["tables"]["ingram"]
        assert row["rank"] == row["paper_rank"] == 1  # ranked among the algorithms run
        return row["total_ms"]

    # the report's string comparison herds far longer than lblab's numeric one
    assert dynamic_total("--lblab-strategies") < dynamic_total() / 1.5


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
            "--no-report",
        ],
    )
    assert result.exit_code == 0, result.output
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["simulated"] is True
    assert manifest["config"]["run"]["strategies"] == ["p2c", "lc"]
    assert (out / "requests.parquet").exists()


# ---- Cheetah Fig. 8 (AWRR vs Pow2 vs least loaded) and the study engine ------------------


@pytest.fixture(scope="module")
def cheetah_fig8_rows():
    from lblab.simulator.reproduce.cheetah_awrr import awrr_point

    names = ("r", "awrr", "pow2-cpu", "ll-cpu")
    return {name: awrr_point(name, servers=64, load=0.6, seconds=10.0, runs=1) for name in names}


def test_cheetah_awrr_and_pow2_beat_the_hash_and_least_loaded_as_published(cheetah_fig8_rows):
    # Fig. 8, 64 servers: AWRR and Pow2 cut the p99 FCT of a uniform hash (paper: 2.2x,
    # 1.9x), AWRR at least as well as Pow2; least loaded on 10 ms-old CPU reports herds.
    p99 = {name: row.p99_ms for name, row in cheetah_fig8_rows.items()}
    assert p99["awrr"] < p99["r"] / 1.3
    assert p99["pow2-cpu"] < p99["r"] / 1.3
    assert p99["awrr"] <= 1.05 * p99["pow2-cpu"]
    assert p99["ll-cpu"] > max(p99["awrr"], p99["pow2-cpu"])
    assert all(
        row.requests == cheetah_fig8_rows["r"].requests for row in cheetah_fig8_rows.values()
    )


def test_cheetah_awrr_comparison_runs_the_papers_awrr():
    from lblab.simulator.reproduce.cheetah_awrr import _strategy, awrr_config

    strategy = _strategy("awrr", awrr_config("awrr", 4, 0.6, 1.0, seed=1))
    assert strategy.config.a == 0.5  # type: ignore[attr-defined]


def test_cheetah_vectorised_rr_is_the_registry_rr():
    sim = cheetah.ConnectionPool("rr", 7, seed=1)
    for i in range(20):
        sim.connect(RequestView(request_id=i), 0.0, 1.0)
    picked = [int(view.id[1:]) - 1 for _, view in sim.open.values()]
    assert picked == cheetah.stateless_servers("rr", 7, 20, seed=1).tolist()


def test_cheetah_stationary_start_holds_the_active_count():
    rng = np.random.default_rng(5)
    duration = LogNormal(1.0, 1.0)
    _, remaining = cheetah.stationary_start(20_000, duration, rng)
    assert abs(len(remaining) - 20_000) < 600  # Poisson(20000): sd 141
    # Equilibrium residuals of a lognormal(mean 1, sigma 1): mean E[D^2] / 2E[D] = e / 2.
    assert remaining.mean() == pytest.approx(np.e / 2, rel=0.05)


def test_reproduce_cheetah_command_writes_the_awrr_table_and_chart(tmp_path):
    result = CliRunner().invoke(
        app,
        ["reproduce", "cheetah", "--study", "awrr", "--awrr-servers", "8", "--runs", "1",
         "--jobs", "1", "--format", "json", "--out", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    rows = data["tables"]["awrr"]
    assert [r["strategy"] for r in rows] == ["r", "rr", "awrr", "pow2-cpu", "ll-cpu", "p2c", "lc"]
    assert rows[0]["better_than_hash_x"] == 1.0 and rows[2]["paper_x"] == 2.2
    assert (tmp_path / "awrr.png").stat().st_size > 10_000
    assert json.loads((tmp_path / "awrr.json").read_text()) == rows
    # Fig. 8's claims are at 64 servers: with 8 each says what it lacks.
    assert {c["verdict"] for c in data["claims"]} == {"n/a"}
    assert all("at 64 servers" in c["why"] for c in data["claims"])


def test_reproduce_cheetah_rejects_an_unknown_study():
    result = CliRunner().invoke(app, ["reproduce", "cheetah", "--study", "fig8"])
    assert isinstance(result.exception, ConfigError)  # main() prints it as one line, exit 2
    assert "not among imbalance, broken, awrr" in str(result.exception)


# ---- Martins per-node counts and service-time distributions (Fig. 13/14/16/17) --------


def test_martins_node_counts_sum_to_the_requests_and_favour_fast_nodes():
    rows = {
        algo: martins.martins_point(algo, 150, True, seconds=4.0, seeds=1) for algo in ("rr", "lc")
    }
    for row in rows.values():
        assert len(row.node_requests) == martins.NODES
        assert sum(row.node_requests) + row.unserved == row.requests == 600
        assert len(row.service_ms) == round(row.requests * row.ok_pct / 100)
    assert set(rows["rr"].node_requests) == {60}  # Fig. 16a: RR splits evenly
    lc = rows["lc"].node_requests
    assert min(lc[:3]) > max(lc[3:6]) > 0 and min(lc[3:6]) > max(lc[6:])  # Fig. 16b
    data = rows["lc"].as_dict()
    assert sum(data["service_histogram"]["counts"]) == len(rows["lc"].service_ms)
    quantiles = data["service_ms_quantiles"]
    assert quantiles["p10"] <= quantiles["p50"] <= quantiles["p90"] <= quantiles["max"]


def test_reproduce_martins_command_writes_node_and_service_charts(tmp_path):
    result = CliRunner().invoke(
        app,
        ["reproduce", "martins", "--rates", "150", "--algorithms", "rr", "--seconds", "2",
         "--seeds", "1", "--format", "json", "--out", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["tables"]["martins"]
    assert [sum(r["node_requests"]) + r["unserved"] for r in rows] == [300, 300]
    for chart in ("martins-nodes.png", "martins-service.png"):
        assert (tmp_path / chart).stat().st_size > 10_000


@pytest.fixture(scope="module")
def linkerd_rows():
    from lblab.simulator.reproduce.linkerd import reproduce_linkerd

    # CI size: 10 s at 500 req/s, the slow window scaled to 2.5-7.5 s.
    rows = reproduce_linkerd(seconds=10.0, rate=500.0)
    return {(r.strategy, r.mode): r for r in rows}


def test_linkerd_post_model_keeps_the_published_order_and_figures(linkerd_rows):
    rr, lc, ewma = (linkerd_rows[(s, "post")] for s in ("rr", "lc", "peak-ewma"))
    # The post: about 95 %, 99 % and 99.9 % success with a 1 s caller timeout.
    assert rr.ok_pct < lc.ok_pct < ewma.ok_pct
    assert 94.5 <= rr.ok_pct <= 96.5  # 1/11 of the requests for half the run
    assert lc.ok_pct >= 98.5 and ewma.ok_pct >= 99.5
    p95, p99 = 1, 2  # indices into PERCENTILES
    assert rr.percentiles_ms[p95] < 1000 <= rr.percentiles_ms[p99]  # slow above p95
    assert lc.percentiles_ms[p99] < 1000 and ewma.percentiles_ms[p99] < 1000
    assert rr.slow_requests > 4 * lc.slow_requests > 4 * ewma.slow_requests


def test_linkerd_slow_window_holds_only_its_backend_at_2_s():
    from lblab.simulator.reproduce.linkerd import linkerd_run

    row = linkerd_run("rr", "post", 4.0, 550.0, 1)
    slow = row.latency_ms[row.latency_ms > 1000.0]
    assert len(slow) == row.slow_requests > 0
    assert np.allclose(slow, 2000.0)
    assert np.median(row.latency_ms) == pytest.approx(167.0, abs=1.0)


def test_linkerd_lblab_deadline_ejects_the_slow_backend(linkerd_rows):
    # lblab's 1 s deadline counts timeouts against the backend: passive ejection
    # takes it out of rotation, which is what lifts rr far above the post's 95 %.
    post, lblab = linkerd_rows[("rr", "post")], linkerd_rows[("rr", "lblab")]
    assert lblab.ejections >= 1 and post.ejections == 0
    assert lblab.ok_pct > post.ok_pct + 1.0
    assert lblab.percentiles_ms[-1] <= 1000.0 + 1e-6  # nothing outlives the deadline


def test_reproduce_linkerd_command_prints_json_and_writes_a_chart(tmp_path):
    result = CliRunner().invoke(
        app,
        ["reproduce", "linkerd", "--seconds", "4", "--rate", "300", "--model", "post",
         "--strategies", "rr,peak-ewma", "--jobs", "1", "--format", "json", "--out",
         str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["tables"]["linkerd"]
    assert [(r["strategy"], r["model"]) for r in rows] == [("rr", "post"), ("peak-ewma", "post")]
    assert {"ok_pct", "p50_ms", "p95_ms", "p99_ms", "p99.9_ms", "paper_ok_pct"} <= set(rows[0])
    assert (tmp_path / "linkerd.png").stat().st_size > 10_000
    bad = CliRunner().invoke(app, ["reproduce", "linkerd", "--strategies", "nope"])
    assert isinstance(bad.exception, ConfigError)  # main() prints it as one line, exit 2
    assert "unknown strategy 'nope'" in str(bad.exception)
    for flag, value, message in (
        ("--format", "csv", "is not one of table, json, markdown"),
        ("--model", "finagle", "not among post, lblab"),
    ):
        bad = CliRunner().invoke(app, ["reproduce", "linkerd", flag, value])
        assert isinstance(bad.exception, ConfigError) and message in str(bad.exception)


# ---- Prequal (NSDI 2024) and the production strategies' table ---------------------------


@pytest.fixture(scope="module")
def prequal_claims(tmp_path_factory):
    # CI size: 14 s of arrivals, the first 12 s warm-up (wrr-orca's 10 s blackout), 3 seeds.
    out = tmp_path_factory.mktemp("prequal")
    result = CliRunner().invoke(
        app,
        ["reproduce", "prequal", "--seconds", "14", "--seeds", "3", "--format", "json", "--out",
         str(out)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert json.loads((out / "prequal.json").read_text()) == data
    assert json.loads((out / "prequal-claims.json").read_text())["claims"] == data["claims"]
    return data


def test_prequal_keeps_the_tail_latency_and_rif_below_wrr_orca_and_p2c(prequal_claims):
    runs = {r["strategy"]: r for r in prequal_claims["tables"]["runs"]}
    prequal = runs["prequal r_probe=3"]
    assert prequal["probes_per_query"] == pytest.approx(3.0, abs=0.01)
    for rival in ("wrr-orca", "wrr-orca blackout_period=0", "p2c"):
        assert runs[rival]["probes_per_query"] == 0
        for figure in ("p99_ms", "p99.9_ms", "rif_p99"):
            assert prequal[figure] < runs[rival][figure], (rival, figure)
    claims = _judged(prequal_claims, "prequal", 3)
    assert [c["verdict"] for c in claims.values()] == ["holds"] * 4
    assert len(prequal_claims["not_modelled"]) >= 4


def test_prequal_tail_rises_sharply_at_one_probe_per_query_or_fewer(prequal_claims):
    runs = {r["strategy"]: r for r in prequal_claims["tables"]["runs"]}
    p99 = {r: runs[f"prequal r_probe={r}"]["p99_ms"] for r in ("3", "1", "0.5", "0.25")}
    assert all(p99[r] >= 2 * p99["3"] for r in ("1", "0.5", "0.25"))
    probes = {r: runs[f"prequal r_probe={r}"]["probes_per_query"] for r in p99}
    assert probes == pytest.approx({"3": 3.0, "1": 1.0, "0.5": 0.5, "0.25": 0.25}, abs=0.01)
    assert {r["seeds"] for r in runs.values()} == {3}


def test_prequal_claim_with_its_bound_flipped_does_not_hold():
    from dataclasses import replace

    from lblab.simulator.reproduce import prequal as pq

    setting = replace(pq.CLAIMS, seconds=14.0)
    rows = pq.reproduce_claims(setting, seeds=(1, 2))
    rise = pq.CLAIMS_JUDGED[3]
    kept, flipped = pq.judge_claims(rows, [rise, replace(rise, op="<=")])
    assert kept.verdict == "holds" and flipped.verdict == "does not hold"
    assert kept.ci.n == 2 and kept.ci.lo >= 2.0
    (missing,) = pq.judge_claims([r for r in rows if r.strategy != "p2c"], [pq.CLAIMS_JUDGED[0]])
    assert missing.verdict == "n/a" and "p2c in the claims study" in missing.why


def test_prequal_table_counts_failures_at_their_latency_and_splits_the_balancers():
    from dataclasses import replace

    from lblab.simulator.reproduce.prequal import TABLE, reproduce_table, strategies_table

    rows = reproduce_table(replace(TABLE, seconds=14.0), strategies=(("rr", ()), ("prequal", ())))
    assert {(r.strategy, r.balancers) for r in rows} == {
        (s, k) for s in ("rr", "prequal") for k in (1, 8)
    }
    table = {r["strategy"]: r for r in strategies_table(rows)}
    # rr sends 1/16 of the load to each server, 12x what a slow one serves: its
    # requests there wait, then time out at 30 s, and count at their latency.
    for k in (1, 8):
        assert table["rr"][f"p99_ms_k{k}"] > 10 * table["prequal"][f"p99_ms_k{k}"]


def test_reproduce_prequal_refuses_bad_options_in_one_line():
    for flag, value, message in (
        ("--study", "fig9", "not among claims, table"),
        ("--seconds", "5", "--seconds: 5.0 must be 14 or more"),
        ("--format", "csv", "is not one of table, json, markdown"),
    ):
        bad = CliRunner().invoke(app, ["reproduce", "prequal", flag, value])
        assert isinstance(bad.exception, ConfigError), (flag, bad.output)
        assert message in str(bad.exception)


# ---- Every reproduction judges its paper's claims over seeds, with an interval ----------

VERDICTS = {"holds", "does not hold", "inconclusive"}


def _judged(data: dict, reproduction: str, seeds: int) -> dict[str, dict]:
    """The claims of a reproduction's JSON, each checked to carry a verdict and an interval."""
    assert data["reproduction"] == reproduction and len(data["seeds"]) == seeds
    claims = {c["id"]: c for c in data["claims"]}
    assert claims and len(claims) == len(data["claims"])
    for c in claims.values():
        assert c["verdict"] in VERDICTS, c
        assert c["seeds"] == len(c["values"]) == seeds, c
        assert c["lo"] <= c["figure"] <= c["hi"], c
        assert c["holds_if"] and c["threshold_basis"] and c["source"], c
        if c["verdict"] == "holds":
            assert (c["lo"] >= c["threshold"]) if c["op"] == ">=" else (c["hi"] <= c["threshold"])
    return claims


def test_reproduce_ingram_judges_the_reports_claims_over_seeds(tmp_path):
    result = CliRunner().invoke(
        app,
        ["reproduce", "ingram", "--requests", "100,500", "--seeds", "3", "--format", "json",
         "--out", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    claims = _judged(data, "ingram", 3)
    for sure in ("rr-vs-first-500", "lc-vs-rr-500", "dynamic-immediate-vs-lc-500",
                 "dynamic-hybrid-vs-lc-500"):  # fmt: skip
        assert claims[sure]["verdict"] == "holds"
    written = json.loads((tmp_path / "ingram-claims.json").read_text())
    assert written["claims"] == data["claims"]
    page = (tmp_path / "ingram-claims.md").read_text()
    assert "| claim | source | figure | 95 % interval |" in page and "holds" in page


def test_ingram_claim_with_its_bound_flipped_does_not_hold(ingram_rows):
    from dataclasses import replace

    from lblab.simulator.reproduce.ingram import CLAIMS, judge_claims

    claim = next(c for c in CLAIMS if c.id == "lc-vs-rr-500")
    (kept,) = judge_claims(list(ingram_rows.values()), [claim])
    (flipped,) = judge_claims(list(ingram_rows.values()), [replace(claim, op=">=")])
    assert kept.verdict == "holds" and flipped.verdict == "does not hold"
    assert "wholly on the other side of" in flipped.why and flipped.ci.n == 3
    (missing,) = judge_claims([r for r in ingram_rows.values() if r.algorithm != "lc"], [claim])
    assert missing.verdict == "n/a" and "lc at 500 requests" in missing.why


def test_reproduce_martins_judges_the_papers_claims_over_seeds(tmp_path):
    result = CliRunner().invoke(
        app,
        ["reproduce", "martins", "--rates", "50,150", "--seconds", "4", "--seeds", "3",
         "--format", "json", "--out", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    claims = _judged(json.loads(result.output), "martins", 3)
    assert set(claims) == {"het-lc-beats-rr", "het-lrt-beats-rr", "hom-alike-low-rates",
                           "hom-lc-beats-lrt-high-rates", "het-fast-nodes-most"}  # fmt: skip
    for sure in ("het-lc-beats-rr", "het-lrt-beats-rr", "het-fast-nodes-most"):
        assert claims[sure]["verdict"] == "holds", claims[sure]
    assert (tmp_path / "martins-claims.md").read_text().count("\n| ") == 6  # head and 5 rows


def test_martins_claim_with_its_bound_flipped_does_not_hold():
    from dataclasses import replace

    rows = martins.reproduce_martins(rates=(150,), algorithms=("rr", "lc"), seconds=4.0, seeds=3)
    claim = next(c for c in martins.CLAIMS if c.id == "het-lc-beats-rr")
    kept, flipped, alike = martins.judge_claims(
        rows, [claim, replace(claim, op=">="), martins.CLAIMS[2]]
    )
    assert kept.verdict == "holds" and flipped.verdict == "does not hold"
    assert alike.verdict == "n/a" and "lrt" in alike.why  # lrt was not run


def test_reproduce_linkerd_judges_the_posts_claims_over_seeds(tmp_path):
    result = CliRunner().invoke(
        app,
        ["reproduce", "linkerd", "--seconds", "10", "--rate", "500", "--model", "post",
         "--seeds", "3", "--jobs", "1", "--format", "json", "--out", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    claims = _judged(data, "linkerd", 3)
    assert data["seeds"] == [1, 2, 3]
    for sure in ("rr-p95-fast", "rr-p99-slow", "lc-p99-fast", "lc-succeeds-more-than-rr"):
        assert claims[sure]["verdict"] == "holds", claims[sure]
    (row,) = [r for r in data["tables"]["linkerd"] if r["strategy"] == "rr"]
    assert row["seeds"] == 3 and row["requests"] == 3 * 5000  # the table pools the seeds
    assert json.loads((tmp_path / "linkerd-claims.json").read_text())["claims"] == data["claims"]


def test_linkerd_claim_with_its_bound_flipped_does_not_hold():
    from dataclasses import replace

    from lblab.simulator.reproduce.linkerd import CLAIMS, judge_claims, reproduce_linkerd

    runs = reproduce_linkerd(("rr", "lc"), ("post",), 10.0, 500.0, seeds=(1, 2, 3))
    claim = next(c for c in CLAIMS if c.id == "lc-succeeds-more-than-rr")
    kept, flipped, ewma = judge_claims(runs, [claim, replace(claim, op="<="), CLAIMS[3]])
    assert kept.verdict == "holds" and flipped.verdict == "does not hold"
    assert ewma.verdict == "n/a" and "peak-ewma in the post's model" in ewma.why


def test_reproduce_cheetah_judges_the_papers_claims_over_seeds(tmp_path):
    result = CliRunner().invoke(
        app,
        ["reproduce", "cheetah", "--study", "imbalance,broken", "--servers", "60", "--active",
         "2400", "--seeds", "3", "--jobs", "1", "--format", "json", "--out", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    claims = _judged(data, "cheetah", 3)
    assert set(claims) == {"rr-imbalance-vs-hash", "p2c-imbalance-vs-hash",
                           "lc-imbalance-vs-hash", "hashing-breaks-connections",
                           "ring-hash-breaks-fewer", "pinned-breaks-none"}  # fmt: skip
    # At 40 connections a server P2C's and least loaded's factors are smaller than at the
    # paper's 100+ (4.5-6.7x and 15-25x here against the bounds 5.5 and 20.5): not asserted.
    for sure in ("rr-imbalance-vs-hash", "hashing-breaks-connections", "ring-hash-breaks-fewer",
                 "pinned-breaks-none"):  # fmt: skip
        assert claims[sure]["verdict"] == "holds", claims[sure]
    assert claims["pinned-breaks-none"]["values"] == [0.0, 0.0, 0.0]
    assert [r["seed"] for r in data["tables"]["broken"]] == [1, 2, 3] * 4
    assert (tmp_path / "cheetah-claims.md").exists()


def test_cheetah_claims_with_their_bounds_flipped_do_not_hold():
    from dataclasses import replace

    from lblab.simulator.reproduce import cheetah_awrr

    rows = [cheetah_awrr.awrr_point(name, 64, 0.6, seconds=10.0, runs=3)
            for name in ("awrr", "pow2-cpu", "ll-cpu")]  # fmt: skip
    claim = next(c for c in cheetah_awrr.CLAIMS if c.id == "ll-cpu-worst")
    kept, flipped = cheetah_awrr.judge_claims(rows, [claim, replace(claim, op="<=")])
    assert kept.verdict == "holds" and flipped.verdict == "does not hold"
    plan = cheetah.ScalingPlan(
        start_servers=10, add=3, drain=3, seconds=10.0, rate_low=300.0, rate_high=500.0
    )
    broken = [cheetah.broken_run("pinned", plan, LogNormal(0.3, 1.0), seed) for seed in (1, 2)]
    none = next(c for c in cheetah.BROKEN_CLAIMS if c.id == "pinned-breaks-none")
    some = replace(none, op=">=", threshold=1.0)  # "breaks at least 1 %"
    kept, flipped = cheetah.judge_claims([], broken, [none, some])
    assert kept.verdict == "holds" and flipped.verdict == "does not hold"


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("ingram", ["--requests", "100,500", "--seeds", "3"]),
        ("cheetah", ["--study", "imbalance", "--servers", "60", "--active", "2400", "--seeds",
                     "3", "--jobs", "1"]),
        ("martins", ["--rates", "50,150", "--seconds", "2", "--seeds", "3"]),
        ("linkerd", ["--seconds", "4", "--rate", "300", "--seeds", "3", "--jobs", "1"]),
        ("prequal", ["--seconds", "14", "--seeds", "2", "--jobs", "1"]),
    ],
)  # fmt: skip
@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_every_reproduction_prints_a_verdict_and_interval_per_claim(tmp_path, name, args, fmt):
    result = CliRunner().invoke(
        app, ["reproduce", name, *args, "--format", fmt, "--out", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    seeds = args[args.index("--seeds") + 1]
    assert f"claims over {seeds} seeds" in result.output
    written = json.loads((tmp_path / f"{name}-claims.json").read_text())
    claims = _judged(written, name, int(seeds))
    # the printed table has the claims' columns, and each claim's interval as lo .. hi
    for column in ("95 % interval", "holds if", "verdict"):
        assert column in result.output
    for c in claims.values():
        assert c["claim"][:30] in result.output and c["verdict"] in result.output
    assert result.output.count(" .. ") >= len(claims)  # "lo .. hi", one a claim
