"""Adversarial sweep: every verdict must agree with what the official SDK client saw.

Issue 18. Each case is one canned upstream answer to one request (a tool call, a list, a
handshake…) in one protocol version, derived from the spec's MUSTs. The scripted
upstream serves it; the official Python SDK client (`mcp`, pinned) asks for it through a
real mitmdump with the addon; then two things are checked:

- the record's outcome is the one the case expects (docs/record-format.md), and
- it agrees with the client: a *successful* outcome (SUCCESS, TOOL_SUCCESS, TOOL_ERROR,
  INPUT_REQUIRED: the answer was delivered as a valid result) exactly when the SDK
  returned a result; any other outcome exactly when the SDK raised, failed or timed out.
  `UNINSPECTED` claims nothing (the proxy could not look) and is not compared. A case
  may say why it knowingly disagrees with the SDK (`disagree`): the spec's MUST wins.

Every case runs on its own URL path (`/sweep/<name>`) with its own user agent, so one
upstream and one proxy serve them all, several at a time. `SWEEP_TABLE` (env) names a
file to write the results table to.
"""

from __future__ import annotations

import concurrent.futures
import gzip
import os
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anyio
import brotli  # mitmproxy's own dependency
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_layers_analysis.records import CHECKER, check_line
from mcp_layers_support.harness import Proxy
from mcp_layers_support.scripted_upstream import Received, Reply, ScriptedUpstream, json_bytes

pytestmark = pytest.mark.e2e

V2024, V0326, V0618, V1125, V2026 = (
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
)
ALL_VERSIONS = (V2024, V0326, V0618, V1125, V2026)
#: Outcomes that say the client got a valid answer.
DELIVERED = frozenset({"SUCCESS", "TOOL_SUCCESS", "TOOL_ERROR", "INPUT_REQUIRED"})
CALL_TIMEOUT_S = 3.0
CASE_TIMEOUT_S = 15.0
RECORD_WAIT_S = 10.0
WORKERS = 6
TOOL = "weather"

Answer = Callable[[Any], Reply]


@dataclass(frozen=True)
class Case:
    name: str
    version: str
    answer: Answer  # the reply to the target request, from its JSON-RPC id
    outcome: str  # the record's expected outcome
    method: str = "tools/call"
    note: str | None = None  # a note the record must carry
    #: Why the record knowingly disagrees with the SDK client (None: it must agree).
    disagree: str | None = None


# -- canned answers ---------------------------------------------------------------------


def _complete(version: str, result: dict[str, Any]) -> dict[str, Any]:
    """2026-07-28 results carry `resultType` (required there); earlier ones do not."""
    return {"resultType": "complete", **result} if version >= V2026 else result


def _cacheable(version: str, result: dict[str, Any]) -> dict[str, Any]:
    """2026-07-28 list/read results also carry the caching directives (required)."""
    if version < V2026:
        return result
    return {"resultType": "complete", "ttlMs": 0, "cacheScope": "private", **result}


def tool_result(version: str, **fields: Any) -> dict[str, Any]:
    return _complete(version, {"content": [{"type": "text", "text": "sunny"}], **fields})


def ok(rid: Any, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": result}


def err(rid: Any, code: int = -32602, message: str = "bad params") -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "error": {"code": code, "message": message}}
    if rid is not _NO_ID:
        msg["id"] = rid
    return msg


_NO_ID = object()
JSON = [("Content-Type", "application/json")]
SSE = [("Content-Type", "text/event-stream")]


def body(value: Any) -> bytes:
    return value if isinstance(value, bytes) else json_bytes(value)


def as_json(make: Callable[[Any], Any], status: int = 200, headers: Any = JSON) -> Answer:
    return lambda rid: Reply(status, list(headers), body(make(rid)))


def as_sse(
    make: Callable[[Any], Any],
    status: int = 200,
    event: str | None = None,
    before: tuple[bytes, ...] = (),
) -> Answer:
    def reply(rid: Any) -> Reply:
        head = f"event: {event}\n".encode() if event is not None else b""
        data = head + b"data: " + body(make(rid)) + b"\n\n"
        return Reply(status, SSE, b"".join(before) + data)

    return reply


