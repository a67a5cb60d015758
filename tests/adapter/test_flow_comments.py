"""Each record's verdict on its flow (`flow.comment`, `flow.marked`), through mitmproxy's
own test helpers: the comment lands on the flow the record is of, also when the record
comes out while another flow is handled, and the traffic is untouched."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Sequence
from typing import Any

import mcp_layers
import mcp_layers_subscribers
import pytest
from mitmproxy import flow as mflow
from mitmproxy import hooks, http
from mitmproxy.test import taddons, tflow, tutils
from test_addon import CALL, OK, post_flow, records, respond

ERROR = b'{"jsonrpc":"2.0","id":7,"result":{"content":[],"isError":true}}'
UNSUPPORTED = (
    b'{"jsonrpc":"2.0","id":null,"error":{"code":-32022,"message":"Unsupported protocol version"}}'
)


class Updates:
    """Collects mitmproxy's `update` event, which tells mitmweb that flows changed."""

    def __init__(self) -> None:
        self.flows: list[mflow.Flow] = []

    def update(self, flows: Sequence[mflow.Flow]) -> None:
        self.flows += flows


@pytest.fixture
def run() -> Any:
    out = io.BytesIO()
    recorder = mcp_layers.Recorder(outfile=out)
    updates = Updates()
    with taddons.context(recorder, updates) as tctx:
        tctx.configure(recorder, mcp_scenario="comments")
        recorder.out, recorder.updates, recorder.tctx = out, updates, tctx
        yield recorder


def exchange(addon: Any, f: http.HTTPFlow, status: int, body: bytes) -> None:
    addon.request(f)
    respond(f, status, "application/json", body)
    addon.responseheaders(f)
    addon.response(f)


def rpc(rpc_id: int, method: str, **params: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params}).encode()


def test_a_tool_error_is_commented_and_marked_without_touching_the_bytes(run: Any) -> None:
    f = post_flow()
    exchange(run, f, 200, ERROR)
    (rec,) = records(run.out)
    assert f.comment == f"#{rec['id']} TOOL_ERROR · application · tools/call echo"
    assert f.marked == ":warning:"
    assert f.metadata[mcp_layers_subscribers.RECORDS_KEY] == [rec["id"]]
    assert f.request.content == CALL and f.response.content == ERROR
    assert run.updates.flows == []  # its own hook: mitmproxy updates the view itself


def test_a_success_is_commented_not_marked(run: Any) -> None:
    f = post_flow()
    exchange(run, f, 200, OK)
    assert f.comment.endswith("TOOL_SUCCESS · application · tools/call echo")
    assert f.marked == ""


def test_an_http_error_shows_its_status_and_a_retry_points_at_the_first_attempt(
    run: Any,
) -> None:
    first, second = post_flow(), post_flow()
    exchange(run, first, 503, b"busy")
    exchange(run, second, 200, OK)
    rec1, rec2 = records(run.out)
    assert first.comment == f"#{rec1['id']} HTTP_ERROR 503 · transport · tools/call echo"
    assert first.marked == ":warning:"
    assert rec2["retryOf"] == rec1["id"]
    assert second.comment == (
        f"#{rec2['id']} TOOL_SUCCESS · application · tools/call echo · "
        f"retry of #{rec1['id']} ({rec2['retryOrigin']})"
    )
    assert second.marked == ""


def test_a_held_probe_is_commented_when_the_next_post_releases_it(run: Any) -> None:
    probe = post_flow(rpc(1, "server/discover"), {"user-agent": "py"})
    exchange(run, probe, 400, UNSUPPORTED)
    assert records(run.out) == []  # held: negotiation or not?
    assert probe.comment == mcp_layers_subscribers.PENDING_COMMENT and probe.marked == ""
    init = post_flow(
        rpc(2, "initialize", protocolVersion="2025-11-25", capabilities={}, clientInfo={}),
        {"user-agent": "py"},
    )
    run.request(init)  # the fallback initialize: the probe was negotiation
    (rec,) = records(run.out)
    assert rec["negotiation"] is True
    assert probe.comment == (
        f"#{rec['id']} HTTP_ERROR 400 · transport · server/discover · negotiation probe"
    )
    assert probe.marked == ""  # negotiation is not a failure
    assert init.comment == ""
    assert run.updates.flows == [probe]  # a later record: mitmweb is told
    assert probe.id not in run.comments._live and not run.comments._awaiting  # its record is out


