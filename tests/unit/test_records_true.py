"""Issue 25 §1: records true at every depth — batches, 2026-07-28's missing sessions, and
the bookkeeping fields of `response`, `stream` and `session_end` records.

What the official SDK clients do with the same bytes (mcp 2.3.0 in .venv, the TS SDK
1.32.2 in support/node) is quoted next to each expectation where it decides it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp_layers_core.events import FlowFailed, ProxyStopping, ResponseBody, ResponseStarted
from mcp_layers_core.tracker import records_of
from wire import SSE, Run, call, event, result, rpc

UA = {"user-agent": "agent/1.0"}


def batch(*messages: bytes) -> bytes:
    return json.dumps([json.loads(m) for m in messages]).encode()


def null_id_error(code: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": "Invalid Request"}}


def answered(r: Run, body: bytes, answer: object, carrier: str, version: str | None) -> list[dict]:
    """POST `body` under `version` (its header), answered by `answer` as a JSON body or
    as one SSE event; the records, in request order."""
    headers = {**UA, **({"mcp-protocol-version": version} if version else {})}
    f = r.post(body, headers)
    records = r.json(f, 200, answer) if carrier == "json" else r.sse(f, [event(answer)])
    return sorted(records, key=lambda rec: rec["id"])


def outcomes(records: list[dict]) -> list[tuple[object, str, int | None]]:
    return [(x["jsonrpc"]["id"], x["outcome"], x["jsonrpc"]["errorCode"]) for x in records]


# -- batches: one rule for both carriers ------------------------------------------------

CARRIERS = ["json", "sse"]
BATCHLESS = ["2024-11-05", "2025-06-18", "2025-11-25", "2026-07-28"]


@pytest.mark.parametrize("carrier", CARRIERS)
@pytest.mark.parametrize("version", BATCHLESS)
def test_an_array_answer_where_batches_do_not_exist_is_no_success(
    carrier: str, version: str
) -> None:
    # mcp 2.3.0 validates a JSON body and each SSE event as ONE JSONRPCMessage
    # (`jsonrpc_message_adapter.validate_json`): an array fails and the request is
    # resolved with a PARSE_ERROR. The TS SDK drops an array in an SSE event (parse
    # error, the request waits); the spec has had no batches since 2025-06-18.
    (rec,) = answered(Run(), call(1), [result(1, content=[])], carrier, version)
    assert (rec["outcome"], rec["layer"]) == ("INVALID_ENVELOPE", "protocol")
    assert f"batch_answer:{version}" in rec["notes"]


@pytest.mark.parametrize("carrier", CARRIERS)
def test_a_batch_posted_where_batches_do_not_exist_is_not_answered_by_an_array(
    carrier: str,
) -> None:
    body = batch(call(1), rpc(2, "ping"))
    recs = answered(Run(), body, [result(1, content=[]), result(2)], carrier, "2025-06-18")
    assert outcomes(recs) == [(1, "INVALID_ENVELOPE", None), (2, "INVALID_ENVELOPE", None)]
    assert all("batch_answer:2025-06-18" in x["notes"] for x in recs)


@pytest.mark.parametrize("carrier", CARRIERS)
@pytest.mark.parametrize("version", ["2025-03-26", None])
def test_where_batches_exist_an_array_answers_by_id_in_both_carriers(
    carrier: str, version: str | None
) -> None:
    body = batch(call(1), rpc(2, "ping"))
    recs = answered(Run(), body, [result(2), result(1, content=[])], carrier, version)
    assert outcomes(recs) == [(1, "TOOL_SUCCESS", None), (2, "SUCCESS", None)]
    (single,) = answered(Run(), call(3), [result(3, content=[])], carrier, version)
    assert single["outcome"] == "TOOL_SUCCESS"


@pytest.mark.parametrize("carrier", CARRIERS)
def test_a_null_id_error_answering_a_batch_keeps_its_code_for_every_request(
    carrier: str,
) -> None:
    # JSON-RPC 2.0 §6: a batch the server cannot take as a whole is answered by a single
    # error object (id null) — it answers every request of the batch.
    body = batch(call(1), rpc(2, "ping"))
    recs = answered(Run(), body, null_id_error(-32600), carrier, "2025-03-26")
    assert outcomes(recs) == [(1, "JSONRPC_ERROR", -32600), (2, "JSONRPC_ERROR", -32600)]
    assert all("error_without_id" in x["notes"] for x in recs)


@pytest.mark.parametrize("carrier", CARRIERS)
def test_a_null_id_error_in_an_array_answers_the_requests_no_answer_named(carrier: str) -> None:
    body = batch(call(1), rpc(2, "ping"))
    answer = [null_id_error(-32602), result(1, content=[])]
    recs = answered(Run(), body, answer, carrier, "2025-03-26")
    assert outcomes(recs) == [(1, "TOOL_SUCCESS", None), (2, "JSONRPC_ERROR", -32602)]


def test_a_null_id_error_before_a_named_answer_on_a_batch_stream_waits_for_it() -> None:
    r = Run()
    f = r.post(batch(call(1), rpc(2, "ping")), {**UA, "mcp-protocol-version": "2025-03-26"})
    recs = r.sse(f, [event(null_id_error(-32603)), event(result(1, content=[]))])
    assert outcomes(sorted(recs, key=lambda x: x["id"])) == [
        (1, "TOOL_SUCCESS", None),
        (2, "JSONRPC_ERROR", -32603),
    ]


def test_a_client_that_hangs_up_after_a_null_id_error_had_its_answer() -> None:
    # mcp 2.3.0 gives a response on a POST's stream the POST's own id
    # (`message.id = original_request_id` in `_handle_sse_event`), then closes the stream.
    r = Run()
    f = r.post(call(1), UA)
    r.t.handle(ResponseStarted(f, r.tick(), 200, SSE))
    assert r.chunk(f, event(null_id_error(-32000))) == []
    (rec,) = records_of(r.t.handle(FlowFailed(f, r.tick(), "Client disconnected.")))
    assert (rec["outcome"], rec["jsonrpc"]["errorCode"]) == ("JSONRPC_ERROR", -32000)
    assert "closed_after_answer" in rec["notes"] and rec["sse"]["final"] is True


# -- 2026-07-28 has no sessions ---------------------------------------------------------

META_2026 = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        pytest.param(rpc(1, "tools/list", _meta=META_2026), {}, id="meta"),
        pytest.param(rpc(1, "tools/list"), {"mcp-protocol-version": "2026-07-28"}, id="header"),
    ],
)
def test_2026_a_404_with_a_stale_session_id_loses_no_session(
    body: bytes, headers: dict[str, str]
) -> None:
    # mcp 2.3.0 keeps a session id only from an `initialize` answer (which 2026-07-28
    # does not have) and, with none, reads a 404 as METHOD_NOT_FOUND, never as
    # "Session terminated"; it never re-initialises.
    r = Run()
    f = r.post(body, {**UA, "mcp-session-id": "stale", **headers})
    records = r.json(f, 404, b"Not Found")
    assert [x["kind"] for x in records] == ["request"]
    (rec,) = records
    assert rec["outcome"] == "HTTP_ERROR" and "session_lost" not in rec["notes"]
    assert rec["protocolVersion"] == "2026-07-28"
    assert records_of(r.t.handle(ProxyStopping(r.tick()))) == []  # no session to end, ever


def test_before_2026_a_404_with_a_session_id_still_ends_it() -> None:
    r = Run()
    f = r.post(call(1), {**UA, "mcp-session-id": "gone", "mcp-protocol-version": "2025-11-25"})
    kinds = [(x["kind"], x.get("endReason")) for x in r.json(f, 404, b"")]
    assert kinds == [("request", None), ("session_end", "not_found")]


# -- bookkeeping ------------------------------------------------------------------------


def test_a_response_post_never_carries_a_notifications_method() -> None:
    r = Run()
    body = batch(
        json.dumps(result(0, action="accept")).encode(),
        b'{"jsonrpc":"2.0","method":"notifications/progress"}',
    )
    f = r.post(body, UA)
    r.t.handle(ResponseStarted(f, r.tick(), 202, {}))
    (rec,) = records_of(r.t.handle(ResponseBody(f, r.tick(), b"", 0)))
    assert (rec["kind"], rec["method"]) == ("response", None)


def test_get_stream_and_delete_carry_the_version_of_their_header() -> None:
    r = Run()
    hdrs = {**UA, "mcp-session-id": "S", "mcp-protocol-version": "2025-06-18"}
    get = r.other("GET", {**hdrs, "accept": "text/event-stream"})
    (stream,) = r.sse(get, [])
    delete = r.other("DELETE", hdrs)
    (end,) = r.json(delete, 200, b"")
    assert (stream["kind"], stream["protocolVersion"]) == ("stream", "2025-06-18")
    assert (end["kind"], end["protocolVersion"]) == ("session_end", "2025-06-18")


def legacy_stream(r: Run, sid: str) -> str:
    get = r.other("GET", {"accept": "text/event-stream", **UA})
    r.t.handle(ResponseStarted(get, r.tick(), 200, SSE))
    assert r.chunk(get, f"event: endpoint\ndata: /messages?session_id={sid}\n\n".encode()) == []
    return get


def accepted(r: Run, flow: str) -> list[dict]:
    r.handle(ResponseStarted(flow, r.tick(), 202, {"content-length": "8"}))
    return r.handle(ResponseBody(flow, r.tick(), b"Accepted", 8))


@pytest.mark.parametrize("answer_first", [False, True], ids=["after-202", "before-202"])
def test_a_2024_11_05_stream_that_delivered_an_answer_says_final(answer_first: bool) -> None:
    r = Run()
    get = legacy_stream(r, "fin")
    f = r.post(call(1), UA, query_session="fin")
    if answer_first:  # the GET's event reaches the proxy before the POST's 202
        assert r.chunk(get, event(result(1, content=[]))) == []
        (rec,) = accepted(r, f)
    else:
        assert accepted(r, f) == []
        (rec,) = r.chunk(get, event(result(1, content=[])))
    assert rec["outcome"] == "TOOL_SUCCESS"
    (stream,) = records_of(r.t.handle(FlowFailed(get, r.tick(), "Client disconnected.")))
    assert stream["kind"] == "stream" and stream["sse"]["final"] is True
    assert stream["protocolVersion"] == "2024-11-05"


def test_a_2024_11_05_stream_that_ended_before_its_answers_202_still_delivered_it() -> None:
    r = Run()
    get = legacy_stream(r, "gone")
    f = r.post(call(1), UA, query_session="gone")
    assert r.chunk(get, event(result(1, content=[]))) == []
    (stream,) = records_of(r.t.handle(FlowFailed(get, r.tick(), "Client disconnected.")))
    assert stream["sse"]["final"] is True
    (rec,) = accepted(r, f)
    assert rec["outcome"] == "TOOL_SUCCESS"


@pytest.mark.parametrize("answer_first", [False, True], ids=["after-202", "before-202"])
def test_a_2024_11_05_array_answer_on_the_stream_is_not_delivered(answer_first: bool) -> None:
    # 2024-11-05 has no batches: mcp 2.3.0's SSE client (`mcp/client/sse.py`) validates
    # each event as one message, so the request never gets this answer.
    r = Run()
    get = legacy_stream(r, "arr")
    f = r.post(call(1), UA, query_session="arr")
    array = f"event: message\ndata: {json.dumps([result(1, content=[])])}\n\n".encode()
    if answer_first:
        assert r.chunk(get, array) == []
        (rec,) = accepted(r, f)
    else:
        assert accepted(r, f) == []
        (rec,) = r.chunk(get, array)
    assert rec["outcome"] == "INVALID_ENVELOPE" and "batch_answer:2024-11-05" in rec["notes"]
    (stream,) = records_of(r.t.handle(FlowFailed(get, r.tick(), "Client disconnected.")))
    assert stream["sse"]["final"] is False


@pytest.mark.parametrize("answer_first", [False, True], ids=["after-202", "before-202"])
def test_a_2024_11_05_answer_in_another_event_type_is_linked_to_its_flow(
    answer_first: bool,
) -> None:
    r = Run()
    get = legacy_stream(r, "hid")
    f = r.post(call(1), UA, query_session="hid")
    hidden = event(result(1, content=[]), name="result")
    if answer_first:
        assert r.chunk(get, hidden) == []
        (rec,) = accepted(r, f)
    else:
        assert accepted(r, f) == []
        (rec,) = r.chunk(get, hidden)
    assert (rec["outcome"], rec["httpStatuses"]) == ("TRANSPORT_VIOLATION", [202])
    assert "sse_event_type:result" in rec["notes"]
    assert r.flows[rec["id"]] == f  # the adapter can comment the POST's flow
    (stream,) = records_of(r.t.handle(FlowFailed(get, r.tick(), "Client disconnected.")))
    assert stream["sse"]["final"] is False  # the client skipped it: nothing was delivered