def encoded(make: Callable[[Any], Any], encoding: str, pack: Callable[[bytes], bytes]) -> Answer:
    return lambda rid: Reply(200, [*JSON, ("Content-Encoding", encoding)], pack(body(make(rid))))


def raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-15)
    return packer.compress(data) + packer.flush()


PROGRESS = b'data: {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}\n\n'

# -- the cases ------------------------------------------------------------------------------


def _cases() -> list[Case]:
    cases: list[Case] = []
    add = cases.append
    for v in ALL_VERSIONS:
        add(Case(f"ok_json_{v}", v, as_json(lambda r, v=v: ok(r, tool_result(v))), "TOOL_SUCCESS"))
        add(Case(f"ok_sse_{v}", v, as_sse(lambda r, v=v: ok(r, tool_result(v))), "TOOL_SUCCESS"))
        add(
            Case(
                f"tool_error_{v}",
                v,
                as_json(lambda r, v=v: ok(r, tool_result(v, isError=True))),
                "TOOL_ERROR",
            )
        )
        add(Case(f"jsonrpc_error_sse_{v}", v, as_sse(lambda r: err(r)), "JSONRPC_ERROR"))
    v = V0618
    good = lambda r: ok(r, tool_result(V0618))  # noqa: E731
    add(
        Case(
            "no_content_type",
            v,
            as_json(good, headers=()),
            "TRANSPORT_VIOLATION",
            note="no_content_type",
        )
    )
    add(
        Case(
            "text_html",
            V1125,
            as_json(good, headers=[("Content-Type", "text/html")]),
            "TRANSPORT_VIOLATION",
            note="content_type:text/html",
        )
    )
    add(
        Case(
            "text_plain_2026",
            V2026,
            as_json(lambda r: ok(r, tool_result(V2026)), headers=[("Content-Type", "text/plain")]),
            "TRANSPORT_VIOLATION",
            note="content_type:text/plain",
        )
    )
    add(
        Case(
            "json_charset",
            v,
            as_json(good, headers=[("Content-Type", "application/json; charset=utf-8")]),
            "TOOL_SUCCESS",
        )
    )
    add(
        Case(
            "json_upper_case_type",
            V0326,
            as_json(good, headers=[("Content-Type", "Application/JSON")]),
            "TOOL_SUCCESS",
        )
    )
    add(
        Case(
            "answer_in_202",
            v,
            as_json(good, status=202),
            "TRANSPORT_VIOLATION",
            note="202_for_request",
        )
    )
    add(
        Case(
            "empty_202", V1125, lambda r: Reply(202), "TRANSPORT_VIOLATION", note="202_for_request"
        )
    )
    add(
        Case(
            "accepted_202_text",
            V0326,
            lambda r: Reply(202, [("Content-Type", "text/plain")], b"Accepted"),
            "TRANSPORT_VIOLATION",
            note="202_for_request",
        )
    )
    add(
        Case(
            "sse_in_202",
            V0326,
            as_sse(good, status=202),
            "TRANSPORT_VIOLATION",
            note="202_for_request",
        )
    )
    add(
        Case(
            "sse_event_result",
            v,
            as_sse(good, event="result"),
            "TRANSPORT_VIOLATION",
            note="sse_event_type:result",
        )
    )
    add(
        Case(
            "sse_event_Message",
            V1125,
            as_sse(good, event="Message"),
            "TRANSPORT_VIOLATION",
            note="sse_event_type:Message",
        )
    )
    add(Case("sse_event_message_explicit", v, as_sse(good, event="message"), "TOOL_SUCCESS"))
    add(
        Case(
            "sse_wrong_event_then_message",
            v,
            as_sse(good, before=(b"event: result\ndata: " + json_bytes(ok(0, {})) + b"\n\n",)),
            "TOOL_SUCCESS",
        )
    )
    add(
        Case(
            "sse_notification_then_answer", V0326, as_sse(good, before=(PROGRESS,)), "TOOL_SUCCESS"
        )
    )
    add(
        Case(
            "sse_error_null_id",
            v,
            as_sse(lambda r: err(None)),
            "JSONRPC_ERROR",
            note="error_without_id",
        )
    )
    add(
        Case(
            "sse_error_no_id",
            V1125,
            as_sse(lambda r: err(_NO_ID)),
            "JSONRPC_ERROR",
            note="error_without_id",
        )
    )
    add(
        Case(
            "sse_400_error_null_id",
            V1125,
            as_sse(lambda r: err(None, -32600, "no"), 400),
            "HTTP_ERROR",
            note="error_without_id",
        )
    )
    add(
        Case(
            "json_error_null_id",
            v,
            as_json(lambda r: err(None)),
            "JSONRPC_ERROR",
            note="error_without_id",
        )
    )
    add(Case("json_400_error", V2026, as_json(lambda r: err(r, -32602, "bad"), 400), "HTTP_ERROR"))
    add(Case("json_500_success_body", v, as_json(good, 500), "HTTP_ERROR"))
    add(
        Case(
            "array_answer_0618",
            v,
            as_json(lambda r: [good(r)]),
            "INVALID_ENVELOPE",
            note="batch_answer:2025-06-18",
        )
    )
    add(
        Case(
            "array_answer_1125",
            V1125,
            as_json(lambda r: [ok(r, tool_result(V1125))]),
            "INVALID_ENVELOPE",
            note="batch_answer:2025-11-25",
        )
    )
    add(
        Case(
            "array_answer_0326",
            V0326,
            as_json(lambda r: [good(r)]),
            "TOOL_SUCCESS",
            disagree="2025-03-26 clients MUST be able to receive batches; the SDK cannot",
        )
    )
    # One rule for both carriers: an array in an SSE event is judged as in a JSON body.
    add(
        Case(
            "sse_array_answer_0618",
            v,
            as_sse(lambda r: [good(r)]),
            "INVALID_ENVELOPE",
            note="batch_answer:2025-06-18",
        )
    )
    add(
        Case(
            "sse_array_answer_2026",
            V2026,
            as_sse(lambda r: [ok(r, tool_result(V2026))]),
            "INVALID_ENVELOPE",
            note="batch_answer:2026-07-28",
        )
    )
    add(
        Case(
            "sse_array_answer_0326",
            V0326,
            as_sse(lambda r: [good(r)]),
            "TOOL_SUCCESS",
            disagree="2025-03-26 clients MUST be able to receive batches; the SDK cannot",
        )
    )
    add(Case("wrong_id_json", v, as_json(lambda r: good(r + 1000)), "INVALID_ENVELOPE"))
    # An id of 7.0 for the request of id 7: JSON Schema counts 7.0 as an integer, but the
    # Python SDK client's message parser refuses it ("Failed to parse JSON response"), so
    # the answer never reaches the caller: not a success.
    add(Case("id_integral_float", v, as_json(lambda r: good(float(r))), "INVALID_ENVELOPE"))
    add(Case("id_fractional_float", v, as_json(lambda r: good(r + 0.5)), "INVALID_ENVELOPE"))
    add(
        Case(
            "string_id_json",
            V1125,
            as_json(lambda r: good(str(r))),
            "INVALID_ENVELOPE",
            disagree='the SDK matches the answer id "1" to request 1; JSON-RPC ids are '
            "compared as JSON values, type included (the format's documented rule)",
        )
    )
    add(
        Case(
            "wrong_id_sse",
            v,
            as_sse(lambda r: good(r + 1000)),
            "INVALID_ENVELOPE",
            disagree="the SDK pairs any answer on a POST's stream with that POST's request "
            "(it overwrites the id); the spec says the response MUST carry the request's id",
        )
    )
    add(Case("malformed_json", v, as_json(lambda r: b'{"jsonrpc":"2.0",'), "MALFORMED_JSON"))
    add(Case("empty_json_body", V1125, as_json(lambda r: b""), "MALFORMED_JSON"))
    add(
        Case(
            "json_with_bom",
            v,
            as_json(lambda r: b"\xef\xbb\xbf" + json_bytes(good(r))),
            "MALFORMED_JSON",
        )
    )
    add(
        Case(
            "result_and_error",
            v,
            as_json(lambda r: {**good(r), "error": {"code": 1, "message": "x"}}),
            "INVALID_ENVELOPE",
        )
    )
    add(
        Case("jsonrpc_1_0", v, as_json(lambda r: {**good(r), "jsonrpc": "1.0"}), "INVALID_ENVELOPE")
    )
    add(
        Case(
            "content_not_list",
            v,
            as_json(lambda r: ok(r, {"content": "sunny"})),
            "INVALID_TOOL_RESULT",
        )
    )
    add(
        Case(
            "content_missing",
            V1125,
            as_json(lambda r: ok(r, {"isError": False})),
            "INVALID_TOOL_RESULT",
        )
    )
    add(
        Case(
            "content_block_video",
            v,
            as_json(lambda r: ok(r, {"content": [{"type": "video"}]})),
            "INVALID_TOOL_RESULT",
            note="unknown_content_block:video",
        )
    )
    add(
        Case(
            "text_block_without_text",
            v,
            as_json(lambda r: ok(r, {"content": [{"type": "text"}]})),
            "INVALID_TOOL_RESULT",
            note="malformed_content_block:text",
        )
    )
    add(
        Case(
            "audio_block",
            V0326,
            as_json(
                lambda r: ok(
                    r, {"content": [{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}]}
                )
            ),
            "TOOL_SUCCESS",
        )
    )
    add(
        Case(
            "resource_link_block",
            V1125,
            as_json(
                lambda r: ok(
                    r, {"content": [{"type": "resource_link", "uri": "file:///a", "name": "a"}]}
                )
            ),
            "TOOL_SUCCESS",
        )
    )
    add(
        Case(
            "is_error_not_bool",
            v,
            as_json(lambda r: ok(r, tool_result(v, isError="yes"))),
            "INVALID_TOOL_RESULT",
            disagree='pydantic\'s lax mode reads "yes" as true; the schema says boolean',
        )
    )
    add(Case("result_not_object", v, as_json(lambda r: ok(r, [])), "INVALID_TOOL_RESULT"))
    add(
        Case(
            "result_type_ignored_1125",
            V1125,
            as_json(lambda r: ok(r, tool_result(V1125, resultType="input_required"))),
            "TOOL_SUCCESS",
        )
    )
    add(
        Case(
            "input_required_empty_2026",
            V2026,
            as_json(lambda r: ok(r, {"resultType": "input_required"})),
            "INVALID_TOOL_RESULT",
            note="input_required_without_requests",
        )
    )
    add(
        Case(
            "result_type_unknown_2026",
            V2026,
            as_json(lambda r: ok(r, tool_result(V2026, resultType="later"))),
            "INVALID_TOOL_RESULT",
            disagree="the spec: a resultType the client does not recognise MUST be treated "
            "as invalid; the SDK accepts it",
        )
    )
    add(
        Case(
            "stream_ends_without_answer",
            v,
            as_sse(lambda r: b"", before=(PROGRESS,)),
            "STREAM_INCOMPLETE",
        )
    )
    add(Case("sse_data_not_json", v, as_sse(lambda r: b"{oops"), "MALFORMED_JSON"))
    add(
        Case(
            "br_json",
            v,
            encoded(good, "br", brotli.compress),
            "UNINSPECTED",
            note="encoded_body:br",
        )
    )
    add(Case("raw_deflate_json", v, encoded(good, "deflate", raw_deflate), "TOOL_SUCCESS"))
    add(
        Case(
            "gzip_json",
            V1125,
            encoded(lambda r: ok(r, tool_result(V1125)), "gzip", gzip.compress),
            "TOOL_SUCCESS",
        )
    )
    add(
        Case(
            "gzip_label_plain_body",
            v,
            encoded(good, "gzip", lambda b: b),
            "UNINSPECTED",
            note="body_undecodable:gzip",
        )
    )
    add(
        Case(
            "result_type_absent_2026",
            V2026,
            as_json(lambda r: ok(r, {"content": [{"type": "text", "text": "x"}]})),
            # 2026-07-28 basic: "The `result` MUST include a `resultType` field"; the
            # absent-means-complete rule is for servers of earlier versions, and the
            # SDK client refuses the result.
            "INVALID_TOOL_RESULT",
            note="result_missing:resultType",
        )
    )
    add(
        Case(
            "tools_list_2026_ok",
            V2026,
            as_json(lambda r: ok(r, _cacheable(V2026, {"tools": [TOOL_DEF]}))),
            "SUCCESS",
            method="tools/list",
        )
    )
    add(
        Case(
            "tools_list_2026_no_cache",
            V2026,
            as_json(lambda r: ok(r, {"resultType": "complete", "tools": []})),
            "INVALID_RESULT",
            method="tools/list",
            note="result_missing:cacheScope",
        )
    )
    add(
        Case(
            "tools_list_2025_no_cache",
            V1125,
            as_json(lambda r: ok(r, {"tools": []})),
            "SUCCESS",
            method="tools/list",
        )
    )
    # Other methods: the shape each one's result must have.
    add(
        Case(
            "tools_list_ok",
            V1125,
            as_json(lambda r: ok(r, {"tools": [TOOL_DEF]})),
            "SUCCESS",
            method="tools/list",
        )
    )
    add(
        Case(
            "tools_list_missing_tools",
            V1125,
            as_json(lambda r: ok(r, {})),
            "INVALID_RESULT",
            method="tools/list",
            note="result_missing:tools",
        )
    )
    add(
        Case(
            "tools_list_no_ctype",
            V0326,
            as_json(lambda r: ok(r, {"tools": []}), headers=()),
            "TRANSPORT_VIOLATION",
            method="tools/list",
            note="no_content_type",
        )
    )
    add(
        Case(
            "initialize_ok",
            V0618,
            as_json(lambda r: ok(r, init_result(V0618))),
            "SUCCESS",
            method="initialize",
        )
    )
    add(
        Case(
            "initialize_no_server_info",
            V0618,
            as_json(lambda r: ok(r, {"protocolVersion": V0618, "capabilities": {}})),
            "INVALID_RESULT",
            method="initialize",
            note="result_missing:serverInfo",
        )
    )
    add(
        Case(
            "initialize_sse_event_type",
            V1125,
            as_sse(lambda r: ok(r, init_result(V1125)), event="init"),
            "TRANSPORT_VIOLATION",
            method="initialize",
        )
    )
    add(Case("ping_ok", V0618, as_json(lambda r: ok(r, {})), "SUCCESS", method="ping"))
    add(
        Case("ping_not_object", V0618, as_json(lambda r: ok(r, 3)), "INVALID_RESULT", method="ping")
    )
    add(
        Case(
            "prompts_get_missing_messages",
            V1125,
            as_json(lambda r: ok(r, {})),
            "INVALID_RESULT",
            method="prompts/get",
            note="result_missing:messages",
        )
    )
    add(
        Case(
            "resources_read_ok",
            V0618,
            as_json(lambda r: ok(r, {"contents": [{"uri": "file:///a", "text": "a"}]})),
            "SUCCESS",
            method="resources/read",
        )
    )
    add(
        Case(
            "resources_read_no_contents",
            V2026,
            as_json(lambda r: ok(r, {"resultType": "complete"})),
            "INVALID_RESULT",
            method="resources/read",
        )
    )
    _deep_cases(add)
    return cases


