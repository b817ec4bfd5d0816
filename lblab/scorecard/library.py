"""The library of hard cases: ``scorecard/scenarios/*.toml``, each an experiment file.

A case is a file ``lblab run --config`` runs as it is (``preset = "scorecard"``, the
common frame: ``experiment/presets/scorecard.toml``) with a ``[scorecard]`` table that says
what it is: ``title``, ``source`` (who named the case), ``tests`` (what it finds out) and
``headline``, the metric the case is judged on (``analysis/metrics.py``). A ``[simulated]``
table gives what differs on the simulated testbed (a case about scale has its own server
count there). ``ORDER`` is the library's order (the scorecard's columns); a file of
one's own, given by its path, is a case as well.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from lblab.config import load_toml
from lblab.errors import ConfigError
from lblab.experiment.config_layers import SCORECARD_KEYS

LIBRARY = Path(__file__).with_name("scenarios")
ORDER = (
    "steady-heterogeneous",
    "one-slow",
    "drastic-slowdown",
    "fast-failures",
    "slow-failures",
    "black-hole",
    "rate-limited",
    "dies-and-returns",
    "cold-node",
    "uncommon-flakes",
    "one-spike",
    "capacity-drift",
    "all-failing",
    "many-balancers",
    "azure-conv",
)
"""Every case of the library, in the scorecard's order (a test holds it to the files)."""


@dataclass(frozen=True, slots=True)
class LibraryCase:
    name: str
    path: Path
    title: str
    source: str
    tests: str
    headline: str


def read_case(path: Path) -> LibraryCase:
    """A case file: its ``[scorecard]`` table checked (the rest is checked as any
    experiment file is, when it runs)."""
    if not path.is_file():
        raise ConfigError(f"{path}: no such case file")
    raw = load_toml(path)
    about = raw.get("scorecard")
    if not isinstance(about, dict):
        raise ConfigError(
            f"{path}: a scorecard case needs a [scorecard] table with "
            f"{', '.join(SCORECARD_KEYS)} (see lblab/scorecard/scenarios/)"
        )
    missing = [k for k in SCORECARD_KEYS if not isinstance(about.get(k), str) or not about[k]]
    if missing:
        raise ConfigError(f"{path}: [scorecard] needs {', '.join(missing)} (each a text)")
    from lblab.analysis.metrics import METRICS

    if about["headline"] not in METRICS:
        raise ConfigError(
            f"{path}: [scorecard] headline {about['headline']!r} is not a metric; "
            f"metrics are {', '.join(METRICS)}"
        )
    return LibraryCase(
        path.stem, path, about["title"], about["source"], about["tests"], about["headline"]
    )


def library() -> list[LibraryCase]:
    """Every case of the library, in ``ORDER``."""
    return [read_case(LIBRARY / f"{name}.toml") for name in ORDER]


def select(names: list[str] | None) -> list[LibraryCase]:
    """The cases named (a library name, or the path of a case file of one's own, ending
    ``.toml``); all of the library when none is."""
    if not names:
        return library()
    out = []
    for name in names:
        if name.endswith(".toml"):
            out.append(read_case(Path(name)))
        elif name in ORDER:
            out.append(read_case(LIBRARY / f"{name}.toml"))
        else:
            raise ConfigError(
                f"--scenarios: {name!r} is not a case of the library ({', '.join(ORDER)}) "
                "nor a case file (path/to/case.toml); `lblab scorecard --list` lists them"
            )
    if len({c.name for c in out}) != len(out):
        raise ConfigError(f"--scenarios: {', '.join(names)} names a case twice")
    return out
