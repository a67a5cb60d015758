"""Model API exchanges, read sans-IO: which API a request speaks, and what its answer did.

The agent's turn has two halves on the wire: the model request (Anthropic Messages,
OpenAI Chat Completions, OpenAI Responses, Gemini generateContent) and the MCP calls it
asks for. This module reads the first half; `model_turns.py` joins it to the second.

What is read, and only this: the provider and API, the model's name, whether the answer
was streamed, the stop reason, when the first output arrived, the tool calls the model
asked for (id, name, a hash of the canonical arguments: never the arguments), the ids of
the tool results the request carried back, and the token counts when the API gives them.
Prompt and completion text is never kept: arguments are concatenated only as long as
needed to hash them, and dropped then.

Recognition is by path *and* body shape, with no configuration: a POST whose path ends
like one of the four APIs and whose body is a JSON object. A body that is not the shape
the path promises still makes a model exchange (provider `unknown`, with a note): a
proxy in front of a model API should say it saw something it could not read rather than
drop it. Side calls that are not turns (`count_tokens`, `countTokens`) are not read.

Nothing here raises on what a peer sends: every reader takes any bytes and any JSON.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from .jsonrpc import NOT_JSON, try_loads
from .record import ModelApi, ModelJoin, NoteCode, Provider
from .sse import SseEvent

#: Argument text kept per tool call while it streams in, only to hash it. A larger one is
#: hashed as far as it came and noted (`model_args_over_cap`).
MAX_ARGS_BYTES: Final = 1024 * 1024
#: The most tool calls one answer's record lists (and the most it reads).
MAX_TOOL_CALLS: Final = 64
#: The most tool-result ids one request's record lists.
MAX_TOOL_RESULTS: Final = 256
#: Ids and names are cut to this many characters (they are the peers' strings).
MAX_ID_CHARS: Final = 128

#: The type of the model APIs' own error events and bodies (Anthropic `event: error`,
#: `{"type": "error"}`; Responses `error`): a model API's word, not the record's.
_API_ERROR: Final = "error"

#: (path ending, provider, API); checked in order, the first that matches wins.
_PATHS: Final = (
    ("/messages", Provider.ANTHROPIC, ModelApi.MESSAGES),
    ("/chat/completions", Provider.OPENAI, ModelApi.CHAT_COMPLETIONS),
    ("/responses", Provider.OPENAI, ModelApi.RESPONSES),
)


def args_hash(value: object) -> str:
    """A hash of tool arguments that is the same on both sides of the turn: the model's
    (`input`, parsed `arguments`, `args`) and the MCP `tools/call`'s `params.arguments`.
    Canonical JSON (sorted keys, no spaces, UTF-8), sha256, first 20 hex digits."""
    try:
        text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = repr(value)
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:20]


def _args_text_hash(text: str) -> str:
    """Arguments sent as a JSON string (Chat, Responses): hashed as the value they hold,
    or as the text when it is not JSON (a model may emit broken JSON)."""
    value = try_loads(text) if text.strip() else {}
    return args_hash(text if value is NOT_JSON else value)


def _cut(value: object) -> str | None:
    return value[:MAX_ID_CHARS] if isinstance(value, str) and value else None


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


class ModelCall(NamedTuple):
    """What a `tools/call` record says of the model turn that asked for it (`modelCall`)."""

    turn: int
    tool_call_id: str | None
    join: ModelJoin

    def record(self) -> dict[str, Any]:
        return {"turn": self.turn, "toolCallId": self.tool_call_id, "join": self.join.value}


# ------------------------------------------------------------------ requests


def api_of_path(path: str) -> tuple[Provider, ModelApi, bool] | None:
    """(provider, API, streamed by its path) of a model API path, or None. Side calls
    (`count_tokens`, `countTokens`) are None: they are not turns."""
    bare = path.split("?", 1)[0].rstrip("/")
    if ":generateContent" in bare:
        return Provider.GEMINI, ModelApi.GENERATE_CONTENT, False
    if ":streamGenerateContent" in bare:
        return Provider.GEMINI, ModelApi.GENERATE_CONTENT, True
    for ending, provider, api in _PATHS:
        if bare.endswith(ending):
            return provider, api, False
    return None


@dataclass(slots=True)
class ModelRequest:
    """What a model request says, read from its path and body."""

    provider: Provider
    api: ModelApi
    model: str | None = None
    streamed: bool = False
    #: The ids of the tool results the request carries, in order (every one, old or new:
    #: each request resends the history; `model_turns.ModelBook` keeps the new ones).
    tool_results: list[str] = field(default_factory=list)
    #: Tool results without an id (Gemini's Developer API often omits it).
    unnamed_results: int = 0
    notes: list[str] = field(default_factory=list)


def read_request(
    path: str, value: object, body_size: int = 0, *, unread: bool = False
) -> ModelRequest | None:
    """The model request a POST is, or None when it is not one. `value`: its body's JSON
    (`NOT_JSON` when it is not); `unread`: the proxy could not read the body (over the
    cap, or a coding it does not inflate). Never raises."""
    found = api_of_path(path)
    if found is None:
        return None
    provider, api, streamed = found
    if unread:
        # Over the body cap, or a coding the proxy could not read (Codex may send zstd):
        # the path alone says what it is; what it carried is unknown.
        req = ModelRequest(provider, api, streamed=streamed)
        req.notes.append(f"{NoteCode.MODEL_REQUEST_UNREAD.value}:{body_size}")
        return req
    if not isinstance(value, dict):
        return None  # not a JSON object: some other API that happens to share the path
    shape_ok = (
        ("messages" in value)
        if api in (ModelApi.MESSAGES, ModelApi.CHAT_COMPLETIONS)
        else ("input" in value or "instructions" in value)
        if api is ModelApi.RESPONSES
        else ("contents" in value)
    )
    if not shape_ok:
        req = ModelRequest(Provider.UNKNOWN, ModelApi.UNKNOWN, streamed=streamed)
        req.model = _cut(value.get("model"))
        req.notes.append(f"{NoteCode.MODEL_SHAPE_UNKNOWN.value}:{api.value}")
        return req
    req = ModelRequest(provider, api)
    req.model = _cut(value.get("model"))
    req.streamed = streamed or value.get("stream") is True
    if api is ModelApi.GENERATE_CONTENT:
        req.model = _gemini_model(path) or req.model
    try:
        _RESULT_READERS[api](value, req)
    except Exception:  # pragma: no cover - the readers take any JSON; a bug must not raise
        req.notes.append(f"{NoteCode.MODEL_SHAPE_UNKNOWN.value}:unread")
    return req


def read_request_body(path: str, body: bytes | None, body_size: int = 0) -> ModelRequest | None:
    """`read_request` of a body not parsed yet (None: the proxy could not read it)."""
    if body is None:
        return read_request(path, NOT_JSON, body_size, unread=True)
    return read_request(path, try_loads(body) if body.lstrip()[:1] == b"{" else NOT_JSON)


def _gemini_model(path: str) -> str | None:
    bare = path.split("?", 1)[0]
    if "/models/" not in bare:
        return None
    return _cut(bare.rsplit("/models/", 1)[1].split(":", 1)[0])


def _add_result(req: ModelRequest, call_id: object) -> None:
    cid = _cut(call_id)
    if cid is None:
        req.unnamed_results += 1
    elif len(req.tool_results) < MAX_TOOL_RESULTS:
        req.tool_results.append(cid)


def _anthropic_results(body: dict[str, Any], req: ModelRequest) -> None:
    for msg in _list(body.get("messages")):
        for block in _list(_dict(msg).get("content")):
            block = _dict(block)
            if block.get("type") == "tool_result":
                _add_result(req, block.get("tool_use_id"))


def _chat_results(body: dict[str, Any], req: ModelRequest) -> None:
    for msg in _list(body.get("messages")):
        msg = _dict(msg)
        if msg.get("role") == "tool":
            _add_result(req, msg.get("tool_call_id"))


def _responses_results(body: dict[str, Any], req: ModelRequest) -> None:
    for item in _list(body.get("input")):
        item = _dict(item)
        if item.get("type") == "function_call_output":
            _add_result(req, item.get("call_id"))


def _gemini_results(body: dict[str, Any], req: ModelRequest) -> None:
    for content in _list(body.get("contents")):
        for part in _list(_dict(content).get("parts")):
            part = _dict(part)
            if "functionResponse" in part:
                _add_result(req, _dict(part.get("functionResponse")).get("id"))


_RESULT_READERS: Final = {
    ModelApi.MESSAGES: _anthropic_results,
    ModelApi.CHAT_COMPLETIONS: _chat_results,
    ModelApi.RESPONSES: _responses_results,
    ModelApi.GENERATE_CONTENT: _gemini_results,
}


# ------------------------------------------------------------------ answers


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model asked for: its id (None: the API gave none, Gemini's often),
    its name as the model spells it, and the hash of its arguments (None: unreadable)."""

    id: str | None
    name: str | None
    args_hash: str | None


