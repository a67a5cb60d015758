"""The lab's fake model API, on its own, with the request shapes the real clients send.

The shapes (and the event sequences the clients need back) are the ones recorded from
Claude Code 2.1.197, Codex 0.171.0, Gemini CLI 0.61.0 and opencode 1.18.33 (docs/lab.md),
and Droid 0.225.2's ToolSearch step from requests it really sent (tests/lab/fixtures/droid).
"""

from __future__ import annotations

import gzip
import http.client
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_layers_lab import clients
from mcp_layers_lab.fake_model import (
    DEFERRED_ECHO,
    DONE_PREFIX,
    TOOL_SEARCH,
    TOOL_SEARCH_HOLD_S,
    TOOL_SEARCH_TRIES,
    FakeModel,
    ToolResult,
    Turn,
    chat_turn,
    decide,
    deferred_tool,
    pick_tool,
    read_log,
)

PROMPT = "Call the echo tool with text hello"
ECHO_SCHEMA = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


@pytest.fixture(params=["once", "again_after_error"])
def script(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def fake(tmp_path: Path, script: str) -> Iterator[FakeModel]:
    with FakeModel(script, tmp_path / "model.log") as model:
        yield model


def post(
    fake: FakeModel,
    path: str,
    body: Any,
    headers: dict[str, str] | None = None,
    raw: bytes | None = None,
) -> tuple[int, str, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=10)
    try:
        data = raw if raw is not None else json.dumps(body).encode()
        conn.request(
            "POST", path, body=data, headers={"content-type": "application/json", **(headers or {})}
        )
        response = conn.getresponse()
        return response.status, response.getheader("content-type") or "", response.read()
    finally:
        conn.close()


def sse(body: bytes) -> list[tuple[str | None, Any]]:
    """(event, data) of each event, CRLF or LF line ends."""
    out = []
    text = body.decode().replace("\r\n", "\n")
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        event, data = None, []
        for line in block.split("\n"):
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        out.append((event, json.loads("\n".join(data))))
    return out


# ------------------------------------------------------------------ Anthropic Messages


def claude_request(messages: list[Any]) -> dict[str, Any]:
    """What Claude Code 2.1.197 sends: streamed, many tools, the MCP one among them."""
    return {
        "model": "claude-opus-4-8",
        "max_tokens": 64000,
        "stream": True,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "tools": [
            {"name": "Bash", "description": "Run a command", "input_schema": {"type": "object"}},
            {"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}},
            {"name": "mcp__echo__fail", "description": "Fails", "input_schema": ECHO_SCHEMA},
            {"name": "mcp__echo__echo", "description": "Echo", "input_schema": ECHO_SCHEMA},
        ],
        "messages": messages,
    }


USER = {"role": "user", "content": [{"type": "text", "text": PROMPT}]}


def tool_use(tool_id: str = "toolu_1", name: str = "mcp__echo__echo") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": tool_id, "name": name, "input": {"text": "hello"}}],
    }


def tool_result(text: str, is_error: bool = False, tool_id: str = "toolu_1") -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": tool_id,
        "content": [{"type": "text", "text": text}],
    }
    if is_error:
        block["is_error"] = True
    return {"role": "user", "content": [block]}


ANTHROPIC_EVENTS = [
    "message_start",
    "content_block_start",
    "content_block_delta",
    "content_block_stop",
    "message_delta",
    "message_stop",
]


def test_anthropic_stream_calls_the_mcp_tool(fake: FakeModel) -> None:
    status, ctype, body = post(
        fake,
        "/v1/messages?beta=true",
        claude_request([USER]),
        {"user-agent": "claude-cli/2.1.197 (external, sdk-cli)"},
    )
    assert (status, ctype) == (200, "text/event-stream")
    events = sse(body)
    assert [e for e, _ in events] == ANTHROPIC_EVENTS
    assert [d["type"] for _, d in events] == ANTHROPIC_EVENTS  # type repeats the event name
    start = events[0][1]["message"]
    assert start["role"] == "assistant" and start["content"] == [] and start["stop_reason"] is None
    assert start["usage"]["input_tokens"] >= 0
    block = events[1][1]
    assert block["index"] == 0
    assert block["content_block"]["type"] == "tool_use"
    assert block["content_block"]["name"] == "mcp__echo__echo"
    assert block["content_block"]["input"] == {}  # the input comes as a delta
    assert block["content_block"]["id"].startswith("toolu_")
    delta = events[2][1]["delta"]
    assert delta == {"type": "input_json_delta", "partial_json": '{"text":"hello"}'}
    assert events[4][1]["delta"]["stop_reason"] == "tool_use"


