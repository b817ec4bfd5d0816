"""Turn the jupytext notebooks into ``.ipynb`` pointed at a run, and execute them headless.

The notebooks live in ``analysis/notebooks/*.py`` (jupytext percent format; the
``.ipynb`` are generated, never committed). Each has a ``parameters`` cell that reads
``LBLAB_RESULTS``; like papermill, ``point_at`` adds an ``injected-parameters`` cell right
after it that sets ``RESULTS`` to the run, so a written notebook opens on its run
without any environment. Execution uses nbclient with the ``python3`` kernel, which
jupyter_client starts with this interpreter (the project's venv), from the repository
root so ``analysis`` imports. jupytext, nbformat and nbclient are imported where they are
used (seconds on a busy machine): ``lblab notebooks`` checks its arguments against
``NOTEBOOKS`` first.
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, TypeVarTuple

from lblab.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    import nbformat
    from nbclient.exceptions import CellExecutionError

NOTEBOOK_DIR = Path(__file__).parent / "notebooks"
NOTEBOOKS = ("overview", "throughput", "latency", "failures", "cpu")
"""A run's notebooks, in reading order (each is ``analysis/notebooks/<name>.py``)."""
SWEEP_NOTEBOOKS = ("sweep",)
"""A sweep's notebooks (its --out folder holds ``sweep.parquet``, no run manifest)."""
CELL_TIMEOUT_S = 300
"""Per cell: summarizing millions of request rows takes seconds, not minutes."""
_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class NotebookFailure:
    """A cell that raised: which notebook, which cell, and the error."""

    notebook: str
    cell: int
    source: str
    error: str

    def describe(self) -> str:
        first = self.source.strip().splitlines()[0] if self.source.strip() else "(empty)"
        return f"{self.notebook}: cell {self.cell} ({first!r}) failed: {self.error}"


def notebooks_for(folder: Path) -> tuple[str, ...]:
    """The notebooks ``folder`` offers: a sweep's (``sweep.parquet`` and no run
    manifest) or a run's (checked when it is opened); refuse a folder that is neither."""
    from lblab.results import MANIFEST, SWEEP_META, SWEEP_TABLE

    if (folder / MANIFEST).exists():
        return NOTEBOOKS
    if (folder / SWEEP_TABLE).is_file():
        return SWEEP_NOTEBOOKS
    if (folder / SWEEP_META).is_file():
        raise ConfigError(
            f"{folder} holds a sweep that has not finished (no {SWEEP_TABLE} yet): rerun its "
            f"`lblab sweep FILE --out {folder}` to run the rest and write {SWEEP_TABLE}"
        )
    if not any((folder / n).exists() for n in ("requests.parquet", "parts")):
        raise ConfigError(
            f"{folder} holds neither a run (manifest.json, requests.parquet) nor a sweep "
            f"({SWEEP_TABLE}): give a folder written by `lblab run` or `lblab simulate` "
            "(results/<run-id>/), or the --out folder of `lblab sweep FILE --out DIR`"
        )
    return NOTEBOOKS


def pick_notebooks(offered: tuple[str, ...], only: list[str] | None) -> tuple[str, ...]:
    """``--only`` checked against the notebooks a folder offers (all of them by default)."""
    names = tuple(dict.fromkeys(only or offered))
    unknown = sorted(set(names) - set(offered))
    if unknown:
        kind = "a sweep folder" if offered == SWEEP_NOTEBOOKS else "a run folder"
        hint = ""
        if unknown[0] in SWEEP_NOTEBOOKS:
            hint = " (the sweep notebook opens a sweep's --out folder)"
        elif unknown[0] in NOTEBOOKS:
            hint = " (that one opens a run's folder)"
        raise ConfigError(
            f"--only {unknown[0]}: no such notebook for {kind}; choose from "
            f"{', '.join(offered)}{hint}"
        )
    return names


def point_at(name: str, results_dir: Path) -> nbformat.NotebookNode:
    """The notebook ``name`` with ``RESULTS`` set to ``results_dir`` after its parameters."""
    import jupytext
    import nbformat

    source = NOTEBOOK_DIR / f"{name}.py"
    notebook = jupytext.read(source)
    cells = notebook.cells
    at = next(
        (i for i, c in enumerate(cells) if "parameters" in c.get("metadata", {}).get("tags", [])),
        None,
    )
    if at is None:
        raise ValueError(f"{source} has no cell tagged 'parameters'; add one that sets RESULTS")
    injected = nbformat.v4.new_code_cell(
        f"# Injected by `lblab notebooks`\nRESULTS = {str(results_dir)!r}",
        metadata={"tags": ["injected-parameters"]},
    )
    cells.insert(at + 1, injected)
    notebook.metadata.pop("jupytext", None)
    return notebook


