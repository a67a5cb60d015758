"""The pairing/session state machine, driven by hand-made events (no sockets)."""

from __future__ import annotations

import gzip
import json

import pytest
from mcp_layers_core.events import (
    FlowFailed,
    PostReceived,
    ProxyStopping,
    ResponseBody,
    ResponseStarted,
    StreamChunk,
    StreamEnded,
)
from mcp_layers_core.lifecycle import FLOW_PHASES, Cause, step
from mcp_layers_core.record import is_issued_session
from mcp_layers_core.tracker import TRANSITIONS, LocalUsageError, Phase, Settings, records_of
from wire import JSON, PEER, SERVER, SSE, Run, call, event, result, rpc


def test_json_exchange_record_fields() -> None:
    r = Run(scenario="unit")
    record = r.exchange(
        call(3, "fail"), result(3, content=[], isError=True), {"user-agent": "ua/1"}
    )
    assert record["kind"] == "request"
    assert (record["method"], record["tool"], record["httpStatuses"]) == (
        "tools/call",
        "fail",
        [200],
    )
    assert record["jsonrpc"] == {"id": 3, "errorCode": None, "errorMessage": None}
    assert (record["outcome"], record["layer"], record["isError"], record["resultType"]) == (
        "TOOL_ERROR", "application", True, "complete",
    )  # fmt: skip
    assert (record["contentType"], record["sse"], record["scenario"]) == (
        "application/json",
        None,
        "unit",
    )
    assert record["userAgent"] == "ua/1" and record["durationMs"] == 20.0
    assert record["v"] == 1 and record["retryOrigin"] == "none" and record["notes"] == []


def test_timestamp_format() -> None:
    record = Run().exchange(call(1), result(1, content=[]))
    assert record["ts"].endswith("Z") and len(record["ts"]) == len("2023-11-14T22:13:20.010Z")


