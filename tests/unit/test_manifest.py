"""The manifest contract (``lblab/manifest.py``): one writer and one reader agree, old
manifests open as version 1, and every file that is not a manifest this lblab can read
fails with one ``ManifestError`` naming it and what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lblab.errors import ManifestError
from lblab.manifest import (
    SCHEMA_VERSION,
    Manifest,
    ManifestFile,
    PhaseEntry,
    ScenarioEntry,
    from_json,
    load,
    save,
)
from lblab.scenarios import Cell
from lblab.validity import Check
from lblab.windows import Window


def _manifest() -> Manifest:
    """A manifest with every field given (JSON-native values, as a file holds them)."""
    phase = PhaseEntry(
        key="r1-000-sp_sr-rr", scenario="sp+sr", strategy="rr", replication=1, status="done",
        seed=8, duration_s=10.0, attempt="a0-abc123", start=100.0, end=112.5, error=None,
        window=Window(101.0, 111.0), requests=900, failures=3, requests_in_window=800,
        ok_in_window=798, ok_per_s_window=79.8, measured={"ok_in_window": 798},
        harness_cpu={"balancer": [0.2]}, loaders={"host-a": 900}, clocks={"workers": {}},
        unaccounted=1, verdicts=(Check("generator", "pass", "5% of a core", "kept up"),),
        verdict="pass",
        extra={"timeline": [], "picks": 40},
    )  # fmt: skip
    return Manifest(
        run_id="quick-1", simulated=False, status="done", config_given={"preset": "quick"},
        config={"run": {"duration": "10s"}},
        scenarios=(
            ScenarioEntry(name="sp+sr", cells=(Cell("sp+sr", 100, 10_000),), load={"users": 4}),
        ),
        strategies=("rr",), warmup_s=2.0, software={"python": "3.11"}, host={"cpus": 2},
        testbed={"kind": "local"}, cpu_limit_method="cgroup", started=99.0, ended=120.0,
        collected=130.0, attempts=({"started": 99.0, "ended": 120.0},),
        adaptive={"decisions": []}, phases=(phase,), extra={"order": "blocks"},
    )  # fmt: skip


def test_a_manifest_reads_back_as_written(tmp_path: Path) -> None:
    written = _manifest()
    save(tmp_path / "manifest.json", written)
    data = json.loads((tmp_path / "manifest.json").read_text())
    assert data["schema_version"] == SCHEMA_VERSION
    assert data["warmup"]["seconds"] == 2.0 and data["phases"][0]["picks"] == 40
    assert load(tmp_path / "manifest.json") == written


def test_a_simulated_manifest_keeps_its_phase_configs_under_config(tmp_path: Path) -> None:
    """The file's ``config`` is a list for a simulation (as readers outside lblab know
    it); the type holds it in ``phase_configs``, and ``config`` means the live one only."""
    sim = Manifest(run_id="sim", simulated=True, status="done", phase_configs=({"seed": 1},))
    with_testbed = sim.updated(testbed={"kind": "simulated"}, twin=True)
    assert with_testbed.testbed == {"kind": "simulated"} and with_testbed.extra == {"twin": True}
    save(tmp_path / "manifest.json", with_testbed)
    assert json.loads((tmp_path / "manifest.json").read_text())["config"] == [{"seed": 1}]
    assert load(tmp_path / "manifest.json") == with_testbed


def test_a_simulated_run_of_an_experiment_file_keeps_both_configs(tmp_path: Path) -> None:
    """``lblab run`` on the simulated testbed: ``config`` is the experiment, as a live
    run's, and the phases' simulator configs are ``phase_configs`` beside it."""
    experiment = {"run": {"name": "quick"}, "testbed": {"kind": "simulated"}}
    sim = Manifest(run_id="sim", simulated=True, config=experiment)
    grown = sim.updated(phase_configs=[{"seed": 1}]).updated(
        phase_configs=[{"seed": 1}, {"seed": 2}]
    )
    save(tmp_path / "manifest.json", grown)
    data = json.loads((tmp_path / "manifest.json").read_text())
    assert data["config"] == experiment
    assert data["phase_configs"] == [{"seed": 1}, {"seed": 2}]
    back = load(tmp_path / "manifest.json")
    assert back == grown and back.config == experiment and len(back.phase_configs) == 2


def test_a_phase_update_keeps_the_rest_and_types_what_it_knows(tmp_path: Path) -> None:
    file = ManifestFile(tmp_path / "manifest.json", _manifest())
    file.update_phase(0, status="failed", window={"start": 1.0, "end": 3.0}, cpu_samples=7)
    phase = load(tmp_path / "manifest.json").phases[0]
    assert phase.status == "failed" and phase.window == Window(1.0, 3.0)
    assert phase.extra == {"timeline": [], "picks": 40, "cpu_samples": 7}
    assert phase.requests == 900


def test_a_run_file_records_its_attempts_and_new_phases(tmp_path: Path) -> None:
    """What the runner does across a run: an attempt, a block added, the end; only
    ``save`` (and ``update_phase``) writes, so a handler on a full disk can wait."""
    file = ManifestFile(tmp_path / "manifest.json", Manifest(run_id="r", status="running"))
    file.add_attempt(started=1.0, phases_to_run=1)
    file.add_phases([PhaseEntry(key="k", scenario="sp+sr", strategy="rr", replication=2)])
    file.end_attempt(ended=2.0)
    file.set(status="done", ended=2.0)
    assert not (tmp_path / "manifest.json").exists()
    file.save()
    m = load(tmp_path / "manifest.json")
    assert m.attempts == ({"started": 1.0, "phases_to_run": 1, "ended": 2.0},)
    assert m.status == "done" and [p.cell for p in m.phases] == [("sp+sr", "rr", 2)]


def test_a_manifest_without_a_version_reads_as_version_1(tmp_path: Path) -> None:
    """A simulated run written before the contract: its configs list, scenario names,
    per-phase status map and ``cpu_limit`` land in the fields that mean them."""
    old = {
        "run_id": "sim-1", "simulated": True, "config": [{"strategy": "rr"}],
        "scenarios": ["sp+sr"], "status": {"sp+sr/rr/r1": "ok"}, "cpu_limit": "simulated",
        "phases": [{"key": "k", "scenario": "sp+sr", "strategy": "rr", "replication": 1}],
    }  # fmt: skip
    (tmp_path / "manifest.json").write_text(json.dumps(old))
    m = load(tmp_path / "manifest.json")
    assert m.config == {} and m.phase_configs == ({"strategy": "rr"},)
    assert m.scenarios == (ScenarioEntry(name="sp+sr"),) and m.status == "done"
    assert m.cpu_limit_method == "simulated" and m.phases[0].status == "done"


def test_a_manifest_without_a_run_id_takes_its_folders_name(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text("{}")
    assert load(tmp_path / "manifest.json").run_id == tmp_path.name


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ('{"run_id": "r", "schema_version": 99}', "schema_version 99, newer than this lblab"),
        ('{"run_id": "r", "schema_version": 0}', "unknown schema_version 0"),
        ('{"run_id": "r", "schema_version": "2"}', "unknown schema_version '2'"),
        ("{run_id: r", "not valid JSON"),
        ("[1, 2]", "not an object"),
        ('{"run_id": "r", "phases": "none"}', "json: phases is a str, not a list"),
        ('{"run_id": "r", "phases": [{"key": "k"}]}', "phases[0].scenario is missing"),
        ('{"run_id": "r", "status": "fine"}', "status is 'fine', not one of running"),
        ('{"run_id": "r", "warmup": {"seconds": "2s"}}', "warmup.seconds is '2s', not a number"),
        (
            '{"run_id": "r", "scenarios": [{"name": "s", "cells": [{"name": "c", '
            '"package_bytes": -1, "work_bytes": 1}]}]}',
            "scenarios[0].cells[0]: cell c: sizes must be 0 or more",
        ),
        (
            '{"run_id": "r", "phases": [{"key": "k", "scenario": "s", "strategy": "rr", '
            '"replication": NaN}]}',
            "phases[0].replication is nan, not a whole number",
        ),
        (
            '{"run_id": "r", "phases": [{"key": "k", "scenario": "s", "strategy": "rr", '
            '"replication": 1, "window": {"start": "x"}}]}',
            "phases[0].window is",
        ),
        (
            '{"run_id": "r", "phases": [{"key": "k", "scenario": "s", "strategy": "rr", '
            '"replication": 1, "verdicts": [{"name": "generator"}]}]}',
            "phases[0].verdicts[0].level is missing",
        ),
    ],
)
def test_a_file_this_lblab_cannot_read_is_refused_by_name(
    tmp_path: Path, text: str, words: str
) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(text)
    with pytest.raises(ManifestError) as caught:
        load(path)
    message = str(caught.value)
    assert words in message and str(path) in message


def test_a_missing_manifest_is_named(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="does not exist"):
        load(tmp_path / "manifest.json")


def test_a_newer_version_says_to_update() -> None:
    with pytest.raises(ManifestError, match="update lblab"):
        from_json({"run_id": "r", "schema_version": SCHEMA_VERSION + 1}, "x/manifest.json")
