"""The run's progress lines, on a terminal and in a log: no source tags, no times."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from lblab.experiment.progress import RunProgress


@pytest.mark.parametrize("terminal", [True, False])
def test_phase_lines_carry_no_source_tag(terminal: bool) -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=terminal, width=200, record=True)
    with RunProgress(2, console=console) as progress:
        progress.start_phase("sp+sr lc rep 1", 3.0)
        progress.update_phase(1.5, 300, 0)
        progress.end_phase("done", 600, 0, 199.6)
        progress.note("stop: every pair is resolved")
    text = console.export_text()
    assert "sp+sr lc rep 1: done, 600 requests, 0 failed, 200 ok req/s measured" in text
    assert "stop: every pair is resolved" in text
    assert "progress.py" not in text and ".py:" not in text