def test_anthropic_stream_finishes_after_the_result(fake: FakeModel) -> None:
    request = claude_request([USER, tool_use(), tool_result("echo: hello")])
    _, _, body = post(fake, "/v1/messages?beta=true", request)
    events = sse(body)
    assert [e for e, _ in events] == ANTHROPIC_EVENTS
    assert events[1][1]["content_block"] == {"type": "text", "text": ""}
    assert events[2][1]["delta"] == {"type": "text_delta", "text": DONE_PREFIX + "ok"}
    assert events[4][1]["delta"]["stop_reason"] == "end_turn"


def test_anthropic_after_an_error_follows_the_script(fake: FakeModel, script: str) -> None:
    error = "Streamable HTTP error: Error POSTing to endpoint: "
    request = claude_request([USER, tool_use(), tool_result(error, is_error=True)])
    events = sse(post(fake, "/v1/messages?beta=true", request)[2])
    if script == "once":
        assert events[2][1]["delta"]["text"] == DONE_PREFIX + "error"
        return
    assert events[1][1]["content_block"]["name"] == "mcp__echo__echo"  # called again
    # ... and after the second result the conversation ends, whatever it was.
    for second, verdicts in (("echo: hello", "error,ok"), ("MCP error -32603", "error,error")):
        request = claude_request(
            [
                USER,
                tool_use(),
                tool_result(error, is_error=True),
                tool_use("toolu_2"),
                tool_result(second, second != "echo: hello", "toolu_2"),
            ]
        )
        events = sse(post(fake, "/v1/messages?beta=true", request)[2])
        assert events[2][1]["delta"]["text"] == DONE_PREFIX + verdicts


def test_anthropic_json_answer_for_the_sdk_agents(fake: FakeModel) -> None:
    request = {
        "model": "lab-model",
        "max_tokens": 1024,
        "messages": [{"role": "user", "content": PROMPT}],
        "tools": [
            {"name": "fail", "input_schema": ECHO_SCHEMA},
            {"name": "echo", "input_schema": ECHO_SCHEMA},
        ],
    }
    status, ctype, body = post(fake, "/v1/messages", request)
    assert (status, ctype) == (200, "application/json")
    message = json.loads(body)
    assert message["type"] == "message" and message["stop_reason"] == "tool_use"
    assert message["content"][0]["name"] == "echo"
    assert message["content"][0]["input"] == {"text": "hello"}


def test_opencode_title_call_without_tools_gets_text(fake: FakeModel) -> None:
    # opencode first asks a small model for a title, with no tools and a system prompt.
    request = {
        "model": "claude-haiku-4-5-20251001",
        "max_tokens": 32000,
        "stream": True,
        "system": [{"type": "text", "text": "Generate a title"}],
        "messages": [{"role": "user", "content": [{"type": "text", "text": PROMPT}]}],
    }
    events = sse(post(fake, "/v1/messages", request)[2])
    assert events[2][1]["delta"]["text"] == DONE_PREFIX + "none"
    entry = read_log(Path(fake.log.path))[-1]
    assert entry["tool"] is None and entry["reply"] == "text"


def test_count_tokens(fake: FakeModel) -> None:
    status, _, body = post(fake, "/v1/messages/count_tokens?beta=true", {"messages": []})
    assert status == 200 and json.loads(body)["input_tokens"] > 0


# ------------------------------------------------------------------ OpenAI Responses (Codex)


def codex_request(extra_input: list[Any]) -> dict[str, Any]:
    """What Codex 0.171.0 sends: MCP tools grouped in a namespace."""
    return {
        "model": "gpt-5.1-codex",
        "instructions": "You are Codex.",
        "input": [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": PROMPT}],
            },
            *extra_input,
        ],
        "tools": [
            {"type": "function", "name": "shell", "parameters": {"type": "object"}},
            {
                "type": "namespace",
                "name": "mcp__echo",
                "description": "echo server",
                "tools": [
                    {"type": "function", "name": "fail", "parameters": ECHO_SCHEMA},
                    {"type": "function", "name": "echo", "parameters": ECHO_SCHEMA},
                ],
            },
        ],
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "reasoning": None,
        "store": False,
        "stream": True,
        "include": [],
        "prompt_cache_key": "abc",
    }


