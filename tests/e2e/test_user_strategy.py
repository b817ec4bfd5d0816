"""A strategy written only against ``lblab.strategy``, in a file outside the repository,
run everywhere a name is taken: a live ``lblab run`` with one and two balancer nodes,
``lblab balancer`` (and its admin switch), ``lblab simulate`` and a ``lblab sweep`` on a
LocalCluster of two workers; each run records the file's sha256 and keeps its copy.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from lblab.procs import lblab_command
from lblab.strategy.skeleton import write_skeleton
from tests.integration.balancer_testbed import (
    admin,
    processes,
    served_counts,
    start_balancer,
    start_server,
    status_of,
)
from tests.run_fixture import PACED_THINK, run_lblab

LEAST_OF_THREE = """
from lblab.strategy import Strategy, eligible


class LeastOfThree(Strategy):
    name = "least-of-3"
    summary = "fewest in flight among three backends drawn at random"

    def pick(self, backends, request, now):
        candidates = [b for b in backends if eligible(b, request)]
        if not candidates:
            return None
        drawn = self.rng.sample(candidates, min(3, len(candidates)))
        return min(drawn, key=lambda b: b.inflight)
"""


@pytest.fixture(scope="module")
def mine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The strategy's file, in a folder of its own outside the repository."""
    path = tmp_path_factory.mktemp("elsewhere") / "least_of_three.py"
    path.write_text(LEAST_OF_THREE)
    return path


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def live_config(tmp_path: Path, strategies: list[str], balancers: int) -> Path:
    config = tmp_path / "run.toml"
    config.write_text(
        f"""
preset = "tiny"
[run]
strategies = {json.dumps(strategies)}
scenarios = ["sp+sr"]
duration = "2s"
warmup = "0.5s"
replications = 1
max_replications = 0
[testbed]
balancers = {balancers}
[load]
users = 4
{PACED_THINK}
"""
    )
    return config


@pytest.mark.parametrize("balancers", [1, 2])
def test_a_live_run_with_my_strategy(tmp_path: Path, mine: Path, balancers: int) -> None:
    # One balancer starts on my strategy (given by its spec) and switches to rr by the
    # admin API; two balancers start on rr and switch to mine by its name.
    order = [f"{mine}:LeastOfThree", "rr"] if balancers == 1 else ["rr", f"{mine}:LeastOfThree"]
    run_dir = tmp_path / "run"
    config = live_config(tmp_path, order, balancers)
    result = run_lblab(["run", "--config", str(config), "--out", str(run_dir)], 240)
    assert result.returncode in (0, 1), result.stderr[-3000:]  # 1: a phase failed a check
    manifest = json.loads((run_dir / "manifest.json").read_text())
    record = manifest["strategy_sources"]["least-of-3"]
    assert record["sha256"] == sha(mine)
    assert record["spec"] == f"{mine}:LeastOfThree"
    assert (run_dir / record["copy"]).read_text() == LEAST_OF_THREE
    assert manifest["config"]["strategy_specs"] == {"least-of-3": f"{mine}:LeastOfThree"}
    requests = pd.read_parquet(run_dir / "requests.parquet", columns=["strategy", "ok"])
    ok = requests[requests["ok"]].groupby("strategy").size()
    assert ok.get("least-of-3", 0) > 20 and ok.get("rr", 0) > 20, ok
    picks = pd.read_parquet(run_dir / "picks.parquet")
    assert "least-of-3" in set(picks["strategy"].astype(str)), picks.columns
    logs = "".join(p.read_text() for p in (run_dir / "logs").glob("lblab.balancer*.log"))
    assert "Traceback" not in logs


def test_behind_lblab_balancer_and_its_admin_switch(tmp_path: Path, mine: Path) -> None:
    spec = f"{mine}:LeastOfThree"
    with processes() as kids:
        kids += [start_server(f"s{i}", tmp_path) for i in range(1, 4)]
        kids.append(start_balancer(list(kids), tmp_path, "--strategy", spec))
        balancer = kids[-1]
        assert status_of(balancer)["strategy"] == "least-of-3"
        assert admin(balancer, "PUT", "/strategy", {"name": "rr"})[0] == 200
        assert status_of(balancer)["strategy"] == "rr"
        assert admin(balancer, "PUT", "/strategy", {"name": spec})[0] == 200  # a spec too
        counts = asyncio.run(served_counts(int(balancer.ready["port"]), 60, 4))
        assert status_of(balancer)["strategy"] == "least-of-3"
        assert sum(counts.values()) == 60 and len(counts) >= 2, counts
        code, body = admin(balancer, "PUT", "/strategy", {"name": f"{mine.parent}/no.py:X"})
        assert code == 400 and "no file" in str(body), body
        assert "Traceback" not in (tmp_path / "balancer.log").read_text()


