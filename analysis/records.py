"""Turn blocks of JSONL bytes into record objects, reporting bad lines instead of failing.

Two decoders give records with the same attributes (the fields a command asked for, a
missing field as None), and accept and refuse the same lines:

- msgspec, when installed: Structs that declare only the fields the command reads, in the
  records' own key order, so the rest is skipped unbuilt; a whole block is one call.
  String fields with few values (outcomes, clients, methods, tools) are decoded against a
  vocabulary learned from the input, so equal values are one object: cheap to group on.
- orjson, plus a checker built from the same declaration (`schema.FIELDS`), into
  namedtuples.

A block that fails the fast path is decoded line by line to find its bad lines, and their
messages always come from the orjson checker, so both decoders word them alike.
`MCP_LAYERS_DECODER=orjson` forces the fallback (the tests run both).
"""

from __future__ import annotations

import os
from collections import namedtuple
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from types import GenericAlias
from typing import Any, Final, Literal

import orjson
from mcp_layers_core.record import EndReason, RetryOrigin, ToolSafety

from .errors import NewerRecordVersion
from .limits import MAX_VOCABULARY
from .schema import FIELDS, KINDS, LAYERS, NESTED, OUTCOMES, RECORD_VERSION

try:  # msgspec is optional: the `bench` extra, not a runtime dependency
    import msgspec
except ImportError:  # pragma: no cover - exercised by forcing the orjson decoder
    msgspec = None  # type: ignore[assignment]  # None stands for the absent module

TRUNCATED: Final = "truncated line (proxy killed mid-write?), skipped"


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line that is not a record: its 0-based index in the block and why."""

    index: int
    reason: str


def msgspec_available() -> bool:
    """msgspec is installed and not switched off by `MCP_LAYERS_DECODER=orjson`."""
    return msgspec is not None and os.environ.get("MCP_LAYERS_DECODER", "") != "orjson"


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
    """A record class for the orjson path: a namedtuple reads like a Struct (attributes by
    name) and is built in C."""
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
    """A function that returns a non-null value as msgspec would give it, or raises
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


# --------------------------------------------------------------------- the decoders

#: String fields decoded against a vocabulary learned from the input: msgspec then returns
#: the same string object for the same value, which hashes once and compares by identity,
#: and that makes grouping cheap. Seeded with the values the format defines.
SEED_VOCABULARY: Final[dict[str, tuple[str, ...]]] = {
    "kind": KINDS,
    "outcome": OUTCOMES,
    "layer": LAYERS,
    "retryOrigin": tuple(o.value for o in RetryOrigin),
    "toolSafety": tuple(s.value for s in ToolSafety),
    "endReason": tuple(r.value for r in EndReason),
    "method": (
        "initialize",
        "notifications/initialized",
        "tools/list",
        "tools/call",
        "ping",
        "resources/list",
        "resources/read",
        "prompts/list",
        "prompts/get",
    ),
    "client": (),
    "scenario": (),
    "protocolVersion": (),
    "tool": (),
    "server": (),
    "serverMethod": (),
}


def _struct_type(fields: Sequence[str], vocabulary: dict[str, set[str] | None]) -> Any:
    """A msgspec Struct with just these fields (plus `v`), every one defaulting to None.

    A field with a vocabulary only accepts its values (a Literal); msgspec then raises
    ValidationError on a new value and the decoder learns it.
    """
    assert msgspec is not None
    nested = {
        name: msgspec.defstruct(
            name, [(m, _py_type(k) | None, None) for m, k in members.items()], gc=False, frozen=True
        )
        for name, members in NESTED.items()
    }

    def field_type(name: str) -> Any:
        kind = FIELDS[name]
        words = vocabulary.get(name)
        if words is not None:
            return Literal[tuple(sorted(words))] if words else type(None)
        return nested[kind] if kind in nested else _py_type(kind)

    spec: list[Any] = [("v", Literal[RECORD_VERSION])]
    spec += [(f, field_type(f) | None, None) for f in fields]
    return msgspec.defstruct("Record", spec, gc=False)


