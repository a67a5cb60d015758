"""Retries, session lifelines and the transport eras, driven through the tracker."""

from __future__ import annotations

import json
from email.utils import formatdate

from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_layers_core.events import (
    FlowFailed,
    ProxyStopping,
    ResponseBody,
    ResponseStarted,
    StreamEnded,
)
from mcp_layers_core.retries import call_signature, retry_after_ms, tool_safety
from mcp_layers_core.tracker import records_of
from wire import JSON, SSE, Run, call, event, result, rpc

INIT = rpc(
    0,
    "initialize",
    protocolVersion="2025-11-25",
    capabilities={},
    clientInfo={"name": "agent", "version": "1.0"},
)
UA = {"user-agent": "agent/1.0"}


def open_session(r: Run, sid: str) -> dict:
    (rec,) = r.json(
        r.post(INIT, UA),
        200,
        result(0, protocolVersion="2025-11-25", capabilities={}, serverInfo={}),
        {"mcp-session-id": sid},
    )
    return rec


def in_session(sid: str) -> dict[str, str]:
    return {**UA, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}


def test_503_then_resend_with_the_same_id_and_body() -> None:
    r = Run()
    open_session(r, "A")
    (first,) = r.json(r.post(call(4), in_session("A")), 503, b"busy")
    (second,) = r.json(r.post(call(4), in_session("A")), 200, result(4, content=[]))
    assert (first["attempt"], first["retryOrigin"], first["httpStatuses"]) == (1, "none", [503])
    assert (
        second["retryOrigin"] == "resend"
        and second["attempt"] == 2
        and second["retryOf"] == first["id"]
    )
    assert second["httpStatuses"] == [503, 200] and second["retryDelayMs"] == 10.0
    assert second["outcome"] == "TOOL_SUCCESS"


def test_new_id_in_the_same_session_is_a_reissue_and_meta_noise_is_ignored() -> None:
    r = Run()
    open_session(r, "A")
    first = rpc(
        4, "tools/call", name="echo", arguments={"a": 1, "b": 2}, _meta={"progressToken": 4}
    )
    again = rpc(
        5, "tools/call", arguments={"b": 2, "a": 1}, name="echo", _meta={"progressToken": 5}
    )
    r.json(
        r.post(first, in_session("A")),
        200,
        {"jsonrpc": "2.0", "id": 4, "error": {"code": -32603, "message": "x"}},
    )
    (rec,) = r.json(r.post(again, in_session("A")), 200, result(5, content=[]))
    assert (rec["retryOrigin"], rec["attempt"], rec["httpStatuses"]) == ("reissue", 2, [200, 200])


def test_success_then_the_same_call_is_a_new_call() -> None:
    r = Run()
    open_session(r, "A")
    r.json(r.post(call(4), in_session("A")), 200, result(4, content=[]))
    (rec,) = r.json(r.post(call(5), in_session("A")), 200, result(5, content=[]))
    assert (rec["retryOrigin"], rec["attempt"], rec["retryOf"]) == ("none", 1, None)


def test_404_ends_the_session_and_the_reinit_links_to_it() -> None:
    r = Run()
    init_a = open_session(r, "A")
    lost = r.json(r.post(call(4), in_session("A")), 404, b"")
    call_rec, end_rec = lost
    assert call_rec["outcome"] == "HTTP_ERROR" and "session_lost" in call_rec["notes"]
    assert (end_rec["kind"], end_rec["endReason"], end_rec["session"]) == (
        "session_end",
        "not_found",
        init_a["session"],
    )
    assert end_rec["sessionStats"]["posts"] == 2
    init_b = open_session(r, "B")
    assert init_b["previousSession"] == init_a["session"] != init_b["session"]
    (retry,) = r.json(r.post(call(1), in_session("B")), 200, result(1, content=[]))
    assert (retry["retryOrigin"], retry["attempt"], retry["retryOf"]) == (
        "reinit",
        2,
        call_rec["id"],
    )
    assert retry["httpStatuses"] == [404, 200]
    # A second 404 on the dead session writes no second session_end.
    again = r.json(r.post(call(9), in_session("A")), 404, b"")
    assert [x["kind"] for x in again] == ["request"]


