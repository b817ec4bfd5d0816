"""Every part of lblab has its top-level folder, a link into ``lblab/``, and a row in the
README's "What is where": one path form for every part, not links for some. The parts
are the packages on the floors of the layers contract (``pyproject.toml``) above the
shared base, whose modules and packages (``wire``) stay in ``lblab/``."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYERS = next(
    c["layers"]
    for c in tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"][
        "contracts"
    ]
    if c["type"] == "layers"
)
PARTS = sorted(name.strip() for floor in LAYERS[:-1] for name in re.split(r"[:|]", floor))


def test_the_parts_are_the_packages_above_the_shared_base() -> None:
    packages = {p.name for p in (ROOT / "lblab").iterdir() if (p / "__init__.py").exists()}
    assert {"balancer", "experiment", "app", "simulator", "loadtests"} <= set(PARTS)
    assert set(PARTS) <= packages


@pytest.mark.parametrize("part", PARTS)
def test_each_part_is_linked_from_the_top(part: str) -> None:
    link = ROOT / part
    assert link.is_symlink(), f"{part}/ is not a link: ln -s lblab/{part} {part}"
    assert link.resolve() == (ROOT / "lblab" / part).resolve()


@pytest.mark.parametrize("part", PARTS)
def test_the_readme_says_where_each_part_is(part: str) -> None:
    table = (ROOT / "README.md").read_text().split("## What is where", 1)[1].split("\n## ", 1)[0]
    assert f"`{part}/`" in table, f"README's 'What is where' has no row for {part}/"
