"""``lblab twin``: the simulated twin of a simulated run and of a live ``tiny`` run."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from lblab.analysis.twin import twin_section
from lblab.pages import GENERATED
from lblab.simulator.config import EPOCH
from lblab.simulator.twin import FIGURES, make_twin
from lblab.simulator.twin.solve import REPEATS
from tests.run_fixture import run_lblab

pytestmark = pytest.mark.slow

SIM_TOML = """
users = 6
requests = 1500
client_delay = "1ms"
deadline = "10s"
scenario = "variation"
[[servers]]
count = 2
service = "json:a=0.5ms,b=2e-8,c=4e-9"
speed = 0.25
weight = 1
[[servers]]
service = "json:a=0.5ms,b=2e-8,c=4e-9"
weight = 4
"""


def check_shape(data: dict[str, Any], strategies: set[str], scenarios: set[str]) -> None:
    cells = data["cells"]
    assert {(c["strategy"], c["scenario"]) for c in cells} == {
        (st, sc) for st in strategies for sc in scenarios
    }
    for c in cells:
        for f in FIGURES:
            assert c["measured"][f] > 0 and c["simulated"][f] > 0, c
            assert math.isfinite(c["error"][f]), c
    for scenario in scenarios:
        for key in ("throughput", "latency_mean"):
            r = data["rank"][scenario][key]
            assert sorted(r["measured"]) == sorted(strategies) == sorted(r["simulated"])
            assert r["tau"] is None or -1.0 <= r["tau"] <= 1.0
    for m in data["model"]["servers"]:
        assert m["samples"] > 0 and 0.0 <= m["fit_r2"] <= 1.0


@pytest.fixture(scope="module")
def sim_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("twin")
    config = folder / "sim.toml"
    config.write_text(SIM_TOML)
    run_dir = folder / "sim"
    args = ["simulate", "-c", str(config), "-s", "rr", "-s", "lc", "-s", "wrr"]
    out = run_lblab([*args, "--replications", "2", "--out", str(run_dir)], 120)
    assert out.returncode == 0, out.stderr
    return run_dir


@pytest.mark.timeout(300)  # about a minute on the shared machine; subprocesses bound it too
def test_twin_of_a_simulated_run_reproduces_it_and_scales(sim_run: Path) -> None:
    out = run_lblab(["twin", str(sim_run), "--scale", "12", "--scale-requests", "3000"], 180)
    assert out.returncode == 0, out.stderr
    assert "worst throughput error" in out.stdout
    data = json.loads((sim_run / "twin" / "twin.json").read_text())
    check_shape(data, {"rr", "lc", "wrr"}, {"variation"})
    # The twin of a simulation fits the same servers and load: it must land close.
    for c in data["cells"]:
        assert abs(c["error"]["throughput_rps"]) < 0.05, c
    assert data["rank"]["variation"]["throughput"]["tau"] == 1.0
    # A simulation's front end is its fixed delays (1 ms each way): no load term.
    front = data["model"]["scenarios"]["variation"]["front"]
    assert front["client_ms"] == pytest.approx(2.0, abs=0.01) and front["slope_ms"] == 0
    # The weaker two servers were given 4x the service time of the strong one.
    means = [s["service_ms_mean"]["100B+10000B"] for s in data["model"]["servers"]]
    assert means[0] == pytest.approx(4 * means[2], rel=0.01)
    (scaled,) = data["scales"]
    assert scaled["servers"] == 12 and scaled["requests_per_phase"] == {"variation": 3000}
    assert (sim_run / scaled["dir"] / "requests.parquet").is_file()
    manifest = json.loads((sim_run / scaled["dir"] / "manifest.json").read_text())
    assert sum(g["count"] for g in manifest["config"][0]["servers"]) == 12
    assert manifest["config"][0]["arrivals"]["users"] == 24  # 6 users per 3 servers
    tau = scaled["rank"]["variation"]["throughput"]["tau_vs_twin"]
    assert tau is None or -1.0 <= tau <= 1.0
    assert (sim_run / "twin" / "requests.parquet").is_file()

    section = twin_section(sim_run)
    assert section is not None and "Measured vs simulated" in section
    assert "does the ranking hold at scale" in section.lower()
    for name in ("rr", "lc", "wrr", "12 servers"):
        assert name in section


@pytest.mark.timeout(300)
def test_twin_prints_its_docs_section_in_markdown(sim_run: Path) -> None:
    args = ["twin", str(sim_run), "--scale", "12", "--scale-requests", "3000"]
    out = run_lblab([*args, "--format", "markdown"], 180)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == GENERATED  # the section itself, no progress line before it
    assert lines[2].startswith(f"Produced by `lblab twin {sim_run} --scale 12 ")
    assert " cores, load average " in lines[2]
    assert (
        "| scenario | rr | lc | wrr | tau by throughput | reversed by throughput "
        "| tau by mean latency | reversed by mean latency |"
    ) in lines
    assert sum(line.startswith("| variation | ") for line in lines) == 2  # and at scale
    assert (
        "| scenario | 12 servers: ranking by throughput | tau vs twin | tau vs measured |" in lines
    )
    assert "twin: simulating" in out.stderr and "worst throughput error" in out.stderr
    assert json.loads((sim_run / "twin" / "twin.json").read_text())["scales"][0]["servers"] == 12

    bad = run_lblab(["twin", str(sim_run), "--format", "html"], 60)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.splitlines() == [
        "error: --format: 'html' is not one of table, json, markdown"
    ]


def test_twin_section_is_none_without_a_twin(tmp_path: Path) -> None:
    assert twin_section(tmp_path) is None


def test_twin_refuses_bad_input_in_one_line(tmp_path: Path, sim_run: Path) -> None:
    out = run_lblab(["twin", str(tmp_path / "missing")], 60)
    assert out.returncode == 2
    assert "does not exist" in out.stderr and "Traceback" not in out.stderr
    out = run_lblab(["twin", str(sim_run), "--scale", "0"], 60)
    assert out.returncode == 2
    assert "--scale 0" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.slow
@pytest.mark.timeout(600)  # the shared tiny run (up to 240 s on a busy machine), then the twin
def test_twin_of_a_live_tiny_run(tiny_run_dir: Path) -> None:
    # `lblab run --twin` (the shared run) built the twin before it wrote the report.
    report = (tiny_run_dir / "report" / "index.html").read_text()
    assert json.loads((tiny_run_dir / "twin" / "twin.json").read_text())["cells"]
    assert "Measured vs simulated" in report and "Rank agreement" in report
    path = make_twin(tiny_run_dir, [30], scale_requests=3000)
    data = json.loads(path.read_text())
    check_shape(data, {"rr", "lc"}, {"sp+sr", "mp+mr"})
    assert [s["id"] for s in data["model"]["servers"]] == ["s1", "s2", "s3"]
    # The quotas the servers ran with: the preset's 0.25/0.25/1.0, scaled to fit the
    # servers' CPUs under isolation (the manifest's cpu_layout).
    manifest = json.loads((tiny_run_dir / "manifest.json").read_text())
    ran = manifest["testbed"]["cpu_layout"]["quotas"]
    assert [s["cpu_quota"] for s in data["model"]["servers"]] == [
        ran[k] for k in ("s1", "s2", "s3")
    ]
    assert ran["s3"] == pytest.approx(4 * ran["s1"])
    for model in data["model"]["scenarios"].values():
        front = model["front"]  # a live request spends time outside the server
        assert front["client_ms"] > 0 or front["slope_ms"] > 0
        assert set(front["server_ms"]) == {"rr", "lc"}
    (scaled,) = data["scales"]
    assert scaled["servers"] == 30
    assert {(f["strategy"], f["scenario"]) for f in scaled["figures"]} == {
        (st, sc) for st in ("rr", "lc") for sc in ("sp+sr", "mp+mr")
    }
    # Each cell carries the harness checks its phases flagged, as the manifest has them.
    phases = json.loads((tiny_run_dir / "manifest.json").read_text())["phases"]
    for c in data["cells"]:
        flagged = {
            f"{v['name']} {v['level']}"
            for p in phases
            if (p["strategy"], p["scenario"]) == (c["strategy"], c["scenario"])
            for v in p["verdicts"]
            if v["name"] in ("generator", "balancer", "machine") and v["level"] in ("warn", "fail")
        }
        assert c["validity"] == sorted(flagged), c
    section = twin_section(tiny_run_dir)
    assert section is not None and "sp+sr" in section and "harness checks" in section


KILL_TOML = """
[run]
strategies = ["rr", "lc"]
scenarios = ["sp+sr"]
duration = "3s"
warmup = "1s"
replications = 1
max_replications = 0

