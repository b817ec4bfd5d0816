"""``lblab reproduce thesis`` live: the runner on the real testbed, then every claim judged.

The thesis-claims preset cut to one replication of 1 s phases (20 phases): every claim
gets a figure from real servers, balancer and Locust; one replication gives no interval,
so nothing is judged here beyond that (the full preset runs 3).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analysis.thesis_claims import CLAIMS, INCONCLUSIVE
from tests.run_fixture import run_lblab

TINY = """
[run]
duration = "1s"
warmup = "0s"
replications = 1
"""


@pytest.mark.slow
@pytest.mark.timeout(420)  # 20 phases of Locust start-up: about 2 minutes on a busy machine
def test_reproduce_thesis_live_gives_every_claim_a_figure(tmp_path: Path) -> None:
    config = tmp_path / "tiny-claims.toml"
    config.write_text(TINY)
    run_dir = tmp_path / "run"
    args = ["reproduce", "thesis", "--config", str(config), "--out", str(run_dir)]
    result = run_lblab([*args, "--format", "json"], 300)
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads(result.stdout)
    assert [c["id"] for c in data["claims"]] == [c.id for c in CLAIMS]
    for row in data["claims"]:
        assert row["figure"] is not None, row
        assert (row["replications"], row["verdict"]) == (1, INCONCLUSIVE), row
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert {p["status"] for p in manifest["phases"]} == {"done"}
    assert len(manifest["phases"]) == 20
    table = (run_dir / "thesis-claims.md").read_text()
    assert all(c.text in table for c in CLAIMS)
