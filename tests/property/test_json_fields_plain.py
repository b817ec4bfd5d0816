"""``to_plain`` output is JSON data: whatever a writer holds (dataclasses, enums, tuples,
mappings, paths, any floats), what it returns reads back from ``json.dumps``/``loads``
unchanged, and with ``finite`` strict JSON (no NaN) writes it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from pathlib import PurePosixPath
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from lblab.json_fields import to_plain


class Verdict(StrEnum):
    BETTER = "better"
    WORSE = "worse"


@dataclass(frozen=True, slots=True)
class Pair:
    left: Any
    right: Any


_floats = st.floats(allow_nan=False, allow_infinity=False)
_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | _floats
    | st.text()
    | st.sampled_from(Verdict)
    | st.builds(PurePosixPath, st.text(st.characters(codec="ascii"), max_size=8))
)


def _held(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.lists(inner, max_size=4).map(tuple)
            | st.dictionaries(st.text(max_size=5), inner, max_size=4)
            | st.builds(Pair, inner, inner)
        ),
        max_leaves=20,
    )


@given(_held(_scalars))
def test_to_plain_round_trips_through_json(value: Any) -> None:
    plain = to_plain(value)
    assert json.loads(json.dumps(plain)) == plain
    assert to_plain(plain) == plain


@given(_held(_scalars | st.floats()))
def test_finite_plain_data_is_strict_json(value: Any) -> None:
    plain = to_plain(value, finite=True)
    assert json.loads(json.dumps(plain, allow_nan=False)) == plain