def test_same_id_resend_on_a_new_session_is_still_a_reinit() -> None:
    """opencode's way: re-initialise, then send the very same message (same id)."""
    r = Run()
    open_session(r, "A")
    r.json(r.post(call(2), in_session("A")), 404, b"")
    open_session(r, "B")
    (retry,) = r.json(r.post(call(2), in_session("B")), 200, result(2, content=[]))
    assert retry["retryOrigin"] == "reinit"


def test_repeat_after_delete_or_in_an_older_session_is_not_a_retry() -> None:
    r = Run()
    open_session(r, "A")
    r.json(r.post(call(2), in_session("A")), 503, b"")
    delete = r.other("DELETE", in_session("A"))
    r.t.handle(ResponseStarted(delete, r.tick(), 200, {}))
    (end,) = records_of(r.t.handle(ResponseBody(delete, r.tick(), b"", 0)))
    assert (end["kind"], end["endReason"], end["httpStatuses"]) == ("session_end", "delete", [200])
    open_session(r, "B")
    (rec,) = r.json(r.post(call(3), in_session("B")), 200, result(3, content=[]))
    assert rec["retryOrigin"] == "none"
    # Two live sessions of look-alike clients: a failure in the newer one is not
    # retried by a call in the older one.
    r2 = Run()
    open_session(r2, "old")
    open_session(r2, "new")
    r2.json(r2.post(call(1), in_session("new")), 503, b"")
    (rec2,) = r2.json(r2.post(call(1), in_session("old")), 200, result(1, content=[]))
    assert rec2["retryOrigin"] == "none"


def test_delete_refused_is_recorded_as_not_ended() -> None:
    r = Run()
    open_session(r, "A")
    f = r.other("DELETE", in_session("A"))
    r.t.handle(ResponseStarted(f, r.tick(), 405, {}))
    (rec,) = records_of(r.t.handle(ResponseBody(f, r.tick(), b"", 0)))
    # It ended nothing: no endReason, and the session still ends once, later.
    assert rec["endReason"] is None and rec["notes"] == ["not_ended:405"]
    stop = records_of(r.t.handle(ProxyStopping(r.tick())))
    assert [(x["kind"], x["endReason"]) for x in stop] == [("session_end", "shutdown")]


def test_stateless_retry_on_another_connection_is_a_reissue() -> None:
    r = Run()
    r.json(r.post(call(1), UA, peer="127.0.0.1:40001"), 503, b"")
    (rec,) = r.json(r.post(call(2), UA, peer="127.0.0.1:40002"), 200, result(2, content=[]))
    assert (rec["retryOrigin"], rec["attempt"]) == ("reissue", 2)


def test_retry_after_seconds_and_date_and_whether_it_was_honoured() -> None:
    r = Run()
    (limited,) = r.json(r.post(call(1), UA), 429, b"", {"retry-after": "2"})
    assert limited["retryAfterMs"] == 2000
    (early,) = r.json(r.post(call(1), UA), 200, result(1, content=[]))
    assert early["retryAfterHonored"] is False and early["retryOrigin"] == "resend"
    r.now += 0  # the clock only ticks 10 ms per event here
    (later,) = r.json(r.post(call(7, "other"), UA), 503, b"", {"retry-after": "0"})
    (ok,) = r.json(r.post(call(8, "other"), UA), 200, result(8, content=[]))
    assert later["retryAfterMs"] == 0 and ok["retryAfterHonored"] is True
    assert retry_after_ms(formatdate(1000.0 + 30, usegmt=True), 1000.0) == 30_000
    assert retry_after_ms("soon", 0.0) is None and retry_after_ms(None, 0.0) is None


