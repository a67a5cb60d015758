"""A fake model API on 127.0.0.1 that makes a client call one MCP tool, by script.

It speaks what the lab's clients send (shapes verified against the real clients, see
docs/lab.md):

- Anthropic Messages: ``POST /v1/messages`` (Claude Code, opencode, the SDK agents),
  streamed (``stream: true``: ``message_start``, ``content_block_start``,
  ``content_block_delta``, ``content_block_stop``, ``message_delta``, ``message_stop``) or
  one JSON body; ``POST /v1/messages/count_tokens``.
- OpenAI Responses: ``POST /v1/responses`` (Codex), streamed, with Codex's tool
  namespaces: a tool offered as ``{"type": "namespace", "name": "mcp__echo", "tools":
  [{"type": "function", "name": "echo"}]}`` is called with ``"namespace": "mcp__echo",
  "name": "echo"`` (a flat name is refused by Codex as an "unsupported call").
- OpenAI Chat Completions: ``POST /v1/chat/completions`` (the OpenAI-compatible agents),
  streamed (``chat.completion.chunk`` deltas, a ``tool_calls`` delta, ``finish_reason``,
  a usage chunk, ``data: [DONE]``) or one JSON ``chat.completion``.
- Gemini: ``POST /v1beta/models/M:generateContent`` and
  ``:streamGenerateContent?alt=sse`` (Gemini CLI), ``:countTokens``; a JSON-mode side call
  (``responseMimeType: application/json``, Gemini CLI's model routing) gets the JSON
  fields it parses.

The decision is a pure function of the conversation the client sends (no state on the
server), so the title and routing side calls some clients make cannot disturb it:

- the echo tool is not offered but a ``ToolSearch`` tool is (Droid defers MCP tools behind
  it): call ``ToolSearch`` with ``select:<the echo tool's name>``, which loads the tool
  into the next request's list. Droid registers its MCP tools while the model's first
  turn is under way, and a search in that turn loads nothing (in the lab's runs the
  search in the next turn did): so a search that loaded nothing is made again, up to
  ``TOOL_SEARCH_TRIES`` in all, each answer held ``TOOL_SEARCH_HOLD_S`` so that the tools
  have time to register (a fault on ``initialize`` or ``tools/list`` delays them). That
  step is not a tool call of the script's: it counts neither as a call nor as a result,
  and its result is not "reporting";
- the echo tool is not offered: answer text;
- no tool call yet: call it with ``{"text": "hello"}``;
- the last turn carries its result: script ``once`` finishes; script
  ``again_after_error`` calls the tool once more if that result was an error (so a
  model-driven re-issue shows on the wire), then finishes.

The final text is ``LAB-DONE results=<r1>,<r2>`` (each ``ok`` or ``error``; ``none``
without results): the clients print it, so the lab can check that what a client printed
agrees with what the model received. Every request is logged as one JSON line (no bodies:
the API, the tools offered, the tool results received, the reply).

Run alone: ``python -m mcp_layers_lab.fake_model --port P --script once --log FILE``.
Standard library only (zstd request bodies are read when ``zstandard`` is importable).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final

from . import fake_model_ws

HOST: Final = "127.0.0.1"
SCRIPTS: Final = ("once", "again_after_error")
TOOL_ARGS: Final = {"text": "hello"}
#: What the bundled server's echo tool answers to TOOL_ARGS: a result is "ok" only with it.
SUCCESS_MARK: Final = "echo: hello"
DONE_PREFIX: Final = "LAB-DONE results="
#: The most tool calls a conversation gets, whatever the script: loops stay bounded.
MAX_CALLS: Final = 2
#: Requests larger than this are refused (a real client sends well under 1 MB).
MAX_BODY: Final = 32 * 1024 * 1024
#: Each tool result is kept in the log only this long.
EXCERPT: Final = 300
#: The tool a client hides its MCP tools behind until the model asks for them (Droid).
TOOL_SEARCH: Final = "ToolSearch"
#: Droid names an MCP tool `<server>___<tool>`; the lab's server is "echo"
#: (clients.SERVER_NAME). Selected by that name when the "Deferred tools:" reminder does
#: not list it: Droid's exec writes the reminder before its MCP tools are registered, and
#: loads a tool by name when ToolSearch runs, after they are.
DEFERRED_ECHO: Final = "echo___echo"
#: ToolSearch calls per conversation at most, and how long each answer is held: the
#: client registers its MCP tools meanwhile (0.1-0.5 s after its first model call here).
TOOL_SEARCH_TRIES: Final = 3
TOOL_SEARCH_HOLD_S: Final = 1.0
_DEFERRED_LIST = re.compile(r"Deferred tools:\n((?:[^\n<]+\n?)+)")

_IS_ERROR_TRUE = re.compile(r'"is_?[eE]rror"\s*:\s*true')


# ------------------------------------------------------------------ the decision


@dataclass(frozen=True)
class ToolResult:
    """One tool result as the model received it."""

    text: str
    #: The API's own error flag where it has one (Anthropic ``is_error``, Gemini ``error``).
    flagged: bool | None = None

    @property
    def verdict(self) -> str:
        # The text decides: Codex and Gemini put errors in the text, with no flag.
        if self.flagged or _IS_ERROR_TRUE.search(self.text) or SUCCESS_MARK not in self.text:
            return "error"
        return "ok"

    def log(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "flagged": self.flagged, "text": self.text[:EXCERPT]}


@dataclass(frozen=True)
class Turn:
    """What the model needs to know of a request: the tool offered and what happened so far."""

    tool: str | None
    namespace: str | None = None
    calls: int = 0
    results: tuple[ToolResult, ...] = ()
    #: The last turn carries a tool result (the client is reporting back).
    reporting: bool = False
    json_mode: bool = False
    #: A ToolSearch tool offered while the echo tool is not: what to select through it.
    deferred: str | None = None
    #: ToolSearch calls so far in this conversation.
    searches: int = 0


@dataclass(frozen=True)
class Reply:
    kind: str  # "tool", "text" or "json"
    text: str = ""
    tool: str | None = None
    namespace: str | None = None
    #: The call's arguments (None: the echo tool's, TOOL_ARGS).
    args: dict[str, Any] | None = None

    @property
    def arguments(self) -> dict[str, Any]:
        return TOOL_ARGS if self.args is None else self.args


def decide(script: str, turn: Turn) -> Reply:
    """The scripted model: what to answer to ``turn``."""
    if turn.json_mode:
        # Side calls that want JSON (Gemini CLI's routing and next-speaker checks).
        body = {
            "reasoning": "lab",
            "next_speaker": "user",
            "model_choice": "flash",
            "complexity_reasoning": "simple",
            "complexity_score": 1,
        }
        return Reply("json", text=json.dumps(body, separators=(",", ":")))
    if turn.tool is None and turn.deferred is not None and turn.searches < TOOL_SEARCH_TRIES:
        # Load the deferred tool first; the script's own steps start once it is offered.
        query = {"query": f"select:{turn.deferred}"}
        return Reply("tool", tool=TOOL_SEARCH, args=query)
    if turn.tool is not None and turn.calls < MAX_CALLS:
        if turn.calls == 0 and not turn.results:
            return Reply("tool", tool=turn.tool, namespace=turn.namespace)
        last = turn.results[-1] if turn.results else None
        if (
            script == "again_after_error"
            and turn.reporting
            and last is not None
            and last.verdict == "error"
        ):
            return Reply("tool", tool=turn.tool, namespace=turn.namespace)
    verdicts = ",".join(r.verdict for r in turn.results) or "none"
    return Reply("text", text=DONE_PREFIX + verdicts)


def pick_tool(names: list[str]) -> str | None:
    """The echo tool among the names offered, however the client spells it.

    ``echo`` (SDK agents), ``mcp__echo__echo`` (Claude Code, Qwen Code), ``mcp_echo_echo``
    (Gemini CLI), ``echo_echo`` (opencode), ``echo-echo`` (Copilot CLI).
    """
    for name in names:
        if name == "echo" or name.endswith(("_echo", "-echo")):
            return name
    return None


def _text_of(value: Any) -> str:
    """Tool-result content as one string: a string, or the text of content blocks."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for block in value:
            if isinstance(block, dict):
                text = block.get("text")
                parts.append(text if isinstance(text, str) else json.dumps(block))
            else:
                parts.append(str(block))
        return "\n".join(parts)
    if value is None:
        return ""
    return json.dumps(value)