def test_no_update_event_is_sent_when_no_addon_listens() -> None:
    """mitmdump has no flow view: the once-per-batch `update` would reach nobody, so it
    is not sent (the comment is still set, and saved with the flow)."""
    recorder = mcp_layers.Recorder(outfile=io.BytesIO())
    with taddons.context(recorder) as tctx:
        sent: list[object] = []
        trigger = tctx.master.addons.trigger
        tctx.master.addons.trigger = lambda event: (sent.append(event), trigger(event))[1]
        probe = post_flow(rpc(1, "server/discover"), {"user-agent": "py"})
        exchange(recorder, probe, 400, UNSUPPORTED)
        recorder.request(post_flow(rpc(2, "initialize", capabilities={}), {"user-agent": "py"}))
        assert "negotiation probe" in probe.comment  # a later record, commented all the same
        assert not [e for e in sent if isinstance(e, hooks.UpdateHook)]


def test_an_injected_fault_is_marked_as_injected(run: Any) -> None:
    f = post_flow()
    f.metadata[mcp_layers.INJECTED_KEY] = {"rule": "five", "action": "http_status"}
    exchange(run, f, 503, b"")
    assert f.comment.endswith("· injected: five/http_status")
    assert f.marked == ":syringe:"


def test_notification_and_delete_are_commented(run: Any) -> None:
    note = post_flow(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
    note.request.headers["mcp-session-id"] = "abc"
    exchange(run, note, 202, b"")
    delete = tflow.tflow(req=tutils.treq(method=b"DELETE", path=b"/mcp", content=b""))
    delete.request.headers["mcp-session-id"] = "abc"
    delete.response = None
    exchange(run, delete, 200, b"")
    rec_note, rec_end = records(run.out)
    assert note.comment == f"#{rec_note['id']} notification · notifications/initialized · 202"
    assert delete.comment == f"#{rec_end['id']} session end · delete · 200"
    assert not note.marked and not delete.marked
    assert not run.comments._live and not run.comments._awaiting  # every flow's record is out


def test_a_flow_open_at_shutdown_is_commented_before_it_is_saved(run: Any) -> None:
    f = post_flow()
    run.request(f)
    run.done()
    (rec,) = records(run.out)
    assert f.comment == f"#{rec['id']} NO_RESPONSE · transport · tools/call echo"
    assert f.marked == ":warning:"
    assert run.updates.flows == []  # the proxy is stopping: no update event then


def test_comments_can_be_switched_off(run: Any) -> None:
    run.tctx.configure(run, mcp_flow_comments=False)
    f = post_flow()
    exchange(run, f, 200, ERROR)
    assert len(records(run.out)) == 1
    assert (f.comment, f.marked) == ("", "")
    assert mcp_layers_subscribers.RECORDS_KEY not in f.metadata


def test_a_failing_comment_never_reaches_mitmproxy(
    run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(record: dict[str, Any]) -> str:
        raise RuntimeError("boom")

    monkeypatch.setattr(mcp_layers_subscribers, "comment_of", broken)
    f = post_flow()
    exchange(run, f, 200, OK)
    assert len(records(run.out)) == 1 and run.errors == 1


def _now(f: http.HTTPFlow) -> http.HTTPFlow:
    """mitmproxy's test flows are dated 2000: a parked request would expire at once."""
    for part in (f.request, f.response):
        if part is not None:
            part.timestamp_start = part.timestamp_end = time.time()
    return f


def _legacy_stream(addon: Any, sid: str) -> http.HTTPFlow:
    """A 2024-11-05 GET stream that announced session `sid` (its `endpoint` event)."""
    req = tutils.treq(method=b"GET", path=b"/sse", content=b"")
    req.headers["accept"] = "text/event-stream"
    get = _now(tflow.tflow(req=req))
    get.response = None
    addon.request(get)
    respond(get, 200, "text/event-stream", None)
    addon.responseheaders(_now(get))
    assert callable(get.response.stream)
    get.response.stream(f"event: endpoint\ndata: /messages?session_id={sid}\n\n".encode())
    return get


@pytest.mark.parametrize("answer_first", [False, True], ids=["after-202", "before-202"])
def test_a_2024_11_05_answer_in_another_event_type_is_commented_on_its_post(
    run: Any, answer_first: bool
) -> None:
    # Issue 25: the record was built past the tracker's flow book, so the POST's flow
    # kept "verdict pending" until it was evicted.
    get = _legacy_stream(run, "hid")
    post = _now(post_flow())
    post.request.path = "/messages?session_id=hid"
    hidden = b"event: result\ndata: " + OK + b"\n\n"
    if answer_first:
        get.response.stream(hidden)
    run.request(post)
    respond(post, 202, "text/plain", b"Accepted")
    run.responseheaders(_now(post))
    run.response(post)
    if not answer_first:
        assert post.comment == mcp_layers_subscribers.PENDING_COMMENT
        get.response.stream(hidden)
    (rec,) = [r for r in records(run.out) if r["kind"] == "request"]
    assert rec["outcome"] == "TRANSPORT_VIOLATION" and "sse_event_type:result" in rec["notes"]
    assert post.comment.startswith(f"#{rec['id']} TRANSPORT_VIOLATION")
    assert post.metadata[mcp_layers_subscribers.RECORDS_KEY] == [rec["id"]]
