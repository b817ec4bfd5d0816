"""A run's folder: ``--out``, or a new ``results/PREFIX-<time>``, never over another run.

``with_new_run_dir`` creates the folder as a run starts and records it in the config
(``run.out``); a folder that already holds a run's manifest is refused.
``results/latest`` points at the newest run made in ``results/``.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
from dataclasses import replace
from pathlib import Path

from lblab.errors import ConfigError
from lblab.experiment.config_layers import merge
from lblab.experiment.runconfig import RunConfig

log = logging.getLogger(__name__)
RESULTS_DIR = "results"


def with_out(config: RunConfig, out: str) -> RunConfig:
    return replace(config, out=out, raw=merge(config.raw, {"run": {"out": out}}))


def with_new_run_dir(config: RunConfig, prefix: str, when_taken: str) -> RunConfig:
    """``config`` writing to a new run folder: ``--out``, else ``results/PREFIX-<time>``,
    created now. A folder that already holds a run is refused (``when_taken`` says what
    to do instead; ``{run_dir}`` in it names the folder), as is one that cannot be created."""
    run_dir = Path(config.out or f"{RESULTS_DIR}/{prefix}-{time.strftime('%Y%m%d-%H%M%S')}")
    if (run_dir / "manifest.json").exists():
        raise ConfigError(f"{run_dir} already holds a run; {when_taken.format(run_dir=run_dir)}")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(
            f"run directory {run_dir} cannot be created ({exc.strerror or exc}); "
            "choose another --out"
        ) from None
    if not config.out:
        point_latest(run_dir)
    return with_out(config, str(run_dir))


def point_latest(run_dir: Path) -> None:
    """``results/latest`` names the newest run made in ``results/`` (what ``lblab
    notebooks`` opens by default); replaced atomically, never a half-made link."""
    link = run_dir.parent / "latest"
    tmp = run_dir.parent / f".latest-{os.getpid()}"
    try:
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(run_dir.name)
        os.replace(tmp, link)
    except OSError as exc:  # a convenience: the run goes on without it
        log.warning("could not point %s at %s: %s", link, run_dir, exc)


def phase_folder(run_dir: Path, phase_key: str, attempt: str) -> Path:
    """Where one attempt at a phase writes its records, inside its run directory."""
    return run_dir / "raw" / "phases" / phase_key / attempt


def new_attempt(number: int) -> str:
    """A name for an attempt at a phase that no earlier attempt had: ``a<number>-<hex>``
    (the number says which run attempt made it; the random part keeps two apart even
    where a killed attempt never recorded its number)."""
    return f"a{number}-{secrets.token_hex(3)}"
