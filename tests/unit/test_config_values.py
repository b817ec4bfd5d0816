"""The value parsers every config uses: NaN, infinity and absurd numbers never pass."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from lblab.config import (
    MAX_DURATION,
    check_id,
    check_range,
    load_json_object,
    load_toml,
    parse_duration,
    parse_float,
    parse_hostport,
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


@pytest.mark.parametrize(
    ("value", "message"),
    [(4194305, "must be at most 4194304"), (0.001, "must be 0.01 or more")],
)
def test_bounds_read_as_written(value: float, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_range("x", value, minimum=0.01, maximum=4194304)


@pytest.mark.parametrize("good", ["s1", "s-1", "web_2.eu-west", "x" * 64, "-", "..."])
def test_ids_of_the_one_grammar_pass(good: str) -> None:
    assert check_id(good, "--id") == good


@pytest.mark.parametrize("bad", ["", "x" * 65, "s 1", "s/1", "s\n1", "s1\n", "s\u00e9", 5, None])
def test_other_ids_are_refused_naming_the_field(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"--id: .* is not an id; give 1-64 letters"):
        check_id(bad, "--id")


@pytest.mark.parametrize(
    ("text", "seconds"), [("1e-05", 1e-05), ("2.5e3ms", 2.5), ("1E2", 100.0), ("1e-300s", 1e-300)]
)
def test_durations_take_the_exponent_form_str_gives(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds  # the runner passes str(float) on to its parts
    with pytest.raises(ConfigError, match="finite"):
        parse_duration("1e999")


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


@pytest.mark.parametrize(
    ("value", "parsed"),
    [("127.0.0.1:7001", ("127.0.0.1", 7001)), ("[::1]:7001", ("::1", 7001)),
     ("s1.lan:1", ("s1.lan", 1))],
)  # fmt: skip
def test_an_address_is_host_and_port(value: str, parsed: tuple[str, int]) -> None:
    assert parse_hostport(value) == parsed


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("127.0.0.1:\u0661\u0662", "is not HOST:PORT"),  # Arabic-Indic 12: int() takes it
        ("127.0.0.1:70000", "is not HOST:PORT"),
        ("127.0.0.1", "is not HOST:PORT"),
        ("::1:7001", "IPv6 address in brackets"),
        ("[]:7001", "IPv6 address in brackets"),
        ("[::1:7001", "IPv6 address in brackets"),
    ],
)
def test_an_address_that_is_not_one_is_named(value: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        parse_hostport(value, "--backend")
