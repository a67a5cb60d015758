"""What the analysis reads from a record, typed from the record definition.

The record is defined once, in the core (`mcp_layers_core.record`): field order, types and
vocabularies come from there. This module spells their types in the small language the line
checker is built from (orjson plus a checker, `records.py`; the engine's column types come
from the same definition, `table.py`), so the two accept and reject the same lines, and
gives the commands the vocabularies as plain strings.
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
        return f"list[{_decoder_type(t.item)}]"
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

# Record kinds.
REQUEST: Final = record.Kind.REQUEST.value
NOTIFICATION: Final = record.Kind.NOTIFICATION.value
RESPONSE: Final = record.Kind.RESPONSE.value
SESSION_END: Final = record.Kind.SESSION_END.value
STREAM: Final = record.Kind.STREAM.value
KINDS: Final = tuple(k.value for k in record.Kind)

#: Layers in the order a table lists them (outer to inner, then the proxy's own).
LAYERS: Final = tuple(layer.value for layer in record.Layer)

#: Outcomes in the order the record format decides them.
OUTCOMES: Final = tuple(o.value for o in record.Outcome)

#: A call whose outcome is none of these failed. INPUT_REQUIRED is a turn, not a failure.
NOT_FAILED: Final = frozenset(o.value for o in record.NOT_FAILED)

#: Outcomes that end an input-required chain well.
COMPLETED: Final = frozenset(o.value for o in record.SUCCESSFUL)

INITIALIZE: Final = "initialize"
INPUT_REQUIRED: Final = record.Outcome.INPUT_REQUIRED.value
JSONRPC_ERROR: Final = record.Outcome.JSONRPC_ERROR.value

#: JSON-RPC "invalid params": repeating the same params cannot succeed.
INVALID_PARAMS: Final = -32602

#: How a retry was made (`retryOrigin`), in the order tables list them.
RETRY_ORIGINS: Final = tuple(o.value for o in record.RETRY_ORIGINS)

#: `endReason` of a session the server answered 404 (it forgot the session).
NOT_FOUND: Final = record.EndReason.NOT_FOUND.value

#: A request record's last HTTP status that means the same.
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