# ------------------------------------------------------------------ reading requests


def anthropic_turn(body: dict[str, Any]) -> Turn:
    names = [t.get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)]
    calls = 0
    results: list[ToolResult] = []
    messages = body.get("messages") or []
    for msg in messages:
        content = msg.get("content") if isinstance(msg, dict) else None
        if not isinstance(content, list):
            continue
        for block in content:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                calls += 1
            elif block.get("type") == "tool_result":
                results.append(
                    ToolResult(_text_of(block.get("content")), bool(block.get("is_error")))
                )
    last = messages[-1] if messages else {}
    last_content = last.get("content") if isinstance(last, dict) else None
    reporting = isinstance(last_content, list) and any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in last_content
    )
    return Turn(pick_tool(names), None, calls, tuple(results), reporting)


def responses_turn(body: dict[str, Any]) -> Turn:
    tool: str | None = None
    namespace: str | None = None
    flat: list[str] = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        if t.get("type") == "namespace":
            inner = [s.get("name", "") for s in t.get("tools") or [] if isinstance(s, dict)]
            if tool is None and "echo" in str(t.get("name")) and "echo" in inner:
                tool, namespace = "echo", str(t.get("name"))
        else:
            flat.append(str(t.get("name") or (t.get("function") or {}).get("name") or ""))
    if tool is None:
        tool = pick_tool(flat)
    items = body.get("input")
    items = items if isinstance(items, list) else []
    calls = sum(1 for it in items if isinstance(it, dict) and it.get("type") == "function_call")
    results = [
        ToolResult(_text_of(it.get("output")))
        for it in items
        if isinstance(it, dict) and it.get("type") == "function_call_output"
    ]
    reporting = (
        bool(items)
        and isinstance(items[-1], dict)
        and (items[-1].get("type") == "function_call_output")
    )
    return Turn(tool, namespace, calls, tuple(results), reporting)


