"""``lblab simulate --config FILE`` takes the experiment file ``lblab run`` takes.

The file ``lblab run --print-config`` prints, with ``[testbed] kind = "simulated"``,
given to ``lblab simulate --config`` and to ``lblab run --config``: the same tables,
row for row (every column but ``run_id``, which is each run folder's name). The
simulator's own older settings still read, with a note on the experiment file; the flags
of the simulator's own knobs set the file's ``[simulator]`` table, and a flag of a pool's
servers or load beside an experiment file is refused with what to do.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pandas as pd
import pytest

from tests.run_fixture import run_lblab

TABLES = ("requests", "picks", "cpu")


@pytest.fixture(scope="module")
def experiment_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("simulate-file")
    printed = run_lblab(
        ["run", "--preset", "quick", "-s", "rr", "-s", "lc", "--duration", "4s",
         "--print-config"],
        timeout=60,
    )  # fmt: skip
    assert printed.returncode == 0, printed.stderr
    text = re.sub(r'(?m)^kind = "local"$', 'kind = "simulated"', printed.stdout)
    assert 'kind = "simulated"' in text
    path = folder / "quick.toml"
    path.write_text(text)
    return path


def _rows(run_dir: Path, table: str) -> pd.DataFrame:
    return pd.read_parquet(run_dir / f"{table}.parquet").drop(columns="run_id")


def test_simulate_and_run_give_the_same_tables(experiment_file: Path) -> None:
    folder = experiment_file.parent
    simulated = run_lblab(
        ["simulate", "--config", str(experiment_file), "--out", str(folder / "by-simulate")],
        timeout=120,
    )
    assert simulated.returncode == 0, simulated.stderr[-3000:]
    ran = run_lblab(
        ["run", "--config", str(experiment_file), "--out", str(folder / "by-run"),
         "--no-report"],
        timeout=120,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-3000:]
    for table in TABLES:
        mine, theirs = _rows(folder / "by-simulate", table), _rows(folder / "by-run", table)
        assert len(mine) > 0, table
        pd.testing.assert_frame_equal(mine, theirs, obj=table)
    assert (folder / "by-simulate" / "summary.csv").read_bytes() == (
        folder / "by-run" / "summary.csv"
    ).read_bytes()
    manifest = json.loads((folder / "by-simulate" / "manifest.json").read_text())
    assert manifest["simulated"] is True and manifest["config"]["testbed"]["kind"] == "simulated"


def test_the_shorthand_flags_override_the_files_keys(experiment_file: Path) -> None:
    out = experiment_file.parent / "shorthand"
    done = run_lblab(
        ["simulate", "--config", str(experiment_file), "-s", "rr", "--duration", "2s",
         "--seed", "7", "--balancers", "2", "--client-delay", "5ms", "--no-picks",
         "--out", str(out)],
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    config = json.loads((out / "manifest.json").read_text())["config"]
    run = config["run"]
    assert (run["strategies"], run["duration"], run["seed"]) == (["rr"], "2s", 7)
    assert config["testbed"]["balancers"] == 2
    # The simulator's own knobs are the file's [simulator] table's keys.
    assert config["simulator"] == {"client_delay": "5ms", "picks_every": 0}
    requests = pd.read_parquet(out / "requests.parquet")
    assert set(requests["strategy"]) == {"rr"} and set(requests["balancer"]) == {"b1", "b2"}
    assert requests["latency_ms"].min() >= 10.0  # 5 ms each way to the balancer
    assert len(pd.read_parquet(out / "picks.parquet")) == 0


def test_a_flag_of_the_simulators_own_dialect_is_refused_with_what_to_do(
    experiment_file: Path,
) -> None:
    done = run_lblab(
        ["simulate", "--config", str(experiment_file), "--rate", "100", "--servers", "4"],
        timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "--rate, --servers: not a shorthand for a key of the experiment file" in done.stderr
    assert "set it in the file" in done.stderr


def test_the_simulators_own_settings_still_read_with_a_note(tmp_path: Path) -> None:
    """An old file runs as the experiment file it says, which --print-config writes:
    that file gives the same tables."""
    old = tmp_path / "pool.toml"
    old.write_text(
        'strategy = "rr"\nrequests = 200\nrate = 500\n'
        "[[servers]]\ncount = 2\n[[servers]]\ncount = 1\nspeed = 2\nweight = 2\n"
    )
    a, b = tmp_path / "a", tmp_path / "b"
    done = run_lblab(["simulate", "--config", str(old), "--out", str(a), "--no-report"], 60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"note: {old} is in the simulator's older dialect, still read" in done.stderr
    assert f"lblab simulate -c {old} --print-config > experiment.toml" in done.stderr
    printed = run_lblab(["simulate", "--config", str(old), "--print-config"], 60)
    assert printed.returncode == 0 and "note:" not in printed.stderr, printed.stderr
    new = tmp_path / "experiment.toml"
    new.write_text(printed.stdout)
    servers = tomllib.loads(printed.stdout)["servers"]
    assert [(s["id"], s["service"], s.get("speed")) for s in servers] == [
        ("s1", "exp:10ms", None), ("s2", "exp:10ms", None), ("s3", "exp:10ms", 2.0)
    ]  # fmt: skip
    again = run_lblab(["simulate", "--config", str(new), "--out", str(b), "--no-report"], 60)
    assert again.returncode == 0 and "note:" not in again.stderr, again.stderr[-3000:]
    first, second = (pd.read_parquet(d / "requests.parquet") for d in (a, b))
    assert len(first) == 200
    columns = [c for c in first.columns if c != "run_id"]
    pd.testing.assert_frame_equal(first[columns], second[columns])


def test_flags_alone_simulate_a_pool_without_a_note(tmp_path: Path) -> None:
    done = run_lblab(
        ["simulate", "--requests", "100", "--out", str(tmp_path / "out"), "--no-report"], 60
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "note:" not in done.stderr


def test_an_experiment_files_timeline_runs_in_lblab_simulate(tmp_path: Path) -> None:
    file = tmp_path / "timeline.toml"
    file.write_text(
        '[run]\nname = "timeline"\nstrategies = ["rr"]\nscenarios = ["sp+sr"]\n'
        'duration = "4s"\nwarmup = "1s"\nreplications = 1\nmax_replications = 0\n'
        '[load]\nmodel = "open"\nrate = 300\n'
        '[testbed]\nkind = "simulated"\n'
        '[[servers]]\nid = "s"\ncount = 3\n'
        '[[timeline]]\nat = "2s"\naction = "kill"\nserver = "s2"\n'
    )
    done = run_lblab(["simulate", "--config", str(file), "--out", str(tmp_path / "out")], 120)
    assert done.returncode == 0, done.stderr[-3000:]
    requests = pd.read_parquet(tmp_path / "out" / "requests.parquet")
    assert set(requests["server"].dropna()) == {"s1", "s2", "s3"}  # the group's members
    late = requests[requests["t_sent"] > requests["t_sent"].min() + 2.5]
    assert len(late) > 100, len(late)
    assert "s2" not in set(late["server"].dropna()), late["server"].value_counts()


def test_a_flags_load_model_replaces_an_old_files_other_one(tmp_path: Path) -> None:
    old = tmp_path / "pool.toml"
    old.write_text("rate = 300\nrequests = 50\nservers = 2\n")
    printed = run_lblab(["simulate", "-c", str(old), "--users", "3", "--print-config"], 60)
    assert printed.returncode == 0, printed.stderr
    load = tomllib.loads(printed.stdout)["load"]
    assert (load["model"], load["users"], load["count"]) == ("closed", 3, 50)