def _deep_cases(add: Callable[[Case], None]) -> None:
    """Results wrong below their first level (issue 25 §1): the record and the SDK
    client agree, each judged against the spec's schema of the version."""
    text = {"type": "text", "text": "x"}
    for version in (V0618, V1125, V2026):
        tag = version.replace("-", "")[2:]
        for name, block, note in (
            (
                "resource_without_text",
                {"type": "resource", "resource": {"uri": "file:///a"}},
                "malformed_content_block:resource",
            ),
            (
                "priority_above_1",
                {**text, "annotations": {"priority": 2}},
                "malformed_content_block:text",
            ),
            (
                "audience_not_a_role",
                {**text, "annotations": {"audience": ["bot"]}},
                "malformed_content_block:text",
            ),
        ):
            add(
                Case(
                    f"deep_{name}_{tag}",
                    version,
                    as_json(lambda r, b=block, v=version: ok(r, tool_result(v, content=[b]))),
                    "INVALID_TOOL_RESULT",
                    note=note,
                )
            )
        add(
            Case(
                f"deep_meta_not_object_{tag}",
                version,
                as_json(lambda r, v=version: ok(r, tool_result(v, content=[text], _meta=3))),
                "INVALID_TOOL_RESULT",
                note="result_shape:_meta: not an object",
            )
        )
        add(
            Case(
                f"deep_tool_without_input_schema_{tag}",
                version,
                as_json(lambda r, v=version: ok(r, _cacheable(v, {"tools": [{"name": TOOL}]}))),
                "INVALID_RESULT",
                method="tools/list",
                note="result_shape:tools/0/inputSchema: missing",
            )
        )
        add(
            Case(
                f"deep_annotations_in_range_{tag}",
                version,
                as_json(
                    lambda r, v=version: ok(
                        r,
                        tool_result(
                            v,
                            content=[{**text, "annotations": {"priority": 1000.0 / 1000.0}}],
                            structuredContent={"n": 1e300},
                        ),
                    )
                ),
                "TOOL_SUCCESS",
            )
        )
    add(
        Case(
            "deep_structured_content_not_object_0618",
            V0618,
            as_json(lambda r: ok(r, tool_result(V0618, content=[text], structuredContent=[1]))),
            "INVALID_TOOL_RESULT",
            note="result_shape:structuredContent: not an object",
        )
    )
    add(
        Case(
            "deep_server_info_without_version",
            V0618,
            as_json(lambda r: ok(r, {**init_result(V0618), "serverInfo": {"name": "sweep"}})),
            "INVALID_RESULT",
            method="initialize",
            note="result_shape:serverInfo/version: missing",
        )
    )