CALL = {
    "type": "function_call",
    "namespace": "mcp__echo",
    "name": "echo",
    "arguments": '{"text":"hello"}',
    "call_id": "call_1",
}


def output(text: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": "call_1", "output": text}


def test_responses_calls_the_namespaced_tool(fake: FakeModel) -> None:
    status, ctype, body = post(
        fake, "/v1/responses", codex_request([]), {"user-agent": "codex_exec/0.171.0"}
    )
    assert (status, ctype) == (200, "text/event-stream")
    events = sse(body)
    assert [e for e, _ in events] == [
        "response.created",
        "response.output_item.added",
        "response.output_item.done",
        "response.completed",
    ]
    assert [d["sequence_number"] for _, d in events] == [0, 1, 2, 3]
    item = events[2][1]["item"]
    # Codex refuses a flat "mcp__echo__echo" or a bare "mcp__echo": namespace + name.
    assert item["type"] == "function_call"
    assert (item["namespace"], item["name"]) == ("mcp__echo", "echo")
    assert json.loads(item["arguments"]) == {"text": "hello"}
    assert item["call_id"].startswith("call_")
    assert events[1][1]["item"] == item
    completed = events[3][1]["response"]
    assert completed["status"] == "completed" and completed["output"] == [item]
    usage = completed["usage"]
    assert {"input_tokens_details", "output_tokens_details", "total_tokens"} <= set(usage)


def test_responses_finishes_with_a_message(fake: FakeModel) -> None:
    done = 'Wall time: 0.0051 seconds\nOutput:\n[{"type":"text","text":"echo: hello"}]'
    events = sse(post(fake, "/v1/responses", codex_request([CALL, output(done)]))[2])
    assert [e for e, _ in events] == [
        "response.created",
        "response.output_item.added",
        "response.output_text.delta",
        "response.output_item.done",
        "response.completed",
    ]
    item = events[3][1]["item"]
    assert item["type"] == "message" and item["role"] == "assistant"
    assert item["content"][0] == {
        "type": "output_text",
        "text": DONE_PREFIX + "ok",
        "annotations": [],
    }
    assert events[2][1]["delta"] == DONE_PREFIX + "ok"


def test_responses_after_an_error(fake: FakeModel, script: str) -> None:
    failed = "tool call failed for `echo/echo`: Transport send error: 503 Service Unavailable"
    events = sse(post(fake, "/v1/responses", codex_request([CALL, output(failed)]))[2])
    item = events[-1][1]["response"]["output"][0]
    if script == "once":
        assert item["content"][0]["text"] == DONE_PREFIX + "error"
    else:
        assert (item["type"], item["namespace"], item["name"]) == (
            "function_call",
            "mcp__echo",
            "echo",
        )


def test_responses_is_error_in_the_output_is_an_error(fake: FakeModel) -> None:
    text = '{"content":[{"type":"text","text":"echo: hello"}],"isError":true}'
    events = sse(post(fake, "/v1/responses", codex_request([CALL, output(text)]))[2])
    item = events[-1][1]["response"]["output"][0]
    if item["type"] == "message":
        assert item["content"][0]["text"] == DONE_PREFIX + "error"


# ------------------------------------------------------------------ OpenAI Chat Completions


def chat_request(extra: list[Any], tool: str = "mcp__echo__echo") -> dict[str, Any]:
    """What the OpenAI-compatible agents send (Qwen Code 0.24.4, Copilot CLI 1.0.102 BYOK)."""
    return {
        "model": "lab-model",
        "messages": [
            {"role": "system", "content": "You are an agent."},
            {"role": "user", "content": [{"type": "text", "text": PROMPT}]},
            *extra,
        ],
        "max_tokens": 4096,
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {"type": "function", "function": {"name": "read_file", "parameters": {}}},
            {
                "type": "function",
                "function": {"name": tool, "description": "Echo", "parameters": ECHO_SCHEMA},
            },
        ],
    }


def chat_call(name: str = "mcp__echo__echo") -> dict[str, Any]:
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": "{}"}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def chat_chunks(body: bytes) -> tuple[list[dict[str, Any]], bool]:
    """The JSON chunks of a streamed answer, and whether it ended with ``data: [DONE]``."""
    datas = [
        line[6:] for line in body.decode().splitlines() if line.startswith("data: ") and line[6:]
    ]
    done = bool(datas) and datas[-1] == "[DONE]"
    return [json.loads(d) for d in datas if d != "[DONE]"], done


