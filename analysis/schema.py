"""What the analysis reads from a record: the version, the fields, and the outcome vocabulary.

One declaration drives both decoders (msgspec Structs when msgspec is installed, orjson plus
a checker otherwise), so the two accept and reject exactly the same lines. Only fields some
command uses are declared; readers ignore the rest, as `docs/record-format.md` asks.
"""

from __future__ import annotations

from typing import Final

#: The record format version this command reads (`"v"` in every record).
RECORD_VERSION: Final = 1

# Field types, spelled small so both decoders can be built from them: a scalar name, a list
# of a scalar, or the name of a nested object below. Every field may also be null or absent.
FieldType = str

#: Nested objects, with the members the analysis reads.
NESTED: Final[dict[str, dict[str, FieldType]]] = {
    "JsonRpc": {"errorCode": "int"},
    "Sse": {"events": "int", "final": "bool", "end": "str", "resumed": "bool"},
    "Injected": {"rule": "str", "action": "str"},
}

#: Every field any command reads, with its type (see `docs/record-format.md`).
FIELDS: Final[dict[str, FieldType]] = {
    # In the order records carry them (docs/record-format.md): the decoder declares its
    # fields in this order, which is what makes msgspec find each key at the first try.
    "id": "int",
    "kind": "str",
    "ts": "str",
    "durationMs": "float",
    "server": "str",
    "session": "str",
    "client": "str",
    "protocolVersion": "str",
    "method": "str",
    "tool": "str",
    "postCount": "int",
    "httpStatuses": "list[int]",
    "contentType": "str",
    "jsonrpc": "JsonRpc",
    "outcome": "str",
    "layer": "str",
    "sse": "Sse",
    "retryOrigin": "str",
    "attempt": "int",
    "retryOf": "int",
    "retryDelayMs": "float",
    "retryAfterMs": "float",
    "retryAfterHonored": "bool",
    "toolSafety": "str",
    "unsafeRetry": "bool",
    "continues": "int",
    "previousSession": "str",
    "negotiation": "bool",
    "serverMethod": "str",
    "endReason": "str",
    "injected": "Injected",
    "scenario": "str",
    "notes": "list[str]",
}

#: What `summary` and `compare` need; a smaller set decodes faster.
SUMMARY_FIELDS: Final = (
    "kind",
    "durationMs",
    "client",
    "scenario",
    "protocolVersion",
    "method",
    "tool",
    "httpStatuses",
    "jsonrpc",
    "outcome",
    "layer",
    "injected",
)

#: Everything: `retries`, `sessions` and `show` follow links between records.
ALL_FIELDS: Final = tuple(FIELDS)

# Record kinds.
REQUEST: Final = "request"
NOTIFICATION: Final = "notification"
RESPONSE: Final = "response"
SESSION_END: Final = "session_end"
KINDS: Final = (REQUEST, NOTIFICATION, RESPONSE, SESSION_END)

#: Layers in the order a table lists them (outer to inner, then the proxy's own).
LAYERS: Final = ("transport", "protocol", "application", "interaction", "proxy")

#: Outcomes in the order the record format decides them.
OUTCOMES: Final = (
    "NO_RESPONSE",
    "HTTP_ERROR",
    "UNINSPECTED",
    "STREAM_INCOMPLETE",
    "MALFORMED_JSON",
    "INVALID_ENVELOPE",
    "JSONRPC_ERROR",
    "INPUT_REQUIRED",
    "INVALID_TOOL_RESULT",
    "TOOL_ERROR",
    "TOOL_SUCCESS",
    "SUCCESS",
    "INVALID_RESULT",
)

#: A call whose outcome is none of these failed. INPUT_REQUIRED is a turn, not a failure.
NOT_FAILED: Final = frozenset({"SUCCESS", "TOOL_SUCCESS", "INPUT_REQUIRED"})

#: Outcomes that end an input-required chain well.
COMPLETED: Final = frozenset({"SUCCESS", "TOOL_SUCCESS"})

INITIALIZE: Final = "initialize"
INPUT_REQUIRED: Final = "INPUT_REQUIRED"
JSONRPC_ERROR: Final = "JSONRPC_ERROR"

#: JSON-RPC "invalid params": repeating the same params cannot succeed.
INVALID_PARAMS: Final = -32602

#: How a retry was made (`retryOrigin`), in the order tables list them.
RETRY_ORIGINS: Final = ("resend", "reissue", "reinit")

#: `endReason` of a session the server answered 404 (it forgot the session).
NOT_FOUND: Final = "not_found"

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
