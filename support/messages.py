"""MCP messages as raw bytes and headers, for clients and upstreams that speak HTTP by hand."""

from __future__ import annotations

import json
from typing import Any


def mcp_headers(
    session: str | None = None, user_agent: str = "hardening/1.0", protocol: str = "2025-11-25"
) -> list[tuple[str, str]]:
    headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("User-Agent", user_agent),
        ("MCP-Protocol-Version", protocol),
    ]
    if session:
        headers.append(("Mcp-Session-Id", session))
    return headers


def jbytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def tool_call(rid: Any, tool: str = "echo", **arguments: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }


def tool_result(rid: Any, text: str = "ok", is_error: bool = False) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "result": {"content": [{"type": "text", "text": text}], "isError": is_error},
    }


def sse_block(message: Any, event_id: str | None = None) -> bytes:
    out = b"event: message\n"
    if event_id is not None:
        out += b"id: " + event_id.encode() + b"\n"
    return out + b"data: " + jbytes(message) + b"\n\n"