@pytest.mark.parametrize("name", ["mcp__echo__echo", "echo-echo", "echo"])
def test_chat_stream_calls_the_mcp_tool(fake: FakeModel, name: str) -> None:
    status, ctype, body = post(fake, "/v1/chat/completions", chat_request([], name))
    assert (status, ctype) == (200, "text/event-stream")
    chunks, done = chat_chunks(body)
    assert done
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    call = chunks[1]["choices"][0]["delta"]["tool_calls"][0]
    assert call["index"] == 0 and call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"]["name"] == name
    assert json.loads(call["function"]["arguments"]) == {"text": "hello"}
    assert chunks[2]["choices"][0]["finish_reason"] == "tool_calls"
    # The usage chunk comes last, without choices (stream_options.include_usage).
    assert chunks[3]["choices"] == [] and chunks[3]["usage"]["total_tokens"] == 15


def test_chat_finishes_after_the_result(fake: FakeModel) -> None:
    result = {"role": "tool", "tool_call_id": "call_1", "content": '{"result":"echo: hello"}'}
    chunks, done = chat_chunks(
        post(fake, "/v1/chat/completions", chat_request([chat_call(), result]))[2]
    )
    assert done
    assert "".join(
        c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]
    ) == (DONE_PREFIX + "ok")
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == "stop"
    entry = read_log(fake.log.path)[-1]  # type: ignore[arg-type]
    assert entry["api"] == "chat" and entry["calls"] == 1
    assert [r["verdict"] for r in entry["results"]] == ["ok"]


def test_chat_after_an_error_follows_the_script(fake: FakeModel, script: str) -> None:
    # Continue CLI sends the result as the JSON text of its content blocks.
    error = {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": [{"type": "text", "text": "MCP error -32603: injected"}],
    }
    chunks, _ = chat_chunks(
        post(fake, "/v1/chat/completions", chat_request([chat_call(), error]))[2]
    )
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    if script == "once":
        assert any(d.get("content") == DONE_PREFIX + "error" for d in deltas)
    else:
        assert any("tool_calls" in d for d in deltas)


def test_chat_json_answer(fake: FakeModel) -> None:
    request = chat_request([]) | {"stream": False}
    status, ctype, body = post(fake, "/v1/chat/completions", request)
    assert (status, ctype) == (200, "application/json")
    answer = json.loads(body)
    assert answer["object"] == "chat.completion"
    choice = answer["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"][0]["function"]["name"] == "mcp__echo__echo"
    assert "index" not in choice["message"]["tool_calls"][0]


def test_chat_without_the_tool_answers_text(fake: FakeModel) -> None:
    request = chat_request([]) | {"tools": []}
    chunks, _ = chat_chunks(post(fake, "/v1/chat/completions", request)[2])
    assert any(
        c["choices"][0]["delta"].get("content") == DONE_PREFIX + "none"
        for c in chunks
        if c["choices"]
    )


# ------------------------------------------------------------------ Gemini


def gemini_request(contents: list[Any]) -> dict[str, Any]:
    """What Gemini CLI 0.61.0 sends: MCP tools as functionDeclarations, mcp_<server>_<tool>."""
    return {
        "contents": contents,
        "systemInstruction": {"role": "user", "parts": [{"text": "You are Gemini CLI."}]},
        "tools": [
            {
                "functionDeclarations": [
                    {"name": "read_file", "parametersJsonSchema": {"type": "object"}},
                    {"name": "mcp_echo_echo", "parametersJsonSchema": ECHO_SCHEMA},
                ]
            }
        ],
        "generationConfig": {"temperature": 0, "topP": 1},
    }


GEMINI_USER = {"role": "user", "parts": [{"text": PROMPT}]}
GEMINI_CALL = {
    "role": "model",
    "parts": [{"functionCall": {"name": "mcp_echo_echo", "args": {"text": "hello"}}}],
}


def function_response(response: dict[str, Any]) -> dict[str, Any]:
    return {
        "role": "user",
        "parts": [{"functionResponse": {"name": "mcp_echo_echo", "response": response}}],
    }


STREAM = "/v1beta/models/gemini-3.1-pro-preview:streamGenerateContent?alt=sse"