@dataclass(slots=True)
class _Partial:
    """A tool call whose arguments are still streaming in."""

    id: str | None
    name: str | None
    text: list[str] = field(default_factory=list)
    size: int = 0
    over: bool = False

    def add(self, fragment: object) -> None:
        if not isinstance(fragment, str) or self.over:
            return
        self.size += len(fragment)
        if self.size > MAX_ARGS_BYTES:
            self.over = True
            return
        self.text.append(fragment)


class ModelReader:
    """Reads one model answer, a JSON body or an SSE stream event by event, and keeps
    only what a `model_turn` record says. Feed it `events()` then `end()`, or `body()`."""

    def __init__(self, api: ModelApi) -> None:
        self.api = api
        self.tool_calls: list[ToolCall] = []
        self.stop_reason: str | None = None
        self.model: str | None = None
        #: A terminal event was seen (`message_stop`, `[DONE]`, `response.completed`,
        #: a Gemini chunk with `finishReason`): the answer is whole.
        self.terminal = False
        #: When the first output (text or a tool call) arrived; None: none did.
        self.first_output: float | None = None
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None
        self.events = 0
        self.notes: list[str] = []
        self._partials: dict[object, _Partial] = {}
        self._error: str | None = None

    # -- what the record says

    @property
    def error(self) -> str | None:
        """The error type an answer carried (Anthropic `event: error`, a failed response)."""
        return self._error

    # -- input

    def events_of(self, items: list[SseEvent], ts: float) -> None:
        for ev in items:
            self.events += 1
            if not ev.has_data:
                continue
            data = ev.data
            if data.strip() == "[DONE]":
                self.terminal = True
                self._flush_partials()
                continue
            value = try_loads(data)
            if not isinstance(value, dict):
                if NoteCode.MODEL_EVENT_NOT_JSON.value not in self.notes:
                    self.notes.append(NoteCode.MODEL_EVENT_NOT_JSON.value)
                continue
            try:
                self._event(ev.event, value, ts)
            except Exception:  # pragma: no cover - readers take any JSON
                note = f"{NoteCode.MODEL_SHAPE_UNKNOWN.value}:event"
                if note not in self.notes:
                    self.notes.append(note)

    def body(self, body: bytes | None, ts: float) -> None:
        """A whole (unstreamed) answer."""
        if body is None:
            return
        value = try_loads(body)
        if self.api is ModelApi.GENERATE_CONTENT and isinstance(value, list):
            # `streamGenerateContent` without `alt=sse`: one JSON array of the chunks.
            for n, chunk in enumerate(value[: MAX_TOOL_CALLS * 16]):
                if isinstance(chunk, dict):
                    self._gemini_chunk("message", chunk, ts)
                    self.events = n + 1
            return
        if not isinstance(value, dict):
            self.notes.append(NoteCode.MODEL_ANSWER_NOT_JSON.value)
            return
        try:
            self._whole(value, ts)
        except Exception:  # pragma: no cover - readers take any JSON
            self.notes.append(f"{NoteCode.MODEL_SHAPE_UNKNOWN.value}:answer")

    def end(self) -> None:
        """The answer ended (whole or not): arguments still streaming are hashed as they are."""
        self._flush_partials()

    # -- helpers

    def _output(self, ts: float) -> None:
        if self.first_output is None:
            self.first_output = ts

    def _call(self, call_id: object, name: object, args: str | None) -> None:
        if len(self.tool_calls) < MAX_TOOL_CALLS:
            self.tool_calls.append(ToolCall(_cut(call_id), _cut(name), args))
        elif NoteCode.MODEL_TOOL_CALLS_OVER_CAP.value not in self.notes:
            self.notes.append(NoteCode.MODEL_TOOL_CALLS_OVER_CAP.value)

    def _finish_partial(self, key: object) -> None:
        p = self._partials.pop(key, None)
        if p is None:
            return
        if p.over and NoteCode.MODEL_ARGS_OVER_CAP.value not in self.notes:
            self.notes.append(NoteCode.MODEL_ARGS_OVER_CAP.value)
        self._call(p.id, p.name, _args_text_hash("".join(p.text)))

    def _flush_partials(self) -> None:
        for key in list(self._partials):
            self._finish_partial(key)

    def _open_partial(self, key: object, call_id: object, name: object) -> _Partial:
        p = self._partials.get(key)
        if p is None:
            if len(self._partials) >= MAX_TOOL_CALLS:
                # A stream that opens calls without end: the oldest is hashed now.
                self._finish_partial(next(iter(self._partials)))
            p = _Partial(_cut(call_id), _cut(name))
            self._partials[key] = p
        else:
            p.id = p.id or _cut(call_id)
            p.name = p.name or _cut(name)
        return p

    def _tokens(self, inp: object, out: object) -> None:
        if _int(inp) is not None:
            self.input_tokens = _int(inp)
        if _int(out) is not None:
            self.output_tokens = _int(out)

    # -- Anthropic Messages

    def _anthropic_event(self, event: str, v: dict[str, Any], ts: float) -> None:
        kind = v.get("type") or event
        if kind == "message_start":
            msg = _dict(v.get("message"))
            self.model = _cut(msg.get("model")) or self.model
            usage = _dict(msg.get("usage"))
            self._tokens(usage.get("input_tokens"), usage.get("output_tokens"))
        elif kind == "content_block_start":
            self._output(ts)
            block = _dict(v.get("content_block"))
            if block.get("type") in ("tool_use", "server_tool_use", "mcp_tool_use"):
                p = self._open_partial(v.get("index"), block.get("id"), block.get("name"))
                initial = block.get("input")
                if isinstance(initial, dict) and initial:
                    p.add(json.dumps(initial))  # a whole input in the start (rare)
        elif kind == "content_block_delta":
            self._output(ts)
            delta = _dict(v.get("delta"))
            if delta.get("type") == "input_json_delta":
                open_call = self._partials.get(v.get("index"))
                if open_call is not None:
                    open_call.add(delta.get("partial_json"))
        elif kind == "content_block_stop":
            self._finish_partial(v.get("index"))
        elif kind == "message_delta":
            delta = _dict(v.get("delta"))
            if isinstance(delta.get("stop_reason"), str):
                self.stop_reason = _cut(delta["stop_reason"])
            usage = _dict(v.get("usage"))
            self._tokens(usage.get("input_tokens"), usage.get("output_tokens"))
        elif kind == "message_stop":
            self.terminal = True
            self._flush_partials()
        elif kind == _API_ERROR:
            self._error = _cut(_dict(v.get("error")).get("type")) or "error"
            self.terminal = True  # the API's own end of a failed answer, not a cut

    def _anthropic_body(self, v: dict[str, Any], ts: float) -> None:
        if v.get("type") == _API_ERROR:
            self._error = _cut(_dict(v.get("error")).get("type")) or "error"
            self.terminal = True
            return
        self.model = _cut(v.get("model"))
        for block in _list(v.get("content")):
            block = _dict(block)
            if block.get("type") in ("tool_use", "server_tool_use", "mcp_tool_use"):
                self._call(block.get("id"), block.get("name"), args_hash(block.get("input")))
        self.stop_reason = _cut(v.get("stop_reason"))
        usage = _dict(v.get("usage"))
        self._tokens(usage.get("input_tokens"), usage.get("output_tokens"))
        self.terminal = "content" in v

    # -- OpenAI Chat Completions

    def _chat_event(self, event: str, v: dict[str, Any], ts: float) -> None:
        self.model = _cut(v.get("model")) or self.model
        if "error" in v:
            self._error = _cut(_dict(v.get("error")).get("type")) or "error"
        for choice in _list(v.get("choices")):
            choice = _dict(choice)
            delta = _dict(choice.get("delta"))
            if delta.get("content") or delta.get("tool_calls") or delta.get("reasoning_content"):
                self._output(ts)
            for call in _list(delta.get("tool_calls")):
                call = _dict(call)
                fn = _dict(call.get("function"))
                # The id and name come only in the first delta of each index.
                key = (choice.get("index"), call.get("index"))
                self._open_partial(key, call.get("id"), fn.get("name")).add(fn.get("arguments"))
            if isinstance(choice.get("finish_reason"), str):
                self.stop_reason = _cut(choice["finish_reason"])
        usage = _dict(v.get("usage"))
        self._tokens(usage.get("prompt_tokens"), usage.get("completion_tokens"))

    def _chat_body(self, v: dict[str, Any], ts: float) -> None:
        if "error" in v and "choices" not in v:
            self._error = _cut(_dict(v.get("error")).get("type")) or "error"
            return
        self.model = _cut(v.get("model"))
        for choice in _list(v.get("choices")):
            choice = _dict(choice)
            for call in _list(_dict(choice.get("message")).get("tool_calls")):
                call = _dict(call)
                fn = _dict(call.get("function"))
                args = fn.get("arguments")
                self._call(
                    call.get("id"),
                    fn.get("name"),
                    _args_text_hash(args) if isinstance(args, str) else args_hash(args),
                )
            if isinstance(choice.get("finish_reason"), str):
                self.stop_reason = _cut(choice["finish_reason"])
        usage = _dict(v.get("usage"))
        self._tokens(usage.get("prompt_tokens"), usage.get("completion_tokens"))
        self.terminal = "choices" in v

    # -- OpenAI Responses

    def _responses_event(self, event: str, v: dict[str, Any], ts: float) -> None:
        kind = v.get("type") or event
        if kind == "response.output_item.added":
            self._output(ts)
            item = _dict(v.get("item"))
            if item.get("type") == "function_call":
                # Deltas are keyed by the item id (`fc_…`); the join key is `call_id`.
                p = self._open_partial(item.get("id"), item.get("call_id"), _fn_name(item))
                p.add(item.get("arguments"))
        elif kind == "response.function_call_arguments.delta":
            open_call = self._partials.get(v.get("item_id"))
            if open_call is not None:
                open_call.add(v.get("delta"))
        elif kind == "response.output_item.done":
            item = _dict(v.get("item"))
            if item.get("type") == "function_call":
                self._partials.pop(item.get("id"), None)
                args = item.get("arguments")
                self._call(
                    item.get("call_id"),
                    _fn_name(item),
                    _args_text_hash(args) if isinstance(args, str) else args_hash(args),
                )
        elif kind.startswith("response.output_") or kind.startswith("response.reasoning"):
            self._output(ts)
        elif kind in ("response.completed", "response.failed", "response.incomplete"):
            self.terminal = True
            self._flush_partials()
            self._response_status(_dict(v.get("response")))
        elif kind == "response.created":
            self.model = _cut(_dict(v.get("response")).get("model")) or self.model
        elif kind == _API_ERROR:
            self._error = _cut(v.get("code")) or "error"
            self.terminal = True

    def _response_status(self, resp: dict[str, Any]) -> None:
        self.model = _cut(resp.get("model")) or self.model
        status = _cut(resp.get("status"))
        incomplete = _cut(_dict(resp.get("incomplete_details")).get("reason"))
        self.stop_reason = f"{status}:{incomplete}" if status and incomplete else status
        if status == "failed":
            self._error = _cut(_dict(resp.get("error")).get("code")) or "failed"
        usage = _dict(resp.get("usage"))
        self._tokens(usage.get("input_tokens"), usage.get("output_tokens"))

    def _responses_body(self, v: dict[str, Any], ts: float) -> None:
        if "error" in v and "output" not in v:
            self._error = _cut(_dict(v.get("error")).get("code")) or "error"
            return
        for item in _list(v.get("output")):
            item = _dict(item)
            if item.get("type") == "function_call":
                args = item.get("arguments")
                self._call(
                    item.get("call_id"),
                    _fn_name(item),
                    _args_text_hash(args) if isinstance(args, str) else args_hash(args),
                )
        self._response_status(v)
        self.terminal = "output" in v

    # -- Gemini

    def _gemini_chunk(self, event: str, v: dict[str, Any], ts: float) -> None:
        # Each chunk is a whole GenerateContentResponse; a functionCall arrives complete.
        if "error" in v and "candidates" not in v:
            self._error = _cut(_dict(v.get("error")).get("status")) or "error"
            self.terminal = True
            return
        self.model = _cut(v.get("modelVersion")) or self.model
        for cand in _list(v.get("candidates")):
            cand = _dict(cand)
            parts = _list(_dict(cand.get("content")).get("parts"))
            if parts:
                self._output(ts)
            for part in parts:
                fc = _dict(_dict(part).get("functionCall"))
                if fc:
                    self._call(fc.get("id"), fc.get("name"), args_hash(fc.get("args") or {}))
            if isinstance(cand.get("finishReason"), str):
                self.stop_reason = _cut(cand["finishReason"])
                self.terminal = True
        usage = _dict(v.get("usageMetadata"))
        self._tokens(usage.get("promptTokenCount"), usage.get("candidatesTokenCount"))

    def _gemini_body(self, v: dict[str, Any], ts: float) -> None:
        self._gemini_chunk("message", v, ts)
        self.first_output = None  # not streamed: no first token to time

    def _event(self, event: str, v: dict[str, Any], ts: float) -> None:
        api = self.api
        if api is ModelApi.MESSAGES:
            self._anthropic_event(event, v, ts)
        elif api is ModelApi.CHAT_COMPLETIONS:
            self._chat_event(event, v, ts)
        elif api is ModelApi.RESPONSES:
            self._responses_event(event, v, ts)
        elif api is ModelApi.GENERATE_CONTENT:
            self._gemini_chunk(event, v, ts)

    def _whole(self, v: dict[str, Any], ts: float) -> None:
        api = self.api
        if api is ModelApi.MESSAGES:
            self._anthropic_body(v, ts)
        elif api is ModelApi.CHAT_COMPLETIONS:
            self._chat_body(v, ts)
        elif api is ModelApi.RESPONSES:
            self._responses_body(v, ts)
        elif api is ModelApi.GENERATE_CONTENT:
            self._gemini_body(v, ts)


def _fn_name(item: dict[str, Any]) -> str | None:
    """A Responses function call's name; Codex adds a `namespace` (`mcp__echo`), kept as
    `namespace.name` so that both are on the record."""
    name = _cut(item.get("name"))
    namespace = _cut(item.get("namespace"))
    if name and namespace:
        return f"{namespace}.{name}"[: MAX_ID_CHARS * 2]
    return name