def test_tool_safety_from_annotations_and_unsafe_retries() -> None:
    r = Run()
    schema = {"type": "object"}
    tools = [
        {"name": "read", "inputSchema": schema, "annotations": {"readOnlyHint": True}},
        {"name": "put", "inputSchema": schema, "annotations": {"idempotentHint": True}},
        {"name": "pay", "inputSchema": schema},
    ]
    # A list the client refuses (a tool without its `inputSchema`) declares nothing.
    (refused,) = r.json(r.post(rpc(0, "tools/list"), UA), 200, result(0, tools=[{"name": "pay"}]))
    assert refused["outcome"] == "INVALID_RESULT"
    (still,) = r.json(r.post(call(5, "pay"), UA), 200, result(5, content=[]))
    assert still["toolSafety"] == "unknown"
    r.json(r.post(rpc(1, "tools/list"), UA), 200, result(1, tools=tools))
    recs = {}
    for i, name in enumerate(["read", "put", "pay"], start=10):
        r.t.handle(FlowFailed(r.post(call(i, name), UA), r.tick(), "reset"))
        (recs[name],) = r.json(r.post(call(i + 10, name), UA), 200, result(i + 10, content=[]))
    assert {n: (x["toolSafety"], x["unsafeRetry"]) for n, x in recs.items()} == {
        "read": ("read_only", False),
        "put": ("idempotent", False),
        "pay": ("unsafe", True),
    }
    # An answered JSON-RPC error proves the tool did not run: repeating it is not unsafe.
    r.json(
        r.post(call(40, "pay"), UA),
        200,
        {"jsonrpc": "2.0", "id": 40, "error": {"code": -32602, "message": "bad"}},
    )
    (rec,) = r.json(r.post(call(41, "pay"), UA), 200, result(41, content=[]))
    assert rec["unsafeRetry"] is False
    (unknown,) = r.json(r.post(call(50, "never-listed"), UA), 200, result(50, content=[]))
    assert unknown["toolSafety"] == "unknown" and unknown["unsafeRetry"] is None


def test_mrtr_continuation_is_not_a_retry() -> None:
    r = Run()
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    first = rpc(1, "tools/call", name="deploy", arguments={"env": "prod"}, _meta=meta)
    (ir,) = r.json(
        r.post(first),
        200,
        result(
            1,
            resultType="input_required",
            requestState="s1",
            inputRequests={
                "ok": {
                    "method": "elicitation/create",
                    "params": {
                        "message": "m",
                        "requestedSchema": {"type": "object", "properties": {}},
                    },
                }
            },
        ),
    )
    follow = rpc(
        2,
        "tools/call",
        name="deploy",
        arguments={"env": "prod"},
        _meta=meta,
        inputResponses={"ok": {"action": "accept"}},
        requestState="s1",
    )
    (done,) = r.json(r.post(follow), 200, result(2, resultType="complete", content=[]))
    assert ir["outcome"] == "INPUT_REQUIRED"
    assert (done["continues"], done["retryOrigin"], done["attempt"], done["retryOf"]) == (
        ir["id"],
        "none",
        1,
        None,
    )


def test_different_servers_do_not_retry_each_other() -> None:
    r = Run()
    r.json(r.post(call(1), UA), 503, b"")
    from mcp_layers_core.events import PostReceived

    r.t.handle(PostReceived("other", r.tick(), "10.0.0.1:80", "127.0.0.1:50000", UA, call(2)))
    r.t.handle(ResponseStarted("other", r.tick(), 200, JSON))
    (rec,) = records_of(
        r.t.handle(ResponseBody("other", r.tick(), json.dumps(result(2, content=[])).encode()))
    )
    assert rec["retryOrigin"] == "none"


@settings(max_examples=200, derandomize=True)
@given(
    params=st.dictionaries(
        st.text(max_size=5), st.integers() | st.text(max_size=5) | st.booleans(), max_size=6
    ),
    meta=st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
)
def test_signature_ignores_key_order_and_meta_noise(params: dict, meta: dict) -> None:
    reordered = dict(reversed(list(params.items())))
    with_meta = {**reordered, "_meta": meta, "requestState": "x"}
    assert call_signature("tools/call", params) == call_signature("tools/call", with_meta)
    assert call_signature("tools/call", params) != call_signature("tools/list", params)


def test_tool_safety_defaults_follow_the_spec() -> None:
    assert tool_safety(None) == "unsafe"  # readOnly false, destructive true, idempotent false
    assert tool_safety({"destructiveHint": False}) == "unsafe"
    assert tool_safety({"readOnlyHint": True, "destructiveHint": True}) == "read_only"


# -- transport eras --------------------------------------------------------------------


