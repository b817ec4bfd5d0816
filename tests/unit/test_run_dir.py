"""A run's folder: made new for every run, never over another run's results."""

from __future__ import annotations

from pathlib import Path

import pytest

from lblab.errors import ConfigError
from lblab.experiment import run_folders, runconfig
from lblab.experiment.presets import load_preset


def _config(out: str) -> runconfig.RunConfig:
    return runconfig.resolve(load_preset("tiny"), {}, {"run": {"out": out}})


def test_the_folder_is_made_and_recorded_in_the_config(tmp_path):
    cfg = run_folders.with_new_run_dir(_config(str(tmp_path / "a" / "b")), "tiny", "-")
    assert (tmp_path / "a" / "b").is_dir()
    assert cfg.out == str(tmp_path / "a" / "b")
    assert cfg.raw["run"]["out"] == cfg.out


def test_a_folder_holding_a_run_is_refused_with_what_to_do(tmp_path):
    (tmp_path / "manifest.json").write_text("{}")
    with pytest.raises(ConfigError, match=rf"{tmp_path} already holds a run; resume {tmp_path}"):
        run_folders.with_new_run_dir(_config(str(tmp_path)), "tiny", "resume {run_dir}")


def test_a_folder_that_cannot_be_made_is_refused(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(ConfigError, match=r"cannot be created .*choose another --out"):
        run_folders.with_new_run_dir(_config(str(tmp_path / "file" / "run")), "tiny", "-")


def test_a_run_made_in_results_is_what_results_latest_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    first = run_folders.with_new_run_dir(_config(""), "tiny", "-")
    assert (tmp_path / "results" / "latest").resolve() == (tmp_path / first.out).resolve()
    (tmp_path / first.out / "manifest.json").write_text("{}")
    monkeypatch.setattr(run_folders.time, "strftime", lambda fmt: "20990101-000000")
    second = run_folders.with_new_run_dir(_config(""), "tiny", "-")
    assert second.out != first.out
    assert (tmp_path / "results" / "latest").resolve() == (tmp_path / second.out).resolve()
    # A run given its own --out leaves results/latest alone.
    run_folders.with_new_run_dir(_config(str(tmp_path / "elsewhere")), "tiny", "-")
    assert (tmp_path / "results" / "latest").resolve() == (tmp_path / second.out).resolve()
