"""Every analysis notebook executed headless (nbclient) against a real run and a simulated one.

A notebook passes when no cell raised and every chart cell left an image; a cell error
makes ``lblab notebooks --execute`` exit 1 and name the notebook and cell.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from lblab.analysis import nbrun
from tests.integration.test_report import simulate
from tests.run_fixture import run_lblab

pytestmark = pytest.mark.slow

NOTEBOOK_TIMEOUT_S = 300


def check_executed(out_dir: Path) -> None:
    for name in nbrun.NOTEBOOKS:
        notebook = nbformat.read(out_dir / f"{name}.ipynb", as_version=4)
        code = [c for c in notebook.cells if c.cell_type == "code"]
        assert code and all(c.get("execution_count") for c in code), f"{name}: a cell did not run"
        outputs = [o for c in code for o in c.get("outputs", [])]
        assert not [o for o in outputs if o.get("output_type") == "error"], name
        images = [
            o
            for o in outputs
            if "image/png" in o.get("data", {}) or "text/html" in o.get("data", {})
        ]
        assert images, f"{name}: no chart in the outputs"
        injected = [c for c in code if "injected-parameters" in c.metadata.get("tags", [])]
        assert len(injected) == 1, f"{name}: the results dir was not injected"


@pytest.mark.slow
@pytest.mark.timeout(300)  # the shared tiny run may still be in the making, then 5 kernels
def test_notebooks_execute_against_a_real_run(tiny_run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "notebooks"
    result = run_lblab(
        ["notebooks", str(tiny_run_dir), "--execute", "--out", str(out)], NOTEBOOK_TIMEOUT_S
    )
    assert result.returncode == 0, result.stdout + result.stderr[-5000:]
    check_executed(out)


@pytest.mark.slow
def test_notebooks_execute_against_a_simulated_run(tmp_path: Path) -> None:
    run = simulate(tmp_path / "sim")
    paths, failures = nbrun.execute_notebooks(run, run / "notebooks")
    assert failures == [], [f.describe() for f in failures]
    assert [p.stem for p in paths] == list(nbrun.NOTEBOOKS)
    check_executed(run / "notebooks")


def test_a_failing_cell_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    book = tmp_path / "books"
    book.mkdir()
    (book / "broken.py").write_text(
        '# %% tags=["parameters"]\nRESULTS = "x"\n\n# %%\nok = 1\n\n# %%\nraise KeyError("no such metric")\n'
    )
    monkeypatch.setattr(nbrun, "NOTEBOOK_DIR", book)
    paths, failures = nbrun.execute_notebooks(tmp_path, tmp_path / "out", names=("broken",))
    assert len(failures) == 1
    text = failures[0].describe()
    assert "broken: cell 3" in text and "KeyError" in text and "no such metric" in text
    assert paths[0].is_file()  # written up to the failing cell, for a look


def test_notebooks_without_execute_are_written_and_pointed_at_the_run(tmp_path: Path) -> None:
    from lblab.analysis.synthetic import write_synthetic_run

    run = write_synthetic_run(tmp_path / "syn", rows_per_unit=20, replications=1)
    result = run_lblab(["notebooks", str(run), "--no-open"], timeout=60)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "open them with" in result.stdout
    for name in nbrun.NOTEBOOKS:
        notebook = nbformat.read(run / "notebooks" / f"{name}.ipynb", as_version=4)
        assert repr(str(run.resolve())) in notebook.cells[1].source
