"""What the analysis reads from a record, typed from the record definition.

The record is defined once, in the core (`mcp_layers_core.record`): field order, types and
vocabularies come from there. This module spells their types in the small language the line
checker is built from (orjson plus a checker, `records.py`; the engine's column types come
from the same definition, `table.py`), so the two accept and reject the same lines.
The vocabularies are the record's own enums, imported where they are compared; the SQL
spells them through `terms`.
"""

from __future__ import annotations

from typing import Final

from mcp_layers_core import record
from mcp_layers_core.record import Bool, Enum, FieldType, Int, ListOf, Num, Obj, Str

#: The record format version this command reads (`"v"` in every record).
RECORD_VERSION: Final = record.FORMAT_VERSION

# Field types, spelled small so both decoders can be built from them: a scalar name, a list
# of a scalar, or the name of a nested object in `NESTED`. Every field may also be null or
# absent.
DecoderType = str


def _decoder_type(t: FieldType) -> DecoderType | None:
    """The decoder's spelling of a type; None for what no command reads (ids as sent,
    redacted bodies: any JSON)."""
    if isinstance(t, Int):
        return "int"
    if isinstance(t, Num):
        return "float"
    if isinstance(t, Str | Enum):
        return "str"
    if isinstance(t, Bool):
        return "bool"
    if isinstance(t, ListOf):
        item = _decoder_type(t.item)
        return None if item is None else f"list[{item}]"  # a list of objects: not decoded
    return None


def _struct_name(field: str) -> str:
    return {"jsonrpc": "JsonRpc"}.get(field, field[:1].upper() + field[1:])


def _members(t: Obj) -> dict[str, DecoderType]:
    return {m.name: d for m in t.members if (d := _decoder_type(m.type)) is not None}


#: Nested objects, with the members the analysis decodes.
NESTED: Final[dict[str, dict[str, DecoderType]]] = {
    _struct_name(f.name): members
    for f in record.FIELDS
    if isinstance(f.type, Obj) and (members := _members(f.type))
}


def _field_type(name: str, t: FieldType) -> DecoderType | None:
    if isinstance(t, Obj):
        return _struct_name(name) if _struct_name(name) in NESTED else None
    return _decoder_type(t)


#: Every field the analysis decodes, with its type, in the order records carry them. `v`
#: is checked apart.
FIELDS: Final[dict[str, DecoderType]] = {
    f.name: d
    for f in record.FIELDS
    if f.name != "v" and (d := _field_type(f.name, f.type)) is not None
}

#: Layers in the order a table lists them (outer to inner, then the proxy's own).
LAYERS: Final = tuple(record.Layer)

#: Outcomes in the order the record format decides them.
OUTCOMES: Final = tuple(record.Outcome)

INITIALIZE: Final = "initialize"

#: JSON-RPC "invalid params": repeating the same params cannot succeed.
INVALID_PARAMS: Final = -32602

#: A request record's last HTTP status that means the session was lost (`endReason`
#: `not_found` says the same of a `session_end`).
HTTP_NOT_FOUND: Final = 404


def outcome_rank(outcome: str) -> tuple[int, str]:
    """Sort key: the record format's order, unknown outcomes last and alphabetical."""
    try:
        return (OUTCOMES.index(outcome), "")
    except ValueError:
        return (len(OUTCOMES), outcome)


def layer_rank(layer: str) -> tuple[int, str]:
    """Sort key: `LAYERS` order, unknown layers last and alphabetical."""
    try:
        return (LAYERS.index(layer), "")
    except ValueError:
        return (len(LAYERS), layer)
