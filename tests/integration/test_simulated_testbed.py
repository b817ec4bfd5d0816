"""One experiment file, two testbeds: ``[testbed] kind = "simulated"`` through ``lblab run``.

The file is what ``lblab run --print-config`` prints for the README's preset, with the
testbed's kind changed and nothing else; ``lblab run --config`` runs it in the simulator
and writes the results contract with a simulated manifest: the live plan's phases (its
scenarios, strategies, blocks and seeds), its servers by their ids, windows as a live
phase's, and a report.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from lblab.experiment import runconfig
from lblab.experiment.plan import plan
from lblab.experiment.presets import load_preset
from lblab.procs import lblab_command
from lblab.results import TABLES, missing_columns
from lblab.simulator.config import EPOCH


def lblab(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(lblab_command(*args), capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def simulated_run(tmp_path_factory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("simulated-testbed")
    printed = lblab("run", "--preset", "quick", "-s", "rr", "-s", "lc", "--print-config")
    assert printed.returncode == 0, printed.stderr
    text = re.sub(r'(?m)^kind = "local"$', 'kind = "simulated"', printed.stdout)
    assert 'kind = "simulated"' in text
    config = folder / "quick-simulated.toml"
    config.write_text(text)
    run_dir = folder / "run"
    done = lblab("run", "--config", str(config), "--out", str(run_dir))
    assert done.returncode == 0, done.stderr[-3000:]
    return run_dir, text


def test_the_file_runs_in_the_simulator_as_the_live_plan(simulated_run) -> None:
    run_dir, text = simulated_run
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["simulated"] is True
    assert manifest["testbed"]["kind"] == "simulated"
    assert manifest["config"]["testbed"]["kind"] == "simulated"  # the experiment, as live
    cfg = runconfig.resolve(load_preset("quick"), tomllib.loads(text), {})
    planned = plan(cfg)
    assert len(planned) == 2 * 2 * cfg.replications
    ran = [(p["scenario"], p["strategy"], p["replication"]) for p in manifest["phases"]]
    assert ran[: len(planned)] == [(p.scenario, p.strategy, p.replication) for p in planned]
    # the adaptive rule of a live run: blocks added while a pair is open
    decisions = manifest["adaptive"]["decisions"]
    assert decisions and decisions[-1]["decision"].startswith("stop")
    added = sum(d["decision"].startswith("add a block") for d in decisions)
    assert max(r for _, _, r in ran) == cfg.replications + added
    seeds = [c["seed"] for c in manifest["phase_configs"]]
    assert seeds == [cfg.seed + i for i in range(len(ran))]
    for phase in manifest["phases"]:  # a live phase's window: warm-up to the end of the load
        assert phase["window"]["start"] == pytest.approx(EPOCH + cfg.warmup)
        assert phase["window"]["end"] == pytest.approx(EPOCH + cfg.warmup + cfg.duration)
        assert phase["verdict"] in ("pass", "warn", "fail")


def test_it_writes_the_results_contract_with_the_files_servers(simulated_run) -> None:
    run_dir, _ = simulated_run
    for name in TABLES:
        table = pq.read_table(run_dir / f"{name}.parquet")
        assert not missing_columns(name, table.schema.names), name
        assert table.num_rows > 0, name
    requests = pd.read_parquet(run_dir / "requests.parquet")
    assert set(requests["server"].dropna()) == {"s1", "s2", "s3"}
    assert set(requests["strategy"]) == {"rr", "lc"}
    inside = requests[requests["window"] == "inside"]
    assert inside["ok"].mean() > 0.99
    # least connections keeps the two quarter-CPU servers from queueing as round robin does
    p95 = inside.groupby(["scenario", "strategy"])["latency_ms"].quantile(0.95)
    assert p95[("sp+sr", "lc")] < p95[("sp+sr", "rr")]
    assert (run_dir / "report" / "index.html").is_file()
    assert (run_dir / "summary.csv").is_file()


def test_a_simulated_run_resumes_what_is_not_done_to_the_same_tables(
    simulated_run, tmp_path
) -> None:
    """Phases marked interrupted, with their parts gone (as a killed run leaves them),
    are simulated again on --resume, with their own seeds: the tables come back whole."""
    run_dir, _ = simulated_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    before = pd.read_parquet(copy / "requests.parquet")
    manifest = json.loads((copy / "manifest.json").read_text())
    for phase in manifest["phases"][-2:]:
        phase["status"] = "interrupted"
        for table in TABLES:
            (copy / "parts" / table / f"{phase['key']}.parquet").unlink()
    manifest["status"] = "interrupted"
    (copy / "manifest.json").write_text(json.dumps(manifest))
    resumed = lblab("run", "--resume", "--out", str(copy), "--no-report")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming" in resumed.stderr
    assert resumed.stderr.count(": done, ") == 2  # the two phases, and no other
    after = pd.read_parquet(copy / "requests.parquet")
    columns = [c for c in before.columns if c != "run_id"]

    def rows(frame: pd.DataFrame) -> pd.DataFrame:
        return frame[columns].sort_values(columns).reset_index(drop=True)

    pd.testing.assert_frame_equal(rows(before), rows(after))
    done = json.loads((copy / "manifest.json").read_text())
    assert done["status"] == "done"
    assert len(done["attempts"]) == 2
    assert all(p["status"] == "done" for p in done["phases"])


def test_a_simulated_run_has_no_twin_and_nothing_to_collect(simulated_run, tmp_path) -> None:
    run_dir, text = simulated_run
    collected = lblab("run", "--collect", "--out", str(run_dir))
    assert collected.returncode == 2
    assert "is a simulated run" in collected.stderr
    config = tmp_path / "sim.toml"
    config.write_text(text)
    twinned = lblab("run", "--config", str(config), "--twin", "--out", str(tmp_path / "x"))
    assert twinned.returncode == 2
    assert "drop --twin" in twinned.stderr


def test_a_bad_service_model_is_refused_before_the_run_folder(tmp_path) -> None:
    bad = tmp_path / "service.toml"
    bad.write_text('[testbed]\nkind = "simulated"\nservice = "json:a=-1ms"\n')
    out = lblab("run", "--config", str(bad), "--out", str(tmp_path / "never"))
    assert out.returncode == 2
    assert "testbed.service: '-1ms' is not a duration" in out.stderr
    assert not (tmp_path / "never").exists()  # refused before a run folder is made


def test_the_files_timeline_runs_in_the_simulator(tmp_path) -> None:
    config = tmp_path / "kill.toml"
    config.write_text(
        """
