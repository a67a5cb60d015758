"""JSON-RPC 2.0 shapes as MCP uses them: decoding, recognising and keying messages.

Decoding never raises into callers that use `try_loads`; everything here is pure and
cheap, because it runs on every POST and on every SSE event of a proxied stream.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

_loads: Callable[[Any], Any]
try:  # orjson is a runtime dependency, but the addon must also load into a bare mitmproxy.
    import orjson

    _loads = orjson.loads
    _DECODE_ERRORS: tuple[type[Exception], ...] = (orjson.JSONDecodeError, ValueError, TypeError)
except ImportError:  # pragma: no cover - exercised only where orjson is absent
    _loads = json.loads
    _DECODE_ERRORS = (ValueError, TypeError, RecursionError)


class NotJson:
    """The sentinel type of `NOT_JSON`: the text was not JSON."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NOT_JSON"


NOT_JSON: Final = NotJson()

#: `_meta` keys of the 2026-07-28 per-request envelope.
META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"


def try_loads(data: bytes | str) -> Any:
    """Decode JSON, or return `NOT_JSON`. Never raises (deep nesting included).

    Valid JSON is decoded whatever the fast parser's limits: orjson refuses a number past
    double range (`1e400`) and reads an integer past 64 bits as a float, which would
    change a JSON-RPC id (two ids one apart become equal) or an error code. The
    standard library reads both as JSON has them (integers exact, `1e400` as infinity,
    as JavaScript's `JSON.parse` and Python's `json` do in the SDK clients), so a text
    orjson refused, or whose id or error code came out a float, is decoded again by it.
    Checking the decoded id costs nothing per event; scanning the text would not.
    """
    try:
        value = _loads(data)
    except _DECODE_ERRORS:
        return _exact_loads(data) if _loads is not json.loads else NOT_JSON
    except (RecursionError, ValueError, TypeError):  # the stdlib on deep or odd input
        return NOT_JSON
    if _loads is json.loads:
        return value
    if type(value) is dict:  # the usual case, checked inline: no call per message
        error = value.get("error")
        if isinstance(value.get("id"), float) or (
            type(error) is dict and isinstance(error.get("code"), float)
        ):
            return _exact_loads(data)
    elif _lossy(value):
        return _exact_loads(data)
    return value


def _reject_constant(name: str) -> Any:
    """`NaN`, `Infinity` and `-Infinity` are Python's extensions, not JSON."""
    raise ValueError(f"{name} is not JSON")


def _exact_loads(data: bytes | str) -> Any:
    """The standard library's reading of a JSON text, or `NOT_JSON`: strict UTF-8 (the
    stdlib would also guess UTF-16 and UTF-32, which no client reads), no NaN."""
    try:
        text = data.decode("utf-8") if isinstance(data, bytes) else data
        return json.loads(text, parse_constant=_reject_constant)
    except (RecursionError, ValueError, TypeError):
        return NOT_JSON


def _lossy(value: object) -> bool:
    """Did the fast parser round an id or an error code (a float where JSON had one)?"""
    if isinstance(value, dict):
        return _lossy_message(value)
    if isinstance(value, list):
        return any(isinstance(m, dict) and _lossy_message(m) for m in value)
    return False


def _lossy_message(msg: dict[str, Any]) -> bool:
    if isinstance(msg.get("id"), float):
        return True
    error = msg.get("error")
    return isinstance(error, dict) and isinstance(error.get("code"), float)


def is_request(msg: object) -> bool:
    """A request has a string `method` and an `id`."""
    return isinstance(msg, dict) and isinstance(msg.get("method"), str) and "id" in msg


def is_notification(msg: object) -> bool:
    return isinstance(msg, dict) and isinstance(msg.get("method"), str) and "id" not in msg


def is_response(msg: object) -> bool:
    """Response-shaped: no method, and a `result` or an `error` (possibly both: invalid)."""
    return isinstance(msg, dict) and "method" not in msg and ("result" in msg or "error" in msg)


def looks_like_jsonrpc(msg: object) -> bool:
    """What makes a POST body MCP traffic: a `jsonrpc` member and a method or an answer."""
    return (
        isinstance(msg, dict)
        and "jsonrpc" in msg
        and (isinstance(msg.get("method"), str) or "result" in msg or "error" in msg)
    )


def messages_of(value: object) -> list[dict[str, Any]] | None:
    """The JSON-RPC messages of a decoded POST body, or None when it is not JSON-RPC.

    A 2025-03-26 batch is a non-empty array of messages; any other value must itself
    be one message.
    """
    if isinstance(value, list):
        if value and all(looks_like_jsonrpc(m) for m in value):
            return value
        return None
    if looks_like_jsonrpc(value):
        return [value]  # type: ignore[list-item]
    return None


def id_key(request_id: object) -> tuple[str, object]:
    """A dict key for a JSON-RPC id that keeps its JSON type: `"1"` and `1` differ."""
    # bool is an int in Python but never a valid JSON-RPC id; keep it apart too.
    hashable = isinstance(request_id, str | int | float | bool) or request_id is None
    return (type(request_id).__name__, request_id if hashable else repr(request_id))


def same_id(a: object, b: object) -> bool:
    """JSON equality of two ids, type included (`1 != "1"`, `1 != true`)."""
    return type(a) is type(b) and a == b


def client_of(info: object) -> str | None:
    """`"name@version"` from an MCP `Implementation` object."""
    if not isinstance(info, dict):
        return None
    name = info.get("name")
    if not isinstance(name, str) or not name:
        return None
    version = info.get("version")
    return f"{name}@{version}" if isinstance(version, str) and version else name


def meta_of(msg: dict[str, Any]) -> dict[str, Any]:
    params = msg.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta if isinstance(meta, dict) else {}


def tool_of(msg: dict[str, Any]) -> str | None:
    """`params.name` of a `tools/call`."""
    return _name_of(msg, "tools/call")


def prompt_of(msg: dict[str, Any]) -> str | None:
    """`params.name` of a `prompts/get`."""
    return _name_of(msg, "prompts/get")


def _name_of(msg: dict[str, Any], method: str) -> str | None:
    if msg.get("method") != method:
        return None
    params = msg.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    return name if isinstance(name, str) else None
