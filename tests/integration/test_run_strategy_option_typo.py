"""``lblab run`` with a misspelt strategy option stops at start: exit 2, one line naming
the strategy and the option, and no phase (no run folder, no process) ever starts."""

from __future__ import annotations

from pathlib import Path

from tests.run_fixture import run_lblab


def test_run_refuses_a_misspelt_strategy_option_before_any_phase(tmp_path: Path) -> None:
    config = tmp_path / "typo.toml"
    config.write_text('[run]\nstrategies = ["rr", "lc"]\n[strategy_options.lc]\ntei = "random"\n')
    run_dir = tmp_path / "run"
    result = run_lblab(
        ["run", "--preset", "tiny", "--config", str(config), "--out", str(run_dir)], 120
    )
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 2, result.stderr[-2000:]
    assert len(lines) == 1, result.stderr[-2000:]
    assert "strategy 'lc': unknown option 'tei'; valid options: tie, weighted" in lines[0]
    assert not (run_dir / "manifest.json").exists()
