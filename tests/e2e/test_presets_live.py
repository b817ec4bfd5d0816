"""Live presets end to end: ``ingram`` (``--delay-ms`` FIFO servers, open-loop batches).

Its smallest batch (10 requests, 25 ms apart) with two of its strategies: Ingram's
noBalancing (``first``) and dynamicImmediate. The servers sleep, so the expected
timings hold on a busy machine: everything to s1 (250 ms, one at a time) takes
10 x 250 ms; spreading by pushed estimates finishes far sooner.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.test_run import assert_complete, manifest
from tests.run_fixture import run_lblab

pytestmark = [pytest.mark.slow, pytest.mark.quiet]
"""Quiet: the servers sleep, but dynamic-immediate spreads by the estimates they push,
and on a busy machine those land late (a full parallel suite beside it: 1.37 s of
makespan against first's 2.56 s, where a quiet machine gives under half)."""

INTERVAL_S = 1 / 40  # the preset's 40 requests/s, constant arrivals
S1_SERVICE_S = 0.25


def test_ingram_batch_of_ten_runs_live_with_delay_servers(tmp_path: Path) -> None:
    run_dir = tmp_path / "ingram"
    args = ["run", "--preset", "ingram", "--scenarios", "ingram-10"]
    args += ["--strategies", "first,dynamic-immediate", "--out", str(run_dir), "--no-report"]
    result = run_lblab(args, 150)
    assert result.returncode == 0, result.stderr[-3000:]
    requests = assert_complete(run_dir)
    assert requests.ok.all()
    assert manifest(run_dir)["testbed"]["servers"]["s5"]["delay_ms"] == 700

    makespan = {}
    for strategy, rows in requests.groupby("strategy"):
        rows = rows.sort_values("t_sent")
        assert len(rows) == 10, strategy
        # Open loop: t_sent is the schedule (25 ms apart), whatever the answers did.
        assert rows.t_sent.diff().dropna().sub(INTERVAL_S).abs().max() < 1e-3, strategy
        makespan[strategy] = (rows.t_sent + rows.latency_ms / 1000).max() - rows.t_sent.min()

    first = requests[requests.strategy.eq("first")]
    assert set(first.server) == {"s1"}
    # One FIFO worker: the k-th request waits for k before it, from its due time on.
    assert 10 * S1_SERVICE_S <= makespan["first"] < 10 * S1_SERVICE_S + 1.0
    spread = requests[requests.strategy.eq("dynamic-immediate")]
    assert spread.server.nunique() >= 3
    assert makespan["dynamic-immediate"] < makespan["first"] / 2