def deferred_tool(messages: list[dict[str, Any]]) -> str:
    """The echo tool's name in a "Deferred tools:" reminder (Droid's), else DEFERRED_ECHO."""
    for msg in messages:
        match = _DEFERRED_LIST.search(_text_of(msg.get("content")))
        if match is not None:
            listed = pick_tool([n.strip() for n in match.group(1).splitlines()])
            if listed is not None:
                return listed
    return DEFERRED_ECHO


def chat_turn(body: dict[str, Any]) -> Turn:
    """An OpenAI Chat Completions request: tools are ``{"type": "function", "function": {…}}``.

    ToolSearch calls and their results are the client's plumbing, not the script's tool
    call: they are left out of ``calls`` and ``results`` (matched by ``tool_call_id``).
    """
    names = []
    for t in body.get("tools") or []:
        if isinstance(t, dict):
            fn = t.get("function")
            names.append(
                str((fn.get("name") if isinstance(fn, dict) else None) or t.get("name") or "")
            )
    calls = 0
    searches: set[str] = set()
    results: list[ToolResult] = []
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    reporting = False
    for msg in messages:
        reporting = False
        if msg.get("role") == "assistant" and isinstance(msg.get("tool_calls"), list):
            for call in msg["tool_calls"]:
                fn = call.get("function") if isinstance(call, dict) else None
                if isinstance(fn, dict) and fn.get("name") == TOOL_SEARCH:
                    searches.add(str(call.get("id")))
                else:
                    calls += 1
        elif msg.get("role") == "tool" and str(msg.get("tool_call_id")) not in searches:
            results.append(ToolResult(_text_of(msg.get("content"))))
            reporting = True
    tool = pick_tool(names)
    deferred = None
    if tool is None and TOOL_SEARCH in names:
        deferred = deferred_tool(messages)
    return Turn(
        tool, None, calls, tuple(results), reporting, deferred=deferred, searches=len(searches)
    )


def gemini_turn(body: dict[str, Any]) -> Turn:
    names: list[str] = []
    for t in body.get("tools") or []:
        if isinstance(t, dict):
            decls = t.get("functionDeclarations") or t.get("function_declarations") or []
            names += [d.get("name", "") for d in decls if isinstance(d, dict)]
    calls = 0
    results: list[ToolResult] = []
    contents = body.get("contents") or []
    reporting = False
    for i, content in enumerate(contents):
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts or []:
            if not isinstance(part, dict):
                continue
            if "functionCall" in part:
                calls += 1
            response = (part.get("functionResponse") or {}).get("response")
            if "functionResponse" in part:
                response = response if isinstance(response, dict) else {}
                flagged = "error" in response
                text = _text_of(response.get("error") if flagged else response.get("output"))
                results.append(ToolResult(text or json.dumps(response), flagged))
                reporting = reporting or i == len(contents) - 1
    config = body.get("generationConfig") or {}
    json_mode = isinstance(config, dict) and config.get("responseMimeType") == "application/json"
    return Turn(pick_tool(names), None, calls, tuple(results), reporting, json_mode)


