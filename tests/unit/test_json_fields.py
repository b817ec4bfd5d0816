"""The typed reader of lblab's JSON files and its writer's plain data
(``lblab/json_fields.py``): every reader's error names the file and the field and says
what to do, as do winners.json's and scorecard.json's; ``to_plain`` writes dataclasses,
enums, paths and nested values as JSON data."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from pathlib import Path
from typing import Any

import pytest

from lblab.analysis.run import read_answer
from lblab.analysis.scorecard import read_scorecard, write_scorecard
from lblab.errors import ConfigError
from lblab.json_fields import (
    Fields,
    MalformedJson,
    Reader,
    an_object,
    checked,
    choice,
    flag,
    map_of,
    number,
    optional,
    plain_fields,
    read_json,
    text,
    to_plain,
    tuple_of,
    whole,
)

FILE, FIX = "runs/x/data.json", "rebuild it"


def _read(data: Any, read: Reader[Any], **how: Any) -> Any:
    """``data``'s field ``a.b`` (under a list ``items`` where given) as ``read`` reads it."""

    def inner(value: Any, where: str) -> Any:
        return Fields(value, where)("b", read)

    def outer(value: Any, where: str) -> Any:
        return Fields(value, where)("a", inner)

    return read_json(data, outer, source=FILE, remedy=FIX, **how)


@pytest.mark.parametrize(
    ("read", "value", "says"),
    [
        (text, 12, "a.b is 12, not text"),
        (number, "2s", "a.b is '2s', not a number"),
        (number, True, "a.b is True, not a number"),
        (whole, 2.5, "a.b is 2.5, not a whole number"),
        (whole, math.nan, "a.b is nan, not a whole number"),
        (flag, "yes", "a.b is 'yes', not true or false"),
        (an_object, [1], "a.b is a list, not an object"),
        (choice(("rr", "lc")), "wrr", "a.b is 'wrr', not one of rr, lc"),
        (choice(("rr", "lc")), 3, "a.b is 3, not text"),
        (optional(number), "x", "a.b is 'x', not a number"),
        (tuple_of(text), "rr", "a.b is a str, not a list"),
        (tuple_of(text), ["rr", 4], "a.b[1] is 4, not text"),
        (map_of(number), {"rr": 1, "lc": "x"}, "a.b.lc is 'x', not a number"),
        (map_of(number), [], "a.b is a list, not an object"),
        (checked({"c": text}), {}, "a.b.c is missing"),
        (checked({}, {"c": whole}), {"c": "1"}, "a.b.c is '1', not a whole number"),
    ],
)
def test_each_reader_names_the_file_the_field_and_what_to_do(
    read: Reader[Any], value: Any, says: str
) -> None:
    with pytest.raises(MalformedJson) as caught:
        _read({"a": {"b": value}}, read)
    assert str(caught.value) == f"{FILE}: {says}; {FIX}"
    assert isinstance(caught.value, ConfigError)


def test_what_each_reader_takes() -> None:
    assert _read({"a": {"b": 3}}, number) == 3 and isinstance(_read({"a": {"b": 3}}, number), int)
    assert _read({"a": {"b": 3.0}}, whole) == 3 and isinstance(_read({"a": {"b": 3.0}}, whole), int)
    assert _read({"a": {"b": None}}, optional(text)) is None
    assert _read({"a": {"b": ["x", "y"]}}, tuple_of(text)) == ("x", "y")
    assert _read({"a": {"b": {"x": None}}}, map_of(optional(flag))) == {"x": None}
    kept = {"c": "x", "more": [1]}
    assert _read({"a": {"b": kept}}, checked({"c": text})) == kept


def test_a_file_may_show_values_by_their_kind() -> None:
    with pytest.raises(MalformedJson, match=r"a\.b is a str, not a number") as caught:
        _read({"a": {"b": "fast"}}, number, lead="not ours: ", show_values=False)
    assert str(caught.value).startswith(f"{FILE}: not ours: a.b")
    with pytest.raises(MalformedJson, match=r"a\.b is null, not text"):
        _read({"a": {"b": None}}, text, show_values=False)


def test_a_missing_field_is_its_default_or_named() -> None:
    f = Fields({"a": 1, "n": None}, "top")
    assert f("b", number, 7) == 7 and f("a", number) == 1
    with pytest.raises(MalformedJson, match=r"^top\.b is missing$"):
        f("b", number)
    with pytest.raises(MalformedJson, match=r"top\.n is None, not a number"):
        f("n", number, 0)
    absent = Fields({"n": None}, "top", null_is_missing=True)
    assert absent("n", number, 0) == 0
    with pytest.raises(MalformedJson, match=r"top\.n is missing"):
        absent("n", number)
    assert Fields({"a": 1, "b": 2, "c": 3}, "").rest(("a", "c")) == {"b": 2}


