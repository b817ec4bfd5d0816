"""twin.json's one writer and one reader: the version, the old layout, clear refusals."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lblab.analysis.twin_file import TWIN_SCHEMA_VERSION, load_twin, save_twin
from lblab.errors import ConfigError

CELL = {"strategy": "rr", "scenario": "sp+sr"}


def test_a_saved_report_reads_back_with_its_version(tmp_path: Path) -> None:
    path = save_twin(tmp_path / "twin.json", {"cells": [{**CELL, "validity": ["machine warn"]}]})
    data = load_twin(path)
    assert data["schema_version"] == TWIN_SCHEMA_VERSION == 2
    assert data["cells"][0]["validity"] == ["machine warn"]


def test_a_report_without_a_version_is_version_1_and_its_flags_are_renamed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "twin.json"
    path.write_text(json.dumps({"cells": [{**CELL, "harness_checks": ["generator fail"]}]}))
    cell = load_twin(path)["cells"][0]
    assert cell["validity"] == ["generator fail"] and "harness_checks" not in cell


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ('{"schema_version": 9, "cells": []}', "schema version 9, but this lblab reads 1 to 2"),
        ("{not json", "not JSON"),
        ('{"rank": []}', "not a twin report (no cells)"),
        ("[]", "not a twin report (no cells)"),
    ],
)
def test_what_cannot_be_read_is_named_with_what_to_do(tmp_path: Path, text: str, says: str) -> None:
    path = tmp_path / "twin.json"
    path.write_text(text)
    with pytest.raises(ConfigError, match="rebuild it with `lblab twin RUN`") as caught:
        load_twin(path)
    assert str(path) in str(caught.value) and says in str(caught.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot be read"):
        load_twin(tmp_path / "nope.json")