def test_gemini_stream_calls_the_mcp_tool(fake: FakeModel) -> None:
    status, ctype, body = post(
        fake, STREAM, gemini_request([GEMINI_USER]), {"user-agent": "GeminiCLI-tui/0.61.0"}
    )
    assert (status, ctype) == (200, "text/event-stream")
    assert body.endswith(b"\r\n\r\n") and body.startswith(b"data: ")
    events = sse(body)
    assert len(events) == 1 and events[0][0] is None
    candidate = events[0][1]["candidates"][0]
    assert candidate["finishReason"] == "STOP"
    assert candidate["content"] == {
        "role": "model",
        "parts": [{"functionCall": {"name": "mcp_echo_echo", "args": {"text": "hello"}}}],
    }
    assert events[0][1]["usageMetadata"]["totalTokenCount"] > 0


def test_gemini_finishes_after_the_function_response(fake: FakeModel) -> None:
    ok = {"output": "<untrusted_context>\necho: hello\n</untrusted_context>"}
    request = gemini_request([GEMINI_USER, GEMINI_CALL, function_response(ok)])
    events = sse(post(fake, STREAM, request)[2])
    assert events[0][1]["candidates"][0]["content"]["parts"] == [{"text": DONE_PREFIX + "ok"}]


def test_gemini_error_response_follows_the_script(fake: FakeModel, script: str) -> None:
    failed = {"error": "MCP tool 'echo' reported: Error POSTing to endpoint (HTTP 503)"}
    request = gemini_request([GEMINI_USER, GEMINI_CALL, function_response(failed)])
    parts = sse(post(fake, STREAM, request)[2])[0][1]["candidates"][0]["content"]["parts"]
    if script == "once":
        assert parts == [{"text": DONE_PREFIX + "error"}]
    else:
        assert parts[0]["functionCall"]["name"] == "mcp_echo_echo"


def test_gemini_routing_side_call_gets_its_json(fake: FakeModel) -> None:
    request = {
        "contents": [GEMINI_USER],
        "generationConfig": {
            "responseMimeType": "application/json",
            "responseJsonSchema": {"type": "object"},
        },
    }
    status, ctype, body = post(
        fake, "/v1beta/models/gemini-3.5-flash-lite:generateContent", request
    )
    assert (status, ctype) == (200, "application/json")
    text = json.loads(body)["candidates"][0]["content"]["parts"][0]["text"]
    routed = json.loads(text)
    assert {"complexity_reasoning", "complexity_score", "next_speaker"} <= set(routed)


def test_gemini_count_tokens(fake: FakeModel) -> None:
    status, _, body = post(fake, "/v1beta/models/x:countTokens", {"contents": []})
    assert status == 200 and json.loads(body)["totalTokens"] > 0


# ------------------------------------------------------------------ plumbing and the log


def test_gzip_and_chunked_bodies_are_read(fake: FakeModel) -> None:
    raw = gzip.compress(json.dumps(claude_request([USER])).encode())
    status, _, body = post(fake, "/v1/messages", None, {"content-encoding": "gzip"}, raw)
    assert status == 200 and sse(body)[1][1]["content_block"]["type"] == "tool_use"
    conn = http.client.HTTPConnection("127.0.0.1", fake.port, timeout=10)
    try:
        data = json.dumps(claude_request([USER])).encode()
        conn.request(
            "POST",
            "/v1/messages",
            body=iter([data[:100], data[100:]]),
            headers={"content-type": "application/json"},
            encode_chunked=True,
        )
        response = conn.getresponse()
        assert response.status == 200
        assert sse(response.read())[1][1]["content_block"]["name"] == "mcp__echo__echo"
    finally:
        conn.close()


def test_unknown_paths_are_refused_and_logged(fake: FakeModel) -> None:
    status, _, _ = post(fake, "/v1/embeddings", {"input": []})
    assert status == 404
    assert read_log(Path(fake.log.path))[-1]["api"] == "unhandled"


def test_the_log_holds_what_the_model_received(fake: FakeModel) -> None:
    post(fake, "/v1/messages", claude_request([USER]))
    post(
        fake,
        "/v1/messages",
        claude_request([USER, tool_use(), tool_result("MCP error -32603: Internal error", True)]),
    )
    entries = read_log(Path(fake.log.path))
    assert entries[0]["reply"] == "tool"
    assert entries[0]["tool"] == "mcp__echo__echo" and entries[0]["results"] == []
    received = entries[1]["results"]
    assert received == [
        {"verdict": "error", "flagged": True, "text": "MCP error -32603: Internal error"}
    ]
    assert all(isinstance(e["ts"], float) for e in entries)


