"""What `mcp_record_bodies` keeps for replay: when the headers came, and every SSE event of
the answer as it came (offset, id, type, retry, data), redacted like the bodies."""

from __future__ import annotations

import json

from wire import Run, call, event, result


def test_a_json_answer_keeps_its_time_to_headers_and_no_events() -> None:
    rec = Run(record_bodies=True).exchange(call(1), result(1, content=[]))
    assert rec["bodies"]["headersMs"] == 10.0  # one tick of the test clock
    assert rec["bodies"]["events"] == []


def test_an_sse_answer_keeps_every_event_in_order_with_its_offset() -> None:
    r = Run(record_bodies=True)
    flow = r.post(call(7))
    progress = {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": "p1", "progress": 1, "note": "Bearer abcdef1234567890"},
    }
    chunks = [
        b"id: e1\nretry: 1500\ndata:\n\n",  # a priming event: id and no data
        event(progress),
        b"data: not json\n\n",
        event(result(7, content=[{"type": "text", "text": "ok"}])),
    ]
    (rec,) = r.sse(flow, chunks)
    events = rec["bodies"]["events"]
    assert [e["id"] for e in events] == ["e1"] * 4  # the id persists, as a client sees it
    assert [e["retry"] for e in events] == [1500, None, None, None]
    assert [e["json"] for e in events] == [False, True, False, True]
    assert events[0]["data"] == "" and events[2]["data"] == "not json"
    assert events[3]["data"]["id"] == 7
    offsets = [e["ms"] for e in events]
    assert offsets == sorted(offsets) and offsets[0] > rec["bodies"]["headersMs"]
    assert "abcdef1234567890" not in json.dumps(rec["bodies"])  # redacted like the bodies


def test_without_record_bodies_nothing_of_the_stream_is_kept() -> None:
    r = Run()
    flow = r.post(call(1))
    (rec,) = r.sse(flow, [event(result(1, content=[]))])
    assert rec["bodies"] is None
    assert r.t.settings.record_bodies is False