def test_stateful_session_lifecycle_client_version_and_post_count() -> None:
    r = Run()
    init = rpc(
        1,
        "initialize",
        protocolVersion="2025-11-25",
        capabilities={},
        clientInfo={"name": "cli", "version": "2.0"},
    )
    f = r.post(init, {"user-agent": "ua"})
    (rec_init,) = r.sse(
        f,
        [event(result(1, protocolVersion="2025-06-18", capabilities={}, serverInfo={"name": "s"}))],
        {"mcp-session-id": "SECRET-SESSION"},
    )
    hdrs = {"mcp-session-id": "SECRET-SESSION", "mcp-protocol-version": "2025-06-18"}
    f2 = r.post(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', hdrs)
    r.t.handle(ResponseStarted(f2, r.tick(), 202, {}))
    (rec_note,) = records_of(r.t.handle(ResponseBody(f2, r.tick(), b"", 0)))
    rec_call = r.exchange(call(2), result(2, content=[]), hdrs)
    assert rec_init["session"] == rec_note["session"] == rec_call["session"]
    assert rec_init["session"].startswith("s-") and "SECRET" not in json.dumps(
        [rec_init, rec_note, rec_call]
    )
    assert [rec_init["postCount"], rec_note["postCount"], rec_call["postCount"]] == [1, 2, 3]
    assert {rec_init["client"], rec_note["client"], rec_call["client"]} == {"cli@2.0"}
    # The negotiated version is the result's, not the one the client asked for.
    assert rec_init["protocolVersion"] == "2025-06-18"
    assert (
        rec_note["kind"] == "notification"
        and rec_note["outcome"] is None
        and rec_note["jsonrpc"] is None
    )
    assert rec_note["method"] == "notifications/initialized" and rec_note["httpStatuses"] == [202]
    assert rec_init["sse"] == {"events": 1, "final": True, "end": "complete", "resumed": False}


def test_raw_session_ids_on_request() -> None:
    r = Run(raw_session_ids=True)
    assert r.exchange(call(1), result(1, content=[]), {"mcp-session-id": "abc"})["session"] == "abc"


def test_a_raw_session_id_shaped_like_a_stand_in_is_hashed() -> None:
    """`c-…` marks the client's stand-in; a server's id of that form is hashed even under
    `raw_session_ids`, so every reader can tell issued sessions from stand-ins."""
    r = Run(raw_session_ids=True)
    (rec,) = r.json(
        r.post(rpc(0, "initialize", protocolVersion="2025-11-25", capabilities={})),
        200,
        result(0, protocolVersion="2025-11-25", capabilities={}, serverInfo={}),
        {"mcp-session-id": "c-abc"},
    )
    assert rec["session"].startswith("s-") and rec["session"] != "c-abc"
    assert is_issued_session(rec["session"])


def test_stateless_requests_share_the_client_stand_in() -> None:
    r = Run()
    init = rpc(
        0,
        "initialize",
        protocolVersion="2025-11-25",
        capabilities={},
        clientInfo={"name": "ts", "version": "1"},
    )
    a = r.exchange(
        init,
        result(0, protocolVersion="2025-11-25", capabilities={}, serverInfo={}),
        {"user-agent": "node"},
    )
    b = r.exchange(
        call(1), result(1, content=[]), {"user-agent": "node", "mcp-protocol-version": "2025-11-25"}
    )
    # Another connection from the same address and user agent is the same client.
    c = r.json(
        r.post(call(2), {"user-agent": "node"}, peer="127.0.0.1:50001"), 200, result(2, content=[])
    )[0]
    # Another user agent on the same host is another client.
    d = r.json(r.post(call(3), {"user-agent": "curl"}), 200, result(3, content=[]))[0]
    assert a["session"] == b["session"] == c["session"] != d["session"]
    assert a["session"].startswith("c-")
    assert [a["postCount"], b["postCount"], c["postCount"], d["postCount"]] == [1, 2, 3, 1]
    assert a["client"] == b["client"] == c["client"] == "ts@1" and d["client"] is None


def test_2026_meta_carries_client_and_version_per_request() -> None:
    r = Run()
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "modern", "version": "0.1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    body = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}
    ).encode()
    # A DiscoverResult is cacheable: ttlMs and cacheScope are required (2026-07-28).
    discovered = result(
        1,
        resultType="complete",
        supportedVersions=["2026-07-28"],
        capabilities={},
        ttlMs=0,
        cacheScope="private",
    )
    record = r.exchange(body, discovered)
    assert (record["client"], record["protocolVersion"], record["outcome"]) == (
        "modern@0.1",
        "2026-07-28",
        "SUCCESS",
    )


def test_negotiation_flag_on_the_released_record() -> None:
    r = Run()
    err = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32022, "message": "Unsupported protocol version"},
    }
    assert r.json(r.post(rpc(1, "server/discover"), {"user-agent": "py"}), 400, err) == []
    init = rpc(
        2,
        "initialize",
        protocolVersion="2025-11-25",
        capabilities={},
        clientInfo={"name": "c", "version": "1"},
    )
    released = records_of(
        r.t.handle(PostReceived("i", r.tick(), SERVER, PEER, {"user-agent": "py"}, init))
    )
    (rec,) = released
    assert (rec["outcome"], rec["layer"], rec["httpStatuses"], rec["negotiation"]) == (
        "HTTP_ERROR",
        "transport",
        [400],
        True,
    )
    assert rec["jsonrpc"]["errorCode"] == -32022
    # A rejection followed by something else is a plain failure: negotiation false.
    assert r.json(r.post(rpc(3, "server/discover"), {"user-agent": "py"}), 400, err) == []
    (rec2,) = records_of(
        r.t.handle(PostReceived("j", r.tick(), SERVER, PEER, {"user-agent": "py"}, call(4)))
    )
    assert rec2["negotiation"] is False