def test_binds_loopback_only(fake: FakeModel) -> None:
    assert fake.url.startswith("http://127.0.0.1:")


# ------------------------------------------------------------------ the decision itself


@pytest.mark.parametrize(
    ("names", "picked"),
    [
        (["Bash", "mcp__echo__fail", "mcp__echo__echo"], "mcp__echo__echo"),
        (["read_file", "mcp_echo_echo"], "mcp_echo_echo"),
        (["bash", "echo_echo", "echo_fail"], "echo_echo"),
        (["fail", "echo"], "echo"),
        (["Bash", "echoes"], None),
    ],
)
def test_pick_tool(names: list[str], picked: str | None) -> None:
    assert pick_tool(names) == picked


def test_verdicts() -> None:
    assert ToolResult("echo: hello").verdict == "ok"
    assert ToolResult("echo: hello", flagged=True).verdict == "error"
    assert ToolResult('{"text":"echo: hello"},"isError": true').verdict == "error"
    assert ToolResult("Error POSTing to endpoint (HTTP 503)").verdict == "error"


def test_calls_are_bounded_whatever_the_script() -> None:
    error = ToolResult("boom")
    turn = Turn("echo", calls=2, results=(error, error), reporting=True)
    assert decide("again_after_error", turn).kind == "text"
    assert (
        decide("again_after_error", Turn("echo", calls=1, results=(error,), reporting=True)).kind
        == "tool"
    )
    # A result that is not the last turn (the client moved on) is not answered with a call.
    assert decide("again_after_error", Turn("echo", calls=1, results=(error,))).kind == "text"


def test_unknown_script_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown script"):
        FakeModel("twice", tmp_path / "x.log")


def test_hold_keeps_the_first_answer_after_a_tool_result_waiting(tmp_path: Path) -> None:
    # An idle-stream fault needs the client's session to sit idle: the model holds its
    # answer once, and only after a tool result (never its first call).
    request = claude_request([USER, tool_use(), tool_result("echo: hello")])
    with FakeModel("once", tmp_path / "model.log", hold_s=0.5) as model:
        start = time.monotonic()
        post(model, "/v1/messages", claude_request([USER]))
        first = time.monotonic() - start
        post(model, "/v1/messages", request)
        held = time.monotonic() - start - first
        post(model, "/v1/messages", request)
        again = time.monotonic() - start - first - held
    assert first < 0.4 and held >= 0.5 and again < 0.4


# ------------------------------------------------------------------ Droid: ToolSearch first

#: Requests Droid 0.225.2 (`droid exec`, a custom chat-completions model) really sent to the
#: fake model, trimmed (tests/lab/fixtures/droid): its first turn (MCP tools deferred behind
#: ToolSearch), the turn after the search (echo___echo loaded), and the turn with the result.
DROID = Path(__file__).resolve().parent / "fixtures" / "droid"


def droid_request(name: str) -> dict[str, Any]:
    capture = json.loads((DROID / f"{name}.json").read_text(encoding="utf-8"))
    assert capture["path"] == "/v1/chat/completions"
    body: dict[str, Any] = capture["body"]
    return body


@pytest.fixture
def quick(tmp_path: Path, script: str) -> Iterator[FakeModel]:
    """The fake model without the wait on each ToolSearch answer."""
    with FakeModel(script, tmp_path / "model.log", search_hold_s=0) as model:
        yield model


def tool_calls(body: bytes) -> list[dict[str, Any]]:
    chunks, done = chat_chunks(body)
    assert done
    return [
        call
        for c in chunks
        if c["choices"]
        for call in c["choices"][0]["delta"].get("tool_calls", [])
    ]


def chat_text(body: bytes) -> str:
    chunks, _ = chat_chunks(body)
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


def test_droid_first_turn_offers_toolsearch_not_echo() -> None:
    # The capture itself: what makes the step necessary.
    body = droid_request("1-tool-search")
    names = [t["function"]["name"] for t in body["tools"]]
    assert "ToolSearch" in names and pick_tool(names) is None
    turn = chat_turn(body)
    assert turn.tool is None and turn.deferred == DEFERRED_ECHO and turn.searches == 0


