"""Records -> spans (mcp_layers_core.otel_map), checked against the pinned MCP conventions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp_layers_core import otel_map, otel_sdk
from mcp_layers_core.events import PostReceived, ResponseBody, ResponseStarted
from mcp_layers_core.otel_map import SpanData, SpanMapper, run_of
from mcp_layers_core.record import new_record
from mcp_layers_core.tracker import Tracker, records_of
from otel_semconv import check_span, flat_data, flat_pb, semconv

RUN = "mcp-20261130T154121Z"
SERVER = "127.0.0.1:9000"


def request(record_id: int, **values: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "id": record_id,
        "kind": "request",
        "ts": f"2026-11-30T15:02:{10 + record_id:02d}.000Z",
        "durationMs": 20.0,
        "server": SERVER,
        "session": "s-abc",
        "protocolVersion": "2025-11-25",
        "method": "tools/call",
        "tool": "echo",
        "httpStatuses": [200],
        "jsonrpc": {"id": record_id, "errorCode": None, "errorMessage": None},
        "outcome": "TOOL_SUCCESS",
        "layer": "application",
    }
    fields.update(values)
    return new_record(**fields)


def session_end(record_id: int, session: str = "s-abc", **values: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "id": record_id,
        "kind": "session_end",
        "ts": f"2026-11-30T15:02:{10 + record_id:02d}.000Z",
        "durationMs": 1.0,
        "server": SERVER,
        "session": session,
        "protocolVersion": "2025-11-25",
        "endReason": "delete",
        "sessionStats": {
            "posts": 2,
            "getStreams": 1,
            "serverRequests": 0,
            "serverNotifications": 0,
        },
    }
    fields.update(values)
    return new_record(**fields)


def one_span(record: dict[str, Any], mapper: SpanMapper | None = None) -> SpanData:
    (span,) = (mapper or SpanMapper(RUN)).map(record).spans
    check_span(flat_data(span))
    return span


def test_the_pinned_conventions_are_the_ones_the_code_names() -> None:
    assert semconv()["source"]["commit"] == otel_map.SEMCONV_COMMIT
    assert semconv()["source"]["repository"] == otel_map.SEMCONV_REPOSITORY
    assert list(otel_map.DURATION_BUCKETS) == semconv()["duration_buckets"]
    assert {otel_map.OPERATION_DURATION, otel_map.SESSION_DURATION} <= set(semconv()["metrics"])


def test_a_tool_call_span_carries_the_conventions_attributes() -> None:
    span = one_span(request(1, userAgent="python-httpx/0.28", client="demo@1.0"))
    assert span.name == "tools/call echo"
    assert span.kind == otel_map.SpanKind.CLIENT
    assert span.attributes == {
        "mcp.method.name": "tools/call",
        "mcp.protocol.version": "2025-11-25",
        "mcp.session.id": "s-abc",
        "jsonrpc.request.id": "1",
        "jsonrpc.protocol.version": "2.0",
        "gen_ai.tool.name": "echo",
        "gen_ai.operation.name": "execute_tool",
        "server.address": "127.0.0.1",
        "server.port": 9000,
        "network.transport": "tcp",
        "network.protocol.name": "http",
        "http.response.status_code": 200,
        "user_agent.original": "python-httpx/0.28",
    } | {k: v for k, v in span.attributes.items() if k.startswith("mcp_layers.")}
    assert span.attributes["mcp_layers.outcome"] == "TOOL_SUCCESS"
    assert span.attributes["mcp_layers.layer"] == "application"
    assert span.attributes["mcp_layers.retry.origin"] == "none"
    assert span.attributes["mcp_layers.injected"] is False
    assert span.attributes["mcp_layers.client"] == "demo@1.0"
    assert not span.error
    assert span.end_ns - span.start_ns == 20_000_000


def test_a_prompt_names_the_span_and_other_methods_have_no_target() -> None:
    prompt = one_span(
        request(1, method="prompts/get", tool=None, prompt="review", outcome="SUCCESS")
    )
    assert prompt.name == "prompts/get review"
    assert prompt.attributes["gen_ai.prompt.name"] == "review"
    listing = one_span(request(2, method="tools/list", tool=None, outcome="SUCCESS"))
    assert listing.name == "tools/list"
    assert "gen_ai.operation.name" not in listing.attributes


@pytest.mark.parametrize(
    ("values", "error_type"),
    [
        # A JSON-RPC error inside a 200: what gateways that read only HTTP statuses miss.
        (
            {
                "outcome": "JSONRPC_ERROR",
                "layer": "protocol",
                "jsonrpc": {"id": 1, "errorCode": -32602, "errorMessage": "bad"},
            },
            "-32602",
        ),
        ({"outcome": "TOOL_ERROR", "isError": True}, "tool_error"),
        ({"outcome": "HTTP_ERROR", "layer": "transport", "httpStatuses": [503]}, "503"),
        # The JSON-RPC code wins over the HTTP status around it.
        (
            {
                "outcome": "HTTP_ERROR",
                "httpStatuses": [404],
                "jsonrpc": {"id": 1, "errorCode": -32001, "errorMessage": "Session not found"},
            },
            "-32001",
        ),
        ({"outcome": "NO_RESPONSE", "layer": "transport", "httpStatuses": []}, "no_response"),
        ({"outcome": "STREAM_INCOMPLETE", "layer": "transport"}, "stream_incomplete"),
        ({"outcome": "MALFORMED_JSON", "layer": "protocol"}, "malformed_json"),
        ({"outcome": "UNINSPECTED", "layer": "proxy"}, None),
        ({"outcome": "INPUT_REQUIRED", "layer": "interaction"}, None),
        ({"outcome": "TOOL_SUCCESS"}, None),
    ],
)
def test_error_type_and_status(values: dict[str, Any], error_type: str | None) -> None:
    span = one_span(request(1, **values))
    assert span.attributes.get("error.type") == error_type
    assert span.error is (error_type is not None)
    code = (values.get("jsonrpc") or {}).get("errorCode")
    assert span.attributes.get("rpc.response.status_code") == (None if code is None else str(code))
    if code is not None:
        assert span.status_message == values["jsonrpc"]["errorMessage"]


def test_a_notification_fails_only_on_its_acknowledgement() -> None:
    note = dict(
        kind="notification",
        method="notifications/initialized",
        tool=None,
        jsonrpc=None,
        outcome=None,
        layer=None,
    )
    ok = one_span(request(1, **note, httpStatuses=[202]))
    assert ok.name == "notifications/initialized" and not ok.error
    assert "jsonrpc.request.id" not in ok.attributes
    refused = one_span(request(2, **note, httpStatuses=[400]))
    assert refused.attributes["error.type"] == "400"


def test_no_session_id_for_2026_07_28_nor_for_the_client_stand_in() -> None:
    modern = one_span(request(1, protocolVersion="2026-07-28"))
    assert "mcp.session.id" not in modern.attributes
    mapper = SpanMapper(RUN)
    stand_in = one_span(request(2, session="c-1234"), mapper)
    assert "mcp.session.id" not in stand_in.attributes
    assert stand_in.attributes["mcp_layers.session"] == "c-1234"
    # A stand-in never ends: no session span to hang under; each exchange its own trace.
    again = one_span(request(3, session="c-1234"), mapper)
    assert stand_in.parent_span_id is None and again.trace_id != stand_in.trace_id


def test_a_raw_session_id_is_a_session_the_server_issued() -> None:
    """Under `mcp_raw_session_ids` the id is written as it is (no `s-`): a session all the
    same, as the verdicts have it too (`record.is_issued_session`)."""
    raw = "1868a90c-93f0-4b4b-9d61-2f9e4c2a8f11"
    mapper = SpanMapper(RUN)
    span = one_span(request(1, session=raw), mapper)
    assert span.attributes["mcp.session.id"] == raw
    again = one_span(request(2, session=raw), mapper)
    assert span.parent_span_id == again.parent_span_id == mapper.session_span_id(raw)
    assert span.trace_id == again.trace_id == mapper.session_trace(raw)


def test_a_retry_is_linked_to_the_attempt_it_repeats_even_in_another_session() -> None:
    mapper = SpanMapper(RUN)
    first = one_span(request(1, outcome="HTTP_ERROR", httpStatuses=[404], session="s-old"), mapper)
    mapper.map(session_end(2, session="s-old", endReason="not_found"))
    retry = one_span(
        request(
            3, session="s-new", retryOrigin="reinit", retryOf=1, attempt=2, httpStatuses=[404, 200]
        ),
        mapper,
    )
    assert retry.parent_span_id != first.span_id  # linked, not parented
    (link,) = retry.links
    assert (link.trace_id, link.span_id) == (first.trace_id, first.span_id)
    assert link.attributes == {"mcp_layers.link": "retry_of", "mcp_layers.retry.origin": "reinit"}
    assert retry.trace_id != first.trace_id


def test_a_session_is_a_trace_whose_span_holds_its_exchanges() -> None:
    mapper = SpanMapper(RUN)
    a = one_span(request(1), mapper)
    b = one_span(request(2), mapper)
    out = mapper.map(session_end(3))
    (session,) = out.spans
    check_span(flat_data(session))
    assert session.name == otel_map.SESSION_SPAN_NAME
    assert a.trace_id == b.trace_id == session.trace_id
    assert a.parent_span_id == b.parent_span_id == session.span_id
    assert session.start_ns == a.start_ns and session.end_ns >= b.end_ns
    assert session.attributes["mcp_layers.session.end_reason"] == "delete"
    assert not session.error
    (duration,) = out.measurements
    assert duration.instrument == otel_map.SESSION_DURATION
    assert duration.value == pytest.approx((session.end_ns - session.start_ns) / 1e9)
    # The same key used again is a new lifeline: a new trace.
    again = one_span(request(4), mapper)
    assert again.trace_id != a.trace_id


def test_a_session_span_ends_no_earlier_than_its_exchanges() -> None:
    # Each record rounds its times to 0.1 ms: a GET stream that ended with its session's
    # DELETE can compute a hair after the session's own end.
    mapper = SpanMapper(RUN)
    stream = one_span(request(1, durationMs=2000.1), mapper)
    (session,) = mapper.map(session_end(1, ts="2026-11-30T15:02:11.000Z", durationMs=2000.0)).spans
    assert session.end_ns == stream.end_ns and session.start_ns <= stream.start_ns


def test_exchange_spans_come_before_their_session_span_and_name_it_as_parent() -> None:
    # Live, a session's exchanges are exported as they complete: their trace and parent are
    # known (hashes of the run and the session) before the session's own span is written.
    early = SpanMapper(RUN)
    spans = [one_span(request(1), early), one_span(request(2), early)]
    (session,) = SpanMapper(RUN).map(session_end(3)).spans
    assert {(s.trace_id, s.parent_span_id) for s in spans} == {(session.trace_id, session.span_id)}


def test_a_get_stream_written_after_its_session_ended_is_in_that_sessions_trace() -> None:
    # The standby GET stream that the DELETE closed is written after the `session_end`.
    mapper = SpanMapper(RUN)
    call = one_span(request(1), mapper)
    (session,) = mapper.map(session_end(3)).spans
    stream = one_span(
        request(
            4,
            kind="stream",
            ts="2026-11-30T15:02:11.500Z",
            durationMs=1600.0,
            method=None,
            tool=None,
            jsonrpc=None,
            outcome=None,
            layer=None,
            contentType="text/event-stream",
        ),
        mapper,
    )
    assert stream.name == "GET"
    assert stream.trace_id == call.trace_id == session.trace_id
    assert stream.parent_span_id == session.span_id
    # What begins after the end is a new lifeline of the same key: a new trace.
    later = one_span(request(5), mapper)
    assert later.trace_id != session.trace_id and later.parent_span_id != session.span_id


def test_docs_name_every_attribute_of_our_own() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "otel.md").read_text(encoding="utf-8")
    full = request(
        1,
        sse={"events": 2, "final": True, "end": "complete", "resumed": True},
        injected={"rule": "r", "action": "http_status"},
        eventIds=True,
        retryMs=500,
        streamClosedMs=12.5,
    )
    keys = {key for _, key in otel_map._OWN}
    keys |= set(one_span(full).attributes)
    keys |= set(one_span(session_end(2)).attributes)
    own = sorted(k.removeprefix("mcp_layers.") for k in keys if k.startswith("mcp_layers."))
    assert [k for k in own if f"`{k}`" not in doc] == []


def test_a_forgotten_session_ends_in_error() -> None:
    (span,) = SpanMapper(RUN).map(session_end(1, endReason="not_found")).spans
    assert span.attributes["error.type"] == "404" and span.error


def test_ids_depend_on_the_run_and_the_record_only() -> None:
    records = [request(1), request(2, retryOf=1, retryOrigin="resend"), session_end(3)]

    def spans(run: str) -> list[SpanData]:
        mapper = SpanMapper(run)
        return [s for r in records for s in mapper.map(r).spans]

    assert spans(RUN) == spans(RUN)
    assert {s.span_id for s in spans(RUN)}.isdisjoint({s.span_id for s in spans("other")})
    assert run_of(f"{RUN}.jsonl") == run_of(f"{RUN}-002.jsonl") == run_of(f"{RUN}.jsonl.gz") == RUN
    assert run_of("copy.jsonl") == "copy"


def test_operation_metrics_use_only_the_conventions_attributes() -> None:
    out = SpanMapper(RUN).map(request(1, outcome="TOOL_ERROR", isError=True))
    by_name = {m.instrument: m for m in out.measurements}
    duration = by_name[otel_map.OPERATION_DURATION]
    assert duration.value == pytest.approx(0.02)
    assert set(duration.attributes) <= set(
        semconv()["metrics"][otel_map.OPERATION_DURATION]["attributes"]
    )
    assert duration.attributes["error.type"] == "tool_error"
    assert "mcp.session.id" not in duration.attributes
    count = by_name[otel_map.EXCHANGES]
    assert count.attributes["mcp_layers.outcome"] == "TOOL_ERROR"
    assert count.attributes["mcp_layers.retry.origin"] == "none"


def test_a_resource_uri_only_from_recorded_bodies() -> None:
    bodies = {
        "request": {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "resources/read",
            "params": {"uri": "file:///a.txt"},
        },
        "response": None,
    }
    without = one_span(request(1, method="resources/read", tool=None, outcome="SUCCESS"))
    assert "mcp.resource.uri" not in without.attributes
    with_bodies = one_span(
        request(2, method="resources/read", tool=None, outcome="SUCCESS", bodies=bodies)
    )
    assert with_bodies.attributes["mcp.resource.uri"] == "file:///a.txt"
    assert with_bodies.name == "resources/read"  # never the URI: high cardinality


def test_odd_ids_and_servers_do_not_break_the_mapping() -> None:
    span = one_span(
        request(
            1,
            jsonrpc={"id": {"x": [1]}, "errorCode": None, "errorMessage": None},
            server="[::1]:8443",
        )
    )
    assert span.attributes["jsonrpc.request.id"] == '{"x":[1]}'
    assert span.attributes["server.address"] == "::1" and span.attributes["server.port"] == 8443
    assert (
        "jsonrpc.request.id"
        not in one_span(
            request(2, jsonrpc={"id": None, "errorCode": None, "errorMessage": None})
        ).attributes
    )


def test_sdk_encoding_round_trips_through_otlp_json() -> None:
    mapper = SpanMapper(RUN)
    data = [
        s
        for r in (request(1), request(2, retryOf=1, retryOrigin="resend"), session_end(3))
        for s in mapper.map(r).spans
    ]
    encoded = otel_sdk.encode(otel_sdk.readable_spans(data, RUN))
    line = otel_sdk.otlp_json(encoded)
    parsed = json.loads(line)
    span = parsed["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert span["traceId"] == f"{data[0].trace_id:032x}"  # OTLP/JSON ids are hex, not base64
    assert span["kind"] == 3  # enums as integers
    assert otel_sdk.parse_otlp_json(line) == encoded
    pb_spans = [s for rs in encoded.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert [flat_pb(s) for s in pb_spans] == [flat_data(s) for s in data]


def test_the_tracker_records_the_prompt_name() -> None:
    t = Tracker()
    body = b'{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"review"}}'
    t.handle(PostReceived("f", 1.0, SERVER, "127.0.0.1:5", {}, body))
    t.handle(ResponseStarted("f", 1.1, 200, {"content-type": "application/json"}))
    (record,) = records_of(
        t.handle(ResponseBody("f", 1.2, b'{"jsonrpc":"2.0","id":1,"result":{"messages":[]}}'))
    )
    assert record["prompt"] == "review" and record["tool"] is None


def test_model_turns_are_not_exported_as_mcp_exchanges() -> None:
    turn = new_record(id=9, kind="model_turn", ts="2026-11-30T15:41:21.000Z", server=SERVER)
    out = SpanMapper(run_of(RUN)).map(turn)
    assert out.spans == [] and out.measurements == []