[testbed]
kind = "simulated"
balancers = 2

[[timeline]]
at = "2s"
action = "kill"
server = "s1"

[[timeline]]
at = "3s"
action = "restart"
server = "s1"
"""


@pytest.mark.timeout(300)
def test_the_twin_of_a_run_with_its_file_simulates_its_timeline_and_balancers(
    tmp_path: Path,
) -> None:
    """The twin of a run whose manifest holds its file is that file's phases simulated:
    the kill of s1 at 2 s (restarted at 3 s) and both balancers, each phase seeded as
    the run's and as long as it."""
    config = tmp_path / "kill.toml"
    config.write_text(KILL_TOML)
    run_dir = tmp_path / "run"
    out = run_lblab(["run", "--config", str(config), "--out", str(run_dir), "--no-report"], 120)
    assert out.returncode == 0, out.stderr[-3000:]
    data = json.loads(make_twin(run_dir).read_text())
    assert data["model"]["notes"] == []  # no scaled twin, so nothing of the file left out
    twin = pd.read_parquet(run_dir / "twin" / "requests.parquet")
    assert set(twin["balancer"]) == {"b1", "b2"}
    sent = twin["t_sent"] - EPOCH
    failed = twin[~twin["ok"]]
    # s1 had requests in flight when it was killed: they fail as the run's did
    assert len(failed) > 0 and set(failed["error_kind"]) == {"connection"}
    assert set(failed["server"]) == {"s1"} and sent[~twin["ok"]].between(1.0, 2.0).all()
    on_s1 = sent[twin["server"] == "s1"]
    assert not on_s1.between(2.0, 3.0).any() and on_s1.between(3.0, 4.0).any()
    assert sent.max() == pytest.approx(4.0, abs=0.1)  # the phase's warm-up plus duration
    manifest = json.loads((run_dir / "manifest.json").read_text())
    ran = {(c["strategy"], c["seed"]) for c in manifest["phase_configs"]}
    twinned = json.loads((run_dir / "twin" / "manifest.json").read_text())["config"]
    assert len(twinned) == REPEATS * len(ran)  # each phase drawn REPEATS times
    firsts = [c for c in twinned if (c["replication"] - 1) % REPEATS == 0]
    assert {(c["strategy"], c["seed"]) for c in firsts} == ran  # the first is the phase

    scaled = json.loads(make_twin(run_dir, [6], scale_requests=2000).read_text())
    (note,) = scaled["model"]["notes"]
    assert "timeline" in note and "2 balancers" in note
