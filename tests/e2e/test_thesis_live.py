"""``lblab reproduce thesis --from`` a real run: the shared ``tiny`` run (live servers,
balancer and Locust; ``tests/run_fixture.py``) judged claim by claim.

The tiny run has rr and lc on sp+sr and mp+mr, one replication: the claim it has cells
for gets a figure (no interval: one replication), every other claim is listed as n/a
naming the cells it needs. A live run of every claim's cells is 20 phases even at 1 s
each: over 5 minutes on the busy 2-core machine, too slow for CI; the command's judging
of a run with every cell is tested on a synthetic run in
``tests/integration/test_thesis_command.py``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lblab.analysis.thesis import CLAIMS, INCONCLUSIVE, NA
from tests.run_fixture import run_lblab

pytestmark = pytest.mark.slow


@pytest.mark.timeout(600)  # the shared tiny run (up to 240 s on a busy machine), then this
def test_reproduce_thesis_from_a_live_run_lists_every_claim(
    tiny_run_dir: Path, tmp_path: Path
) -> None:
    run_dir = shutil.copytree(tiny_run_dir, tmp_path / "tiny")  # the shared run stays as it is
    result = run_lblab(["reproduce", "thesis", "--from", str(run_dir), "--format", "json"], 120)
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads(result.stdout)
    rows = {c["id"]: c for c in data["claims"]}
    assert list(rows) == [c.id for c in CLAIMS]
    covered = rows.pop("lc-first-two")  # lc on sp+sr: the one claim the tiny run has cells for
    assert covered["figure"] is not None and 0.0 <= covered["figure"] <= 1.0, covered
    assert (covered["replications"], covered["verdict"]) == (1, INCONCLUSIVE), covered
    for row in rows.values():
        assert row["verdict"] == NA and row["figure"] is None, row
        assert row["why"].startswith("this run lacks the cells: needs "), row
    table = (run_dir / "thesis-claims.md").read_text()
    assert all(c.text in table for c in CLAIMS)
    assert json.loads((run_dir / "thesis-claims.json").read_text()) == data