def test_2024_11_05_posts_are_answered_on_the_endpoint_stream() -> None:
    r = Run()
    get = r.other("GET", {"accept": "text/event-stream", **UA})
    r.t.handle(ResponseStarted(get, r.tick(), 200, SSE))
    assert r.chunk(get, b"event: endpoint\ndata: /messages?session_id=abc123\n\n") == []
    f = r.post(INIT, UA, query_session="abc123")
    r.t.handle(ResponseStarted(f, r.tick(), 202, {"content-type": "text/plain"}))
    assert (
        records_of(r.t.handle(ResponseBody(f, r.tick(), b"", 0))) == []
    )  # parked: answer comes on the GET
    (init,) = r.chunk(
        get,
        event(
            result(
                0,
                protocolVersion="2024-11-05",
                capabilities={},
                serverInfo={"name": "s", "version": "1"},
            )
        ),
    )
    assert (init["outcome"], init["httpStatuses"], init["protocolVersion"]) == (
        "SUCCESS",
        [202],
        "2024-11-05",
    )
    assert init["session"].startswith("s-") and "answer_on_get_stream" in init["notes"]
    lost = r.post(call(1), UA, query_session="abc123")
    r.t.handle(ResponseStarted(lost, r.tick(), 202, {}))
    r.t.handle(ResponseBody(lost, r.tick(), b"", 0))
    rec, stream = records_of(r.t.handle(StreamEnded(get, r.tick())))
    assert (rec["outcome"], rec["notes"]) == ("STREAM_INCOMPLETE", ["answer_stream_closed"])
    assert stream["kind"] == "stream" and stream["session"] == init["session"]
    assert rec["session"] == init["session"] and rec["postCount"] == 2


def test_2025_11_25_resumed_stream_completes_the_original_post() -> None:
    r = Run()
    open_session(r, "A")
    f = r.post(call(3), in_session("A"))
    # The server primes the stream with an event id, then closes without the answer.
    assert r.sse(f, [b"id: ev-1\nretry: 500\ndata: \n\n"]) == []
    assert r.t.pending == 1
    get = r.other(
        "GET", {**in_session("A"), "last-event-id": "ev-1", "accept": "text/event-stream"}
    )
    r.t.handle(ResponseStarted(get, r.tick(), 200, SSE))
    (rec,) = r.chunk(get, b"id: ev-2\n" + event(result(3, content=[])))
    assert rec["outcome"] == "TOOL_SUCCESS"
    assert rec["sse"] == {"events": 1, "final": True, "end": "complete", "resumed": True}
    # The POST's own stream: resumable (an event id) and a `retry:` of 500 ms.
    assert (rec["eventIds"], rec["retryMs"]) == (True, 500)
    (stream,) = records_of(r.t.handle(StreamEnded(get, r.tick())))
    assert stream["kind"] == "stream" and stream["httpStatuses"] == [200]
    assert stream["requestHeaders"] == [
        "accept",
        "last-event-id",
        "mcp-protocol-version",
        "mcp-session-id",
    ]
    assert stream["accept"] == ["text/event-stream"]
    assert stream["sse"] == {"events": 1, "final": True, "end": "complete", "resumed": True}
    assert (stream["eventIds"], stream["retryMs"], stream["method"]) == (True, None, None)


def test_unresumed_stream_is_written_at_shutdown_or_after_the_window() -> None:
    r = Run(resume_window_s=5.0)
    open_session(r, "A")
    assert r.sse(r.post(call(3), in_session("A")), [b"id: 1\ndata: \n\n"]) == []
    r.now += 10
    r.post(call(4, "later"), in_session("A"))
    (expired,) = r.released
    assert expired["outcome"] == "STREAM_INCOMPLETE" and "not_resumed" in expired["notes"]
    assert r.sse(r.post(call(5), in_session("A")), [b"id: 2\ndata: \n\n"]) == []
    stopped = records_of(r.t.handle(ProxyStopping(r.tick())))
    assert sorted(x["jsonrpc"]["id"] for x in stopped if x["kind"] == "request") == [4, 5]


def test_2026_streams_are_not_resumable() -> None:
    r = Run()
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    (rec,) = r.sse(r.post(rpc(1, "tools/call", name="x", _meta=meta)), [b"id: 1\ndata: \n\n"])
    assert rec["outcome"] == "STREAM_INCOMPLETE"


