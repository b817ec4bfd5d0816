"""The sweep notebook executed headless on a real sweep: ``lblab notebooks SWEEP_DIR --execute``.

The sweep is small (3 strategies x 2 rates x 2 speeds x 2 seeds of 800 requests, plus a
point that fails on its worker) and runs on a one-worker Dask ``LocalCluster``, as
``lblab sweep`` does; the notebook is then executed by ``lblab notebooks`` in a child
process, as a user runs it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import nbformat
import pytest

from lblab.sweep.grid import load_sweep
from lblab.sweep.run import run_sweep, sweep_folder
from tests.integration.test_sweep import SWEEP as GRID
from tests.run_fixture import run_lblab

pytestmark = pytest.mark.slow

SWEEP = "seeds = 2\n" + GRID.format(requests=800)
NOTEBOOK_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("sweep")
    source = folder / "sweep.toml"
    source.write_text(SWEEP)
    sweep = load_sweep(source)
    broken = dataclasses.replace(  # fails where it runs: a row with its error
        sweep.points[0], settings={**sweep.points[0].settings, "servers": "many"}, key="broken"
    )
    sweep = dataclasses.replace(sweep, points=(*sweep.points, broken))
    out = folder / "out"
    sweep_folder(out, sweep, source, force=False)
    outcome = run_sweep(sweep, out, workers=1)
    assert (outcome.planned, outcome.failed) == (25, 1)
    return out


def test_the_sweep_notebook_executes_on_a_real_sweep(sweep_dir: Path) -> None:
    result = run_lblab(["notebooks", str(sweep_dir), "--execute"], NOTEBOOK_TIMEOUT_S)
    assert result.returncode == 0, result.stdout + result.stderr[-5000:]
    path = sweep_dir / "notebooks" / "sweep.ipynb"
    assert f"executed: {path}" in result.stdout
    notebook = nbformat.read(path, as_version=4)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code and all(c.get("execution_count") for c in code), "a cell did not run"
    outputs = [o for c in code for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    images = [o for o in outputs if "image/png" in o.get("data", {})]
    assert len(images) >= 3  # the map, the map on throughput, the margins
    injected = [c for c in code if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1 and repr(str(sweep_dir.resolve())) in injected[0].source
    text = "\n".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "servers" in text  # the failed point's error is shown
    assert "rate, servers.1.speed" in text  # what was swept


def test_only_names_the_sweep_notebook_on_a_sweep_folder(sweep_dir: Path) -> None:
    result = run_lblab(["notebooks", str(sweep_dir), "--only", "cpu", "--no-open"], 60)
    assert result.returncode != 0
    assert "--only cpu: no such notebook for a sweep folder; choose from sweep" in result.stderr


def test_the_report_command_names_the_notebooks_command(sweep_dir: Path) -> None:
    result = run_lblab(["sweep", "report", str(sweep_dir)], 60)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"in a notebook: lblab notebooks {sweep_dir}" in result.stdout
