"""Loading and metrics on a tiny results directory whose numbers are computed by hand.

The rows are few and chosen so every metric can be checked on paper (see the comments);
they go through lblab.results' writer, as a run's do.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lblab.analysis.load import ResultsError, open_results
from lblab.analysis.manifest import run_facts
from lblab.analysis.metrics import CPU_COLUMNS, REQUEST_COLUMNS, server_metrics, summarize
from lblab.analysis.run import answer, verdict
from lblab.manifest import from_json
from lblab.results import consolidate, to_arrow, write_part

KEYS = ("run_id", "scenario", "strategy", "replication")


def _rows(unit: tuple[str, str, int], rows: list[dict]) -> list[dict]:
    strategy, scenario, rep = unit
    return [
        {"run_id": "hand", "scenario": scenario, "strategy": strategy, "replication": rep, **r}
        for r in rows
    ]


def _req(t: float, ms: float, ok: bool, server: str | None, kind=None, warmup=False) -> dict:
    return {
        "t_sent": t,
        "latency_ms": ms,
        "ok": ok,
        "error_kind": kind,
        "error_origin": None if kind is None else "server",
        "package_bytes": 100,
        "work_bytes": 10_000,
        "server": server,
        "warmup": warmup,
    }


def _cpu(t: float, server: str, pct: float, warmup=False) -> dict:
    return {"t": t, "server": server, "cpu_percent": pct, "warmup": warmup}


@pytest.fixture(scope="module")
def hand_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("hand") / "hand"
    requests = {
        # rr rep 1: 3 ok of 4 after warm-up; window 100.0 .. 102.0 (the timeout ends last)
        ("rr", "sp+sr", 1): [
            _req(99.0, 1000.0, True, "s1", warmup=True),  # excluded
            _req(100.0, 10.0, True, "s1"),
            _req(100.5, 20.0, True, "s2"),
            _req(101.0, 30.0, True, "s1"),
            _req(101.5, 500.0, False, None, "timeout"),
        ],
        # rr rep 2: one ok request of 40 ms
        ("rr", "sp+sr", 2): [_req(200.0, 40.0, True, "s2")],
        # lc: zero successes (a null error_kind counts as "other")
        ("lc", "sp+sr", 1): [
            _req(300.0, 1.0, False, None, "rejected"),
            _req(300.5, 1.0, False, None, None),
        ],
    }
    cpu = {
        ("rr", "sp+sr", 1): [
            _cpu(99.0, "s1", 100.0, warmup=True),  # excluded
            _cpu(100.0, "s1", 50.0),
            _cpu(101.0, "s1", 70.0),
            _cpu(100.0, "s2", 30.0),
            _cpu(101.0, "s2", 30.0),
        ],
    }
    for unit, rows in requests.items():
        key = "_".join(map(str, unit)).replace("+", "_")
        write_part(run, "requests", key, to_arrow("requests", _rows(unit, rows)))
        if unit in cpu:
            write_part(run, "cpu", key, to_arrow("cpu", _rows(unit, cpu[unit])))
    consolidate(run)
    (run / "manifest.json").write_text(json.dumps({"run_id": "hand", "simulated": False}))
    return run


@pytest.fixture(scope="module")
def summary(hand_run: Path):
    return summarize(open_results(hand_run))


def _unit(summary, strategy: str, rep: int) -> pd.Series:
    u = summary.units
    return u.loc[(u["strategy"] == strategy) & (u["replication"] == rep)].iloc[0]


def test_warmup_rows_are_excluded(hand_run: Path) -> None:
    results = open_results(hand_run)
    requests = results.table("requests", REQUEST_COLUMNS)
    assert 99.0 not in set(requests["t_sent"])
    assert len(requests) == 7
    assert 100.0 not in set(results.table("cpu", CPU_COLUMNS)["cpu_percent"])


def test_request_metrics_by_hand(summary) -> None:
    rr = _unit(summary, "rr", 1)
    assert rr["requests"] == 4 and rr["ok"] == 3
    assert rr["window_s"] == pytest.approx(2.0)
    assert rr["throughput_rps"] == pytest.approx(1.5)
    assert rr["failure_rate"] == pytest.approx(0.25)
    assert rr["failure_rate_timeout"] == pytest.approx(0.25)
    assert rr["failure_rate_rejected"] == 0.0
    assert rr["failure_rate_from_server"] == pytest.approx(0.25)
    assert rr["failure_rate_from_balancer"] == rr["failure_rate_from_client"] == 0.0
    assert rr["latency_mean_ms"] == pytest.approx(20.0)  # successes only: 10, 20, 30
    assert rr["latency_p50_ms"] == pytest.approx(20.0)
    assert rr["latency_max_ms"] == pytest.approx(30.0)


def test_zero_successes(summary) -> None:
    lc = _unit(summary, "lc", 1)
    assert lc["ok"] == 0 and lc["failure_rate"] == 1.0
    assert lc["failure_rate_rejected"] == pytest.approx(0.5)
    assert lc["failure_rate_other"] == pytest.approx(0.5)  # null kind
    assert lc["throughput_rps"] == 0.0
    assert math.isnan(lc["latency_mean_ms"])


def test_cpu_balance_by_hand(summary) -> None:
    rr = _unit(summary, "rr", 1)
    # server means 60 (s1) and 30 (s2)
    assert rr["cpu_mean"] == pytest.approx(45.0)
    assert rr["cpu_spread"] == pytest.approx(30.0)
    assert rr["cpu_imbalance"] == pytest.approx(60 / 45)
    assert rr["cpu_jain"] == pytest.approx(90**2 / (2 * (60**2 + 30**2)))
    assert rr["cpu_smoothness"] == pytest.approx((math.sqrt(200.0) + 0.0) / 2)
    assert math.isnan(_unit(summary, "rr", 2)["cpu_mean"])  # no samples: no value, no error


def test_server_share_and_latency(hand_run: Path) -> None:
    results = open_results(hand_run)
    servers = server_metrics(results.table("requests", REQUEST_COLUMNS))
    rr1 = servers.loc[(servers["strategy"] == "rr") & (servers["replication"] == 1)]
    s1 = rr1.loc[rr1["server"] == "s1"].iloc[0]
    assert s1["requests"] == 2 and s1["share"] == pytest.approx(2 / 3)
    assert s1["latency_mean_ms"] == pytest.approx(20.0)  # 10 and 30


def test_pooled_ci_across_replications(summary) -> None:
    p = summary.pooled
    row = p.loc[(p["strategy"] == "rr") & (p["metric"] == "latency_mean_ms")].iloc[0]
    # replications 20 and 40: mean 30, sd 14.142, half = 12.706 * 14.142 / sqrt(2) = 127.06
    assert row["n"] == 2 and row["mean"] == pytest.approx(30.0)
    assert row["hi"] - row["mean"] == pytest.approx(127.06, abs=0.01)
    single = p.loc[(p["strategy"] == "lc") & (p["metric"] == "failure_rate")].iloc[0]
    assert single["n"] == 1 and math.isnan(single["lo"])  # one replication: no CI


def test_the_answer_of_a_summary_names_its_best_and_why_it_is_open(summary) -> None:
    cells = [c.to_dict() for c in answer(summary.units, metrics=["failure_rate"])]
    (cell,) = [c for c in cells if c["scenario"] == cells[0]["scenario"]]
    assert cell["strategies"] == ["rr"] and cell["runner_up"] == "lc"
    assert cell["verdict"] == "unresolved"  # lc has one replication: no paired interval
    assert "unresolved in" in verdict(cells)


def test_missing_directory_says_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(ResultsError, match="does not exist; pass a folder written by"):
        open_results(tmp_path / "nope")


def test_missing_column_is_named(tmp_path: Path) -> None:
    table = pa.table({k: ["x"] for k in KEYS[:3]} | {"replication": [1], "t_sent": [1.0]})
    pq.write_table(table, tmp_path / "requests.parquet")
    results = open_results(tmp_path)
    with pytest.raises(ResultsError, match=r"lacks required columns \['latency_ms', 'ok'"):
        results.table("requests", REQUEST_COLUMNS)


def test_missing_cpu_table_is_a_note_not_an_error(tmp_path: Path) -> None:
    write_part(
        tmp_path,
        "requests",
        "a",
        to_arrow("requests", _rows(("rr", "sp+sr", 1), [_req(1.0, 5.0, True, "s1")])),
    )
    s = summarize(open_results(tmp_path))
    assert len(s.units) == 1 and any("no cpu table" in n for n in s.notes)


def test_run_facts_of_live_and_simulated_manifests() -> None:
    live = {
        "run_id": "r1",
        "simulated": False,
        "started": 0,
        "warmup": {"seconds": 2.0},
        "config": {"run": {"duration": "20m"}, "load": {"model": "closed", "users": 50}},
        "testbed": {
            "kind": "local",
            "servers": {"s1": {"cpu_quota": 0.25, "cpu_limit": "cgroup"}},
        },
        "cpu_limit_method": "cgroup",
    }
    facts = run_facts(from_json(live))
    assert facts["servers"] == "s1: 0.25 CPU (cgroup)"
    assert facts["started"] == "1970-01-01 00:00:00 UTC"
    assert facts["warm-up (excluded)"] == "2 s" and facts["load"] == "closed, 50 users"
    sim = run_facts(
        from_json(
            {
                "run_id": "s1",
                "simulated": True,
                "config": [{"servers": [{"count": 3, "service": "exp:10ms"}]}],
            }
        )
    )
    assert sim["kind"].startswith("simulated") and sim["servers"].startswith("3 x exp:10ms")