def write_notebooks(
    results_dir: Path, out_dir: Path, names: tuple[str, ...] = NOTEBOOKS
) -> list[Path]:
    """Write the notebooks, pointed at ``results_dir``, as ``out_dir/<name>.ipynb``."""
    import nbformat

    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in names:
        path = out_dir / f"{name}.ipynb"
        nbformat.write(point_at(name, results_dir.resolve()), path)
        paths.append(path)
    return paths


def execute_notebooks(
    results_dir: Path, out_dir: Path, names: tuple[str, ...] = NOTEBOOKS
) -> tuple[list[Path], list[NotebookFailure]]:
    """Execute the notebooks headless; write each (executed, or up to the failing cell).

    Returns the written paths and the failures (empty when every cell ran). Kernels run
    side by side, a few at a time: each spends most of its ~8 s importing pandas and
    matplotlib, so five in a row took 42 s on 2 busy cores.
    """
    import nbformat

    out_dir.mkdir(parents=True, exist_ok=True)
    env = {"LBLAB_RESULTS": str(results_dir.resolve()), "MPLBACKEND": "Agg"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernels inherit this process's environment
    try:
        outcomes = _run_interruptibly(_execute_all(results_dir.resolve(), names))
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    paths, failures = [], []
    for name, (notebook, failure) in zip(names, outcomes, strict=True):
        path = out_dir / f"{name}.ipynb"
        nbformat.write(notebook, path)
        paths.append(path)
        if failure is not None:
            failures.append(failure)
    return paths, failures


T = TypeVar("T")
Ts = TypeVarTuple("Ts")


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


class _KeepSignalsLoop(asyncio.SelectorEventLoop):
    """An event loop whose Ctrl-C and SIGTERM handler only ``_run_interruptibly`` sets.

    nbclient sets its own for each notebook, which kills the kernels under the running
    cells and leaves a traceback, and removes it after each notebook; here those requests
    are ignored, and the interrupt cancels the whole run instead: each kernel is shut
    down as nbclient leaves its notebook.
    """

    def add_signal_handler(self, sig: int, callback: Callable[[*Ts], object], *args: *Ts) -> None:
        if sig not in _STOP_SIGNALS:
            super().add_signal_handler(sig, callback, *args)

    def remove_signal_handler(self, sig: int) -> bool:
        return sig not in _STOP_SIGNALS and super().remove_signal_handler(sig)

    def on_stop_signal(self, callback: Callable[[], object]) -> None:
        for sig in _STOP_SIGNALS:
            super().add_signal_handler(sig, callback)

    def close(self) -> None:
        for sig in _STOP_SIGNALS:
            super().remove_signal_handler(sig)
        super().close()


def _run_interruptibly(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro``; Ctrl-C or SIGTERM cancels it and raises ``KeyboardInterrupt``."""

    async def main() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert isinstance(loop, _KeepSignalsLoop) and task is not None
        if threading.current_thread() is threading.main_thread():  # signals reach only it
            loop.on_stop_signal(task.cancel)
        return await coro

    with asyncio.Runner(loop_factory=_KeepSignalsLoop) as runner:
        try:
            return runner.run(main())
        except asyncio.CancelledError:
            raise KeyboardInterrupt from None


async def _execute_all(
    results_dir: Path, names: tuple[str, ...]
) -> list[tuple[nbformat.NotebookNode, NotebookFailure | None]]:
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    gate = asyncio.Semaphore(max(3, os.cpu_count() or 1))

    async def one(name: str) -> tuple[nbformat.NotebookNode, NotebookFailure | None]:
        notebook = point_at(name, results_dir)
        client = NotebookClient(
            notebook,
            timeout=CELL_TIMEOUT_S,
            kernel_name="python3",
            resources={"metadata": {"path": str(_ROOT)}},
        )
        async with gate:
            try:
                await client.async_execute()
            except CellExecutionError as exc:
                return notebook, _failure(name, notebook, exc)
        return notebook, None

    return list(await asyncio.gather(*(one(n) for n in names)))


def _failure(
    name: str, notebook: nbformat.NotebookNode, exc: CellExecutionError
) -> NotebookFailure:
    """Find the failing cell: the first code cell with an error output."""
    for index, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                error = f"{output.get('ename')}: {output.get('evalue')}"
                return NotebookFailure(name, index, cell.source, error)
    return NotebookFailure(name, -1, "", str(exc).strip().splitlines()[-1])