def test_simulate_and_a_sweep_on_two_dask_workers(tmp_path: Path, mine: Path) -> None:
    out = tmp_path / "sim"
    result = run_lblab(
        ["simulate", "-s", "p2c", "-s", f"{mine}:LeastOfThree", "--requests", "2000",
         "--out", str(out), "--no-report"], 120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert "least-of-3" in (out / "summary.csv").read_text()
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["strategy_sources"]["least-of-3"]["sha256"] == sha(mine)
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(
        f'[base]\nservers = 3\nrequests = 1500\n[grid]\nstrategy = ["p2c", "{mine}:LeastOfThree"]'
        "\nrate = [300, 900]\n"
    )
    swept = tmp_path / "swept"
    result = run_lblab(["sweep", "run", str(sweep), "--out", str(swept), "--workers", "2"], 240)
    assert result.returncode == 0, result.stderr[-2000:]
    table = pq.read_table(swept / "sweep.parquet").to_pandas()
    mine_rows = table[table["strategy"] == "least-of-3"]
    assert len(mine_rows) == 2 and mine_rows["error"].isna().all(), table
    assert len(set(table["worker"])) == 2  # both workers ran points: each got the source
    meta = json.loads((swept / "sweep.json").read_text())
    assert meta["strategy_sources"]["least-of-3"]["sha256"] == sha(mine)


BAD = {
    "missing file": ("nowhere.py:Nope", "no file"),
    "not a strategy": ("lblab.errors:ConfigError", "is not a strategy class"),
    "built-in name": ("{dir}/clash.py:Clash", "is a built-in strategy's"),
    "syntax error": ("{dir}/broken.py:Broken", "line 2"),
    "no class": ("{dir}/clash.py:Other", "has no class 'Other'"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_spec_is_one_line_and_exit_2(tmp_path: Path, case: str) -> None:
    (tmp_path / "clash.py").write_text(
        "from lblab.strategy import Strategy\n\n"
        "class Clash(Strategy):\n    name = 'rr'\n\n    def pick(self, b, r, now):\n        return None\n"
    )
    (tmp_path / "broken.py").write_text("from lblab.strategy import Strategy\nclass Broken(:\n")
    spec, words = BAD[case]
    for command in (["simulate", "--requests", "100", "-s"], ["strategy", "check"]):
        result = subprocess.run(
            lblab_command(*command, spec.format(dir=tmp_path)),
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert result.returncode == 2, (command, result.stderr)
        assert words in result.stderr and "Traceback" not in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_new_skeleton_passes_the_check_and_its_own_test(tmp_path: Path) -> None:
    paths = write_skeleton("least-of-d", tmp_path)
    assert [p.name for p in paths] == ["least_of_d.py", "test_least_of_d.py"]
    result = subprocess.run(
        lblab_command("strategy", "check", f"{paths[0]}:LeastOfD"),
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout
    result = subprocess.run(
        ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", str(paths[1])],
        capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-2000:]


def test_resume_loads_the_runs_copy_and_refuses_an_edited_one(tmp_path: Path) -> None:
    source = tmp_path / "gone_soon.py"
    source.write_text(LEAST_OF_THREE)
    run_dir = tmp_path / "run"
    args = ["run", "--preset", "tiny", "--testbed", "simulated", "-s", "rr"]
    result = run_lblab([*args, "-s", f"{source}:LeastOfThree", "--out", str(run_dir)], 120)
    assert result.returncode == 0, result.stderr[-2000:]
    source.unlink()  # the run goes on from its own copy
    result = run_lblab(["run", "--resume", "--out", str(run_dir)], 120)
    assert result.returncode == 0, result.stderr[-2000:]
    copy = run_dir / "strategies" / "least-of-3.py"
    copy.write_text(LEAST_OF_THREE + "# edited\n")
    result = run_lblab(["run", "--resume", "--out", str(run_dir)], 120)
    assert result.returncode == 2
    assert "was changed after the run" in result.stderr, result.stderr


def test_a_package_names_its_strategy_by_entry_point(tmp_path: Path) -> None:
    """An installed distribution (a ``.dist-info`` on the path, as pip leaves one) adds a
    name through the entry-point group ``lblab.strategies``; its module works as
    ``package.module:Class`` too, and an entry point whose name is not the class's is
    refused in one line."""
    site = tmp_path / "site"
    (site / "my_strategies").mkdir(parents=True)
    (site / "my_strategies" / "__init__.py").write_text("")
    (site / "my_strategies" / "balancing.py").write_text(LEAST_OF_THREE)
    info = site / "my_strategies-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-strategies\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[lblab.strategies]\nleast-of-3 = my_strategies.balancing:LeastOfThree\n"
        "misnamed = my_strategies.balancing:LeastOfThree\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    for i, given in enumerate(("least-of-3", "my_strategies.balancing:LeastOfThree")):
        out = tmp_path / f"sim-{i}"
        result = subprocess.run(
            lblab_command("simulate", "--requests", "300", "-s", given, "--out", str(out),
                          "--no-report"),
            capture_output=True, text=True, timeout=120, check=False, env=env,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-2000:]
        assert "least-of-3" in (out / "summary.csv").read_text()
    result = subprocess.run(
        lblab_command("simulate", "--requests", "300", "-s", "misnamed"),
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert result.returncode == 2
    assert "the entry point's name and the class's name must be the same" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
