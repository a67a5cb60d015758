"""The replies a fault sends instead of the upstream's: `Reply` (a complete HTTP answer)
and the builders of its bodies (JSON-RPC errors, tool errors, input requests, malformed
answers), each carrying the request's JSON-RPC id with its JSON type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .fault_encoding import _JSON, _SSE, _dumps
from .fault_request import RequestView
from .fault_rules import Action, InputRequired, JsonRpcError, Malformed, ToolError


@dataclass(frozen=True, slots=True)
class Reply:
    """A complete HTTP answer. No Content-Length: the proxy frames the body itself."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)


def _empty(status: int, headers: tuple[tuple[str, str], ...] = ()) -> Reply:
    return Reply(status, headers, b"")


def _message_reply(payload: bytes, *, status: int = 200, sse: bool = False) -> Reply:
    """One JSON-RPC message as a JSON body or as a one-event SSE stream."""
    if sse:
        body = b"event: message\ndata: " + payload + b"\n\n"
        return Reply(status, (("content-type", _SSE), ("cache-control", "no-cache")), body)
    return Reply(status, (("content-type", _JSON),), payload)


def _envelope(rpc_id: object, **member: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, **member}


def _tool_result(request: RequestView, text: str, is_error: bool) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": is_error}
    if (request.protocol_version or "") >= "2026":
        result = {"resultType": "complete", **result}  # the 2026-07-28 result shape
    return result


def _input_required(a: InputRequired, request: RequestView, state: str) -> Reply:
    asked = {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": a.message,
            "requestedSchema": {
                "type": "object",
                "properties": {"approve": {"type": "boolean", "title": "Approve"}},
                "required": ["approve"],
            },
        },
    }
    result = {
        "resultType": "input_required",
        "inputRequests": {a.key: asked},
        "requestState": state,
    }
    return _message_reply(_dumps(_envelope(request.rpc_id, result=result)), sse=a.sse)


def _answer(a: Action, request: RequestView) -> Reply:
    """The reply of jsonrpc_error, tool_error and malformed."""
    rid = request.rpc_id
    if isinstance(a, JsonRpcError):
        payload = _dumps(_envelope(rid, error=a.error.member()))
        return _message_reply(payload, status=a.status, sse=a.sse)
    if isinstance(a, ToolError):
        payload = _dumps(_envelope(rid, result=_tool_result(request, a.text, True)))
        return _message_reply(payload, sse=a.sse)
    assert isinstance(a, Malformed)
    return _message_reply(_malformed(a.kind, request), sse=a.sse)


def _malformed(kind: str, request: RequestView) -> bytes:
    rid = request.rpc_id
    if request.method == "tools/call":
        result: dict[str, Any] = _tool_result(request, "injected", False)
    else:
        result = {}
    if kind == "wrong_id":
        return _dumps(_envelope(_other_id(rid), result=result))
    if kind == "result_and_error":
        error = {"code": -32603, "message": "injected: result and error together"}
        return _dumps(_envelope(rid, result=result, error=error))
    # invalid_json: a real answer without its closing brace (the id is still readable).
    return _dumps(_envelope(rid, result=result))[:-1]


def _other_id(rpc_id: object) -> object:
    """A different id of the same JSON type (a type change is a different fault)."""
    if isinstance(rpc_id, int):
        return rpc_id + 1000
    if isinstance(rpc_id, str):
        return f"{rpc_id}-not-yours"
    return 1000