def test_sse_with_notifications_priming_and_server_request_before_the_answer() -> None:
    r = Run()
    f = r.post(call(5, "slow"))
    chunks = [
        b"id: 1\ndata: \n\n",  # priming event
        event({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}),
        b": keep-alive\n\n",
        event({"jsonrpc": "2.0", "id": 0, "method": "elicitation/create", "params": {}}),
    ]
    final = event(result(5, content=[{"type": "text", "text": "done"}]))
    chunks += [final[:10], final[10:]]  # the answer split across chunks
    (rec,) = r.sse(f, chunks)
    assert (rec["outcome"], rec["sse"]) == (
        "TOOL_SUCCESS",
        {"events": 4, "final": True, "end": "complete", "resumed": False},
    )


@pytest.mark.parametrize(
    ("end", "framed", "sse_end"),
    [("ok", True, "complete"), ("ok", False, "eof"), ("Client disconnected.", True, "error")],
)
def test_stream_without_the_answer_is_incomplete(end: str, framed: bool, sse_end: str) -> None:
    r = Run()
    progress = event({"jsonrpc": "2.0", "method": "notifications/progress", "params": {}})
    (rec,) = r.sse(r.post(call(1)), [progress], end=end, framed=framed)
    assert (rec["outcome"], rec["layer"]) == ("STREAM_INCOMPLETE", "transport")
    assert rec["sse"] == {"events": 1, "final": False, "end": sse_end, "resumed": False}


def test_answer_before_a_broken_stream_still_counts() -> None:
    r = Run()
    (rec,) = r.sse(r.post(call(1)), [event(result(1, content=[]))], end="peer closed")
    assert rec["outcome"] == "TOOL_SUCCESS" and rec["sse"]["end"] == "complete"
    assert rec["notes"] == ["closed_after_answer"]


def test_sse_wrong_id_and_not_json_data() -> None:
    r = Run()
    (wrong,) = r.sse(r.post(call(1)), [event(result(99, content=[]))])
    assert wrong["outcome"] == "INVALID_ENVELOPE" and wrong["notes"] == [
        "unexpected_response_id:99"
    ]
    (bad,) = r.sse(r.post(call(2)), [b"data: {unclosed\n\n"])
    assert bad["outcome"] == "MALFORMED_JSON"
    (odd,) = r.sse(r.post(call(3)), [b'data: {"hello": 1}\n\n'])
    assert odd["outcome"] == "INVALID_ENVELOPE"


def test_unterminated_final_event_is_not_an_answer() -> None:
    # WHATWG: an event with no blank line before EOF is not dispatched; clients drop it.
    r = Run()
    (rec,) = r.sse(r.post(call(1)), [event(result(1, content=[]))[:-1]])
    assert rec["outcome"] == "STREAM_INCOMPLETE"
    assert rec["notes"] and rec["notes"][0].startswith("sse_unterminated_event:")


def test_gzip_stream_is_read_through_an_inflater() -> None:
    r = Run()
    payload = gzip.compress(b"id: 1\ndata: \n\n" + event(result(1, content=[])))
    chunks = [payload[i : i + 7] for i in range(0, len(payload), 7)]
    (rec,) = r.sse(r.post(call(1)), chunks, {"content-encoding": "gzip"})
    assert rec["outcome"] == "TOOL_SUCCESS" and rec["sse"]["events"] == 2


def test_undecodable_stream_encoding_is_uninspected() -> None:
    r = Run()
    (rec,) = r.sse(r.post(call(1)), [b"\x00\x01brotli bytes"], {"content-encoding": "br"})
    assert (rec["outcome"], rec["layer"], rec["notes"]) == (
        "UNINSPECTED",
        "proxy",
        ["encoded_stream:br"],
    )
    (corrupt,) = r.sse(r.post(call(2)), [b"not gzip at all"], {"content-encoding": "gzip"})
    assert corrupt["outcome"] == "UNINSPECTED" and "stream_decode_error" in corrupt["notes"]


