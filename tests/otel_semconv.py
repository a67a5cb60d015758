"""The pinned MCP semantic conventions (tests/fixtures/otel/mcp_semconv.json) and the
checks every exported span must pass, on spans in one comparable shape (`Flat`)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from mcp_layers_core.otel_map import SESSION_SPAN_NAME, SpanData
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

FIXTURE = Path(__file__).parent / "fixtures" / "otel" / "mcp_semconv.json"

Flat = dict[str, Any]


@cache
def semconv() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FIXTURE.read_text(encoding="utf-8"))
    return data


def allowed_attributes() -> set[str]:
    c = semconv()
    span = c["client_span"]
    return {
        *span["required"],
        *span["conditionally_required"],
        *span["recommended"],
        *span["opt_in"],
        *c["general_registry"]["attributes"],
    }


def _value(v: AnyValue) -> Any:
    which = v.WhichOneof("value")
    if which == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, which) if which else None


_KINDS = {Span.SPAN_KIND_CLIENT: "client", Span.SPAN_KIND_SERVER: "server"}


def flat_pb(span: Span) -> Flat:
    """A protobuf span (what a collector receives), flattened."""
    return {
        "name": span.name,
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent": span.parent_span_id.hex() or None,
        "kind": _KINDS.get(span.kind, "internal"),
        "start": span.start_time_unix_nano,
        "end": span.end_time_unix_nano,
        "attributes": {a.key: _value(a.value) for a in span.attributes},
        "links": sorted(
            (
                link.trace_id.hex(),
                link.span_id.hex(),
                tuple(sorted((a.key, str(_value(a.value))) for a in link.attributes)),
            )
            for link in span.links
        ),
        "error": span.status.code == Status.STATUS_CODE_ERROR,
        "status_message": span.status.message or None,
    }


def flat_data(span: SpanData) -> Flat:
    """A mapped span (before the SDK), flattened the same way."""
    return {
        "name": span.name,
        "trace_id": f"{span.trace_id:032x}",
        "span_id": f"{span.span_id:016x}",
        "parent": None if span.parent_span_id is None else f"{span.parent_span_id:016x}",
        "kind": str(span.kind),
        "start": span.start_ns,
        "end": span.end_ns,
        "attributes": dict(span.attributes),
        "links": sorted(
            (
                f"{link.trace_id:032x}",
                f"{link.span_id:016x}",
                tuple(sorted((k, str(v)) for k, v in link.attributes.items())),
            )
            for link in span.links
        ),
        "error": span.error,
        "status_message": span.status_message,
    }


def check_span(span: Flat) -> None:
    """The conventions' rules, as far as a span alone shows them."""
    attrs = span["attributes"]
    unknown = {
        k for k in attrs if not k.startswith("mcp_layers.") and k not in allowed_attributes()
    }
    assert not unknown, f"{span['name']}: attributes outside the pinned registry: {unknown}"
    # Status ERROR exactly when error.type is set.
    assert span["error"] == ("error.type" in attrs), span
    if "error.type" in attrs:
        assert isinstance(attrs["error.type"], str) and attrs["error.type"]
    if "mcp.session.id" in attrs:
        version = attrs.get("mcp.protocol.version") or ""
        assert version < semconv()["mcp.session.id"]["must_not_be_set_from_protocol_version"]
    if "network.transport" in attrs:
        assert attrs["network.transport"] in semconv()["network.transport"]
    if span["name"] == SESSION_SPAN_NAME:
        assert span["kind"] == "internal" and span["parent"] is None
        return
    assert "mcp.method.name" in attrs or attrs.get("mcp_layers.kind") == "response", span
    method = attrs.get("mcp.method.name")
    target = attrs.get("gen_ai.tool.name") or attrs.get("gen_ai.prompt.name")
    assert span["name"] == (f"{method} {target}" if target else method or "response")
    if method == "tools/call":
        assert attrs["gen_ai.operation.name"] == "execute_tool"
        assert "gen_ai.tool.name" in attrs
    else:
        assert "gen_ai.operation.name" not in attrs
    if attrs.get("mcp_layers.kind") == "request":
        assert span["kind"] == "client"
    if "rpc.response.status_code" in attrs and "error.type" in attrs:
        # The JSON-RPC code wins over the HTTP status and the outcome.
        assert attrs["error.type"] == attrs["rpc.response.status_code"]
    if attrs.get("mcp_layers.outcome") == "TOOL_ERROR" and "rpc.response.status_code" not in attrs:
        assert attrs["error.type"] == "tool_error"
