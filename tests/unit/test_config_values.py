"""The value parsers every config uses: NaN, infinity and absurd numbers never pass."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from lblab.config import (
    MAX_DURATION,
    check_range,
    load_json_object,
    load_toml,
    parse_duration,
    parse_float,
    parse_int,
)
from lblab.errors import ConfigError


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_fail_every_bound(value: float) -> None:
    # NaN passes `x < 0` and `x <= 0` tests: the check must not rely on them.
    with pytest.raises(ConfigError, match="not a finite number"):
        check_range("load.rate", value, minimum=0)
    with pytest.raises(ConfigError, match="not a finite number"):
        parse_float(value, "load.rate")
    with pytest.raises(ConfigError, match="finite"):
        parse_duration(value, "run.duration")


@pytest.mark.parametrize(
    ("value", "bounds", "message"),
    [
        (0, {"minimum": 1}, "0 must be 1 or more"),
        (0.0, {"above": 0}, "0.0 must be above 0"),
        (10**12, {"maximum": 100_000}, "must be at most 100000"),
        (10**400, {}, "far too large"),
    ],
)
def test_bounds_name_the_value_and_the_limit(value: float, bounds: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_range("load.users", value, **bounds)


@pytest.mark.parametrize("value", [True, "5.5", "many", [5], None])
def test_whole_numbers_are_whole(value: object) -> None:
    with pytest.raises(ConfigError, match="not a whole number"):
        parse_int(value, "load.users")


def test_durations_are_finite_and_at_most_a_week() -> None:
    assert parse_duration(str(int(MAX_DURATION))) == MAX_DURATION
    with pytest.raises(ConfigError, match="longer than a week"):
        parse_duration(MAX_DURATION + 1, "run.duration")
    with pytest.raises(ConfigError, match="too short"):
        parse_duration("0s", "run.request_timeout", above=0)
    assert parse_duration("250ms", "x", above=0) == 0.25


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe\x00binary", "not UTF-8"),
        (b"[run\nx = ", "not valid TOML"),
    ],
)
def test_unreadable_toml_is_a_config_error(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=message):
        load_toml(path)


def test_a_directory_or_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is a directory"):
        load_toml(tmp_path)
    with pytest.raises(ConfigError, match="does not exist"):
        load_toml(tmp_path / "nope.toml")


@pytest.mark.parametrize(
    ("content", "message"), [(b"[1, 2]", "not an object"), (b"{nope", "not valid JSON")]
)
def test_a_manifest_must_be_a_json_object(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "manifest.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=message):
        load_json_object(path, "manifest")
