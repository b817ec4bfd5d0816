"""Named bundles of run parameters: the TOML files in ``experiment/presets/``.

``quick`` (an adaptive first answer in minutes), ``thesis`` (the published design),
``tiny`` (CI), ``thesis-claims`` (what ``lblab reproduce thesis`` runs), and ``ingram``,
``martins`` and ``linkerd`` (the other reports' experiments), ``scorecard`` (the frame of
``lblab scorecard``'s cases); ``none`` is no layer. Each file is a config layer
in the shape ``loadtests.runconfig`` documents; a config file or flags override it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lblab.config import load_toml
from lblab.errors import ConfigError

PRESET_DIR = Path(__file__).with_name("presets")
NO_PRESET = "none"
"""The preset of no layer: the defaults alone under a file and flags (a file that says
every key, as ``--print-config`` prints it, runs as printed; ``lblab simulate``'s flags)."""


def preset_names() -> list[str]:
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def load_preset(name: str) -> dict[str, Any]:
    if name == NO_PRESET:
        return {}
    path = PRESET_DIR / f"{name}.toml"
    if not path.is_file():
        raise ConfigError(f"unknown preset {name!r}; presets are {', '.join(preset_names())}")
    return load_toml(path)