def test_event_over_cap_is_skipped_and_makes_the_verdict_uninspected() -> None:
    r = Run(max_event_bytes=1024)
    big = event(result(1, content=[{"type": "text", "text": "x" * 5000}]))
    (rec,) = r.sse(r.post(call(1)), [big[i : i + 100] for i in range(0, len(big), 100)])
    assert rec["outcome"] == "UNINSPECTED" and rec["notes"][0].startswith("sse_event_over_cap:")
    assert r.t.pending == 0


def test_json_body_over_cap_is_uninspected() -> None:
    r = Run()
    f = r.post(call(1))
    r.t.handle(ResponseStarted(f, r.tick(), 200, JSON))
    (rec,) = records_of(r.t.handle(ResponseBody(f, r.tick(), None, 99_000_000)))
    assert rec["outcome"] == "UNINSPECTED" and rec["notes"] == ["body_over_cap:99000000"]


def test_batch_gets_one_record_per_request() -> None:
    r = Run()
    body = json.dumps(
        [
            json.loads(call(1)),
            json.loads(rpc(2, "tools/list")),
            {"jsonrpc": "2.0", "method": "notifications/x"},
        ]
    ).encode()
    f = r.post(body)
    recs = r.json(f, 200, [result(2, tools=[]), result(1, content=[], isError=True)])
    assert [(x["jsonrpc"]["id"], x["outcome"]) for x in recs] == [(1, "TOOL_ERROR"), (2, "SUCCESS")]
    assert {x["postCount"] for x in recs} == {1} and all("batch:3" in x["notes"] for x in recs)
    # A batch answer that misses one request leaves that one with an invalid envelope.
    (one, two) = r.json(
        r.post(json.dumps([json.loads(call(3)), json.loads(call(4))]).encode()),
        200,
        [result(3, content=[])],
    )
    assert (one["outcome"], two["outcome"]) == ("TOOL_SUCCESS", "INVALID_ENVELOPE")


def test_no_response_and_shutdown() -> None:
    r = Run()
    (rec,) = records_of(r.t.handle(FlowFailed(r.post(call(1)), r.tick(), "connect refused")))
    assert (rec["outcome"], rec["httpStatuses"], rec["durationMs"]) == ("NO_RESPONSE", [], 10.0)
    waiting = r.post(call(2))
    streaming = r.post(call(3))
    r.t.handle(ResponseStarted(streaming, r.tick(), 200, SSE))
    r.t.handle(StreamChunk(streaming, r.tick(), b"id: 1\ndata: \n\n"))
    recs = records_of(r.t.handle(ProxyStopping(r.tick())))
    assert [(x["jsonrpc"]["id"], x["outcome"], x["notes"]) for x in recs] == [
        (2, "NO_RESPONSE", ["proxy_shutdown"]),
        (3, "STREAM_INCOMPLETE", ["proxy_shutdown"]),
    ]
    assert recs[1]["sse"] == {"events": 1, "final": False, "end": "error", "resumed": False}
    # mitmproxy calls `error` for open flows after `done`: nothing more is written.
    assert (
        records_of(r.t.handle(FlowFailed(waiting, r.tick(), "shutdown"))) == [] and r.t.pending == 0
    )


def test_buffered_body_broken_by_upstream_is_no_response() -> None:
    r = Run()
    f = r.post(call(1))
    r.t.handle(ResponseStarted(f, r.tick(), 200, JSON))
    (rec,) = records_of(r.t.handle(FlowFailed(f, r.tick(), "peer closed")))
    assert rec["outcome"] == "NO_RESPONSE" and rec["notes"] == ["upstream_broke_mid_body:200"]


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"hello",
        b"\xff\xfe\x00garbage",
        b'{"not": "jsonrpc"}',
        b"[]",
        b"[1,2]",
        b'{"jsonrpc":"2.0"}',
        b"a=1&b=2",
    ],
)
def test_posts_that_are_not_jsonrpc_are_ignored(body: bytes) -> None:
    r = Run()
    assert records_of(r.t.handle(PostReceived("x", r.tick(), SERVER, PEER, {}, body))) == []
    assert not r.t.is_tracked("x")
    assert records_of(r.t.handle(ResponseStarted("x", r.tick(), 200, JSON))) == []