[run]
strategies = ["rr"]
scenarios = ["sp+sr"]
duration = "4s"
warmup = "1s"
replications = 1
max_replications = 0

[testbed]
kind = "simulated"

[[timeline]]
at = "2s"
action = "kill"
server = "s1"

[[timeline]]
at = "3s"
action = "restart"
server = "s1"

[[timeline]]
at = "1s"
action = "slow"
server = "s3"
factor = 2
duration = "1s"

[[timeline]]
at = "3.5s"
action = "add"
server = "s4"
cpu_quota = 0.5
weight = 2
"""
    )
    run_dir = tmp_path / "run"
    out = lblab("run", "--config", str(config), "--out", str(run_dir), "--no-report")
    assert out.returncode == 0, out.stderr[-3000:]
    requests = pd.read_parquet(run_dir / "requests.parquet")
    sent = requests["t_sent"] - EPOCH
    failed = requests[~requests["ok"]]
    # s1 (a quarter CPU) always has requests queued: they fail when it is killed
    assert set(failed["error_kind"]) == {"connection"} and set(failed["server"]) == {"s1"}
    assert sent[~requests["ok"]].between(1.0, 2.0).all()
    on_s1 = sent[requests["server"] == "s1"]
    assert not on_s1.between(2.0, 3.0).any() and on_s1.between(3.0, 5.0).any()
    s3 = requests[requests["server"] == "s3"].assign(t=sent)
    slow = s3[s3["t"].between(1.05, 1.95)]["service_ms"].median()
    normal = s3[s3["t"].between(2.05, 4.95)]["service_ms"].median()
    assert slow == pytest.approx(2 * normal, rel=0.35)
    # s4, not in [[servers]], serves only once the timeline adds it
    on_s4 = sent[requests["server"] == "s4"]
    assert len(on_s4) > 10 and on_s4.min() >= 3.5
