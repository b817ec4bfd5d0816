"""Timeline events ``drain``, ``add`` and ``remove`` in a live run (``kill`` and
``restart`` are in test_run.py): one phase drains s2, adds a fourth server and removes
s1 while Locust keeps 4 users busy, and nothing may be lost."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from tests.e2e.test_run import assert_complete, manifest
from tests.run_fixture import PACED_LOAD, run_lblab

pytestmark = pytest.mark.slow

CONFIG = (
    """
preset = "tiny"
[run]
strategies = ["rr"]
scenarios = ["sp+mr"]
# Events fire in turn from the runner's loop: the add starts a server, which took over
# 5 s on a busy machine and pushed the remove to the end of a 10 s phase. 15 s leaves
# the phase running well after the last change.
duration = "15s"
warmup = "0s"
# s2 serves one request at a time, 100 ms each: it always holds some when drained.
[[servers]]
id = "s1"
cpu_quota = 0.25
[[servers]]
id = "s2"
cpu_quota = 0.25
delay_ms = 100
[[servers]]
id = "s3"
cpu_quota = 1.0
[[timeline]]
at = "1.5s"
action = "drain"
server = "s2"
[[timeline]]
at = "2.5s"
action = "add"
server = "s4"
cpu_quota = 0.5
[[timeline]]
at = "4.5s"
action = "remove"
server = "s1"
"""
    + PACED_LOAD
)

CLOCK_SLACK_S = 0.25
"""Picks carry the balancer's epoch (its start-up offset on the monotonic clock), events
the runner's ``time.time()``: the same clock, read in two processes."""
DRAIN_S = 1.0
"""A draining server finishes what it holds (milliseconds here) and closes its
connection; answers of requests sent after that cannot come from it."""


def test_drain_add_remove_mid_phase_lose_nothing(tmp_path: Path) -> None:
    config = tmp_path / "timeline.toml"
    config.write_text(CONFIG)
    run_dir = tmp_path / "run"
    result = run_lblab(["run", "--config", str(config), "--out", str(run_dir), "--no-report"], 150)
    assert result.returncode == 0, result.stderr[-3000:]

    # Every request Locust counted has its row, and none failed: a drain's REJECTED
    # answers are replayed elsewhere, a removal lets in-flight requests finish.
    requests = assert_complete(run_dir)
    assert requests.ok.all(), requests[~requests.ok].error_kind.value_counts().to_dict()

    (phase,) = manifest(run_dir)["phases"]
    events = {e["action"]: e for e in phase["timeline"]}
    assert [(e["action"], e["server"], e["ok"]) for e in phase["timeline"]] == [
        ("drain", "s2", True), ("add", "s4", True), ("remove", "s1", True),
    ]  # fmt: skip
    drained, added, removed = events["drain"], events["add"], events["remove"]
    load_end = requests.t_sent.max()
    assert removed["t_done"] < load_end - 1.0, "the phase ended before the pool changes"

    ok = requests[requests.ok]
    answered = ok.assign(t_done=ok.t_sent + ok.latency_ms / 1000.0)
    picks = pd.read_parquet(run_dir / "picks.parquet")

    # The drain had requests in flight on s2, and they were answered there.
    held = answered[
        answered.server.eq("s2")
        & (answered.t_sent < drained["t"])
        & (answered.t_done > drained["t_done"])
    ]
    assert len(held) > 0, "nothing was in flight on s2 when it was drained"
    # The drained server answers nothing sent after its drain had time to finish.
    late_s2 = answered[answered.server.eq("s2") & (answered.t_sent > drained["t_done"] + DRAIN_S)]
    assert late_s2.empty, late_s2.head().to_dict("records")

    # The added server takes picks and answers requests after it joined, never before.
    s4_picks = picks[picks.server.eq("s4")]
    assert len(s4_picks) > 0, "the added server received no picks"
    assert s4_picks.t.min() >= added["t"] - CLOCK_SLACK_S
    assert answered.server.eq("s4").sum() > 0

    # The removed server gets no pick once it is out of the pool; what it already had
    # in flight may still be answered.
    late_picks = picks[picks.server.eq("s1") & (picks.t > removed["t_done"] + CLOCK_SLACK_S)]
    assert late_picks.empty, late_picks.head().to_dict("records")
    assert (picks.server.eq("s1") & (picks.t < removed["t"])).any()
    late_s1 = answered[
        answered.server.eq("s1") & (answered.t_sent > removed["t_done"] + CLOCK_SLACK_S)
    ]
    assert late_s1.empty, late_s1.head().to_dict("records")

    # After the changes the pool is s3 and s4: both keep serving to the end.
    tail = answered[answered.t_sent > removed["t_done"] + CLOCK_SLACK_S]
    assert set(tail.server) == {"s3", "s4"}
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "done"
