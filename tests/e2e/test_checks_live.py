"""Validity checks fire on a real run (real servers, balancer, Locust on loopback).

An open-model phase asking for far more than one Locust process can send: the run must
say so (the open model check warns: the generator sent short of the offered rate and
late), and the terminal says which phase not to trust. (The report's section of checks is
asserted on the tiny run's report, test_report.py, and for a warn and a fail in
test_report_layout.py: building it here would add its 8 s to the pass that runs alone.)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.run_fixture import run_lblab

pytestmark = [pytest.mark.slow, pytest.mark.quiet]

OVERLOADED = """
[run]
name = "overloaded-generator"
strategies = ["rr"]
scenarios = ["echo"]
duration = "2s"
warmup = "0.5s"
replications = 1
# One phase, not the default preset's adaptive blocks: a phase that fails a check (the
# disturbance check, on a machine with hypervisor steal) leaves the cell undecided, and
# blocks were added up to ten ("checks: 10 phases").
max_replications = 0
request_timeout = "2s"

[load]
model = "open"
rate = 4000

[scenario_defs.echo]
cells = [{name = "echo", package = 40, work = 0}]

[[servers]]
id = "s1"
max_inflight = 1000
[[servers]]
id = "s2"
max_inflight = 1000

[weights]
s1 = 1
s2 = 1
"""


def test_an_overloaded_generator_is_reported(tmp_path: Path) -> None:
    config = tmp_path / "overloaded.toml"
    config.write_text(OVERLOADED)
    run_dir = tmp_path / "run"
    result = run_lblab(["run", "--config", str(config), "--out", str(run_dir), "--no-report"], 240)
    phase = json.loads((run_dir / "manifest.json").read_text())["phases"][0]
    checks = {c["name"]: c for c in phase["verdicts"]}
    assert checks["open model"]["level"] == "warn", checks["open model"]
    assert "of the offered rate" in checks["open model"]["figure"]
    assert phase["verdict"] in ("warn", "fail")
    # Measured, not guessed: the harness's own CPU and the generator's figure are there.
    assert checks["generator"]["level"] in ("pass", "warn", "fail")
    assert phase["harness_cpu"]["locust"] and phase["harness_cpu"]["balancer"]
    said = " ".join((result.stdout + result.stderr).split())  # rich wraps long lines
    assert "checks: 1 phases" in said and "open model warn" in said, said