def test_droid_gets_a_toolsearch_for_the_echo_tool_first(quick: FakeModel) -> None:
    calls = tool_calls(post(quick, "/v1/chat/completions", droid_request("1-tool-search"))[2])
    assert [c["function"]["name"] for c in calls] == [TOOL_SEARCH]
    assert json.loads(calls[0]["function"]["arguments"]) == {"query": "select:echo___echo"}
    entry = read_log(quick.log.path)[-1]  # type: ignore[arg-type]
    # Not the script's tool call: nothing counted, nothing offered yet.
    assert entry["calls"] == 0 and entry["results"] == [] and entry["tool"] is None
    assert entry["called"] == TOOL_SEARCH and entry["args"] == {"query": "select:echo___echo"}


def test_droid_calls_echo_once_the_search_loaded_it(quick: FakeModel) -> None:
    body = droid_request("2-tool-loaded")
    # The search's result is in the conversation, but it is neither a call nor a result.
    turn = chat_turn(body)
    assert turn.tool == "echo___echo" and turn.calls == 0 and turn.results == ()
    assert not turn.reporting and turn.searches == 1
    calls = tool_calls(post(quick, "/v1/chat/completions", body)[2])
    assert [c["function"]["name"] for c in calls] == ["echo___echo"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"text": "hello"}


def test_droid_finishes_on_the_echo_result_alone(quick: FakeModel) -> None:
    body = droid_request("3-tool-result")
    assert chat_text(post(quick, "/v1/chat/completions", body)[2]) == DONE_PREFIX + "ok"
    entry = read_log(quick.log.path)[-1]  # type: ignore[arg-type]
    assert entry["calls"] == 1 and [r["verdict"] for r in entry["results"]] == ["ok"]


def test_droid_after_an_error_follows_the_script(quick: FakeModel, script: str) -> None:
    body = droid_request("3-tool-result")
    # What Droid hands the model for a failed call (seen in the lab's tool_error runs).
    body["messages"][-1]["content"] = (
        "Error: MCP tool echo___echo returned an error: Injected tool failure"
    )
    answer = post(quick, "/v1/chat/completions", body)[2]
    if script == "once":
        assert chat_text(answer) == DONE_PREFIX + "error"
    else:
        assert [c["function"]["name"] for c in tool_calls(answer)] == ["echo___echo"]


def test_a_search_that_loaded_nothing_is_made_again_a_bounded_number_of_times(
    quick: FakeModel,
) -> None:
    body = droid_request("1-tool-search")
    for n in range(TOOL_SEARCH_TRIES):
        calls = tool_calls(post(quick, "/v1/chat/completions", body)[2])
        assert [c["function"]["name"] for c in calls] == [TOOL_SEARCH], n
        # Droid's turn after a search that found nothing (its text here is made up: the
        # fake model reads only that the echo tool is still not offered).
        call = {**calls[0], "id": f"call_s{n}"}
        call.pop("index")
        body["messages"] += [
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_s{n}", "content": "No tools loaded"},
        ]
    # Then it gives up: the model was never offered the tool.
    assert chat_text(post(quick, "/v1/chat/completions", body)[2]) == DONE_PREFIX + "none"


def test_the_deferred_list_names_the_tool_to_select() -> None:
    reminder = "<system-reminder>\nDeferred tools:\nWebSearch\nlab___echo\nLoop\n</system-reminder>"
    messages = [{"role": "user", "content": [{"type": "text", "text": reminder}]}]
    assert deferred_tool(messages) == "lab___echo"
    # Not listed (Droid writes the list before its MCP tools are registered): its name for
    # the lab's server, `<server>___<tool>`.
    assert deferred_tool([]) == DEFERRED_ECHO == f"{clients.SERVER_NAME}___echo"


def test_each_toolsearch_answer_is_held(tmp_path: Path) -> None:
    # Time for the client to register its MCP tools before it runs the search.
    with FakeModel("once", tmp_path / "model.log", search_hold_s=0.4) as model:
        start = time.monotonic()
        post(model, "/v1/chat/completions", droid_request("1-tool-search"))
        searched = time.monotonic() - start
        post(model, "/v1/chat/completions", droid_request("2-tool-loaded"))
        called = time.monotonic() - start - searched
    assert searched >= 0.4 and called < 0.3
    assert TOOL_SEARCH_HOLD_S > 0
