"""infra/ passes yamllint and ansible-lint (production profile), as CI requires."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def test_yamllint_is_clean() -> None:
    out = subprocess.run(
        [str(BIN / "yamllint"), "--strict", "infra", ".yamllint", ".ansible-lint"],
        cwd=REPO, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.timeout(180)
def test_ansible_lint_is_clean() -> None:
    out = subprocess.run(
        [str(BIN / "ansible-lint"), "--offline", "--nocolor", "infra"],
        cwd=REPO, capture_output=True, text=True, timeout=170,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert (
        "profile 'production' was required, and it passed"
        in out.stderr.lower() + out.stdout.lower()
    )
