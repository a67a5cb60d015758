"""The model API readers (`model_api.py`) under arbitrary input: whatever a peer sends as a
model request or answer (any JSON, any bytes, any event names, cut anywhere), nothing
raises, the tool calls stay under their cap, and every record the tracker writes of it
validates (tests/conftest.py checks each one)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp_layers_core.events import (
    FlowFailed,
    PostReceived,
    ProxyStopping,
    ResponseBody,
    ResponseStarted,
    StreamChunk,
    StreamEnded,
)
from mcp_layers_core.model_api import MAX_TOOL_CALLS, ModelReader, read_request_body
from mcp_layers_core.record import ModelApi
from mcp_layers_core.sse import SseEvent
from mcp_layers_core.tracker import Tracker

PATHS = (
    "/v1/messages",
    "/v1/chat/completions",
    "/v1/responses",
    "/v1beta/models/g:streamGenerateContent?alt=sse",
    "/v1beta/models/g:generateContent",
    "/v1/messages/count_tokens",
    "/other",
)
KEYS = st.sampled_from(
    ["type", "index", "id", "call_id", "item_id", "name", "delta", "content_block", "item",
     "choices", "tool_calls", "function", "arguments", "partial_json", "candidates",
     "content", "parts", "functionCall", "args", "finishReason", "stop_reason", "usage",
     "message", "response", "status", "error", "messages", "input", "contents", "model"]
)  # fmt: skip
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12)
    | st.sampled_from(["tool_use", "input_json_delta", "function_call", "message_stop",
                       "response.output_item.added", "response.completed", "[DONE]"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=25,
)  # fmt: skip
OBJECTS = st.dictionaries(KEYS, VALUES, max_size=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    api=st.sampled_from(list(ModelApi)),
    events=st.lists(st.tuples(st.text(max_size=30), OBJECTS | st.text(max_size=20)), max_size=12),
    body=OBJECTS | st.binary(max_size=64),
)
def test_readers_take_anything(api: ModelApi, events: list[tuple[str, Any]], body: Any) -> None:
    r = ModelReader(api)
    r.events_of(
        [
            SseEvent(name, v if isinstance(v, str) else json.dumps(v), None, None, True)
            for name, v in events
        ],
        1.0,
    )
    r.body(body if isinstance(body, bytes) else json.dumps(body).encode(), 2.0)
    r.end()
    assert len(r.tool_calls) <= MAX_TOOL_CALLS


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    path=st.sampled_from(PATHS),
    request=OBJECTS | st.binary(max_size=32),
    answer=st.lists(OBJECTS | st.binary(max_size=32), max_size=6),
    streamed=st.booleans(),
    cut=st.integers(min_value=0, max_value=3),
)
def test_the_tracker_takes_any_model_exchange(
    path: str, request: Any, answer: list[Any], streamed: bool, cut: int
) -> None:
    t = Tracker()
    body = request if isinstance(request, bytes) else json.dumps(request).encode()
    assert read_request_body(path, body) is None or path != "/other"
    out = t.handle(PostReceived("m", 1.0, "m:1", "p:1", {}, body, len(body), None, path))
    ctype = "text/event-stream" if streamed else "application/json"
    out += t.handle(ResponseStarted("m", 1.1, 200, {"content-type": ctype}, False))
    parts = [
        a if isinstance(a, bytes) else b"data: " + json.dumps(a).encode() + b"\n\n" for a in answer
    ]
    if streamed:
        for p in parts:
            out += t.handle(StreamChunk("m", 1.2, p))
        end = [StreamEnded("m", 1.3), FlowFailed("m", 1.3, "reset"), ProxyStopping(1.3)][cut % 3]
        out += t.handle(end)
    else:
        raw = b"".join(parts)
        out += t.handle(ResponseBody("m", 1.3, raw, len(raw)))
    out += t.handle(ProxyStopping(2.0))
    assert not t.models.open
    if path != "/other" and not path.endswith("count_tokens") and isinstance(request, dict):
        assert [e.record["kind"] for e in out] == ["model_turn"]