# ------------------------------------------------------------------ writing replies


def _j(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))


def _sse(event: str | None, data: Any) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {_j(data)}\n\n".encode()


def _id(prefix: str) -> str:
    return prefix + uuid.uuid4().hex[:20]


def anthropic_reply(reply: Reply, model: str) -> tuple[dict[str, Any], list[bytes]]:
    """The reply as one JSON message and as the SSE events of a streamed one."""
    usage = {
        "input_tokens": 10,
        "output_tokens": 5,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
    if reply.kind == "tool":
        block: dict[str, Any] = {
            "type": "tool_use",
            "id": _id("toolu_"),
            "name": reply.tool,
            "input": reply.arguments,
        }
        stop = "tool_use"
        start = {**block, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": _j(reply.arguments)}
    else:
        block = {"type": "text", "text": reply.text}
        stop = "end_turn"
        start = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": reply.text}
    message = {
        "id": _id("msg_"),
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [block],
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage,
    }
    events = [
        _sse(
            "message_start",
            {
                "type": "message_start",
                "message": {**message, "content": [], "stop_reason": None},
            },
        ),
        _sse(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": start},
        ),
        _sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        ),
        _sse("message_stop", {"type": "message_stop"}),
    ]
    return message, events


def responses_events(reply: Reply, model: str) -> list[bytes]:
    """The SSE events of a streamed OpenAI Responses answer (what Codex reads)."""
    if reply.kind == "tool":
        item: dict[str, Any] = {
            "type": "function_call",
            "id": _id("fc_"),
            "call_id": _id("call_"),
            "name": reply.tool,
            "arguments": _j(reply.arguments),
            "status": "completed",
        }
        if reply.namespace:
            item["namespace"] = reply.namespace
    else:
        item = {
            "type": "message",
            "id": _id("msg_"),
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
        }
    response = {
        "id": _id("resp_"),
        "object": "response",
        "created_at": int(time.time()),
        "status": "in_progress",
        "model": model,
        "output": [],
    }
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": response},
        {"type": "response.output_item.added", "output_index": 0, "item": item},
    ]
    if reply.kind != "tool":
        events.append(
            {
                "type": "response.output_text.delta",
                "item_id": item["id"],
                "output_index": 0,
                "content_index": 0,
                "delta": reply.text,
            }
        )
    events += [
        {"type": "response.output_item.done", "output_index": 0, "item": item},
        {
            "type": "response.completed",
            "response": {**response, "status": "completed", "output": [item], "usage": usage},
        },
    ]
    return [_sse(e["type"], {**e, "sequence_number": n}) for n, e in enumerate(events)]


CHAT_USAGE: Final = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}


def chat_message(reply: Reply) -> tuple[dict[str, Any], str]:
    """The assistant message of a Chat Completions answer, and its finish reason."""
    if reply.kind == "tool":
        call = {
            "id": _id("call_"),
            "type": "function",
            "function": {"name": reply.tool, "arguments": _j(reply.arguments)},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
    return {"role": "assistant", "content": reply.text}, "stop"


def chat_completion(reply: Reply, model: str) -> dict[str, Any]:
    message, finish = chat_message(reply)
    return {
        "id": _id("chatcmpl-"),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": CHAT_USAGE,
    }


def chat_events(reply: Reply, model: str) -> list[bytes]:
    """A streamed Chat Completions answer: role, content or tool call, finish, usage, [DONE]."""
    message, finish = chat_message(reply)
    base = {
        "id": _id("chatcmpl-"),
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }

    def chunk(delta: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}

    chunks = [chunk({"role": "assistant", "content": ""}, None)]
    if reply.kind == "tool":
        calls = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
        chunks.append(chunk({"tool_calls": calls}, None))
    else:
        chunks.append(chunk({"content": reply.text}, None))
    chunks.append(chunk({}, finish))
    # The usage chunk has no choices (what `stream_options.include_usage` asks for).
    chunks.append({**base, "choices": [], "usage": CHAT_USAGE})
    return [_sse(None, c) for c in chunks] + [b"data: [DONE]\n\n"]


def gemini_response(reply: Reply) -> dict[str, Any]:
    if reply.kind == "tool":
        part: dict[str, Any] = {"functionCall": {"name": reply.tool, "args": reply.arguments}}
    else:
        part = {"text": reply.text}
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": "lab-fake",
        "responseId": uuid.uuid4().hex[:12],
    }


