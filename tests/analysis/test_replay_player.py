"""`mcp-layers replay`'s pure parts: a recording read as a script, and which recorded answer
a live request gets (no sockets)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp_layers_analysis.replay.player import MISS_CODE, Player
from mcp_layers_analysis.replay.recording import read
from mcp_layers_analysis.replay.script import ScriptError, build
from mcp_layers_core.record import Kind, StreamEnd, new_record

SESSION = "s-0123456789"
HEADERS_IN_SESSION = ["accept", "mcp-session-id"]


def rec(
    kind: Kind,
    request: dict[str, Any] | None,
    response: Any = None,
    *,
    status: int | None = 200,
    in_session: bool = True,
    content_type: str = "application/json",
    **more: Any,
) -> dict[str, Any]:
    method = request.get("method") if request else None
    return new_record(
        kind=kind.value,
        method=method,
        session=SESSION,
        httpStatuses=[] if status is None else [status],
        contentType=content_type,
        jsonrpc=None if request is None else {"id": request.get("id"), "errorCode": None,
                                              "errorMessage": None},
        requestHeaders=HEADERS_IN_SESSION if in_session else ["accept"],
        durationMs=5.0,
        bodies={"request": request, "response": response, "headersMs": 1.0, "events": []},
        **more,
    )  # fmt: skip


def initialize(rpc_id: Any = 0) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "clientInfo": {"name": "c", "version": "1"}}}  # fmt: skip


def call(rpc_id: Any, tool: str = "echo", **arguments: Any) -> dict[str, Any]:
    params = {"name": tool, "arguments": arguments, "_meta": {"progressToken": rpc_id}}
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": params}


def ok(rpc_id: Any, text: str = "ok") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "result": {"content": [{"type": "text", "text": text}]}}


def opened() -> dict[str, Any]:
    return rec(Kind.REQUEST, initialize(), ok(0), in_session=False)


def player(*records: dict[str, Any]) -> Player:
    return Player(build([(f"r.jsonl:{i}", r) for i, r in enumerate(records, 1)]))


def live(p: Player, message: dict[str, Any], session: str | None) -> tuple[int | None, Any]:
    reply = p.post(session, json.dumps(message).encode())
    return reply.status, (json.loads(reply.body) if reply.body else None)


def session_of(p: Player) -> str:
    reply = p.post(None, json.dumps(initialize("x")).encode())
    (minted,) = [v for k, v in reply.headers if k == "mcp-session-id"]
    return minted


def test_the_nth_live_call_gets_the_nth_recorded_answer_with_the_live_id() -> None:
    p = player(
        opened(),
        rec(Kind.REQUEST, call(5, text="hi"), None, status=503, retryAfterMs=2000),
        rec(Kind.REQUEST, call(6, text="hi"), ok(6, "second")),
    )
    s = session_of(p)
    first = p.post(s, json.dumps(call("a-string-id", text="hi")).encode())
    assert first.status == 503 and ("retry-after", "2") in first.headers
    status, body = live(p, call(99, text="hi"), s)  # a retry with a new id and token
    assert status == 200 and body["id"] == 99 and body["result"]["content"][0]["text"] == "second"
    assert p.misses == []


def test_an_id_keeps_its_json_type() -> None:
    p = player(opened(), rec(Kind.REQUEST, call(1), ok(1)))
    _, body = live(p, call("1"), session_of(p))
    assert body["id"] == "1"


def test_a_request_beyond_the_recording_is_a_miss_that_says_what_differed() -> None:
    p = player(opened(), rec(Kind.REQUEST, call(1, text="hi"), ok(1)))
    s = session_of(p)
    status, body = live(p, call(2, text="bye"), s)
    assert status == 200 and body["error"]["code"] == MISS_CODE and body["id"] == 2
    assert "r.jsonl:2" in body["error"]["message"] and "arguments.text" in body["error"]["message"]
    live(p, call(3, text="hi"), s)
    _, again = live(p, call(4, text="hi"), s)  # the recording held one such call
    assert "holds 1 such request" in again["error"]["message"]
    assert [m.method for m in p.misses] == ["tools/call", "tools/call"]


def test_after_a_recorded_404_the_session_is_gone_for_every_request() -> None:
    gone = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": "Session not found"}}
    p = player(opened(), rec(Kind.REQUEST, call(1), gone, status=404))
    s = session_of(p)
    assert live(p, call(1), s)[0] == 404
    assert live(p, call(2, other=True), s)[0] == 404  # not matched: the session is gone
    assert p.get(s).status == 404
    assert p.misses == []
    assert live(p, call(3), "never-issued")[0] == 404


def test_every_initialize_opens_a_fresh_session_mapped_to_the_recorded_one() -> None:
    p = player(opened(), rec(Kind.REQUEST, call(1), ok(1)))
    first = session_of(p)
    assert live(p, call(1), first)[0] == 200
    # A second initialize: the recording had one, so it is a miss, and opens nothing.
    reply = p.post(None, json.dumps(initialize("y")).encode())
    assert not [v for k, v in reply.headers if k == "mcp-session-id"]
    assert [m.method for m in p.misses] == ["initialize"]


def test_notifications_get_their_recorded_acknowledgement() -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    recorded = rec(Kind.NOTIFICATION, note, status=202)
    recorded["bodies"] = None  # notification records hold no bodies
    p = player(opened(), recorded)
    s = session_of(p)
    assert p.post(s, json.dumps(note).encode()).status == 202
    assert p.post(s, json.dumps({"jsonrpc": "2.0", "id": 9, "result": {}}).encode()).status == 202


def test_an_sse_answer_replays_its_events_with_ids_and_progress_tokens_rewritten() -> None:
    progress = {"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": 1, "progress": 1}}  # fmt: skip
    recorded = rec(Kind.REQUEST, call(1), ok(1), content_type="text/event-stream",
                   sse={"events": 2, "final": True, "end": "complete", "resumed": False})  # fmt: skip
    recorded["bodies"]["events"] = [
        {"ms": 10.0, "id": "e1", "event": "message", "retry": None, "data": progress, "json": True},
        {"ms": 20.0, "id": "e2", "event": "message", "retry": 500, "data": ok(1), "json": True},
    ]
    p = Player(build([("r:1", opened()), ("r:2", recorded)]), speed=2.0)
    live_call = call(77)
    live_call["params"]["_meta"]["progressToken"] = "tok"
    reply = p.post(session_of(p), json.dumps(live_call).encode())
    assert reply.sse is not None and reply.end is StreamEnd.COMPLETE
    (t1, e1), (t2, e2) = reply.sse
    assert (t1, t2) == (0.005, 0.01)  # scaled by --speed 2
    assert b'"progressToken":"tok"' in e1 and e1.startswith(b"id: e1\n")
    assert b'"id":77' in e2 and b"retry: 500\n" in e2


def test_a_recorded_drop_and_a_cut_stream() -> None:
    dropped = rec(Kind.REQUEST, call(1), None, status=None)
    cut = rec(Kind.REQUEST, call(2, n=2), None, content_type="text/event-stream",
              sse={"events": 0, "final": False, "end": "error", "resumed": False})  # fmt: skip
    p = player(opened(), dropped, cut)
    s = session_of(p)
    assert p.post(s, json.dumps(call(1)).encode()).status is None
    reply = p.post(s, json.dumps(call(2, n=2)).encode())
    assert reply.status == 200 and reply.sse == () and reply.end is StreamEnd.ERROR


def stream(ts: str, end: str, duration_ms: float = 50.0, **more: Any) -> dict[str, Any]:
    return new_record(kind="stream", session=SESSION, httpStatuses=[200], ts=ts,
                      requestHeaders=HEADERS_IN_SESSION, durationMs=duration_ms,
                      sse={"events": 0, "final": False, "end": end, "resumed": False}, **more)  # fmt: skip


def test_get_streams_replay_in_the_order_opened_and_hold_as_the_server_held_them() -> None:
    injected = {"rule": "middlebox.idle_cut", "action": "idle_cut"}
    deleted = new_record(kind="session_end", session=SESSION, httpStatuses=[200],
                         ts="2026-12-02T10:00:09.000Z", durationMs=1.0)  # fmt: skip
    p = player(
        opened(),
        # Written when they ended, not in the order they were opened.
        stream("2026-12-02T10:00:05.000Z", "complete", 4000.0),  # ended with the session
        stream("2026-12-02T10:00:01.000Z", "error"),  # the client left
        stream("2026-12-02T10:00:02.000Z", "complete", 1000.0),  # the server closed it
        stream("2026-12-02T10:00:04.000Z", "error", 300.0, injected=injected),  # a fault
        deleted,
    )
    s = session_of(p)
    replies = [p.get(s) for _ in range(5)]
    assert [r.status for r in replies] == [200, 200, 200, 200, 405]
    assert [r.hold_s for r in replies[:4]] == [None, 1.0, 0.3, None]
    assert replies[2].end is StreamEnd.ERROR
    assert p.delete(s).status == 200 and not p.alive(s)


def test_a_resumed_get_carries_the_answer_its_cut_stream_owed() -> None:
    cut = rec(Kind.REQUEST, call(3), ok(3), content_type="text/event-stream",
              sse={"events": 1, "final": True, "end": "error", "resumed": True})  # fmt: skip
    resumed = stream("2026-12-02T10:00:01.000Z", "complete")
    resumed["sse"]["resumed"] = True
    p = player(opened(), cut, resumed)
    s = session_of(p)
    post = p.post(s, json.dumps(call(41)).encode())
    assert post.sse == () and post.end is StreamEnd.ERROR  # cut before its answer
    assert p.get(s).status == 405  # no standby stream was recorded
    again = p.get(s, last_event_id="e1")
    assert again.status == 200 and again.sse is not None
    ((_, event),) = again.sse
    assert b'"id":41' in event


def test_a_recording_without_bodies_is_refused_with_the_option_to_set() -> None:
    plain = opened()
    plain["bodies"] = None
    with pytest.raises(ScriptError, match="mcp_record_bodies=true"):
        build([("r:1", plain)])


def test_an_unknown_session_is_refused_listing_the_sessions() -> None:
    with pytest.raises(ScriptError, match=SESSION):
        build([("r:1", opened())], session="s-nope")


def test_a_bad_or_truncated_line_names_its_file_and_line(tmp_path: Path) -> None:
    good = json.dumps(opened())
    bad = tmp_path / "bad.jsonl"
    bad.write_text(f"{good}\nnot json\n{good}\n")
    with pytest.raises(ScriptError, match=r"bad.jsonl:2: not JSON"):
        read([str(bad)])
    cut = tmp_path / "cut.jsonl"
    cut.write_text(f"{good}\n{good[:40]}")
    with pytest.raises(ScriptError, match=r"cut.jsonl:2: a line cut short"):
        read([str(cut)])
    other = tmp_path / "other.jsonl"
    other.write_text('{"v": 2}\n')
    with pytest.raises(ScriptError, match=r"other\.jsonl:1: not a v1"):
        read([str(other)])
