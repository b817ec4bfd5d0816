"""``lblab compare``: significance and direction on synthetic runs, one replication, live vs
simulated and a run vs its twin, bad input, and the page in headless Chromium."""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lblab.analysis.compare import compare, default_out, verdict_of, write_report
from lblab.analysis.stats import welch_diff
from lblab.analysis.synthetic import write_synthetic_run
from lblab.errors import ConfigError
from lblab.simulator.twin import make_twin
from tests.integration.test_report import probe_page
from tests.run_fixture import run_lblab

pytestmark = pytest.mark.slow

STRATEGIES = ("rr", "lc", "wrr")
SCENARIOS = ("sp+sr", "mp+mr")
SLOWER = 3.0
"""Run "after" is run "before" with every latency of ``lc`` multiplied by this."""


def slow_down(run_dir: Path, strategy: str, factor: float) -> None:
    """Multiply the latency of one strategy's requests in place (the rest stays identical)."""
    path = run_dir / "requests.parquet"
    table = pq.read_table(path)
    latency = pc.if_else(
        pc.equal(table["strategy"], strategy),
        pc.multiply(table["latency_ms"], factor),
        table["latency_ms"],
    )
    pq.write_table(
        table.set_column(table.schema.get_field_index("latency_ms"), "latency_ms", latency), path
    )


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two runs of 3 replications; "after" has lc 3x slower, all else the same rows."""
    root = tmp_path_factory.mktemp("compare")
    runs = []
    for name in ("before", "after"):
        runs.append(
            write_synthetic_run(
                root / name,
                strategies=STRATEGIES,
                scenarios=SCENARIOS,
                replications=3,
                rows_per_unit=300,
                seed=5,
            )
        )
    slow_down(runs[1], "lc", SLOWER)
    return runs[0], runs[1]


def cli_compare(*args: str) -> Any:
    result = run_lblab(["compare", *args], timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def test_welch_interval_matches_a_hand_computation() -> None:
    # a: mean 2, var 1; b: mean 31/6, var 19/12; se^2 = 1/3 + 19/36 = 31/36
    d = welch_diff([1.0, 2.0, 3.0], [4.0, 5.0, 6.5])
    se2 = 31 / 36
    df = se2**2 / ((1 / 3) ** 2 / 2 + (19 / 36) ** 2 / 2)
    assert d.diff == pytest.approx(19 / 6)
    assert d.df == pytest.approx(df)  # 3.806
    assert (d.hi - d.lo) / 2 == pytest.approx(2.8365 * math.sqrt(se2), rel=2e-3)  # t(.975, 3.81)
    assert d.significant and 0.02 < d.p < 0.04
    assert not welch_diff([1.0, 2.0, 3.0], [1.5, 2.5, 3.5]).significant
    one = welch_diff([1.0], [4.0, 5.0])
    assert one.diff == pytest.approx(3.5) and not one.has_ci and not one.significant


def test_direction_follows_the_metric() -> None:
    assert verdict_of("throughput_rps", True, True, 5.0) == "better"
    assert verdict_of("throughput_rps", True, True, -5.0) == "worse"
    assert verdict_of("latency_p95_ms", True, True, 5.0) == "worse"
    assert verdict_of("failure_rate", True, True, -0.01) == "better"
    assert verdict_of("cpu_imbalance", False, True, 0.3) == "not significant"
    assert verdict_of("cpu_imbalance", False, False, 0.3) == "no interval"


def test_the_changed_metric_is_flagged_in_its_direction_and_the_rest_not(
    pair: tuple[Path, Path], tmp_path: Path
) -> None:
    before, after = pair
    out = tmp_path / "out"
    result = cli_compare(str(before), str(after), "--out", str(out))
    assert f"compare: {out / 'index.html'}" in result.stdout
    data = json.loads((out / "compare.json").read_text())
    assert data["baseline"] == "before" and len(data["comparisons"]) == 1
    (c,) = data["comparisons"]
    rows = c["differences"]
    assert {(r["strategy"], r["scenario"]) for r in rows} == {
        (s, c) for s in STRATEGIES for c in SCENARIOS
    }
    changed = {"latency_mean_ms", "latency_p95_ms"}
    for r in rows:
        if r["strategy"] == "lc" and r["metric"] in changed:
            assert r["verdict"] == "worse" and r["significant"], r
            assert r["lo"] > 0 and r["other"] > 2 * r["baseline"], r
        else:
            assert r["verdict"] == "not significant" and not r["significant"], r
            assert r["lo"] <= 0 <= r["hi"], r
    assert c["summary"]["worse"] == 2 * len(SCENARIOS) and c["summary"]["better"] == 0
    assert "2 significantly better" not in result.stdout
    assert f"0 significantly better, {2 * len(SCENARIOS)} significantly worse" in result.stdout
    # Seen from the slow run, the same change is an improvement.
    (reverse,) = compare([after, before]).comparisons
    flagged = {(d.strategy, d.metric, d.verdict) for d in reverse.differences if d.significant}
    assert flagged == {("lc", m, "better") for m in changed}
    # The page says it in words and opens from disk without errors.
    page = (out / "index.html").read_text()
    assert "lc x sp+sr: p95 latency (ms) higher in after than in before" in page
    for external in ('src="http', 'href="http', "<script", "<link"):
        assert external not in page
    outcome = probe_page(out / "index.html", tmp_path)
    assert outcome["errors"] == [] and outcome["console"] == [], outcome


def test_one_replication_says_no_interval(tmp_path: Path) -> None:
    a = write_synthetic_run(
        tmp_path / "a", strategies=("rr",), scenarios=("sp+sr",), replications=1
    )
    b = write_synthetic_run(
        tmp_path / "b", strategies=("rr",), scenarios=("sp+sr",), replications=1, seed=2
    )
    result = cli_compare(str(a), str(b))
    out = tmp_path / "compare-a-vs-b"  # the default: next to the first run
    data = json.loads((out / "compare.json").read_text())
    rows = data["comparisons"][0]["differences"]
    assert rows and all(r["verdict"] == "no interval" and r["lo"] is None for r in rows)
    assert "no difference has an interval" in result.stdout
    assert "no interval" in result.stdout and "significantly worse" not in result.stdout
    assert "no interval (1 vs 1 replications)" in (out / "index.html").read_text()


def test_live_vs_simulated_and_a_run_vs_its_twin(tmp_path: Path) -> None:
    live = write_synthetic_run(tmp_path / "live", strategies=("rr", "lc"), scenarios=("sp+sr",))
    sim = tmp_path / "sim"
    args = ["simulate", "--servers", "3", "--requests", "600", "-s", "rr", "-s", "lc"]
    result = run_lblab([*args, "--replications", "2", "--out", str(sim)], timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]

    out = tmp_path / "live-sim"
    cli_compare(str(live), str(sim), "--out", str(out))
    (c,) = json.loads((out / "compare.json").read_text())["comparisons"]
    assert {(r["strategy"], r["scenario"]) for r in c["differences"]} == {
        ("rr", "sp+sr"),
        ("lc", "sp+sr"),
    }
    assert all(r["lo"] is not None for r in c["differences"] if r["metric"] != "failure_rate")
    kind = next(f for f in c["facts"] if f["key"] == "kind")
    assert kind["baseline"] == "live measurement" and kind["other"].startswith("simulated")
    assert "configured differently" in c["config_note"]

    make_twin(sim, [])  # sim/twin/, as `lblab twin` writes it
    report = compare([sim])  # one folder: against its twin
    assert [r.label for r in report.runs] == ["sim", "sim/twin"]
    assert default_out(report) == tmp_path / "compare-sim-vs-sim-twin"
    (c,) = report.comparisons
    assert len(c.differences) == 2 * 5
    assert all(d.verdict != "no interval" for d in c.differences)  # 2 replications each


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, pair: tuple[Path, Path]) -> None:
    before, _ = pair
    (tmp_path / "empty").mkdir()
    result = run_lblab(["compare", str(before), str(tmp_path / "missing")], timeout=60)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "missing does not exist" in lines[0], result.stderr
    # The same ConfigError (one line, exit 2 in the CLI) for the other cases, in process.
    for paths, metrics, message in [
        ([before, tmp_path / "empty"], [], "no requests.parquet"),
        ([before], [], "run `lblab twin"),
        ([before, before], ["speed"], "unknown metric speed"),
    ]:
        with pytest.raises(ConfigError, match=re.escape(message)):
            compare(paths, metrics)
    with pytest.raises(ConfigError, match="is a file"):
        write_report(compare([before, before]), before / "manifest.json")


@pytest.mark.slow
@pytest.mark.timeout(600)  # the shared tiny run (up to 240 s on a busy machine), then the twin
def test_a_live_run_against_its_twin_agrees_with_twin_json(
    tiny_run_dir: Path, tmp_path: Path
) -> None:
    run = tmp_path / "tiny"  # a copy: the session's run and its twin stay as they are
    shutil.copytree(tiny_run_dir, run, ignore=shutil.ignore_patterns("twin", "report"))
    twin = json.loads(make_twin(run, []).read_text())
    report = compare([run])
    (c,) = report.comparisons
    assert not report.runs[0].simulated and report.runs[1].simulated
    by_cell = {(d.strategy, d.scenario, d.metric): d for d in c.differences}
    assert {(s, sc) for s, sc, _ in by_cell} == {
        (x["strategy"], x["scenario"]) for x in twin["cells"]
    }
    for cell in twin["cells"]:  # the same definitions give the same numbers
        for metric in ("throughput_rps", "latency_mean_ms", "latency_p95_ms"):
            d = by_cell[(cell["strategy"], cell["scenario"], metric)]
            assert d.baseline == pytest.approx(cell["measured"][metric], rel=1e-3)
            assert d.other == pytest.approx(cell["simulated"][metric], rel=1e-3)
    page = write_report(report, tmp_path / "out")
    assert "live" in page.read_text() and "simulated" in page.read_text()