TOOL_DEF = {"name": TOOL, "inputSchema": {"type": "object"}}


def init_result(version: str) -> dict[str, Any]:
    return {
        "protocolVersion": version,
        "capabilities": {"tools": {}, "prompts": {}, "resources": {}},
        "serverInfo": {"name": "sweep", "version": "1"},
    }


CASES = _cases()
BY_NAME = {c.name: c for c in CASES}
assert len(BY_NAME) == len(CASES), "case names must be unique"


# -- the upstream: routes by path, answers the handshake, serves the case -------------------


def respond(request: Received) -> Reply:
    name = request.target.split("?", 1)[0].rsplit("/", 1)[-1]
    case = BY_NAME.get(name)
    if case is None or request.method != "POST":
        return Reply(405)
    msg = request.json()
    method = msg.get("method") if isinstance(msg, dict) else None
    rid = msg.get("id") if isinstance(msg, dict) else None
    session = [("Mcp-Session-Id", f"sess-{name}")] if case.version < V2026 else []
    if method == case.method and rid is not None:
        reply = case.answer(rid)
        return Reply(reply.status, [*reply.headers, *session], reply.body)
    if rid is None:
        return Reply(202, session)
    if method == "initialize":
        return Reply(200, [*JSON, *session], json_bytes(ok(rid, init_result(case.version))))
    if method == "tools/list":
        result = _cacheable(case.version, {"tools": [TOOL_DEF]})
        return Reply(200, [*JSON, *session], json_bytes(ok(rid, result)))
    return Reply(200, [*JSON, *session], json_bytes(err(rid, -32601, "not found")))


