"""OpenTelemetry export end to end: the real SDK client through a real mitmdump with
`--set mcp_otlp_endpoint=…`, an OTLP/HTTP receiver (`mcp_layers_support.otlp_receiver`,
decoding with `opentelemetry-proto`) in place of a collector.

Judged: every record arrives as one span (a `session_end` as the session's span); every
span passes the pinned conventions (tests/fixtures/otel/mcp_semconv.json); the live
spans equal what `mcp-layers export --otlp-json` makes of the recording; the metrics
arrive with the conventions' buckets; and a collector that is down or slow costs the
traffic nothing.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_layers_core import faults, otel_map, otel_sdk
from mcp_layers_core.record import is_issued_session
from mcp_layers_demo import procs
from mcp_layers_demo.client import CallResult, run_calls
from mcp_layers_support.harness import (
    JSON_STATELESS,
    SSE_STATEFUL,
    Proxies,
    Proxy,
    ServerMode,
    ServerPool,
)
from mcp_layers_support.otlp_receiver import OtlpReceiver
from otel_semconv import Flat, check_span, flat_pb, semconv

pytestmark = pytest.mark.e2e

MCP_LAYERS = str(Path(sys.executable).with_name("mcp-layers"))


def run_client(url: str, mode: str = "legacy") -> list[CallResult] | Exception:
    async def go() -> list[CallResult]:
        return await run_calls(url, mode)

    try:
        return anyio.run(go)
    except Exception as exc:  # a dropped connection takes the SDK client down: still spans
        return exc


def offline_spans(proxy: Proxy, out: Path) -> list[Flat]:
    done = subprocess.run(
        [MCP_LAYERS, "export", "--otlp-json", str(out), *map(str, proxy.files())],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    spans: list[Flat] = []
    for line in out.read_text(encoding="utf-8").splitlines():
        request = otel_sdk.parse_otlp_json(line)
        spans += [
            flat_pb(s) for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans
        ]
    return spans


def by_id(spans: list[Flat]) -> dict[str, Flat]:
    out = {s["span_id"]: s for s in spans}
    assert len(out) == len(spans), "span ids are unique"
    return out


def judge(
    proxy: Proxy, receiver: OtlpReceiver, tmp_path: Path
) -> tuple[list[dict[str, Any]], dict[str, Flat]]:
    """Stop the proxy (it flushes the export at shutdown) and check the spans it sent."""
    proxy.stop()
    records = proxy.records()
    live = by_id([flat_pb(s) for s in receiver.spans()])
    assert records and len(live) == len(records), proxy.failure_context()
    for span in live.values():
        check_span(span)
    offline = by_id(offline_spans(proxy, tmp_path / "spans.otlp.jsonl"))
    assert offline == live
    exchange_spans = {
        s["attributes"]["mcp_layers.record.id"]: s
        for s in live.values()
        if s["name"] != otel_map.SESSION_SPAN_NAME
    }
    for record in records:
        if record["kind"] == "session_end":
            continue
        span = exchange_spans[record["id"]]
        attrs = span["attributes"]
        assert attrs["mcp_layers.record.id"] == record["id"]
        assert attrs.get("mcp_layers.outcome") == record["outcome"]
        assert attrs["mcp_layers.retry.origin"] == record["retryOrigin"]
        assert attrs["mcp_layers.injected"] == (record["injected"] is not None)
        if record["kind"] == "request" and record["jsonrpc"]["id"] is not None:
            assert attrs["jsonrpc.request.id"] == str(record["jsonrpc"]["id"])
    sessions = [s for s in live.values() if s["name"] == otel_map.SESSION_SPAN_NAME]
    assert len(sessions) == sum(r["kind"] == "session_end" for r in records)
    return records, live


@pytest.mark.parametrize(
    ("client_mode", "mode"),
    [("legacy", SSE_STATEFUL), ("auto", JSON_STATELESS)],
    ids=["legacy-sse-stateful", "auto-json-stateless"],
)
def test_live_spans_of_sdk_traffic_follow_the_conventions_and_equal_the_offline_export(
    client_mode: str, mode: ServerMode, servers: ServerPool, proxies: Proxies, tmp_path: Path
) -> None:
    server = servers.get(mode)
    with OtlpReceiver() as receiver:
        proxy = proxies(
            server.port,
            extra_sets=(
                f"mcp_otlp_endpoint={receiver.url}",
                "mcp_otlp_headers=authorization=Bearer%20sekrit,x-scope-orgid=team",
            ),
        )
        results = run_client(proxy.url, client_mode)
        assert not isinstance(results, Exception), results
        records, live = judge(proxy, receiver, tmp_path)
        # The headers reach the collector, and are never written or logged.
        assert receiver.headers and all(
            h.get("authorization") == "Bearer sekrit" for h in receiver.headers
        )
        assert "sekrit" not in proxy.text() and "sekrit" not in proxy.log_text()
        # The metrics the conventions define, with their buckets, arrive at shutdown.
        wanted = {otel_map.OPERATION_DURATION, otel_map.EXCHANGES}
        if any(r["kind"] == "session_end" for r in records):
            wanted.add(otel_map.SESSION_DURATION)
        assert wanted <= receiver.metric_names()
        bounds = [
            list(m.histogram.data_points[0].explicit_bounds)
            for req in receiver.metrics
            for rm in req.resource_metrics
            for sm in rm.scope_metrics
            for m in sm.metrics
            if m.name == otel_map.OPERATION_DURATION and m.histogram.data_points
        ]
        assert bounds and bounds[0] == semconv()["duration_buckets"]
    spans = list(live.values())
    names = {s["name"] for s in spans}
    assert {"tools/list", "tools/call echo", "tools/call fail", "tools/call slow"} <= names
    failed = next(s for s in spans if s["name"] == "tools/call fail")
    assert failed["attributes"]["error.type"] == "tool_error" and failed["error"]
    unknown = next(s for s in spans if s["name"] == "tools/call no_such_tool")
    # An error inside a 200: invisible to a gateway that reads the status only.
    assert unknown["attributes"]["http.response.status_code"] == 200
    assert unknown["attributes"]["error.type"] == "tool_error" and unknown["error"]
    versions = {s["attributes"].get("mcp.protocol.version") for s in spans} - {None}
    if client_mode == "legacy":
        assert any("mcp.session.id" in s["attributes"] for s in spans)
    if "2026-07-28" in versions:
        assert not any(
            "mcp.session.id" in s["attributes"]
            for s in spans
            if s["attributes"].get("mcp.protocol.version") == "2026-07-28"
        )
    exchanges = [s for s in spans if s["name"] != otel_map.SESSION_SPAN_NAME]
    sessions = {s["span_id"]: s for s in spans if s["name"] == otel_map.SESSION_SPAN_NAME}
    written = {r["id"]: n for n, r in enumerate(records)}  # the recording's order
    for span in exchanges:
        parent = sessions.get(span["parent"] or "")
        if is_issued_session(span["attributes"].get("mcp_layers.session")):
            assert parent is not None, span  # no exchange of a session without its root
        if parent is not None:  # the session span holds its exchanges, in time too
            assert parent["trace_id"] == span["trace_id"]
            assert parent["start"] <= span["start"] <= parent["end"]
            # ... but for one written after it (the GET stream a DELETE closed), which may
            # end a little later
            own, root = (written[s["attributes"]["mcp_layers.record.id"]] for s in (span, parent))
            assert span["end"] <= parent["end"] or own > root, span
    assert len(records) == len(spans)


#: The idle presets act after 3 s of silence on the standby stream, longer than this
#: client's whole session: tests/e2e/test_middlebox_e2e.py runs them with 1 s rules.
NEEDS_AN_IDLE_SESSION = ("middlebox.idle_cut", "middlebox.graceful_close")
PRESETS = sorted(p for p in faults.PRESETS if p not in ("none", "baseline", *NEEDS_AN_IDLE_SESSION))


@pytest.mark.parametrize("preset", PRESETS)
def test_every_fault_preset_exports_its_verdicts(
    preset: str, servers: ServerPool, proxies: Proxies, tmp_path: Path
) -> None:
    server = servers.get(SSE_STATEFUL)
    with OtlpReceiver() as receiver:
        proxy = proxies(
            server.port,
            scenario=None,
            extra_sets=(f"mcp_otlp_endpoint={receiver.url}", f"mcp_faults={preset}"),
        )
        client_mode = "auto" if preset in ("elicitation.approval", "compat.sdk_v2") else "legacy"
        run_client(proxy.url, client_mode)
        records, live = judge(proxy, receiver, tmp_path)
    injected = [r for r in records if r["injected"]]
    assert injected, f"{preset} injected nothing"
    spans = list(live.values())
    assert all(
        s["attributes"]["mcp_layers.scenario"] == preset
        for s in spans
        if s["name"] != otel_map.SESSION_SPAN_NAME
    )
    if preset == "errors.jsonrpc_error":
        # A JSON-RPC error inside a 200: the code is the error type, the message the status.
        rpc = [s for s in spans if "rpc.response.status_code" in s["attributes"]]
        assert rpc
        for s in rpc:
            assert s["attributes"]["error.type"] == s["attributes"]["rpc.response.status_code"]
            assert s["error"] and s["status_message"]
    rules = {s["attributes"].get("mcp_layers.injected.rule") for s in spans} - {None}
    assert rules == {r["injected"]["rule"] for r in injected}
    # A fault that broke a call shows as an error span; a retry as a link.
    for r in records:
        if r["kind"] == "request" and r["outcome"] not in (
            "SUCCESS",
            "TOOL_SUCCESS",
            "INPUT_REQUIRED",
            "UNINSPECTED",
        ):
            span = next(
                s
                for s in spans
                if s["attributes"].get("mcp_layers.record.id") == r["id"]
                and s["name"] != otel_map.SESSION_SPAN_NAME
            )
            assert span["error"]
        if r.get("retryOf"):
            span = next(
                s
                for s in spans
                if s["attributes"].get("mcp_layers.record.id") == r["id"]
                and s["name"] != otel_map.SESSION_SPAN_NAME
            )
            assert any(dict(link[2]).get("mcp_layers.link") == "retry_of" for link in span["links"])


@pytest.mark.parametrize("collector", ["down", "slow"])
def test_a_collector_down_or_slow_costs_the_traffic_nothing(
    collector: str, servers: ServerPool, proxies: Proxies
) -> None:
    server = servers.get(SSE_STATEFUL)
    with OtlpReceiver(delay_s=30.0) as slow:
        endpoint = slow.url if collector == "slow" else f"http://127.0.0.1:{procs.free_port()}"
        proxy = proxies(server.port, extra_sets=(f"mcp_otlp_endpoint={endpoint}",))
        started = time.monotonic()
        results = run_client(proxy.url)
        took = time.monotonic() - started
        assert not isinstance(results, Exception), results
        assert [r.error for r in results[:2]] == [None, None], results
        assert took < 15, took  # the slow tool takes ~1 s; nothing waits for the collector
        stopping = time.monotonic()
        proxy.stop()
        # Shutdown gives the export a bounded time (3 s), then leaves.
        assert time.monotonic() - stopping < 12
    assert proxy.records(), "the recording is complete either way"
    log = proxy.log_text()
    assert "OTLP export" in log
    assert "Traceback" not in log