def test_response_post_is_recorded_unclassified() -> None:
    r = Run()
    f = r.post(json.dumps(result(0, action="accept")).encode())
    r.t.handle(ResponseStarted(f, r.tick(), 202, {}))
    (rec,) = records_of(r.t.handle(ResponseBody(f, r.tick(), b"", 0)))
    assert (rec["kind"], rec["outcome"], rec["httpStatuses"]) == ("response", None, [202])


def test_pending_exchanges_are_bounded() -> None:
    r = Run(max_pending=3)
    flows = [r.post(call(i)) for i in range(3)]
    n = r.n + 1
    evicted = records_of(r.t.handle(PostReceived(f"f{n}", r.tick(), SERVER, PEER, {}, call(99))))
    assert [x["jsonrpc"]["id"] for x in evicted] == [0] and evicted[0]["notes"] == [
        "evicted_pending_cap"
    ]
    assert r.t.pending == 3 and not r.t.is_tracked(flows[0])


def test_sessions_are_bounded() -> None:
    r = Run(max_sessions=5)
    for i in range(50):
        r.exchange(call(i), result(i, content=[]), {"mcp-session-id": f"s{i}"})
    assert len(r.t.sessions) <= 5


def test_record_ids_are_unique_and_increasing() -> None:
    r = Run()
    ids = [r.exchange(call(i), result(i, content=[]))["id"] for i in range(5)]
    assert ids == [1, 2, 3, 4, 5]


def test_impossible_event_order_is_a_local_usage_error() -> None:
    r = Run()
    f = r.post(call(1))
    with pytest.raises(LocalUsageError, match=r"can.t handle ResponseBody .* AWAITING_HEADERS"):
        r.t.handle(ResponseBody(f, r.tick(), b"{}", 2))


def test_transition_table_covers_every_phase_and_ends_in_done() -> None:
    assert set(TRANSITIONS) == set(Phase)
    for phase, moves in TRANSITIONS.items():
        if phase in FLOW_PHASES:  # a flow's own phases: its events end it
            assert FlowFailed in moves and ProxyStopping in moves
        if phase is not Phase.DONE:
            assert ProxyStopping in moves and Phase.DONE in moves.values()
    # What waits beyond its flow is reachable, and every wait is bounded by a cap.
    reachable = {nxt for moves in TRANSITIONS.values() for nxt in moves.values()}
    assert {Phase.PARKED, Phase.HELD} <= reachable
    for waiting in (Phase.PARKED, Phase.HELD, Phase.UNCLAIMED):
        assert TRANSITIONS[waiting][Cause.EVICTED] is Phase.DONE


def test_a_move_the_table_forbids_is_named() -> None:
    with pytest.raises(LocalUsageError, match=r"can.t handle ANSWERED .* HELD"):
        step(Phase.HELD, Cause.ANSWERED)


def test_error_message_is_scrubbed_and_cut() -> None:
    r = Run()
    msg = "invalid token sk-ant-api03-abcdefghijklmnopqrstuvwxyz0123 for user; " + "x" * 1000
    record = r.exchange(
        call(1), {"jsonrpc": "2.0", "id": 1, "error": {"code": -32001, "message": msg}}
    )
    text = record["jsonrpc"]["errorMessage"]
    assert "sk-ant" not in text and "[redacted]" in text and len(text) <= 300


# -- found in review of the tracker's rewrite (issue 26) --------------------------------