# -- the client ------------------------------------------------------------------------------


async def _ask(client: Client, method: str) -> Any:
    if method == "tools/call":
        return await client.call_tool(TOOL, {"city": "Paris"})
    if method == "tools/list":
        return await client.list_tools()
    if method == "ping":
        return await client.send_ping()
    if method == "prompts/get":
        return await client.get_prompt("greeting")
    if method == "resources/read":
        return await client.read_resource("file:///a")
    assert method == "initialize"
    return client.protocol_version  # the handshake itself was the question


async def _sdk(url: str, case: Case) -> str:
    """What the SDK client made of the answer: `ok`, or `error: …`."""
    http = httpx2.AsyncClient(
        headers={"User-Agent": f"sweep/{case.name}"},
        timeout=httpx2.Timeout(CALL_TIMEOUT_S, read=CALL_TIMEOUT_S),
    )
    mode = case.version if case.version >= V2026 else "legacy"
    try:
        with anyio.fail_after(CASE_TIMEOUT_S):
            async with (
                http,
                Client(
                    streamable_http_client(url, http_client=http),
                    mode=mode,
                    client_info=types.Implementation(name="sweep", version="1"),
                    read_timeout_seconds=CALL_TIMEOUT_S,
                ) as client,
            ):
                await _ask(client, case.method)
        return "ok"
    except BaseException as e:
        if isinstance(e, KeyboardInterrupt):
            raise
        while isinstance(e, BaseExceptionGroup) and e.exceptions:
            e = e.exceptions[0]  # the real failure inside the task group
        text = f"{type(e).__name__}: {e}".replace("\n", " ")
        return f"error: {text[:140]}"