def test_the_whole_file_not_an_object_and_a_refused_value() -> None:
    with pytest.raises(MalformedJson) as caught:
        read_json([1], lambda value, where: Fields(value, where), source=FILE, remedy=FIX)
    assert str(caught.value) == f"{FILE}: the file is a list, not an object; {FIX}"

    def refusing(value: Any, where: str) -> None:
        raise MalformedJson.refused(where, ConfigError("cell c: sizes must be 0 or more"))

    with pytest.raises(MalformedJson) as caught:
        _read({"a": {"b": -1}}, refusing)
    assert str(caught.value) == f"{FILE}: a.b: cell c: sizes must be 0 or more; {FIX}"


# ------------------------------------------------------------------ to_plain


class Colour(StrEnum):
    RED = "red"


class Level(IntEnum):
    HIGH = 3


@dataclass(frozen=True, slots=True)
class Inner:
    colour: Colour
    levels: tuple[Level, ...] = ()


@dataclass(frozen=True, slots=True)
class Outer:
    name: str
    inner: Inner
    by_name: dict[str, Inner] = field(default_factory=dict)
    where: Path = Path("runs/x")


@dataclass(frozen=True)
class OwnLayout:
    a: int

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a, "twice": (self.a * 2,)}


@dataclass(frozen=True)
class OwnDict:
    a: float

    def to_dict(self) -> dict[str, Any]:
        return {"a": self.a, "seconds": self.a}


def test_to_plain_writes_dataclasses_enums_and_what_they_nest() -> None:
    value = Outer("x", Inner(Colour.RED, (Level.HIGH,)), {"k": Inner(Colour.RED)})
    plain = to_plain(value)
    assert plain == {
        "name": "x",
        "inner": {"colour": "red", "levels": [3]},
        "by_name": {"k": {"colour": "red", "levels": []}},
        "where": "runs/x",
    }
    assert type(plain["inner"]["colour"]) is str and type(plain["inner"]["levels"][0]) is int
    assert plain_fields(value) == plain
    assert json.loads(json.dumps(plain)) == plain


def test_to_plain_keeps_a_dataclasss_own_layout() -> None:
    assert to_plain([OwnLayout(2), OwnDict(1.5)]) == [
        {"a": 2, "twice": [4]},
        {"a": 1.5, "seconds": 1.5},
    ]


def test_to_plain_makes_nan_null_only_when_asked() -> None:
    value = {"a": [math.nan, (math.inf, 1.0)], "b": OwnDict(-math.inf)}
    assert to_plain(value, finite=True) == {
        "a": [None, [None, 1.0]],
        "b": {"a": None, "seconds": None},
    }
    kept = to_plain(value)
    assert math.isnan(kept["a"][0]) and kept["b"]["a"] == -math.inf


# ------------------------------------------------------------------ the files read with it


def test_a_malformed_winners_json_names_the_file_and_the_cell(tmp_path: Path) -> None:
    cell = {"scenario": "sp+sr", "metric": "throughput_rps", "verdict": "winner"}
    (tmp_path / "winners.json").write_text(
        json.dumps({"schema_version": 1, "cells": [{**cell, "strategies": ["rr"]}, cell]})
    )
    with pytest.raises(ConfigError) as caught:
        read_answer(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / 'winners.json'}: cells[1].strategies is missing; "
        f"rebuild it: lblab report {tmp_path}"
    )
    (tmp_path / "winners.json").write_text('{"schema_version": 1, "cells": null}')
    assert read_answer(tmp_path) == []


def test_a_scorecard_reads_back_as_written_and_a_malformed_one_is_named(tmp_path: Path) -> None:
    about = {"scenario": "s", "title": "t", "source": "x", "tests": "y", "headline": "h"}
    card = {
        "schema_version": 1,
        "testbeds": ["simulated"],
        "scenarios": [about],
        "cells": [{"scenario": "s", "strategy": "rr", "testbed": "simulated", "rank": None}],
        "winners": [
            {"scenario": "s", "testbed": "simulated", "metric": "m", "verdict": "tie"},
        ],
    }
    write_scorecard(tmp_path, card)
    assert read_scorecard(tmp_path) == card
    card["cells"][0]["rank"] = "first"
    write_scorecard(tmp_path, card)
    with pytest.raises(ConfigError) as caught:
        read_scorecard(tmp_path)
    assert str(caught.value) == (
        f"{tmp_path / 'scorecard.json'}: cells[0].rank is 'first', not a whole number; "
        "make one with lblab scorecard"
    )