def test_an_answer_waiting_unclaimed_at_shutdown_still_finds_its_parked_request() -> None:
    """The proxy stops while a resumable POST stream is open and its answer already came
    on the resuming GET: closing the stream parks the request, which takes the answer."""
    r = Run()
    h = {"mcp-session-id": "S1", "mcp-protocol-version": "2025-11-25", "user-agent": "ua"}
    post = r.post(call(1), h)
    r.handle(ResponseStarted(post, r.tick(), 200, SSE))
    assert r.chunk(post, b"id: e1\ndata: \n\n") == []
    get = r.other("GET", {**h, "accept": "text/event-stream", "last-event-id": "e1"})
    r.handle(ResponseStarted(get, r.tick(), 200, SSE))
    assert r.chunk(get, event(result(1, content=[]))) == []
    out = r.handle(ProxyStopping(r.tick()))
    (request,) = [rec for rec in out if rec["kind"] == "request"]
    (stream,) = [rec for rec in out if rec["kind"] == "stream"]
    assert (request["outcome"], request["sse"]["final"]) == ("TOOL_SUCCESS", True)
    assert stream["sse"]["final"] is True
    assert [rec["id"] for rec in out] == sorted(rec["id"] for rec in out)


@pytest.mark.parametrize("split", [True, False], ids=["two-chunks", "one-chunk"])
def test_a_batch_answer_is_judged_by_the_version_known_when_it_is_read(split: bool) -> None:
    """An `initialize` answer that negotiates 2025-03-26 (batches exist) followed by an
    array in the same SSE stream: the verdict does not depend on how the bytes were cut."""
    r = Run()
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}},
    }
    body = json.dumps([init, {"jsonrpc": "2.0", "id": 2, "method": "ping"}]).encode()
    f = r.post(body, {"user-agent": "ua"})
    server = {"name": "s", "version": "1"}
    negotiated = result(1, protocolVersion="2025-03-26", capabilities={}, serverInfo=server)
    first = event(negotiated)
    second = b"data: " + json.dumps([{"jsonrpc": "2.0", "id": 2, "result": {}}]).encode() + b"\n\n"
    records = r.sse(f, [first, second] if split else [first + second])
    assert {rec["method"]: rec["outcome"] for rec in records} == {
        "initialize": "SUCCESS",
        "ping": "SUCCESS",
    }


@pytest.mark.parametrize("status", [500, 202])
def test_a_tool_list_the_client_never_took_teaches_no_safety(status: int) -> None:
    """A `tools/list` result on a stream under an error status (or a stream in a 202's
    clothes) is one the client did not take: its annotations declare nothing."""
    r = Run()
    tools = [{"name": "pay", "inputSchema": {"type": "object"}}]
    f = r.post(rpc(1, "tools/list"), {"user-agent": "ua"})
    r.handle(ResponseStarted(f, r.tick(), status, SSE))
    r.chunk(f, event(result(1, tools=tools)))
    (listed,) = r.handle(StreamEnded(f, r.tick()))
    assert listed["outcome"] in ("HTTP_ERROR", "TRANSPORT_VIOLATION")
    (called,) = r.json(r.post(call(2, "pay"), {"user-agent": "ua"}), 200, result(2, content=[]))
    assert called["toolSafety"] == "unknown"


def test_sessions_pushed_out_by_a_lower_cap_end_on_the_next_event_of_any_flow() -> None:
    r = Run()
    for sid in ("A", "B", "C"):
        r.json(
            r.post(rpc(0, "initialize", protocolVersion="2025-11-25", capabilities={})),
            200,
            result(0, protocolVersion="2025-11-25", capabilities={}, serverInfo={}),
            {"mcp-session-id": sid},
        )
    r.t.settings = Settings(max_sessions=1)
    ends = r.handle(ResponseStarted("not-tracked", r.tick(), 200, JSON))
    assert [rec["endReason"] for rec in ends] == ["evicted", "evicted"]
