"""The OpenTelemetry SDK side of the export: `SpanData` -> the SDK's spans, OTLP encoding.

Needs the `otel` extra (`pip install 'mcp-layers[otel]'`); imported only by the live
exporter once `mcp_otlp_endpoint` is set, and by `mcp-layers export --otlp-json`.

The spans are built as the SDK's `ReadableSpan`s directly rather than through a
`Tracer`: a tracer draws random ids and stamps the current time, and the export must
carry the ids derived from the recording (the same spans live and offline) and the
times the proxy measured. Encoding is the SDK's own (`encode_spans`), so what leaves
the proxy and what lands in a file are the same protobuf messages.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence
from typing import Any, Final, cast

from google.protobuf import json_format
from opentelemetry import trace as trace_api
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.util.instrumentation import InstrumentationScope
from opentelemetry.trace import Link, SpanContext, Status, StatusCode, TraceFlags

from .otel_map import SpanData, SpanKind

SCOPE_NAME: Final = "mcp-layers"
SERVICE_NAME: Final = "mcp-layers"

_KINDS: Final = {
    SpanKind.CLIENT: trace_api.SpanKind.CLIENT,
    SpanKind.SERVER: trace_api.SpanKind.SERVER,
    SpanKind.INTERNAL: trace_api.SpanKind.INTERNAL,
}
_SAMPLED: Final = TraceFlags(TraceFlags.SAMPLED)


def version() -> str:
    from importlib import metadata

    try:
        return metadata.version("mcp-layers")
    except metadata.PackageNotFoundError:  # pragma: no cover - a bare checkout
        return "0"


def resource(run: str) -> Resource:
    """The same resource live and offline: no environment detection."""
    return Resource(
        {"service.name": SERVICE_NAME, "service.version": version(), "mcp_layers.run": run}
    )


def scope() -> InstrumentationScope:
    return InstrumentationScope(SCOPE_NAME, version())


def readable(span: SpanData, res: Resource, scp: InstrumentationScope) -> ReadableSpan:
    context = SpanContext(span.trace_id, span.span_id, is_remote=False, trace_flags=_SAMPLED)
    parent = None
    if span.parent_span_id is not None:
        parent = SpanContext(
            span.trace_id, span.parent_span_id, is_remote=False, trace_flags=_SAMPLED
        )
    links = [
        Link(
            SpanContext(link.trace_id, link.span_id, is_remote=False, trace_flags=_SAMPLED),
            dict(link.attributes),
        )
        for link in span.links
    ]
    status = Status(StatusCode.ERROR, span.status_message) if span.error else Status()
    return ReadableSpan(
        name=span.name,
        context=context,
        parent=parent,
        resource=res,
        attributes=dict(span.attributes),
        links=links,
        kind=_KINDS[span.kind],
        status=status,
        start_time=span.start_ns,
        end_time=span.end_ns,
        instrumentation_scope=scp,
    )


def readable_spans(spans: Iterable[SpanData], run: str) -> list[ReadableSpan]:
    res, scp = resource(run), scope()
    return [readable(s, res, scp) for s in spans]


def encode(spans: Sequence[ReadableSpan]) -> ExportTraceServiceRequest:
    return encode_spans(spans)


_ID_FIELDS: Final = ("traceId", "spanId", "parentSpanId")


def otlp_json(request: ExportTraceServiceRequest) -> str:
    """One line of OTLP/JSON (what the Collector's `otlpjsonfile` receiver reads).

    Protobuf's JSON mapping writes bytes as base64; OTLP/JSON wants trace and span ids
    as hex, and enums as integers.
    """
    data = json_format.MessageToDict(request, use_integers_for_enums=True)
    for rs in data.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                _hex_ids(span)
                for link in span.get("links", []):
                    _hex_ids(link)
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def parse_otlp_json(line: str) -> ExportTraceServiceRequest:
    """The inverse of `otlp_json` (tests compare live and offline spans with it)."""
    data: dict[str, Any] = json.loads(line)
    for rs in data.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                _b64_ids(span)
                for link in span.get("links", []):
                    _b64_ids(link)
    return cast(ExportTraceServiceRequest, json_format.ParseDict(data, ExportTraceServiceRequest()))


def _hex_ids(obj: dict[str, Any]) -> None:
    for key in _ID_FIELDS:
        if obj.get(key):
            obj[key] = base64.b64decode(obj[key]).hex()


def _b64_ids(obj: dict[str, Any]) -> None:
    for key in _ID_FIELDS:
        if obj.get(key):
            obj[key] = base64.b64encode(bytes.fromhex(obj[key])).decode()