def test_server_request_and_the_clients_answer_post() -> None:
    r = Run()
    open_session(r, "A")
    f = r.post(call(3), in_session("A"))
    r.t.handle(ResponseStarted(f, r.tick(), 200, SSE))
    r.chunk(f, event({"jsonrpc": "2.0", "id": 0, "method": "elicitation/create", "params": {}}))
    answer = r.post(json.dumps(result(0, action="accept")).encode(), in_session("A"))
    r.t.handle(ResponseStarted(answer, r.tick(), 202, {}))
    (resp,) = records_of(r.t.handle(ResponseBody(answer, r.tick(), b"", 0)))
    assert (resp["kind"], resp["serverMethod"], resp["answerMs"], resp["outcome"]) == (
        "response",
        "elicitation/create",
        10.0,
        None,
    )
    r.chunk(f, event(result(3, content=[])))
    (rec,) = records_of(r.t.handle(StreamEnded(f, r.tick())))
    assert rec["outcome"] == "TOOL_SUCCESS"


def test_get_stream_counts_server_messages_on_the_session() -> None:
    r = Run()
    open_session(r, "A")
    get = r.other("GET", {**in_session("A"), "accept": "text/event-stream"})
    r.t.handle(ResponseStarted(get, r.tick(), 200, SSE))
    r.chunk(get, event({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}))
    r.chunk(get, event({"jsonrpc": "2.0", "id": 1, "method": "roots/list"}))
    r.t.handle(FlowFailed(get, r.tick(), "Client disconnected."))
    (end,) = records_of(r.t.handle(ProxyStopping(r.tick())))
    assert end["sessionStats"] == {
        "posts": 1,
        "getStreams": 1,
        "serverRequests": 1,
        "serverNotifications": 1,
    }


def test_notification_ack_that_is_not_202_is_noted() -> None:
    r = Run()
    f = r.post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    r.t.handle(ResponseStarted(f, r.tick(), 200, JSON))
    (rec,) = records_of(r.t.handle(ResponseBody(f, r.tick(), b"{}", 2)))
    assert rec["ackNote"] == "200 with body"


