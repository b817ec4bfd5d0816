"""lblab's JSON files, typed: one reader of their fields and one writer's plain data.

Reading. A file's reader is made of readers, each a function ``(value, where) -> T``
that takes the JSON value found at ``where`` (its path in the file, ``phases[3].strategy``;
"" for the whole file) and returns it typed, or raises ``MalformedJson`` naming that path
and what is wrong: ``text``, ``number``, ``whole``, ``flag`` and ``an_object`` read one
value, ``choice``, ``optional``, ``tuple_of`` and ``map_of`` make a reader of another,
and ``Fields`` reads an object's fields by name, each with its reader (a nested object
is a reader that makes its own ``Fields``); ``checked`` keeps an object as it is once
the fields its users take are of their type. ``read_json`` reads a whole file: its error
names the file, the field, what is wrong and what to do, as in
``runs/x/manifest.json: phases[3].strategy is 12, not text; re-run the experiment``.

Writing. ``to_plain`` turns what a writer holds (dataclasses, mappings, tuples, enums,
paths) into the data ``json.dumps`` writes.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import fields, is_dataclass
from enum import Enum
from pathlib import PurePath
from typing import Any, TypeVar

from lblab.errors import ConfigError

T = TypeVar("T")
Reader = Callable[[Any, str], T]
"""Reads one JSON value found at the path it is given (for errors) as a ``T``."""
_NONE_GIVEN: Any = object()


class MalformedJson(ConfigError):
    """A field of a JSON file is missing or not what lblab writes there.

    A reader raises it with the field's path and the problem (``is missing``); a problem
    of the value's type (``not a number``) is raised with the ``value``, which the
    message shows by its repr, or by its kind (``a str``) for a file read with
    ``show_values=False``. ``read_json`` raises it again naming the file and what to do."""

    def __init__(self, where: str, problem: str, value: Any = _NONE_GIVEN) -> None:
        super().__init__(where, problem)
        self.where, self.problem, self.value = where, problem, value
        self.joint = " "
        self.source = self.lead = self.remedy = ""
        self.show_values = True

    @classmethod
    def refused(cls, where: str, exc: ConfigError) -> MalformedJson:
        """The value at ``where`` was read, but what it makes refused it (``exc``)."""
        made = cls(where, str(exc))
        made.joint = ": "
        return made

    def located(
        self, source: str, remedy: str, lead: str = "", *, show_values: bool = True
    ) -> MalformedJson:
        """This error as in the file ``source``: "``source``: ``lead`` path problem;
        ``remedy``"."""
        out = copy.copy(self)
        out.source, out.lead, out.remedy, out.show_values = source, lead, remedy, show_values
        return out

    def __str__(self) -> str:
        problem = self.problem
        if self.value is not _NONE_GIVEN:
            shown = repr(self.value) if self.show_values else _kind(self.value)
            problem = f"is {shown}, {problem}"
        detail = f"{self.where or 'the file'}{self.joint}{problem}"
        return f"{self.source}: {self.lead}{detail}; {self.remedy}" if self.source else detail


def read_json(
    data: Any,
    read: Reader[T],
    *,
    source: str,
    remedy: str,
    lead: str = "",
    show_values: bool = True,
) -> T:
    """``read`` of a whole file's ``data``; a ``MalformedJson`` names the file
    (``source``) and says what to do (``remedy``), after ``lead``."""
    try:
        return read(data, "")
    except MalformedJson as exc:
        raise exc.located(source, remedy, lead, show_values=show_values) from None


class Fields:
    """One JSON object, its fields read by name: ``f(name, read)`` is the field as
    ``read`` reads it; a missing field is ``default``, or without one ``MalformedJson``.

    ``null_is_missing``: a field that is null is read as missing, for a file whose
    writer leaves what it does not know out and whose readers take null alike."""

    __slots__ = ("data", "null_is_missing", "where")

    def __init__(self, value: Any, where: str, *, null_is_missing: bool = False) -> None:
        if not isinstance(value, Mapping):
            raise MalformedJson(where, f"is {_kind(value)}, not an object")
        self.data: Mapping[str, Any] = value
        self.where = where
        self.null_is_missing = null_is_missing

    def __call__(self, name: str, read: Reader[T], default: Any = _NONE_GIVEN) -> T:
        where = f"{self.where}.{name}" if self.where else name
        value = self.data.get(name, _NONE_GIVEN)
        if value is _NONE_GIVEN or (value is None and self.null_is_missing):
            if default is _NONE_GIVEN:
                raise MalformedJson(where, "is missing")
            return default
        return read(value, where)

    def rest(self, known: Iterable[str]) -> dict[str, Any]:
        """The fields not named in ``known``, as they are."""
        names = set(known)
        return {k: v for k, v in self.data.items() if k not in names}


