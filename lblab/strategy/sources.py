"""A run's strategies of the user's own, kept with the run: a copy of each source file
in ``RUN/strategies/NAME.py`` and its record (spec, class, file, sha256) in the
manifest, so that ``--resume``, ``lblab twin`` and a balancer process of the run load the
same bytes the run started with, wherever the original file has gone since."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from lblab.balancer.strategies.registry import install, user_sources
from lblab.balancer.strategies.specs import StrategySource
from lblab.errors import ConfigError
from lblab.files import write_bytes_atomically

COPIES = "strategies"
"""The run folder's folder of copies."""
RECORD_KEY = "strategy_sources"
"""Where the manifest's ``extra`` keeps the records."""


def sources_of(names: Iterable[str]) -> list[StrategySource]:
    """The loaded user strategies among ``names`` (built-ins have no source)."""
    loaded = user_sources()
    return [loaded[n] for n in names if n in loaded]


def copy_path(run_dir: Path, source: StrategySource) -> Path:
    return run_dir / COPIES / f"{source.name}.py"


def copy_spec(run_dir: Path, source: StrategySource) -> str:
    """The spec that loads the run's copy (what the run's balancer processes are given)."""
    return f"{copy_path(run_dir, source).resolve()}:{source.class_name}"


def write_copies(run_dir: Path, sources: Iterable[StrategySource]) -> dict[str, Any]:
    """Copy each source into the run folder; the manifest's records of them."""
    records: dict[str, Any] = {}
    for source in sources:
        path = copy_path(run_dir, source)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_bytes_atomically(path, source.text.encode())
        records[source.name] = {**source.to_plain(), "copy": f"{COPIES}/{path.name}"}
    return records


def install_copies(run_dir: Path, records: Mapping[str, Any]) -> None:
    """Load a run's strategies from its copies, checked against their recorded sha256."""
    for name, record in records.items():
        path = run_dir / str(record.get("copy", f"{COPIES}/{name}.py"))
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"strategy {name!r}: the run's copy {path} cannot be read ({exc}); the run "
                "needs it to load the strategy it ran"
            ) from None
        digest = hashlib.sha256(text.encode()).hexdigest()
        if digest != record.get("sha256"):
            raise ConfigError(
                f"strategy {name!r}: {path} was changed after the run (sha256 {digest[:12]}, "
                f"recorded {str(record.get('sha256'))[:12]}); put back the file the run ran"
            )
        install(
            StrategySource(name, str(record["spec"]), str(record["class"]), path.name, text, digest)
        )
