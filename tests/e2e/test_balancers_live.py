"""Several balancer nodes live: ``[testbed] balancers = 2`` over the same servers.

Each node has its own pool and strategy state; every agent reports to both; the Locust
users spread over them and every request says which one it went through; the report
shows the split.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from tests.run_fixture import PACED_THINK, run_lblab

CONFIG = (
    """
preset = "tiny"
[run]
strategies = ["rr", "dwrr"]
scenarios = ["sp+sr"]
duration = "3s"
warmup = "1s"
[testbed]
balancers = 2
[load]
users = 6
"""
    + PACED_THINK
)


def test_two_balancer_nodes_split_the_load_and_the_report_shows_it(tmp_path: Path) -> None:
    config = tmp_path / "two.toml"
    config.write_text(CONFIG)
    run_dir = tmp_path / "run"
    result = run_lblab(["run", "--config", str(config), "--out", str(run_dir)], 240)
    assert result.returncode in (0, 1), result.stderr[-3000:]  # 1: a phase failed a check
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert sorted(manifest["testbed"]["balancers"]) == ["b1", "b2"]
    assert all(p["status"] == "done" for p in manifest["phases"])
    requests = pd.read_parquet(run_dir / "requests.parquet")
    for strategy, rows in requests.groupby("strategy", observed=True):
        counts = rows["balancer"].value_counts()
        # 6 users, 3 on each node, closed loop: each node carries a third to two thirds.
        assert set(counts.index) == {"b1", "b2"}, (strategy, counts.to_dict())
        assert 1 / 3 <= counts["b1"] / counts.sum() <= 2 / 3, (strategy, counts.to_dict())
        # Each node balanced over all three servers on its own.
        for node, sent in rows.groupby("balancer", observed=True):
            assert set(sent["server"].dropna()) == {"s1", "s2", "s3"}, (strategy, node)
    # Both nodes logged their picks; the agents reported to both (dwrr reads their CPU).
    assert (run_dir / "raw" / "picks-local.jsonl").stat().st_size > 0
    assert (run_dir / "raw" / "picks-local-b2.jsonl").stat().st_size > 0
    page = (run_dir / "report" / "index.html").read_text()
    assert 'id="balancers"' in page and "independent balancers" in page
    assert "to s3 %" in page
