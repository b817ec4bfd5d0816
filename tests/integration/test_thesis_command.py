"""``lblab reproduce thesis --from``: judging a finished run dir, as a user would."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lblab.analysis.synthetic import write_synthetic_run
from lblab.analysis.thesis import CLAIMS, NA
from lblab.cli import app
from lblab.errors import ConfigError

SCENARIOS = ("sp+sr", "sp+lr", "variation", "light")
SERVERS = [{"id": "s1", "cpu_quota": 0.25}, {"id": "s2", "cpu_quota": 0.25},
           {"id": "s3", "cpu_quota": 1.0}]  # fmt: skip


@pytest.fixture(scope="module")
def shaped_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A synthetic run (made-up numbers) with the cells every claim needs and the servers' allowances."""
    run_dir = write_synthetic_run(
        tmp_path_factory.mktemp("thesis") / "syn", scenarios=SCENARIOS, replications=3
    )
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["config"] = {"servers": SERVERS}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    return run_dir


def test_from_a_run_prints_json_and_writes_the_tables(shaped_run: Path) -> None:
    result = CliRunner().invoke(
        app, ["reproduce", "thesis", "--from", str(shaped_run), "--format", "json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [c["id"] for c in data["claims"]] == [c.id for c in CLAIMS]
    for row in data["claims"]:
        assert row["verdict"] != NA and row["figure"] is not None, row
        assert row["replications"] == 3 and row["lo"] <= row["figure"] <= row["hi"], row
    assert json.loads((shaped_run / "thesis-claims.json").read_text()) == data
    text = (shaped_run / "thesis-claims.md").read_text()
    assert all(c.text in text for c in CLAIMS)


def test_table_format_shows_every_claim(shaped_run: Path) -> None:
    result = CliRunner().invoke(app, ["reproduce", "thesis", "--from", str(shaped_run)])
    assert result.exit_code == 0, result.output
    for word in ("supported", "Thesis claims", "thesis-claims.md"):
        assert word in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "csv"], "--format: 'csv' is not one of table, json, markdown"),
        (["--from", "/nonexistent/run"], "does not exist"),
        (["--from", "RUN", "--out", "x"], "drop --config and --out"),
        (["--preset", "nosuch", "--out", "OUT"], "unknown preset 'nosuch'"),
    ],
)
def test_bad_input_is_one_clear_line(
    args: list[str], message: str, shaped_run: Path, tmp_path: Path
) -> None:
    args = [str(shaped_run) if a == "RUN" else str(tmp_path / "o") if a == "OUT" else a
            for a in args]  # fmt: skip
    result = CliRunner().invoke(app, ["reproduce", "thesis", *args])
    # A ConfigError is what `lblab`'s entry point turns into one line and exit 2.
    assert isinstance(result.exception, ConfigError), result.output
    assert message in str(result.exception)


def test_a_run_with_equal_servers_is_refused_with_the_reason(tmp_path: Path) -> None:
    run_dir = write_synthetic_run(tmp_path / "equal", scenarios=("sp+sr",), replications=1)
    result = CliRunner().invoke(app, ["reproduce", "thesis", "--from", str(run_dir)])
    assert isinstance(result.exception, ConfigError), result.output
    assert "unequal CPU allowance" in str(result.exception)