# ------------------------------------------------------------------ the server


@dataclass
class RequestLog:
    """Thread-safe JSONL log of what the model was asked and what it answered."""

    path: Path | None
    entries: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, entry: dict[str, Any]) -> None:
        entry = {"ts": round(time.time(), 4), **entry}
        with self.lock:
            self.entries.append(entry)
            if self.path is not None:
                with self.path.open("a", encoding="utf-8") as out:
                    out.write(json.dumps(entry) + "\n")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass  # the JSONL log is the record; stderr stays quiet

    # -- plumbing

    def _read_body(self) -> dict[str, Any]:
        length = int(self.headers.get("content-length") or 0)
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            raw = b"".join(self._chunks())
        else:
            if length > MAX_BODY:
                raise ValueError(f"body of {length} bytes")
            raw = self.rfile.read(length) if length else b""
        encoding = self.headers.get("content-encoding", "").lower()
        if encoding == "gzip":
            raw = gzip.decompress(raw)
        elif encoding == "zstd":
            import zstandard  # not in the standard library; Codex may compress

            raw = zstandard.ZstdDecompressor().decompress(raw, max_output_size=MAX_BODY)
        body = json.loads(raw or b"{}")
        if not isinstance(body, dict):
            raise ValueError("the body is not a JSON object")
        return body

    def _chunks(self) -> Iterator[bytes]:
        total = 0
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                self.rfile.readline()
                return
            total += size
            if total > MAX_BODY:
                raise ValueError("chunked body too large")
            yield self.rfile.read(size)
            self.rfile.readline()

    def _json(self, status: int, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, chunks: list[bytes]) -> None:
        # No length framing: the stream ends when the connection closes, as the real APIs'
        # streams do over HTTP/1.1 without chunking from a proxy.
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        self.close_connection = True
        for chunk in chunks:
            self.wfile.write(chunk)
            self.wfile.flush()

    def _note(self, api: str, turn: Turn | None, reply: Reply | None, **extra: Any) -> None:
        entry: dict[str, Any] = {
            "api": api,
            "path": self.path,
            "userAgent": self.headers.get("user-agent"),
        }
        if turn is not None:
            entry |= {
                "tool": turn.tool if turn.namespace is None else f"{turn.namespace}.{turn.tool}",
                "calls": turn.calls,
                "results": [r.log() for r in turn.results],
            }
        if reply is not None:
            entry |= {"reply": reply.kind, "text": reply.text or None}
            if reply.args is not None:
                # A plumbing call (ToolSearch): which tool, with what, so the log says why.
                entry |= {"called": reply.tool, "args": reply.args}
        self.server.log.add(entry | extra)

    # -- routes

    def do_GET(self) -> None:
        path = self.path.split("?")[0].rstrip("/")
        if path.endswith("/responses") and self.headers.get("upgrade", "").lower() == "websocket":
            self._websocket()
            return
        self._note("get", None, None)
        if path.endswith("/models"):
            self._json(200, {"object": "list", "data": [], "models": []})
        else:
            self._json(404, {"error": {"message": "not found"}})

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        path = self.path.split("?")[0]
        try:
            body = self._read_body()
        except Exception as exc:  # a body we cannot read is the client's problem: say so
            self._note("unreadable", None, None, error=f"{type(exc).__name__}: {exc}")
            self._json(400, {"error": {"type": "invalid_request_error", "message": str(exc)}})
            return
        try:
            if path.endswith("/messages/count_tokens"):
                self._note("anthropic-count", None, None)
                self._json(200, {"input_tokens": 42})
            elif path.endswith("/messages"):
                self._anthropic(body)
            elif path.endswith("/responses"):
                self._responses(body)
            elif path.endswith("/chat/completions"):
                self._chat(body)
            elif ":countTokens" in path:
                self._note("gemini-count", None, None)
                self._json(200, {"totalTokens": 42})
            elif ":generateContent" in path or ":streamGenerateContent" in path:
                self._gemini(body, stream=":streamGenerateContent" in path)
            else:
                self._note("unhandled", None, None, keys=sorted(body)[:20])
                self._json(404, {"error": {"type": "not_found_error", "message": "not found"}})
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client hung up mid-answer (it was killed, or gave up): nothing to do

    def _decide(self, turn: Turn) -> Reply:
        """The script's reply; the first one after a tool result held `hold_s` first."""
        reply = decide(self.server.script, turn)
        if reply.tool == TOOL_SEARCH:
            time.sleep(self.server.search_hold_s)
        if turn.reporting and self.server.hold_s > 0 and not self.server.held.is_set():
            self.server.held.set()
            time.sleep(self.server.hold_s)
        return reply

    def _anthropic(self, body: dict[str, Any]) -> None:
        turn = anthropic_turn(body)
        reply = self._decide(turn)
        self._note("anthropic", turn, reply, model=body.get("model"), stream=body.get("stream"))
        message, events = anthropic_reply(reply, str(body.get("model") or "lab-fake"))
        if body.get("stream"):
            self._stream(events)
        else:
            self._json(200, message)

    def _responses(self, body: dict[str, Any]) -> None:
        turn = responses_turn(body)
        reply = self._decide(turn)
        self._note("responses", turn, reply, model=body.get("model"), stream=body.get("stream"))
        self._stream(responses_events(reply, str(body.get("model") or "lab-fake")))

    def _websocket(self) -> None:
        """Responses over WebSocket (Codex with `supports_websockets`): each
        `response.create` message is answered as `_responses` answers a POST."""
        key = self.headers.get("sec-websocket-key", "")
        self.send_response(101)
        self.send_header("upgrade", "websocket")
        self.send_header("connection", "Upgrade")
        self.send_header("sec-websocket-accept", fake_model_ws.accept_key(key))
        self.end_headers()
        self.close_connection = True

        def answer(body: dict[str, Any]) -> list[bytes]:
            turn = responses_turn(body)
            reply = self._decide(turn)
            self._note("responses-ws", turn, reply, model=body.get("model"))
            return responses_events(reply, str(body.get("model") or "lab-fake"))

        fake_model_ws.serve(self.rfile, self.wfile, answer)

    def _chat(self, body: dict[str, Any]) -> None:
        turn = chat_turn(body)
        reply = self._decide(turn)
        self._note("chat", turn, reply, model=body.get("model"), stream=body.get("stream"))
        model = str(body.get("model") or "lab-fake")
        if body.get("stream"):
            self._stream(chat_events(reply, model))
        else:
            self._json(200, chat_completion(reply, model))

    def _gemini(self, body: dict[str, Any], *, stream: bool) -> None:
        turn = gemini_turn(body)
        reply = self._decide(turn)
        self._note("gemini", turn, reply, stream=stream)
        answer = gemini_response(reply)
        if stream:
            # Gemini's own server ends SSE lines with CRLF; Gemini CLI reads both.
            self._stream([f"data: {_j(answer)}\r\n\r\n".encode()])
        else:
            self._json(200, answer)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    script: str
    log: RequestLog
    hold_s: float
    held: threading.Event
    search_hold_s: float