@dataclass
class Result:
    case: Case
    sdk: str
    record: dict[str, Any] | None


def _record(proxy: Proxy, case: Case) -> dict[str, Any] | None:
    deadline = time.monotonic() + RECORD_WAIT_S
    while True:
        for r in proxy.records():
            if (
                r["kind"] == "request"
                and r["userAgent"] == f"sweep/{case.name}"
                and r["method"] == case.method
            ):
                return r
        if time.monotonic() > deadline:
            return None
        time.sleep(0.05)


def _run(proxy: Proxy, case: Case) -> Result:
    sdk = anyio.run(_sdk, f"{proxy.url.rstrip('/')}/sweep/{case.name}", case)
    return Result(case, sdk, _record(proxy, case))


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Result]]:
    with (
        ScriptedUpstream(responder=respond, keep_log=False) as up,
        Proxy(up.port, tmp_path_factory.mktemp("sweep")) as proxy,
        concurrent.futures.ThreadPoolExecutor(WORKERS) as pool,
    ):
        results = {r.case.name: r for r in pool.map(lambda c: _run(proxy, c), CASES)}
        _write_table(results)
        RECORDING.append(proxy.text())
        yield results


def _write_table(results: dict[str, Result]) -> None:
    path = os.environ.get("SWEEP_TABLE")
    if not path:
        return
    lines = [
        "| case | version | method | record | notes | SDK | agree |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results.values():
        outcome = r.record["outcome"] if r.record else "(no record)"
        notes = ", ".join(r.record["notes"]) if r.record else ""
        agree = "n/a" if outcome in ("UNINSPECTED", "(no record)") else _agrees(r)
        if r.case.disagree and agree == "no":
            agree = "no (chosen)"
        sdk = r.sdk.replace("|", "/")
        lines.append(
            f"| {r.case.name} | {r.case.version} | {r.case.method} | {outcome} | {notes} | "
            f"{sdk[:90]} | {agree} |"
        )
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")


def _agrees(r: Result) -> str:
    assert r.record is not None
    return "yes" if (r.record["outcome"] in DELIVERED) == (r.sdk == "ok") else "no"


def test_the_sweep_is_big_enough() -> None:
    assert len(CASES) >= 40
    assert {c.version for c in CASES} == set(ALL_VERSIONS)


@pytest.mark.parametrize("name", [c.name for c in CASES])
def test_verdict_matches_the_client(sweep: dict[str, Result], name: str) -> None:
    r = sweep[name]
    assert r.record is not None, f"no record for {name} (SDK: {r.sdk})"
    record = r.record
    assert record["outcome"] == r.case.outcome, (record, r.sdk)
    assert record["protocolVersion"] == r.case.version, record
    if r.case.note is not None:
        assert r.case.note in record["notes"], record
    if record["outcome"] == "UNINSPECTED":
        return  # the proxy could not look: it claims nothing the client could contradict
    agrees = _agrees(r) == "yes"
    if r.case.disagree is None:
        assert agrees, f"record {record['outcome']} {record['notes']}, SDK {r.sdk}"
    else:
        assert not agrees, f"the documented disagreement is gone: SDK {r.sdk}"


def test_null_id_error_on_a_4xx_stream_keeps_its_code(sweep: dict[str, Result]) -> None:
    record = sweep["sse_400_error_null_id"].record
    assert record is not None
    assert record["jsonrpc"]["errorCode"] == -32600, record


#: The sweep's recording as the proxy wrote it (set by the `sweep` fixture).
RECORDING: list[str] = []


def test_the_recording_stays_readable(sweep: dict[str, Result]) -> None:
    # Every line the proxy wrote for these answers (deep, huge, odd numbers, bad UTF-16
    # escapes) is one record that `mcp-layers` reads: the line checker finds no fault.
    (text,) = RECORDING
    lines = text.encode("utf-8", "surrogatepass").splitlines()
    assert len(lines) >= len([r for r in sweep.values() if r.record is not None])
    checked = [(n, check_line(line, CHECKER, torn=False)) for n, line in enumerate(lines, 1)]
    faults = [(n, why) for n, why in checked if isinstance(why, str)]
    assert faults == []
