"""OpenTelemetry spans of stdio records (`mcp-layers wrap`): a pipe, no server address."""

from __future__ import annotations

import json

from mcp_layers_core.otel_map import SpanMapper
from mcp_layers_core.stdio import StdioObserver
from otel_semconv import check_span, flat_data


def stdio_records() -> list[dict[str, object]]:
    o = StdioObserver(server="stdio:files", run_id="1-1", started=1_700_000_000.0)
    out = []
    t = o.started
    for line, side in (
        ({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "read"}}, "c"),
        ({"jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": False}}, "s"),
    ):
        t += 0.01
        data = json.dumps(line).encode()
        take = o.from_client if side == "c" else o.from_server
        out += take(data, len(data), t)
    out += o.exited(t + 0.01, 0, None)
    return out


def test_stdio_spans_say_pipe_and_name_no_host() -> None:
    mapper = SpanMapper("mcp-stdio-run")
    spans = [span for record in stdio_records() for span in mapper.map(record).spans]
    assert len(spans) == 2  # the call, and the session
    for span in spans:
        check_span(flat_data(span))
        assert span.attributes["network.transport"] == "pipe"
        for http_only in ("server.address", "server.port", "network.protocol.name"):
            assert http_only not in span.attributes