def test_subscription_listen_is_marked_long_lived() -> None:
    r = Run()
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}
    f = r.post(rpc(1, "subscriptions/listen", _meta=meta))
    (rec,) = r.sse(
        f,
        [
            event({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged"}),
            event(
                result(
                    1,
                    resultType="complete",
                    _meta={"io.modelcontextprotocol/subscriptionId": 1},
                )
            ),
        ],
    )
    assert rec["outcome"] == "SUCCESS" and "subscription" in rec["notes"]


def test_bodies_are_recorded_only_on_request_and_redacted() -> None:
    body = rpc(
        1,
        "tools/call",
        name="login",
        arguments={"password": "hunter2", "note": "Bearer abcdef1234567890"},
    )
    answer = result(1, content=[{"type": "text", "text": "token=sekrit123 ok"}], access_token="xyz")
    plain = Run().exchange(body, answer)
    assert plain["bodies"] is None
    rec = Run(record_bodies=True).exchange(body, answer)
    text = json.dumps(rec["bodies"])
    assert rec["bodies"]["request"]["params"]["name"] == "login"
    assert not any(s in text for s in ("hunter2", "abcdef1234567890", "sekrit123", "xyz"))


def test_2024_11_05_accepted_body_and_an_answer_that_beats_the_202() -> None:
    r = Run()
    get = r.other("GET", {"accept": "text/event-stream", **UA})
    r.t.handle(ResponseStarted(get, r.tick(), 200, SSE))
    r.chunk(get, b"event: endpoint\ndata: /messages/?session_id=s1\n\n")
    f = r.post(call(1), UA, query_session="s1")
    # The answer arrives on the GET before the proxy has seen the POST's 202.
    assert r.chunk(get, event(result(1, content=[], isError=True))) == []
    r.t.handle(ResponseStarted(f, r.tick(), 202, {"content-length": "8"}))
    (rec,) = records_of(r.t.handle(ResponseBody(f, r.tick(), b"Accepted", 8)))
    assert (rec["outcome"], rec["httpStatuses"]) == ("TOOL_ERROR", [202])


def test_unanswered_delete_ends_the_session_once() -> None:
    r = Run()
    open_session(r, "A")
    f = r.other("DELETE", in_session("A"))
    (rec,) = records_of(r.t.handle(FlowFailed(f, r.tick(), "Client disconnected.")))
    assert (rec["kind"], rec["endReason"], rec["httpStatuses"], rec["notes"]) == (
        "session_end", "delete", [], ["delete_unanswered"],
    )  # fmt: skip
    assert records_of(r.t.handle(ProxyStopping(r.tick()))) == []  # no second end at shutdown


def test_review_findings_stay_fixed() -> None:
    # A Retry-After of non-ASCII digits is ignored, not a lost record.
    assert retry_after_ms("²", 0.0) is None and retry_after_ms("١٢", 0.0) is None
    r = Run()
    (rec,) = r.json(r.post(call(1), UA), 503, b"", {"retry-after": "²"})
    assert rec["outcome"] == "HTTP_ERROR" and rec["retryAfterMs"] is None
    # An endpoint event that is not a URL teaches nothing and breaks nothing.
    get = r.other("GET", {"accept": "text/event-stream", **UA})
    r.t.handle(ResponseStarted(get, r.tick(), 200, SSE))
    assert r.chunk(get, b"event: endpoint\ndata: http://[x/messages?session_id=1\n\n") == []
    # A notification acknowledged with an SSE stream that carried events had a body.
    f = r.post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', UA)
    (ack,) = r.sse(f, [event({"jsonrpc": "2.0", "method": "notifications/message"})])
    assert ack["ackNote"] == "200 with body"


def test_body_streamed_past_the_addon_is_uninspected() -> None:
    r = Run()
    f = r.post(call(1), UA)
    r.t.handle(ResponseStarted(f, r.tick(), 200, JSON))
    (rec,) = records_of(r.t.handle(ResponseBody(f, r.tick(), None, 0)))
    assert (rec["outcome"], rec["notes"]) == ("UNINSPECTED", ["body_unseen"])


def test_2024_11_05_answer_in_another_event_type_never_reaches_the_client() -> None:
    # Issue 18: the legacy client reads `message` events only; `result` hides the answer.
    r = Run()
    get = r.other("GET", {"accept": "text/event-stream", **UA})
    r.t.handle(ResponseStarted(get, r.tick(), 200, SSE))
    r.chunk(get, b"event: endpoint\ndata: /messages?session_id=hid\n\n")
    f = r.post(call(1), UA, query_session="hid")
    r.t.handle(ResponseStarted(f, r.tick(), 202, {"content-type": "text/plain"}))
    assert records_of(r.t.handle(ResponseBody(f, r.tick(), b"Accepted", 8))) == []  # parked
    (rec,) = r.chunk(get, event(result(1, content=[]), name="result"))
    assert (rec["outcome"], rec["layer"]) == ("TRANSPORT_VIOLATION", "transport")
    assert "sse_event_type:result" in rec["notes"]
    # Once the endpoint stream is gone, a 202 parks nothing: it fails at once.
    r.t.handle(StreamEnded(get, r.tick()))
    late = r.post(call(2), UA, query_session="hid")
    r.t.handle(ResponseStarted(late, r.tick(), 202, {}))
    (rec,) = records_of(r.t.handle(ResponseBody(late, r.tick(), b"", 0)))
    assert (rec["outcome"], rec["notes"]) == ("TRANSPORT_VIOLATION", ["202_for_request"])
    assert r.t.pending == 0


def test_a_feed_of_custom_event_types_is_no_mcp_stream() -> None:
    # Events of other types carry nothing a client reads: a GET stream of only those,
    # with no JSON-RPC in them, stops being read like any other foreign stream.
    r = Run()
    get = r.other("GET", {"accept": "text/event-stream", **UA})
    r.t.handle(ResponseStarted(get, r.tick(), 200, SSE))
    for n in range(8):
        assert r.chunk(get, f'event: update\ndata: {{"n": {n}}}\n\n'.encode()) == []
    assert r.t.is_tracked(get) and not r.t.wants_chunks(get)
