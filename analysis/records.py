"""Say why a line is not a record: the checker behind the `path:lineno: reason` report.

The engines read records typed (the types come from the record definition). When their
counts say a line was not a record, each line of that input is checked here, in Python,
and the bad ones are reported by number and left out; the rest are read as usual.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from .errors import NewerRecordVersion
from .schema import FIELDS, NESTED, RECORD_VERSION

TRUNCATED: Final = "truncated line (proxy killed mid-write?), skipped"


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line that is not a record: its 0-based index in the block and why."""

    index: int
    reason: str


# --------------------------------------------------------------------- the checker

_SCALAR_NAMES: Final = {
    "int": "an integer",
    "float": "a number",
    "str": "a string",
    "bool": "true or false",
}


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _scalar_ok(kind: str, value: object) -> bool:
    if kind == "int":
        return type(value) is int
    if kind == "float":
        return type(value) is float or type(value) is int
    if kind == "str":
        return type(value) is str
    if kind == "bool":
        return type(value) is bool
    raise AssertionError(kind)


def _expected(kind: str) -> str:
    if kind.startswith("list["):
        return f"an array of {_SCALAR_NAMES[kind[5:-1]].removeprefix('an ').removeprefix('a ')}s"
    if kind in NESTED:
        return "an object"
    return _SCALAR_NAMES[kind]


def _make_class(name: str, fields: Sequence[str]) -> Any:
    """A record class: a namedtuple, built in C."""
    return namedtuple(name, fields)


class _Invalid(Exception):
    """A field of the wrong type; the message is the bad-line reason."""


Converter = Callable[[Any], Any]


def _invalid(name: str, expected: str, value: object) -> _Invalid:
    return _Invalid(
        f"not a valid v{RECORD_VERSION} record: {name} should be {expected} or "
        f"null, not {_type_name(value)}, skipped"
    )


def _converter(name: str, kind: str) -> Converter:
    """A function that returns a non-null value as typed, or raises
    _Invalid. Made once per field, so checking a record does no dispatching on kinds."""
    if kind in NESTED:
        cls = _NESTED_CLASSES[kind]
        members = [(m, _converter(f"{name}.{m}", k)) for m, k in NESTED[kind].items()]

        def nested(v: Any) -> Any:
            if type(v) is not dict:
                raise _invalid(name, "an object", v)
            return cls._make([None if (x := v.get(m)) is None else conv(x) for m, conv in members])

        return nested
    if kind.startswith("list["):
        inner = kind[5:-1]

        def listed(v: Any) -> Any:
            if type(v) is not list:
                raise _invalid(name, _expected(kind), v)
            for i, x in enumerate(v):
                if not _scalar_ok(inner, x):
                    raise _Invalid(
                        f"not a valid v{RECORD_VERSION} record: {name}[{i}] should "
                        f"be {_SCALAR_NAMES[inner]}, not {_type_name(x)}, skipped"
                    )
            return v

        return listed
    if kind == "float":

        def number(v: Any) -> Any:
            t = type(v)
            if t is float:
                return v
            if t is int:
                return float(v)
            raise _invalid(name, _expected(kind), v)

        return number
    wanted = {"int": int, "str": str, "bool": bool}[kind]

    def scalar(v: Any) -> Any:
        if type(v) is wanted:
            return v
        raise _invalid(name, _expected(kind), v)

    return scalar


_NESTED_CLASSES: Final = {n: _make_class(n, tuple(members)) for n, members in NESTED.items()}


class _Checker:
    """Checks an orjson-decoded object against the declared fields and builds the record."""

    def __init__(self, fields: Sequence[str]) -> None:
        self.fields = tuple(fields)
        self.cls = _make_class("Record", ("v", *self.fields))
        self.converters = [(f, _converter(f, FIELDS[f])) for f in self.fields]

    def build(self, obj: dict[str, Any]) -> Any:
        """The record, or a str saying what is wrong with it."""
        values: list[Any] = [obj["v"]]
        append = values.append
        get = obj.get
        try:
            for name, conv in self.converters:
                value = get(name)
                append(None if value is None else conv(value))
        except _Invalid as exc:
            return str(exc)
        return self.cls._make(values)


def check_line(line: bytes, checker: _Checker, *, torn: bool) -> Any:
    """Decode one line with orjson and the checker: the record, or a reason string.

    Raises NewerRecordVersion (without a location; the caller adds it).
    """
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        if torn:
            return TRUNCATED
        return f"not JSON ({exc.msg} at column {exc.colno}), skipped"
    if type(obj) is not dict:
        return f"not a JSON object ({_type_name(obj)}), skipped"
    if "v" not in obj:
        return 'not a record (no "v" field), skipped'
    v = obj["v"]
    if type(v) is not int or v < RECORD_VERSION:
        return f'not a record of a known schema version ("v": {orjson.dumps(v).decode()}), skipped'
    if v > RECORD_VERSION:
        raise NewerRecordVersion(v)
    return checker.build(obj)


#: The checker of every field the analysis reads.
CHECKER: Final = _Checker(tuple(FIELDS))