class FakeModel:
    """The fake model API in a background thread: ``with FakeModel(...) as fake: fake.url``."""

    def __init__(
        self,
        script: str = "once",
        log_path: Path | None = None,
        port: int = 0,
        *,
        hold_s: float = 0.0,
        search_hold_s: float = TOOL_SEARCH_HOLD_S,
    ) -> None:
        """`hold_s`: the first answer after a tool result waits that long, so the client's
        MCP session sits idle meanwhile (what an idle-stream fault needs to act on).
        `search_hold_s`: how long each ToolSearch answer waits (tests set it to 0)."""
        if script not in SCRIPTS:
            raise ValueError(f"unknown script {script!r}; scripts are {', '.join(SCRIPTS)}")
        self.log = RequestLog(log_path)
        self._server = _Server((HOST, port), _Handler)
        self._server.script = script
        self._server.log = self.log
        self._server.hold_s = hold_s
        self._server.held = threading.Event()
        self._server.search_hold_s = search_hold_s
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="fake-model", daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    def start(self) -> FakeModel:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join(timeout=10)
        self._server.server_close()

    def __enter__(self) -> FakeModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def read_log(path: Path) -> list[dict[str, Any]]:
    """The entries of a fake-model log (a torn last line is skipped)."""
    entries: list[dict[str, Any]] = []
    if not path.exists():
        return entries
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    return entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mcp_layers_lab.fake_model")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--script", choices=SCRIPTS, default="once")
    parser.add_argument("--log", type=Path, default=None)
    args = parser.parse_args(argv)
    fake = FakeModel(args.script, args.log, args.port)
    print(f"fake model on {fake.url} (script {args.script})", flush=True)
    try:
        fake._server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        fake._server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
