"""Adaptive replications, live: blocks in a seeded order, the decision after each block
in the manifest, a budget that stops the run, and winners.json at the end."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from lblab.experiment.plan import plan
from lblab.experiment.runconfig import resolve
from tests.run_fixture import PACED_LOAD, run_lblab

pytestmark = pytest.mark.slow

VERDICTS = ("pass", "warn", "fail", "n/a")

CONFIG = (
    """
preset = "tiny"
[run]
strategies = ["rr", "wrr"]
scenarios = ["sp+sr"]
duration = "2s"
warmup = "1s"
replications = 2
max_replications = 6
budget = "{budget}"
"""
    + PACED_LOAD
)


def test_a_budget_stops_the_blocks_and_the_answer_is_written(tmp_path: Path) -> None:
    """A budget of less than one block stops the run after its minimum. The minimum is
    one block, whose pairs are open by construction (one block gives no interval), so
    the budget, not a settled answer, decides: with two blocks of two strategies that
    send alike, a drift common to a strategy's phases resolved pairs on this VM."""
    config = tmp_path / "adaptive.toml"
    config.write_text(CONFIG.format(budget="5s").replace("replications = 2", "replications = 1"))
    run_dir = tmp_path / "run"
    result = run_lblab(["run", "--config", str(config), "--out", str(run_dir), "--no-report"], 180)
    assert result.returncode == 0, result.stderr[-3000:]
    m = json.loads((run_dir / "manifest.json").read_text())
    (decision,) = m["adaptive"]["decisions"]
    assert decision["after_block"] == 1 and decision["decision"].startswith("stop: another block")
    assert "budget" in decision["decision"] and _open_unless_left_out(decision, m["phases"])
    # The block ran in the order the seed draws, and nothing more.
    planned = plan(resolve(None, m["config"], {}))
    assert [(p["scenario"], p["strategy"], p["replication"]) for p in m["phases"]] == [
        (p.scenario, p.strategy, p.replication) for p in planned
    ]
    assert all(p["status"] == "done" for p in m["phases"])
    assert "budget" in result.stderr  # the decision is on the terminal too
    cells = json.loads((run_dir / "winners.json").read_text())["cells"]
    metrics = {c["metric"] for c in cells}
    assert metrics == {"throughput_rps", "latency_mean_ms", "latency_p95_ms", "failure_rate",
                       "cpu_imbalance"}  # fmt: skip
    # A phase that failed a check (hypervisor steal, on this VM) is left out of the answer.
    counted = 0 if all(p["verdict"] == "fail" for p in m["phases"]) else 1
    for cell in cells:
        assert cell["verdict"] == "unresolved" and cell["why"], cell
        assert cell["blocks"] == counted, cell
    # summary.csv: one row per phase with the headline metrics and the phase's verdict.
    rows = list(csv.DictReader((run_dir / "summary.csv").open()))
    assert len(rows) == len(m["phases"]) == 2
    assert {r["strategy"] for r in rows} == {"rr", "wrr"}
    assert all(float(r["throughput_rps"]) > 0 and r["verdict"] in VERDICTS for r in rows)


def test_blocks_are_added_while_pairs_are_open_up_to_the_most_allowed(tmp_path: Path) -> None:
    """One block leaves every pair open (no interval yet), so a block is added; the
    second is the most allowed, so the run stops there, settled or not."""
    config = tmp_path / "adaptive.toml"
    config.write_text(
        CONFIG.format(budget="0s")
        .replace("replications = 2", "replications = 1")
        .replace("max_replications = 6", "max_replications = 2")
    )
    run_dir = tmp_path / "run"
    result = run_lblab(["run", "--config", str(config), "--out", str(run_dir), "--no-report"], 240)
    assert result.returncode == 0, result.stderr[-3000:]
    m = json.loads((run_dir / "manifest.json").read_text())
    first, last = m["adaptive"]["decisions"]
    assert first["after_block"] == 1 and first["decision"] == "add a block of sp+sr"
    assert _open_unless_left_out(first, m["phases"])
    assert last["after_block"] == 2
    assert last["decision"].startswith(("stop: 2 blocks", "stop: every pair")), last
    assert [p["replication"] for p in m["phases"]] == [1, 1, 2, 2]
    assert all(p["status"] == "done" for p in m["phases"])
    assert "add a block" in result.stderr  # each decision is on the terminal too


def _open_unless_left_out(decision: dict, phases: list[dict]) -> bool:  # type: ignore[type-arg]
    """After block 1 the decision counts open pairs, but a pair whose phases failed a
    check (hypervisor steal, on this VM) is left out, not open: with one of the two left
    out, none is."""
    counted = [p for p in phases if p["replication"] == 1 and p["verdict"] != "fail"]
    return decision["open_pairs"] > 0 or len({p["strategy"] for p in counted}) < 2