def _py_type(kind: str) -> Any:
    scalars: dict[str, Any] = {"int": int, "float": float, "str": str, "bool": bool}
    if kind.startswith("list["):
        return GenericAlias(list, scalars[kind[5:-1]])  # list[int] and so on, built at run time
    return scalars[kind]


class BlockDecoder:
    """Decodes blocks of whole lines into records of the given fields.

    `decode(data, final)` returns the records and the bad lines; `final` says the block
    ends the input, so an unterminated last line that fails to parse is a torn write.
    Raises NewerRecordVersion with the line's index when a record is of a newer version.

    With msgspec, a block is first decoded with the learned vocabularies; a new value makes
    it decode again with plain strings and learn the block's values (at most
    `MAX_VOCABULARY` per field; past that the field stays plain). A block that still fails
    is decoded line by line.
    """

    def __init__(self, fields: Sequence[str], *, fast: bool | None = None) -> None:
        unknown = set(fields) - FIELDS.keys()
        if unknown:
            raise ValueError(f"not record fields: {sorted(unknown)}")
        # The records' own order: msgspec looks for each key from the field after the last
        # one it matched, so this order finds each in one comparison (about a third faster).
        self.fields = tuple(f for f in FIELDS if f in fields)
        self.checker = _Checker(self.fields)
        self.fast = msgspec_available() if fast is None else fast
        self.vocabulary: dict[str, set[str] | None] = {
            f: set(SEED_VOCABULARY[f]) for f in self.fields if f in SEED_VOCABULARY
        }
        if self.fast:
            self._plain = msgspec.json.Decoder(_struct_type(self.fields, {}))
            self._literal = msgspec.json.Decoder(_struct_type(self.fields, self.vocabulary))

    def decode(
        self, data: bytes | memoryview, *, final: bool = True
    ) -> tuple[list[Any], list[BadLine]]:
        if not self.fast:
            return self._by_line(bytes(data), final)
        try:
            return self._literal.decode_lines(data), []
        except msgspec.ValidationError:
            pass  # a value not in a vocabulary yet, or a bad line: try plain strings
        except msgspec.DecodeError:
            return self._by_line(bytes(data), final)
        try:
            records = self._plain.decode_lines(data)
        except (msgspec.DecodeError, msgspec.ValidationError):
            records, bad = self._by_line(bytes(data), final)
            self._learn(records)
            return records, bad
        self._learn(records)
        return records, []

    def _learn(self, records: list[Any]) -> None:
        changed = False
        for name, words in self.vocabulary.items():
            if words is None:
                continue
            seen = set(map(attrgetter(name), records))
            seen.discard(None)
            seen = {w for w in seen if type(w) is str}
            if seen <= words:
                continue
            words |= seen
            if len(words) > MAX_VOCABULARY:
                self.vocabulary[name] = None  # too many values to be worth it
            changed = True
        if changed:
            self._literal = msgspec.json.Decoder(_struct_type(self.fields, self.vocabulary))

    def _by_line(self, data: bytes, final: bool) -> tuple[list[Any], list[BadLine]]:
        lines = data.split(b"\n")
        if lines and not lines[-1]:
            lines.pop()
            torn_index = -1
        else:
            torn_index = len(lines) - 1 if final else -1
        records: list[Any] = []
        bad: list[BadLine] = []
        one: Callable[[bytes], Any] | None = self._plain.decode if self.fast else None
        for i, line in enumerate(lines):
            if not line.strip():
                continue  # blank lines (an editor's, a concatenation's) carry nothing
            if one is not None:
                try:
                    records.append(one(line))
                    continue
                except (msgspec.DecodeError, msgspec.ValidationError):
                    pass  # the checker below says why, in the same words either way
            try:
                result = check_line(line, self.checker, torn=i == torn_index)
            except NewerRecordVersion as exc:
                raise NewerRecordVersion(exc.version, index=i, earlier=bad) from None
            if isinstance(result, str):
                bad.append(BadLine(i, result))
            else:
                # Only exotic lines get here (integers too big for orjson, invalid UTF-8
                # in a field we skip): msgspec refused them, orjson took them.
                records.append(result)
        return records, bad
