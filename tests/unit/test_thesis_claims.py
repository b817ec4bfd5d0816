"""The thesis's claims (``analysis.thesis.claims``) on small synthetic tables.

Each unit (strategy x scenario x replication) is a few hundred request rows with chosen
server shares, latency and failures, and CPU samples at chosen levels; they go through
the same ``unit_metrics``/``server_metrics`` as a real run. Every verdict is made to fire.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pytest

from lblab.analysis.stats import MeanCI
from lblab.analysis.thesis import (
    CLAIMS,
    CONTRADICTED,
    INCONCLUSIVE,
    NA,
    PHASE_COLUMNS,
    SUPPORTED,
    Claim,
    RunTables,
    judge,
    judge_all,
    markdown,
    tables_from_frames,
    verdict_of,
    why_static_small,
)

SERVERS = ("s1", "s2", "s3")
SCENARIOS = ("sp+sr", "sp+lr", "variation", "light")
STRATEGIES = ("r", "rr", "wrr", "lc", "dwrr")

# A thesis-shaped run: shares of s1, s2, s3, mean latency (ms), failure rate, CPU % per
# server; overridden per (strategy, scenario) by each test.
BASE: dict[str, dict[str, Any]] = {
    "r": {"shares": (1 / 3, 1 / 3, 1 / 3), "latency": 100.0, "cpu": (95, 95, 25)},
    "rr": {"shares": (1 / 3, 1 / 3, 1 / 3), "latency": 100.0, "cpu": (95, 95, 25)},
    "wrr": {"shares": (1 / 6, 1 / 6, 2 / 3), "latency": 60.0, "cpu": (70, 70, 70)},
    "lc": {"shares": (0.25, 0.25, 0.5), "latency": 70.0, "cpu": (99, 99, 55)},
    "dwrr": {"shares": (0.15, 0.15, 0.7), "latency": 65.0, "cpu": (65, 65, 60)},
}


def unit(
    strategy: str, scenario: str, rep: int, spec: Mapping[str, Any], n: int = 300
) -> tuple[pd.DataFrame, pd.DataFrame]:
    counts = np.round(np.array(spec["shares"]) * n).astype(int)
    servers = np.repeat(np.array(SERVERS), counts)
    m = len(servers)
    t0 = 1_700_000_000.0 + 1000.0 * (rep * 100 + SCENARIOS.index(scenario) * 10)
    t0 += 10.0 * STRATEGIES.index(strategy)
    failed = np.zeros(m, dtype=bool)
    failed[: round(spec.get("failures", 0.0) * m)] = True
    key = {"run_id": "syn", "strategy": strategy, "scenario": scenario, "replication": rep}
    requests = pd.DataFrame(
        {
            **{k: [v] * m for k, v in key.items()},
            "t_sent": t0 + np.linspace(0.0, 6.0, m),
            "latency_ms": np.full(m, spec["latency"]) * (1.0 + 0.01 * rep),
            "ok": ~failed,
            "error_kind": np.where(failed, "timeout", None),
            "error_origin": np.where(failed, "balancer", None),
            "server": servers,
        }
    )
    ts = np.arange(0.0, 6.0, 0.5)
    cpu = pd.DataFrame(
        {
            **{k: [v] * (3 * len(ts)) for k, v in key.items()},
            "t": np.tile(t0 + ts, 3),
            "server": np.repeat(np.array(SERVERS), len(ts)),
            "cpu_percent": np.repeat(np.array(spec["cpu"], dtype=float), len(ts)),
        }
    )
    return requests, cpu


def run(
    overrides: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
    per_rep: Mapping[tuple[str, str, int], Mapping[str, Any]] | None = None,
    reps: int = 3,
    scenarios: tuple[str, ...] = SCENARIOS,
) -> RunTables:
    parts = []
    for rep in range(1, reps + 1):
        for scenario in scenarios:
            for strategy in STRATEGIES:
                spec = {
                    **BASE[strategy],
                    **(overrides or {}).get((strategy, scenario), {}),
                    **(per_rep or {}).get((strategy, scenario, rep), {}),
                }
                parts.append(unit(strategy, scenario, rep, spec))
    requests = pd.concat([p[0] for p in parts], ignore_index=True)
    cpu = pd.concat([p[1] for p in parts], ignore_index=True)
    return tables_from_frames(requests, cpu, "s3", ("s1", "s2"))


def claim(cid: str) -> Claim:
    return next(c for c in CLAIMS if c.id == cid)


@pytest.fixture(scope="module")
def shaped() -> RunTables:
    """The thesis-shaped run, unchanged."""
    return run()


def test_every_claim_has_a_figure_on_a_thesis_shaped_run(shaped: RunTables) -> None:
    judgements = judge_all(shaped)
    assert [j.claim.id for j in judgements] == [c.id for c in CLAIMS]
    for j in judgements:
        assert j.verdict != NA, (j.claim.id, j.why)
        assert j.ci.n == 3 and not math.isnan(j.ci.mean), j.claim.id


def test_shaped_run_figures_are_what_was_put_in(shaped: RunTables) -> None:
    by_id = {j.claim.id: j for j in judge_all(shaped)}
    assert by_id["r-rr-even"].ci.mean == pytest.approx(0.0, abs=0.1)
    assert by_id["r-rr-large-cpu-low"].ci.mean == pytest.approx(25 / 95)
    assert by_id["wrr-large-most"].ci.mean == pytest.approx(2 / 3, abs=0.01)
    assert by_id["lc-first-two"].ci.mean == pytest.approx(0.5, abs=0.01)
    # latency r, rr 100 vs lc, dwrr 67.5: r, rr are slower, the opposite of the claim
    assert by_id["static-faster-variation"].ci.mean == pytest.approx(1 - 100 / 67.5)
    assert by_id["static-faster-variation"].verdict == CONTRADICTED
    assert by_id["wrr-slow-variation"].ci.mean == pytest.approx(60 / 65)
    # no failures anywhere: identical (supported), no 1 MB excess (contradicted, 0 .. 0)
    assert by_id["failures-identical"].verdict == SUPPORTED
    fail_1mb = by_id["dynamic-fail-1mb"]
    assert (fail_1mb.verdict, fail_1mb.ci.lo, fail_1mb.ci.hi) == (CONTRADICTED, 0.0, 0.0)
    assert "1 MB" in fail_1mb.why and "0.00%" in fail_1mb.why


def test_lc_light_idle_fires_each_verdict() -> None:
    idle = {("lc", "light"): {"shares": (0.9, 0.1, 0.0)}}
    assert judge(claim("lc-light-idle"), run(idle)).verdict == SUPPORTED
    busy = {("lc", "light"): {"shares": (0.3, 0.3, 0.4)}}
    assert judge(claim("lc-light-idle"), run(busy)).verdict == CONTRADICTED
    mixed = {
        ("lc", "light", 1): {"shares": (0.9, 0.1, 0.0)},
        ("lc", "light", 2): {"shares": (0.8, 0.1, 0.1)},
        ("lc", "light", 3): {"shares": (0.85, 0.1, 0.05)},
    }
    j = judge(claim("lc-light-idle"), run(per_rep=mixed))
    assert j.verdict == INCONCLUSIVE
    assert j.ci.lo < 0.05 < j.ci.hi
    assert "straddles 5.0%" in j.why


def test_latency_claim_supported_when_static_is_a_fifth_faster() -> None:
    fast = {(s, "variation"): {"latency": 55.0} for s in ("r", "rr")}
    j = judge(claim("static-faster-variation"), run(fast))
    assert j.verdict == SUPPORTED and j.why == ""
    assert j.ci.mean == pytest.approx(1 - 55 / 67.5)


def test_throughput_claim_reads_throughput_not_request_counts() -> None:
    # lc and dwrr get twice r and rr's requests in the large cell: ratio 2, supported
    more = {(s, "sp+lr"): {"shares": (0.5, 0.5, 1.0)} for s in ("lc", "dwrr")}
    j = judge(claim("dynamic-more-large"), run(more))
    assert j.ci.mean == pytest.approx(2.0, rel=0.01)
    assert j.verdict == SUPPORTED


def test_failure_excess_with_1_mb_work_is_supported_when_dynamic_fails_more() -> None:
    failing = {(s, "sp+lr"): {"failures": 0.05} for s in ("lc", "dwrr")}
    j = judge(claim("dynamic-fail-1mb"), run(failing))
    assert j.ci.mean == pytest.approx(5.0, abs=0.1)
    assert j.verdict == SUPPORTED


def test_one_replication_has_no_interval_and_is_inconclusive() -> None:
    j = judge(claim("wrr-large-most"), run(reps=1))
    assert j.ci.n == 1 and not j.ci.has_ci
    assert j.verdict == INCONCLUSIVE
    assert "one replication" in j.why


def test_missing_cells_give_na_naming_them() -> None:
    j = judge(claim("lc-light-idle"), run(scenarios=("sp+sr", "sp+lr", "variation")))
    assert j.verdict == NA
    assert "lc on light" in j.why


def test_a_replication_missing_a_cell_is_left_out(shaped: RunTables) -> None:
    units = shaped.units
    keep = ~((units.strategy == "rr") & (units.scenario == "variation") & (units.replication == 2))
    partial = RunTables(units[keep], shaped.servers, shaped.large, shaped.small)
    j = judge(claim("static-faster-variation"), partial)
    assert j.ci.n == 2


@pytest.mark.parametrize(
    ("ci", "op", "verdict"),
    [
        (MeanCI(1.2, 1.1, 1.3, 3), ">=", SUPPORTED),
        (MeanCI(0.9, 0.8, 0.95, 3), ">=", CONTRADICTED),
        (MeanCI(1.0, 0.9, 1.1, 3), ">=", INCONCLUSIVE),
        (MeanCI(0.9, 0.8, 0.95, 3), "<=", SUPPORTED),
        (MeanCI(1.2, 1.1, 1.3, 3), "<=", CONTRADICTED),
        (MeanCI(1.0, 0.9, 1.1, 3), "<=", INCONCLUSIVE),
        (MeanCI(1.2, math.nan, math.nan, 1), ">=", INCONCLUSIVE),
        (MeanCI(math.nan, math.nan, math.nan, 0), ">=", NA),
    ],
)
def test_verdict_is_where_the_interval_lies(ci: MeanCI, op: str, verdict: str) -> None:
    assert verdict_of(ci, op, 1.0) == verdict


def test_markdown_lists_every_claim_with_its_words(shaped: RunTables) -> None:
    text = markdown(judge_all(shaped), "Thesis claims")
    for c in CLAIMS:
        assert c.text in text and c.thesis in text
    assert text.count("\n| ") == len(CLAIMS) + 1  # header and one row per claim


def test_the_balancers_cost_per_request_is_said_in_its_direction(shaped: RunTables) -> None:
    """lc and dwrr cheaper per request than r and rr: "less", with the figures in the
    order the sentence names them (a live run printed "-13 us more")."""
    phases = pd.DataFrame(
        [
            (strategy, "sp+sr", rep, us, [], math.nan)
            for strategy, us in {"r": 182.0, "rr": 182.0, "lc": 169.0, "dwrr": 169.0}.items()
            for rep in (1, 2, 3)
        ],
        columns=PHASE_COLUMNS,
    )
    words = why_static_small(replace(shaped, phases=phases))
    assert "lc and dwrr cost the balancer 13 us less a request (169 us vs 182 us for r, rr)" in (
        words
    ), words
