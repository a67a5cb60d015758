"""Codex 0.171.0 with its model over WebSocket (`supports_websockets`, Responses over a
WebSocket: each turn a `response.create` message), recorded by the lab on 2026-12-02
through the proxy (tests/fixtures/lab_ws; `python -m mcp_layers_lab --clients codex-ws`).

Issue 28 on the real wire: every `tools/call` joined exactly to the WebSocket turn that
asked for it, the re-call after an error `retryOrigin: "model"` with no Retry-After grade,
and a stalled model on the WebSocket named by `hangs`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from analysis_helpers import invoke
from mcp_layers_core.record import Kind, Outcome, RetryOrigin

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lab_ws"


def records(name: str) -> list[dict[str, Any]]:
    text = (FIXTURES / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def test_every_call_joined_exactly_to_its_websocket_turn() -> None:
    recs = records("codex-ws_tool_error_again.jsonl")
    turns = {r["id"]: r for r in recs if r["kind"] == Kind.MODEL_TURN}
    calls = [r for r in recs if r["method"] == "tools/call"]
    assert [c["outcome"] for c in calls] == [Outcome.TOOL_ERROR, Outcome.TOOL_SUCCESS]
    for call in calls:
        join = call["modelCall"]
        assert join["join"] == "exact"
        asked = turns[join["turn"]]["modelTurn"]
        assert join["toolCallId"] in [t["id"] for t in asked["toolCalls"]]
        assert asked["api"] == "responses" and asked["complete"]
    # Each result went back to the model on a later turn of the same WebSocket.
    carried = [t for r in turns.values() for t in r["modelTurn"]["toolResults"]]
    assert [c["modelCall"]["toolCallId"] for c in calls] == carried
    assert [c["retryOrigin"] for c in calls] == [RetryOrigin.NONE, RetryOrigin.MODEL]


def test_the_models_re_call_gets_no_retry_after_grade() -> None:
    out = invoke(
        "verdicts", FIXTURES / "codex-ws_tool_error_again.jsonl", "--format", "json"
    ).stdout
    [row] = [r for r in json.loads(out) if r["check"] == "mcp-layers/retry-after-honored"]
    assert row["verdict"] == "NOT_EXERCISED", row


def test_a_stalled_model_on_the_websocket_is_named() -> None:
    result = invoke("hangs", FIXTURES / "codex-ws_model_hang.jsonl", "--format", "json")
    [row] = json.loads(result.stdout)
    assert row["waited_on"] == "model" and 24 < row["seconds"] < 27, row
    assert "model openai gpt-5.1-codex" in row["in_flight"]
