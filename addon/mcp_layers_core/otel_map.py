"""Records -> OpenTelemetry spans and measurements, by the MCP semantic conventions.

Pure data: no OpenTelemetry import, no I/O. The live exporter (`addon/mcp_layers_otel.py`) and the
offline one (`mcp-layers export --otlp-json`) both feed records through a `SpanMapper`
in the order the recording holds them, so the same recording gives the same spans
either way: trace and span ids are hashes of the run's name and the record's id, and
times are the record's own.

Conventions followed (docs/otel.md): OpenTelemetry GenAI semantic conventions, MCP
(`open-telemetry/semantic-conventions-genai`, `docs/gen-ai/mcp.md` and
`model/mcp/*.yaml` at commit `SEMCONV_COMMIT`; status Development).

Size: over 400 lines because it is one table-like mapping (every record field to its
attributes, statuses, links and metrics); split, each half would need the other's names.

Shape of a trace: one trace per MCP session (the session's hashed key names it); one
`mcp_layers.session` span for the session's lifeline, written when its `session_end`
record comes, and under it one span per exchange, each written when its record is (the
trace id and the parent's span id are hashes, known before the parent is written). A
record begun within a lifeline that has since ended (the standby GET stream its DELETE
closed) still goes under that lifeline's span. An exchange outside a session (a
stateless server, 2026-07-28) is a trace of its own. A retry is *linked* to the attempt it
repeats (the conventions link rather than parent: one MCP request can take several HTTP
requests), as are a 2026-07-28 continuation to the turn it answers and an `initialize`
to the session a 404 ended just before.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Final

from .record import (
    NOT_FAILED,
    EndReason,
    Kind,
    Outcome,
    RetryOrigin,
    Transport,
    is_issued_session,
)
from .versions import is_sessionless

#: The conventions followed: repository, commit, and the files read.
SEMCONV_REPOSITORY: Final = "open-telemetry/semantic-conventions-genai"
SEMCONV_COMMIT: Final = "4172e394d28f2d26ec4a4514a45f153580c68670"

#: Buckets the conventions recommend for the MCP duration histograms (seconds).
DURATION_BUCKETS: Final[tuple[float, ...]] = (
    0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300,
)  # fmt: skip

OPERATION_DURATION: Final = "mcp.client.operation.duration"
SESSION_DURATION: Final = "mcp.client.session.duration"
#: Counters of this project (not in the conventions): exchanges by verdict and retry.
EXCHANGES: Final = "mcp_layers.exchanges"

#: Methods whose `params.uri` is `mcp.resource.uri`.
RESOURCE_METHODS: Final = frozenset(
    {"resources/read", "resources/subscribe", "resources/unsubscribe"}
)

SESSION_SPAN_NAME: Final = "mcp_layers.session"

#: How many record ids and sessions the mapper remembers (for links and session spans).
DEFAULT_MEMORY: Final = 100_000

AttrValue = str | int | float | bool | list[str] | list[int]
Attributes = dict[str, AttrValue]


class SpanKind(StrEnum):
    CLIENT = "client"
    SERVER = "server"
    INTERNAL = "internal"


@dataclass(frozen=True, slots=True)
class SpanLink:
    trace_id: int
    span_id: int
    attributes: Attributes


@dataclass(frozen=True, slots=True)
class SpanData:
    """One span, ready for any encoder (the SDK's, in `otel_sdk`)."""

    name: str
    trace_id: int  # 128 bits
    span_id: int  # 64 bits
    parent_span_id: int | None
    kind: SpanKind
    start_ns: int
    end_ns: int
    attributes: Attributes
    links: tuple[SpanLink, ...] = ()
    error: bool = False
    status_message: str | None = None


@dataclass(frozen=True, slots=True)
class Measurement:
    """One value for an instrument: a histogram (seconds) or a counter (1)."""

    instrument: str
    value: float
    attributes: Attributes


@dataclass(slots=True)
class Mapped:
    spans: list[SpanData] = field(default_factory=list)
    measurements: list[Measurement] = field(default_factory=list)


_RUN_NAME = re.compile(r"^(mcp-\d{8}T\d{6}Z)(?:-\d{3})?\.jsonl(?:\.gz)?$")


def run_of(file_name: str) -> str:
    """The run a recording file belongs to: `mcp-20261130T154121Z` for that run's file
    and its rotated parts (`…-002.jsonl`); otherwise the name without its extensions."""
    m = _RUN_NAME.match(file_name)
    if m:
        return m.group(1)
    return file_name.split(".", 1)[0] or file_name


def trace_id_of(run: str, key: str) -> int:
    return _hash(run, key, 16)


def span_id_of(run: str, key: str) -> int:
    return _hash(run, key, 8)


def _hash(run: str, key: str, size: int) -> int:
    digest = hashlib.blake2b(f"{run}\x00{key}".encode(), digest_size=size).digest()
    return int.from_bytes(digest, "big") or 1  # an all-zero id is invalid


def ts_ns(ts: str) -> int:
    """`2026-11-30T15:02:51.925Z` -> Unix nanoseconds."""
    moment = datetime.fromisoformat(ts.replace("Z", "+00:00"))
    return round(moment.timestamp() * 1000) * 1_000_000


def split_server(server: str) -> tuple[str, int | None]:
    """`host:port` (the record's `server`) -> (`server.address`, `server.port`)."""
    host, sep, port = server.rpartition(":")
    if not sep or not port.isdigit():
        return server, None
    return host.strip("[]"), int(port)


def put_network(attrs: Attributes, record: dict[str, Any]) -> None:
    """Where the server is and how it is reached: `host:port` over TCP and HTTP; for a
    server run by `mcp-layers wrap` (`transport: stdio`), a pipe and no address (its
    `server` is a command's name, `stdio:NAME`, not a host)."""
    if record.get("transport") == Transport.STDIO:
        attrs["network.transport"] = "pipe"
        return
    address, port = split_server(record.get("server") or "")
    _put(attrs, "server.address", address or None)
    _put(attrs, "server.port", port)
    attrs["network.transport"] = "tcp"
    attrs["network.protocol.name"] = "http"


def error_type(record: dict[str, Any]) -> str | None:
    """`error.type` of an exchange, or None when it did not fail.

    The JSON-RPC error code first (also inside an HTTP error), as the conventions say;
    `tool_error` for `isError: true`; then the HTTP status of an error answer; then the
    outcome, lower-cased (`no_response`, `stream_incomplete`, `malformed_json`, …) for
    what failed below JSON-RPC. UNINSPECTED (the proxy could not look) and
    INPUT_REQUIRED (a turn) are not failures.
    """
    rpc = record.get("jsonrpc") or {}
    code = rpc.get("errorCode")
    outcome = record.get("outcome")
    statuses: list[int] = record.get("httpStatuses") or []
    if outcome is None:  # a notification or a response POST: its acknowledgement
        if not statuses:
            return "no_response"
        last = statuses[-1]
        return None if 200 <= last < 300 else str(last)
    if outcome in NOT_FAILED or outcome == Outcome.UNINSPECTED:
        return None
    if code is not None:
        return str(code)
    if outcome == Outcome.TOOL_ERROR:
        return "tool_error"
    if outcome == Outcome.HTTP_ERROR and statuses:
        return str(statuses[-1])
    return str(outcome).lower()


def request_id_text(rpc_id: object) -> str | None:
    """`jsonrpc.request.id`: the id as text; none for a null or absent id."""
    if rpc_id is None:
        return None
    if isinstance(rpc_id, str):
        return rpc_id
    if isinstance(rpc_id, bool) or not isinstance(rpc_id, int | float):
        return json.dumps(rpc_id, separators=(",", ":"), default=repr)[:200]
    return str(rpc_id)


def session_id_allowed(record: dict[str, Any]) -> bool:
    """May `mcp.session.id` be set? Only for a session the server issued (not the client
    stand-in `c-…`: `record.is_issued_session`) of a revision before 2026-07-28, which
    removed protocol-level sessions: there `mcp.session.id` MUST NOT be set."""
    if not is_issued_session(record.get("session")):
        return False
    version = record.get("protocolVersion")
    return not (isinstance(version, str) and is_sessionless(version))


def resource_uri(record: dict[str, Any]) -> str | None:
    """`params.uri` of a resource request, known only with `mcp_record_bodies` (the
    record does not keep URIs otherwise: they can name a user's files)."""
    if record.get("method") not in RESOURCE_METHODS:
        return None
    bodies = record.get("bodies") or {}
    request = bodies.get("request")
    params = request.get("params") if isinstance(request, dict) else None
    uri = params.get("uri") if isinstance(params, dict) else None
    return uri if isinstance(uri, str) else None


def _put(attrs: Attributes, key: str, value: object) -> None:
    if value is None:
        return
    if isinstance(value, str | bool | int | float):
        attrs[key] = value
    elif isinstance(value, list) and all(isinstance(v, str) for v in value):
        attrs[key] = [str(v) for v in value]
    elif isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        attrs[key] = [int(v) for v in value]


def convention_attributes(record: dict[str, Any], method: str | None) -> Attributes:
    """The attributes the MCP conventions define, for an exchange span."""
    attrs: Attributes = {}
    _put(attrs, "mcp.method.name", method)
    _put(attrs, "mcp.protocol.version", record.get("protocolVersion"))
    if session_id_allowed(record):
        _put(attrs, "mcp.session.id", record["session"])
    rpc = record.get("jsonrpc") or {}
    _put(attrs, "jsonrpc.request.id", request_id_text(rpc.get("id")))
    # MCP messages are JSON-RPC 2.0; an answer that says otherwise is INVALID_ENVELOPE.
    attrs["jsonrpc.protocol.version"] = "2.0"
    if method == "tools/call":
        _put(attrs, "gen_ai.tool.name", record.get("tool"))
        attrs["gen_ai.operation.name"] = "execute_tool"
    _put(attrs, "gen_ai.prompt.name", record.get("prompt"))
    _put(attrs, "mcp.resource.uri", resource_uri(record))
    put_network(attrs, record)
    code = rpc.get("errorCode")
    _put(attrs, "rpc.response.status_code", None if code is None else str(code))
    _put(attrs, "error.type", error_type(record))
    statuses = record.get("httpStatuses") or []
    _put(attrs, "http.response.status_code", statuses[-1] if statuses else None)
    _put(attrs, "user_agent.original", record.get("userAgent"))
    return attrs


#: Record field -> this project's attribute (the record's own verdict and context).
_OWN: Final[tuple[tuple[str, str], ...]] = (
    ("id", "mcp_layers.record.id"),
    ("kind", "mcp_layers.kind"),
    ("outcome", "mcp_layers.outcome"),
    ("layer", "mcp_layers.layer"),
    ("retryOrigin", "mcp_layers.retry.origin"),
    ("attempt", "mcp_layers.retry.attempt"),
    ("retryOf", "mcp_layers.retry.of"),
    ("retryDelayMs", "mcp_layers.retry.delay_ms"),
    ("retryAfterMs", "mcp_layers.retry.after_ms"),
    ("retryAfterHonored", "mcp_layers.retry.after_honored"),
    ("unsafeRetry", "mcp_layers.retry.unsafe"),
    ("toolSafety", "mcp_layers.tool.safety"),
    ("continues", "mcp_layers.continues"),
    ("negotiation", "mcp_layers.negotiation"),
    ("previousSession", "mcp_layers.previous_session"),
    ("session", "mcp_layers.session"),
    ("client", "mcp_layers.client"),
    ("postCount", "mcp_layers.post_count"),
    ("httpStatuses", "mcp_layers.http.statuses"),
    ("contentType", "mcp_layers.content_type"),
    ("resultType", "mcp_layers.result_type"),
    ("isError", "mcp_layers.is_error"),
    ("ackNote", "mcp_layers.ack_note"),
    ("serverMethod", "mcp_layers.server_method"),
    ("answerMs", "mcp_layers.answer_ms"),
    # SSE answers and GET streams: could the stream be resumed, and how soon.
    ("eventIds", "mcp_layers.sse.event_ids"),
    ("retryMs", "mcp_layers.sse.retry_ms"),
    ("streamClosedMs", "mcp_layers.stream_closed_ms"),
    ("scenario", "mcp_layers.scenario"),
    ("notes", "mcp_layers.notes"),
)


def own_attributes(record: dict[str, Any]) -> Attributes:
    """The record's own verdict as `mcp_layers.*` attributes."""
    attrs: Attributes = {}
    for name, key in _OWN:
        _put(attrs, key, record.get(name))
    injected = record.get("injected")
    attrs["mcp_layers.injected"] = injected is not None
    if isinstance(injected, dict):
        _put(attrs, "mcp_layers.injected.rule", injected.get("rule"))
        _put(attrs, "mcp_layers.injected.action", injected.get("action"))
    sse = record.get("sse")
    if isinstance(sse, dict):
        _put(attrs, "mcp_layers.sse.events", sse.get("events"))
        _put(attrs, "mcp_layers.sse.final", sse.get("final"))
        _put(attrs, "mcp_layers.sse.end", sse.get("end"))
        _put(attrs, "mcp_layers.sse.resumed", sse.get("resumed"))
    rpc = record.get("jsonrpc") or {}
    _put(attrs, "mcp_layers.jsonrpc.error_message", rpc.get("errorMessage"))
    return attrs


#: Operation-metric attributes (low cardinality: no ids, no session).
_METRIC_KEYS: Final = (
    "mcp.method.name",
    "error.type",
    "gen_ai.tool.name",
    "gen_ai.prompt.name",
    "gen_ai.operation.name",
    "rpc.response.status_code",
    "jsonrpc.protocol.version",
    "mcp.protocol.version",
    "network.protocol.name",
    "network.transport",
    "server.address",
    "server.port",
)
_SESSION_METRIC_KEYS: Final = (
    "mcp.protocol.version",
    "network.protocol.name",
    "jsonrpc.protocol.version",
    "error.type",
    "server.address",
    "server.port",
)


class SpanMapper:
    """Maps the records of one run, in recording order, to spans and measurements.

    It remembers (boundedly) each session's first moment and generation, and the trace
    of each record id, so that session spans cover their exchanges and a retry's link
    reaches an attempt in another session's trace.
    """

    def __init__(self, run: str, memory: int = DEFAULT_MEMORY) -> None:
        self.run = run
        self._memory = memory
        self._first: OrderedDict[str, int] = OrderedDict()  # session -> first start (ns)
        # session -> latest end of its exchanges (ns): records round times to 0.1 ms, so an
        # exchange that ended with its session can compute a hair later than the session
        self._last: OrderedDict[str, int] = OrderedDict()
        self._generation: OrderedDict[str, int] = OrderedDict()  # session -> lifelines ended
        # session -> end (ns) of its last ended lifeline: a record that began before it (the
        # standby GET stream its DELETE closed, written after the `session_end`) belongs to it
        self._ended_at: OrderedDict[str, int] = OrderedDict()
        self._trace_of: OrderedDict[int, int] = OrderedDict()  # record id -> trace id

    def map(self, record: dict[str, Any]) -> Mapped:
        out = Mapped()
        kind = record.get("kind")
        if kind == Kind.MODEL_TURN:
            # Not an MCP exchange: the MCP semantic conventions do not fit it, and it is not
            # counted among the exchanges. Not exported yet (docs/model-turns.md).
            return out
        if kind == Kind.SESSION_END:
            self._session_span(record, out)
        else:
            self._exchange_span(record, out)
        return out

    # -- ids ------------------------------------------------------------------------------

    def _session_key(self, session: str, generation: int | None = None) -> str:
        if generation is None:
            generation = self._generation.get(session, 0)
        return f"session\x00{session}\x00{generation}"

    def session_trace(self, session: str, generation: int | None = None) -> int:
        return trace_id_of(self.run, self._session_key(session, generation))

    def session_span_id(self, session: str, generation: int | None = None) -> int:
        return span_id_of(self.run, self._session_key(session, generation))

    def record_span_id(self, record_id: int) -> int:
        return span_id_of(self.run, f"record\x00{record_id}")

    # -- spans ---------------------------------------------------------------------------

    def _exchange_span(self, record: dict[str, Any], out: Mapped) -> None:
        record_id = int(record["id"])
        start, end = _times(record)
        session = record.get("session")
        # A session the server issued is a trace. The client's stand-in where there is none
        # (stateless servers, 2026-07-28) never ends, so it gets no session span and no
        # trace: each of its exchanges is a trace of its own, found together by
        # `mcp_layers.session`.
        if is_issued_session(session) and start <= self._ended_at.get(str(session), -1):
            # Begun within a lifeline that has ended since (a GET stream open when its
            # session ended is written when it closes, after the `session_end`): it belongs
            # to that lifeline's trace, under its span, though it may end a little after it.
            assert isinstance(session, str)
            ended = self._generation.get(session, 1) - 1
            trace_id = self.session_trace(session, ended)
            parent: int | None = self.session_span_id(session, ended)
        elif is_issued_session(session):
            assert isinstance(session, str)
            trace_id = self.session_trace(session)
            parent = self.session_span_id(session)
            self._remember(self._first, session, start, keep_first=True)
            self._remember(self._last, session, max(end, self._last.get(session, end)))
        else:
            trace_id, parent = trace_id_of(self.run, f"record\x00{record_id}"), None
        self._remember(self._trace_of, record_id, trace_id)
        kind = record.get("kind")
        method = record.get("serverMethod") if kind == Kind.RESPONSE else record.get("method")
        attrs = convention_attributes(record, method)
        attrs.update(own_attributes(record))
        target = record.get("tool") if method == "tools/call" else record.get("prompt")
        # A GET event stream is no JSON-RPC call: its span is named by its HTTP method.
        fallback = "GET" if kind == Kind.STREAM else str(kind)
        name = f"{method} {target}" if method and target else (method or fallback)
        etype = attrs.get("error.type")
        rpc = record.get("jsonrpc") or {}
        out.spans.append(
            SpanData(
                name=name,
                trace_id=trace_id,
                span_id=self.record_span_id(record_id),
                parent_span_id=parent,
                kind=SpanKind.SERVER if kind == Kind.RESPONSE else SpanKind.CLIENT,
                start_ns=start,
                end_ns=end,
                attributes=attrs,
                links=self._links(record, trace_id),
                error=etype is not None,
                status_message=(rpc.get("errorMessage") or record.get("outcome") or str(etype))
                if etype
                else None,
            )
        )
        if kind == Kind.REQUEST and record.get("durationMs") is not None:
            picked: Attributes = {k: attrs[k] for k in _METRIC_KEYS if k in attrs}
            out.measurements.append(Measurement(OPERATION_DURATION, (end - start) / 1e9, picked))
        counted: Attributes = {
            k: attrs[k] for k in ("mcp.method.name", "server.address", "server.port") if k in attrs
        }
        counted["mcp_layers.outcome"] = record.get("outcome") or "none"
        counted["mcp_layers.retry.origin"] = record.get("retryOrigin") or RetryOrigin.NONE.value
        counted["mcp_layers.injected"] = record.get("injected") is not None
        out.measurements.append(Measurement(EXCHANGES, 1, counted))

    def _links(self, record: dict[str, Any], own_trace: int) -> tuple[SpanLink, ...]:
        links: list[SpanLink] = []
        for field_name, how in (("retryOf", "retry_of"), ("continues", "continues")):
            other = record.get(field_name)
            if isinstance(other, int) and not isinstance(other, bool):
                trace = self._trace_of.get(other, own_trace)
                attrs: Attributes = {"mcp_layers.link": how}
                if how == "retry_of":
                    attrs["mcp_layers.retry.origin"] = str(record.get("retryOrigin"))
                links.append(SpanLink(trace, self.record_span_id(other), attrs))
        previous = record.get("previousSession")
        if isinstance(previous, str) and previous:
            # The lifeline that ended just before: its span ids are of the generation
            # that its `session_end` closed.
            gen = max(0, self._generation.get(previous, 1) - 1)
            key = f"session\x00{previous}\x00{gen}"
            links.append(
                SpanLink(
                    trace_id_of(self.run, key),
                    span_id_of(self.run, key),
                    {"mcp_layers.link": "previous_session"},
                )
            )
        return tuple(links)

    def _session_span(self, record: dict[str, Any], out: Mapped) -> None:
        session = record.get("session")
        start, end = _times(record)
        if not is_issued_session(session):
            return
        assert isinstance(session, str)
        first = self._first.pop(session, start)
        end = max(end, first, self._last.pop(session, end))
        trace_id, span_id = self.session_trace(session), self.session_span_id(session)
        self._remember(self._generation, session, self._generation.get(session, 0) + 1)
        self._remember(self._ended_at, session, end)
        attrs: Attributes = {}
        _put(attrs, "mcp.protocol.version", record.get("protocolVersion"))
        if session_id_allowed(record):
            _put(attrs, "mcp.session.id", session)
        attrs["jsonrpc.protocol.version"] = "2.0"
        put_network(attrs, record)
        reason = record.get("endReason")
        # A session the server forgot (404) ended in error; a DELETE or shutdown did not.
        if reason == EndReason.NOT_FOUND:
            attrs["error.type"] = "404"
        _put(attrs, "user_agent.original", record.get("userAgent"))
        attrs.update(own_attributes(record))
        _put(attrs, "mcp_layers.session.end_reason", reason)
        stats = record.get("sessionStats")
        if isinstance(stats, dict):
            for name, key in (
                ("posts", "posts"),
                ("getStreams", "get_streams"),
                ("serverRequests", "server_requests"),
                ("serverNotifications", "server_notifications"),
            ):
                _put(attrs, f"mcp_layers.session.{key}", stats.get(name))
        out.spans.append(
            SpanData(
                name=SESSION_SPAN_NAME,
                trace_id=trace_id,
                span_id=span_id,
                parent_span_id=None,
                kind=SpanKind.INTERNAL,
                start_ns=min(first, start),
                end_ns=end,
                attributes=attrs,
                error="error.type" in attrs,
                status_message="session lost (404)" if "error.type" in attrs else None,
            )
        )
        picked: Attributes = {k: attrs[k] for k in _SESSION_METRIC_KEYS if k in attrs}
        out.measurements.append(
            Measurement(SESSION_DURATION, (end - min(first, start)) / 1e9, picked)
        )

    def _remember(
        self, book: OrderedDict[Any, int], key: Any, value: int, keep_first: bool = False
    ) -> None:
        if keep_first and key in book:
            return
        book[key] = value
        book.move_to_end(key)
        while len(book) > self._memory:
            book.popitem(last=False)


def _times(record: dict[str, Any]) -> tuple[int, int]:
    start = ts_ns(record["ts"])
    duration = record.get("durationMs")
    end = start + round(float(duration) * 1_000_000) if duration is not None else start
    return start, end