def _kind(value: Any) -> str:
    return "null" if value is None else f"a {type(value).__name__}"


def text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise MalformedJson(where, "not text", value)
    return value


def number(value: Any, where: str) -> float:
    """A JSON number as the file has it (an int stays an int, so it is written back so)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MalformedJson(where, "not a number", value)
    return value


def whole(value: Any, where: str) -> int:
    """A whole number; one written as a float (``3.0``) is taken too."""
    is_whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not is_whole:
        raise MalformedJson(where, "not a whole number", value)
    return int(value)


def flag(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise MalformedJson(where, "not true or false", value)
    return value


def an_object(value: Any, where: str) -> Mapping[str, Any]:
    """A JSON object as it is, whatever it holds."""
    if not isinstance(value, Mapping):
        raise MalformedJson(where, f"is {_kind(value)}, not an object")
    return value


def choice(allowed: Sequence[str]) -> Reader[str]:
    """Text that is one of ``allowed``."""

    def one_of(value: Any, where: str) -> str:
        picked = text(value, where)
        if picked not in allowed:
            raise MalformedJson(where, f"is {picked!r}, not one of {', '.join(allowed)}")
        return picked

    return one_of


def optional(read: Reader[T]) -> Reader[T | None]:
    """``read``, or None for JSON's null."""
    return lambda value, where: None if value is None else read(value, where)


def tuple_of(read: Reader[T]) -> Reader[tuple[T, ...]]:
    """A list, each item as ``read`` reads it."""

    def each(value: Any, where: str) -> tuple[T, ...]:
        if not isinstance(value, list | tuple):
            raise MalformedJson(where, f"is {_kind(value)}, not a list")
        return tuple(read(item, f"{where}[{i}]") for i, item in enumerate(value))

    return each


def map_of(read: Reader[T]) -> Reader[dict[str, T]]:
    """An object whose every value ``read`` reads, by its key."""

    def each(value: Any, where: str) -> dict[str, T]:
        items = an_object(value, where)
        return {str(k): read(v, f"{where}.{k}") for k, v in items.items()}

    return each


def checked(
    required: Mapping[str, Reader[Any]], missing_ok: Mapping[str, Reader[Any]] | None = None
) -> Reader[dict[str, Any]]:
    """An object kept as it is, for code that takes its fields by name, once each field
    named is what its reader takes (one in ``missing_ok`` may be left out)."""

    def check(value: Any, where: str) -> dict[str, Any]:
        f = Fields(value, where)
        for name, read in required.items():
            f(name, read)
        for name, read in (missing_ok or {}).items():
            f(name, read, None)
        return dict(f.data)

    return check


# ------------------------------------------------------------------ writing


def to_plain(value: Any, *, finite: bool = False) -> Any:
    """``value`` as JSON data: a dataclass with its own ``to_json`` or ``to_dict`` (a
    layout of its own) as that writes it, another one its fields by name in order; a
    mapping a dict (its keys as they are), a list or tuple a list, an enum its value (a
    ``StrEnum`` plain text), a path its text, anything else as it is. ``finite``: NaN
    and infinities are null, for a file strict JSON readers read (JSON has neither;
    ``json.dumps`` writes ``NaN``)."""
    if is_dataclass(value) and not isinstance(value, type):
        own = getattr(value, "to_json", None) or getattr(value, "to_dict", None)
        return to_plain(own(), finite=finite) if own else plain_fields(value, finite=finite)
    if isinstance(value, Enum):
        return to_plain(value.value, finite=finite)
    if isinstance(value, Mapping):
        return {k: to_plain(v, finite=finite) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_plain(v, finite=finite) for v in value]
    if isinstance(value, PurePath):
        return str(value)
    if finite and isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def plain_fields(value: Any, *, finite: bool = False) -> dict[str, Any]:
    """A dataclass's fields by name, in order, each ``to_plain``: what a dataclass's own
    ``to_json`` starts from (``to_plain`` of itself there would call it again)."""
    return {f.name: to_plain(getattr(value, f.name), finite=finite) for f in fields(value)}
