"""`mcp-layers hangs`: each stall, and who was waited on (issue 28).

The recordings are made by the core itself (`Tracker`), fed the lab fake model's real
answers (tests/fixtures/model) and MCP exchanges at chosen times, so the records are what
the proxy writes: a tool call the server never answers (`mcp_server`), a model that never
answers after the tool result (`model`), an agent that sends nothing after both answered
(`agent`), a model that ended its turn (`none`), and a recording without model traffic
(`unknown`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from analysis_helpers import invoke
from report_helpers import AgentRun


def hangs(path: Path, *args: str) -> list[dict[str, Any]]:
    """The rows; none found exits 1 (NOTHING_MATCHED, as every reading command)."""
    result = invoke("hangs", path, "--format", "json", *args)
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    assert result.exit_code == (0 if rows else 1), result.output + result.stderr
    return rows


def test_a_tools_call_never_answered_is_the_servers(tmp_path: Path) -> None:
    run = AgentRun()
    run.model(0, "anthropic-tool-stream")
    run.call(0.5, answer_at=None)
    [row] = hangs(run.write(tmp_path / "r.jsonl", 40))
    assert row["waited_on"] == "mcp_server" and row["seconds"] > 39
    assert "tools/call echo" in row["in_flight"] and row["since"].endswith("Z")


def test_a_model_that_never_answers_after_the_result(tmp_path: Path) -> None:
    run = AgentRun()
    run.model(0, "anthropic-tool-stream")
    run.call(0.5, answer_at=0.6)
    run.model(0.7, "anthropic-result-stream", hang=True)
    [row] = hangs(run.write(tmp_path / "r.jsonl", 30))
    assert row["waited_on"] == "model" and "model anthropic" in row["in_flight"]
    assert row["detail"] == "no output; the answer never completed"


def test_an_agent_that_sends_nothing_after_both_answered(tmp_path: Path) -> None:
    run = AgentRun()
    run.model(0, "chat-tool-stream")
    run.call(0.5, answer_at=0.6)
    run.model(25, "chat-result-stream")  # 24 s later: the agent sat on the result
    rows = hangs(run.write(tmp_path / "r.jsonl", 26))
    assert [(r["waited_on"], round(r["seconds"])) for r in rows] == [("agent", 24)]
    assert rows[0]["in_flight"] is None


def test_a_slow_model_stream_and_the_min(tmp_path: Path) -> None:
    run = AgentRun()
    run.model(0, "responses-tool-stream", until=12)  # answered, but its stream took 12 s
    run.call(12.5, answer_at=12.6)
    path = run.write(tmp_path / "r.jsonl", 13)
    [row] = hangs(path)
    assert row["waited_on"] == "model" and "then the stream went silent" in row["detail"]
    assert hangs(path, "--min-s", "20") == []


def test_the_model_ended_its_turn_then_silence_is_none(tmp_path: Path) -> None:
    run = AgentRun()
    run.model(0, "anthropic-result-stream")  # end_turn, no tool asked for
    run.call(15, answer_at=15.1, method="tools/list")
    [row] = hangs(run.write(tmp_path / "r.jsonl", 15.2))
    assert row["waited_on"] == "none" and "end_turn" in row["detail"]


def test_without_model_traffic_a_silence_is_unknown(tmp_path: Path) -> None:
    run = AgentRun()
    run.call(0, answer_at=0.1, method="tools/list")
    run.call(20, answer_at=20.1)
    [row] = hangs(run.write(tmp_path / "r.jsonl", 21))
    assert row["waited_on"] == "unknown"


def test_table_format_and_nothing_found(tmp_path: Path) -> None:
    run = AgentRun()
    run.model(0, "anthropic-tool-stream")
    run.call(0.5, answer_at=None)
    path = run.write(tmp_path / "r.jsonl", 40)
    table = invoke("hangs", path)
    assert table.exit_code == 0 and "mcp_server" in table.stdout and "waited_on" in table.stdout
    quiet = AgentRun()
    quiet.call(0, answer_at=0.1)
    empty = invoke("hangs", quiet.write(tmp_path / "q.jsonl", 1))
    assert empty.exit_code == 1 and "no stall" in empty.stderr


def test_a_models_first_output_at_the_end_of_the_silence_came_after_it() -> None:
    from mcp_layers_analysis.hangs import classify

    span = {"kind": "model_turn", "started": 0, "ttft": 25_000.0, "complete": True}
    # The silence ended 74 ms after the first output (the next moment was the stream's end).
    assert classify([span], None, 1, 25_074)[1].startswith("no output during the silence")
    assert classify([span], None, 1, 40_000)[1].endswith("then the stream went silent")


def shown(path: Path) -> dict[str, Any]:
    """`show`'s first row (the incident) of the recording's one session."""
    [session] = json.loads(invoke("sessions", path, "--format", "json").stdout)
    rows = json.loads(invoke("show", session["session"], path, "--format", "json").stdout)
    return dict(rows[0])


def test_the_forensics_name_who_a_stall_after_an_incident_waited_on(tmp_path: Path) -> None:
    """The same silences in the hang forensics (`show`, `retries`, `verdicts`, `bundle`):
    a tool error the model never answered was a wait on the model, not the client."""
    run = AgentRun()
    run.model(0, "anthropic-tool-stream")
    run.call(0.5, answer_at=0.6, is_error=True)
    run.model(0.7, "anthropic-result-stream", hang=True)
    row = shown(run.write(tmp_path / "r.jsonl", 30))
    assert (
        "stall: no request for 29 s after TOOL_ERROR (waited on model for 29 s)" in (row["detail"])
    ), row


def test_a_stall_after_a_503_with_every_answer_in_was_the_agents(tmp_path: Path) -> None:
    run = AgentRun()
    run.model(0, "anthropic-tool-stream")
    run.call(0.5, answer_at=0.6, status=503)
    run.call(20.6, answer_at=20.7)  # the same call, 20 s later, the model not asked
    row = shown(run.write(tmp_path / "r.jsonl", 21))
    assert f"(waited on agent for 20 s), then tools/call #{row['id'] + 1}" in row["detail"], row


def test_a_stall_the_models_traffic_kept_busy_says_nothing_more(tmp_path: Path) -> None:
    """No silence of the whole traffic inside the client's: no party is named."""
    run = AgentRun()
    run.model(0, "anthropic-tool-stream")
    run.call(0.5, answer_at=0.6, is_error=True)
    for at in range(2, 30, 5):  # the model is asked again and again, never the server
        run.model(at, "anthropic-result-stream")
    run.call(31, answer_at=31.1)
    row = shown(run.write(tmp_path / "r.jsonl", 32))
    assert "stall: no request for 30 s after TOOL_ERROR, then tools/call #" in row["detail"], row
    assert "waited on" not in row["detail"]


def test_progress_during_the_silence_is_slow_progress_before_it_is_hung(tmp_path: Path) -> None:
    """`lastEventMs`: when the stream's last event came tells a slow call from a hung one."""
    slow = AgentRun()
    slow.model(0, "anthropic-tool-stream")
    slow.streamed_call(0.5, [1.0 + 5 * i for i in range(7)])  # progress to 31 s
    [row] = hangs(slow.write(tmp_path / "slow.jsonl", 40))
    assert row["waited_on"] == "mcp_server"
    assert row["detail"].startswith("slow, not hung: its last of 7 events came 30.") and (
        "s in" in row["detail"]
    ), row
    hung = AgentRun()
    hung.model(0, "anthropic-tool-stream")
    hung.streamed_call(0.5, [0.6])  # one progress at once, then nothing
    [row] = hangs(hung.write(tmp_path / "hung.jsonl", 40))
    assert row["waited_on"] == "mcp_server"
    assert row["detail"].startswith("no answer, and no event during the silence"), row
