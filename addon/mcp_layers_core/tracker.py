"""Pair every MCP POST with its answer and turn each finished exchange into records.

Theory of operation. The adapter feeds `Tracker.handle` one event at a time (see
`events.py`) and writes whatever records come back. A POST whose body is JSON-RPC opens
an *exchange*; anything else is ignored, so the tracker never holds state for traffic
that is not MCP. An exchange moves through the phases of `TRANSITIONS` (one table, in
the spirit of h11's `_state.py`): it waits for headers, then for a buffered body or a
stream, and is *finished* exactly once, by its body, the end of its stream, an error or
the proxy stopping. Finishing classifies every request it carried and returns one record
per request (or one record for a POST of notifications or responses).

Sessions are keyed by a hash of `Mcp-Session-Id`. Where a server issues none (stateless
servers, 2026-07-28), the client connection stands in. A session remembers the client,
the negotiated protocol version and how many POSTs it has seen.

Errors: `handle` raises `LocalUsageError` only when the adapter breaks the event order
(a bug in the caller); whatever the peers send is recorded, never raised.
"""

from __future__ import annotations

import zlib
from collections import OrderedDict
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from . import limits
from .classify import Outcome, Verdict, classify_answer, http_error
from .events import (
    Event,
    FlowFailed,
    PostReceived,
    ProxyStopping,
    ResponseBody,
    ResponseStarted,
    StreamChunk,
    StreamEnded,
)
from .jsonrpc import (
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    NOT_JSON,
    client_of,
    id_key,
    is_notification,
    is_request,
    is_response,
    messages_of,
    meta_of,
    tool_of,
    try_loads,
)
from .records import add_verdict, base_record, sse_summary
from .redact import pseudonym
from .sse import SseAnomaly, SseEvent, SseParser


class LocalUsageError(Exception):
    """The caller fed events in an order no proxy can produce. A bug, not bad traffic."""


class Phase(Enum):
    #: The POST is in; no response headers yet.
    AWAITING_HEADERS = "awaiting_headers"
    #: Headers are in; a buffered body or a stream follows.
    AWAITING_BODY = "awaiting_body"
    #: Stream chunks are arriving.
    STREAMING = "streaming"
    #: Records written; nothing more will be recorded for this exchange.
    DONE = "done"


#: Which event moves an exchange from which phase to which. Anything else is misuse.
TRANSITIONS: dict[Phase, dict[type, Phase]] = {
    Phase.AWAITING_HEADERS: {
        ResponseStarted: Phase.AWAITING_BODY,
        FlowFailed: Phase.DONE,
        ProxyStopping: Phase.DONE,
    },
    Phase.AWAITING_BODY: {
        ResponseBody: Phase.DONE,
        StreamChunk: Phase.STREAMING,
        StreamEnded: Phase.DONE,
        FlowFailed: Phase.DONE,
        ProxyStopping: Phase.DONE,
    },
    Phase.STREAMING: {
        StreamChunk: Phase.STREAMING,
        StreamEnded: Phase.DONE,
        FlowFailed: Phase.DONE,
        ProxyStopping: Phase.DONE,
    },
    Phase.DONE: {},
}


@dataclass(slots=True)
class Settings:
    scenario: str | None = None
    raw_session_ids: bool = False
    max_body_bytes: int = limits.MAX_BODY_BYTES
    max_event_bytes: int = limits.MAX_EVENT_BYTES
    max_pending: int = limits.MAX_PENDING_EXCHANGES
    max_sessions: int = limits.MAX_SESSIONS


@dataclass(slots=True)
class Session:
    key: str
    client: str | None = None
    protocol_version: str | None = None
    posts: int = 0


@dataclass(slots=True)
class PendingRequest:
    rpc_id: object
    method: str
    tool: str | None
    verdict: Verdict | None = None


@dataclass(slots=True)
class Exchange:
    flow: str
    started: float
    server: str
    peer: str
    session: Session
    post_count: int
    kind: str  # request | notification | response
    method: str | None
    user_agent: str | None
    client: str | None
    protocol_version: str | None
    requests: list[PendingRequest]
    by_id: dict[tuple[str, object], PendingRequest]
    phase: Phase = Phase.AWAITING_HEADERS
    status: int | None = None
    content_type: str | None = None
    framed: bool = True
    notes: list[str] = field(default_factory=list)
    # Streaming state, set when the answer is text/event-stream.
    parser: SseParser | None = None
    inflater: Any = None  # zlib decompressobj for gzip/deflate streams
    stream_readable: bool = True
    events: int = 0
    stream_end: str | None = None
    unexpected_ids: list[object] = field(default_factory=list)
    saw_not_json: bool = False
    saw_non_rpc_json: bool = False
    skipped_event: bool = False


class Tracker:
    """The pairing and session state machine. Feed it events; write what it returns."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self._exchanges: OrderedDict[str, Exchange] = OrderedDict()
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        # A stateless 2025 client sends clientInfo once, in `initialize`, and may then
        # come back on another connection: remember it by address and user agent too.
        self._client_by_agent: OrderedDict[tuple[str, str | None], str] = OrderedDict()
        self._next_record_id = 1

    # -- queries the adapter needs ------------------------------------------------

    def is_tracked(self, flow: str) -> bool:
        """Is this flow an MCP exchange still being recorded?"""
        return flow in self._exchanges

    def wants_stream(self, flow: str) -> bool:
        """Should the adapter feed this flow's body chunk by chunk (an SSE answer)?"""
        x = self._exchanges.get(flow)
        return x is not None and x.parser is not None

    @property
    def pending(self) -> int:
        return len(self._exchanges)

    # -- the one verb ---------------------------------------------------------------

    def handle(self, event: Event) -> list[dict[str, Any]]:
        """Advance the state with one event; return the records it finished (maybe none)."""
        if isinstance(event, PostReceived):
            return self._post(event)
        if isinstance(event, ProxyStopping):
            return self._stop(event)
        x = self._exchanges.get(event.flow)
        if x is None:
            return []  # not MCP, or already written (an error hook after shutdown)
        nxt = TRANSITIONS[x.phase].get(type(event))
        if nxt is None:
            raise LocalUsageError(
                f"can't handle {type(event).__name__} for flow {event.flow} in phase {x.phase.name}"
            )
        x.phase = nxt
        if isinstance(event, StreamChunk):
            self._chunk(x, event.data)
            return []
        if isinstance(event, ResponseStarted):
            self._headers(x, event)
            return []
        if isinstance(event, ResponseBody):
            self._body(x, event)
            return self._finish(x, event.ts)
        if isinstance(event, StreamEnded):
            self._stream_closed(x, "complete" if x.framed else "eof")
            return self._finish(x, event.ts)
        assert isinstance(event, FlowFailed)
        return self._failed(x, event)

    # -- POST -------------------------------------------------------------------------

    def _post(self, ev: PostReceived) -> list[dict[str, Any]]:
        body = ev.body
        if body is None or len(body) > self.settings.max_body_bytes:
            return []  # too large to look at: not recognised as MCP (documented)
        # Cheap refusal first: most non-MCP POSTs are not JSON at all.
        if body.lstrip()[:1] not in (b"{", b"["):
            return []
        messages = messages_of(try_loads(body))
        if not messages:
            return []
        records = self._evict_if_full(ev.ts)
        headers = ev.headers
        session = self._session_for(headers.get("mcp-session-id"), ev.peer)
        session.posts += 1  # a batch counts once
        user_agent = headers.get("user-agent")
        requests = [m for m in messages if is_request(m)]
        first = requests[0] if requests else messages[0]
        client, version = self._identify(session, first, headers, ev.peer, user_agent)
        pending = [PendingRequest(m["id"], m["method"], tool_of(m)) for m in requests]
        if requests:
            kind, method = "request", None
        elif any(is_response(m) for m in messages):
            kind, method = "response", None
        else:
            kind = "notification"
            method = next((m["method"] for m in messages if is_notification(m)), None)
        x = Exchange(
            flow=ev.flow,
            started=ev.ts,
            server=ev.server,
            peer=ev.peer,
            session=session,
            post_count=session.posts,
            kind=kind,
            method=method,
            user_agent=user_agent,
            client=client,
            protocol_version=version,
            requests=pending,
            by_id={id_key(p.rpc_id): p for p in pending},
        )
        if len(messages) > 1:
            x.notes.append(f"batch:{len(messages)}")
        self._exchanges[ev.flow] = x
        return records

    def _session_for(self, session_header: str | None, peer: str) -> Session:
        if session_header:
            key = (
                session_header if self.settings.raw_session_ids else pseudonym("s-", session_header)
            )
        else:
            key = pseudonym("c-", peer)
        return self._session(key)

    def _session(self, key: str) -> Session:
        s = self._sessions.get(key)
        if s is None:
            s = self._sessions[key] = Session(key)
            if len(self._sessions) > self.settings.max_sessions:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(key)
        return s

    def _identify(
        self,
        session: Session,
        msg: dict[str, Any],
        headers: Any,
        peer: str,
        user_agent: str | None,
    ) -> tuple[str | None, str | None]:
        """The client and protocol version this POST speaks for, remembering what it teaches."""
        meta = meta_of(msg)
        agent = (peer.rsplit(":", 1)[0], user_agent)
        client = client_of(meta.get(META_CLIENT_INFO))
        if client is None and msg.get("method") == "initialize":
            params = msg.get("params")
            client = client_of(params.get("clientInfo")) if isinstance(params, dict) else None
        if client is not None:
            session.client = client
            self._client_by_agent[agent] = client
            if len(self._client_by_agent) > self.settings.max_sessions:
                self._client_by_agent.popitem(last=False)
        else:
            client = session.client or self._client_by_agent.get(agent)
        version = meta.get(META_PROTOCOL_VERSION)
        if not isinstance(version, str):
            version = headers.get("mcp-protocol-version") or session.protocol_version
        elif session.protocol_version is None:
            session.protocol_version = version
        return client, version

    # -- response ---------------------------------------------------------------------

    def _headers(self, x: Exchange, ev: ResponseStarted) -> None:
        x.status = ev.status
        x.framed = ev.framed
        ctype = ev.headers.get("content-type")
        x.content_type = ctype.split(";", 1)[0].strip().lower() if ctype else None
        issued = ev.headers.get("mcp-session-id")
        if issued and any(p.method == "initialize" for p in x.requests):
            self._adopt_session(x, issued)
        if x.content_type == "text/event-stream" and 200 <= ev.status < 300:
            x.parser = SseParser(self.settings.max_event_bytes)
            encoding = (ev.headers.get("content-encoding") or "identity").strip().lower()
            if encoding in ("gzip", "x-gzip", "deflate"):
                # wbits=47 accepts both gzip and zlib framing; chunks are raw wire bytes.
                x.inflater = zlib.decompressobj(wbits=47)
            elif encoding != "identity":
                x.stream_readable = False
                x.notes.append(f"encoded_stream:{encoding}")

    def _adopt_session(self, x: Exchange, issued: str) -> None:
        """`initialize` was answered with a session id: that POST opened the session."""
        old = x.session
        if old.posts == x.post_count:
            old.posts -= 1  # the connection stand-in no longer counts this POST
        session = self._session_for(issued, x.peer)
        session.client = x.client or session.client
        session.posts = max(session.posts, 1)
        x.session, x.post_count = session, 1

    def _body(self, x: Exchange, ev: ResponseBody) -> None:
        assert x.status is not None
        if not x.requests:
            return  # notifications and responses expect no answer (normally 202)
        if not 200 <= x.status < 300:
            verdict = http_error(ev.body if ev.body is not None else None)
            for p in x.requests:
                p.verdict = verdict
            return
        if ev.body is None:
            x.notes.append(f"body_over_cap:{ev.body_size}")
            for p in x.requests:
                p.verdict = Verdict(Outcome.UNINSPECTED)
            return
        answer = try_loads(ev.body) if ev.body else NOT_JSON
        if not ev.body:
            x.notes.append("empty_body")
        if len(x.requests) == 1 and not isinstance(answer, list):
            p = x.requests[0]
            p.verdict = classify_answer(p.method, p.rpc_id, answer)
            self._learn(x, p, answer)
            return
        # A batch: each answer finds its request by id.
        answers = answer if isinstance(answer, list) else [answer]
        for msg in answers:
            if is_response(msg) and isinstance(msg, dict):
                p = x.by_id.get(id_key(msg.get("id")))
                if p is not None and p.verdict is None:
                    p.verdict = classify_answer(p.method, p.rpc_id, msg)
                    self._learn(x, p, msg)
        for p in x.requests:
            if p.verdict is None:
                p.verdict = classify_answer(
                    p.method, p.rpc_id, answer if answer is NOT_JSON else None
                )

    def _learn(self, x: Exchange, p: PendingRequest, answer: object) -> None:
        """What a successful answer teaches about the session (the negotiated version)."""
        if p.method == "initialize" and isinstance(answer, dict):
            result = answer.get("result")
            version = result.get("protocolVersion") if isinstance(result, dict) else None
            if isinstance(version, str):
                x.protocol_version = x.session.protocol_version = version

    # -- stream -----------------------------------------------------------------------

    def _chunk(self, x: Exchange, data: bytes) -> None:
        if x.parser is None or not x.stream_readable or not data:
            return
        if x.inflater is not None:
            try:
                data = x.inflater.decompress(data, self.settings.max_event_bytes)
            except zlib.error:
                x.stream_readable = False
                x.notes.append("stream_decode_error")
                return
            if x.inflater.unconsumed_tail:
                # More than a whole event's cap out of one chunk: a bomb or a giant
                # event. Stop reading rather than inflate without bound.
                x.stream_readable = False
                x.notes.append("stream_inflate_over_cap")
                return
        for item in x.parser.feed(data):
            self._stream_item(x, item)

    def _stream_item(self, x: Exchange, item: SseEvent | SseAnomaly) -> None:
        if isinstance(item, SseAnomaly):
            if item.kind == "event_over_cap":
                x.skipped_event = True
                x.notes.append(f"sse_event_over_cap:{item.skipped_bytes}")
            else:
                x.notes.append(f"sse_{item.kind}:{item.skipped_bytes}")
            return
        x.events += 1
        if not item.data:
            return  # priming events and keep-alives carry no message
        value = try_loads(item.data)
        if value is NOT_JSON:
            x.saw_not_json = True
            return
        for msg in value if isinstance(value, list) else [value]:
            self._stream_message(x, msg)

    def _stream_message(self, x: Exchange, msg: object) -> None:
        if is_response(msg):
            assert isinstance(msg, dict)
            p = x.by_id.get(id_key(msg.get("id")))
            if p is not None and p.verdict is None:
                p.verdict = classify_answer(p.method, p.rpc_id, msg)
                self._learn(x, p, msg)
            elif p is None:
                x.unexpected_ids.append(msg.get("id"))
        elif not (is_request(msg) or is_notification(msg)):
            x.saw_non_rpc_json = True

    def _stream_closed(self, x: Exchange, how: str) -> None:
        x.stream_end = how
        if x.parser is not None and x.stream_readable:
            for item in x.parser.end():
                self._stream_item(x, item)

    def _stream_verdict(self, x: Exchange) -> Verdict:
        """No answer arrived on the stream for a request: say the most specific thing."""
        if not x.stream_readable or x.skipped_event:
            return Verdict(Outcome.UNINSPECTED)
        if x.unexpected_ids:
            x.notes.append(f"unexpected_response_id:{x.unexpected_ids[0]!r}")
            return Verdict(Outcome.INVALID_ENVELOPE)
        if x.saw_not_json:
            return Verdict(Outcome.MALFORMED_JSON)
        if x.saw_non_rpc_json:
            return Verdict(Outcome.INVALID_ENVELOPE)
        return Verdict(Outcome.STREAM_INCOMPLETE)

    # -- endings ----------------------------------------------------------------------

    def _failed(self, x: Exchange, ev: FlowFailed) -> list[dict[str, Any]]:
        if x.parser is not None:
            self._stream_closed(x, "error")
        elif x.status is not None and 200 <= x.status < 300:
            # mitmproxy buffered this body and the upstream broke inside it: the client
            # never got the upstream's answer (mitmproxy answers 502 instead).
            x.notes.append(f"upstream_broke_mid_body:{x.status}")
            x.status = None
        return self._finish(x, ev.ts)

    def _stop(self, ev: ProxyStopping) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        for x in list(self._exchanges.values()):
            x.notes.append("proxy_shutdown")
            if x.parser is not None:
                self._stream_closed(x, "error")
            x.phase = Phase.DONE
            records += self._finish(x, ev.ts)
        return records

    def _evict_if_full(self, ts: float) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        while len(self._exchanges) >= self.settings.max_pending:
            _, oldest = next(iter(self._exchanges.items()))
            oldest.notes.append("evicted_pending_cap")
            if oldest.parser is not None:
                self._stream_closed(oldest, "error")
            records += self._finish(oldest, ts)
        return records

    def _finish(self, x: Exchange, ts: float) -> list[dict[str, Any]]:
        """Classify what is still open and build the records. Called once per exchange."""
        self._exchanges.pop(x.flow, None)
        x.phase = Phase.DONE
        statuses = [] if x.status is None else [x.status]
        if x.kind != "request":
            return [self._record(x, ts, statuses, x.method, None, final=False)]
        records = []
        for p in x.requests:
            answered = p.verdict is not None
            verdict = self._final_verdict(x, p)
            record = self._record(x, ts, statuses, p.method, p.tool, final=answered)
            add_verdict(record, p.rpc_id, verdict)
            records.append(record)
        return records

    def _final_verdict(self, x: Exchange, p: PendingRequest) -> Verdict:
        if x.status is None:
            return Verdict(Outcome.NO_RESPONSE)
        if not 200 <= x.status < 300:
            return p.verdict or http_error(None)
        if p.verdict is not None:
            return p.verdict
        if x.parser is not None:
            return self._stream_verdict(x)
        # Headers arrived and the exchange ended without a body event (shutdown).
        return Verdict(Outcome.NO_RESPONSE)

    def _record(
        self,
        x: Exchange,
        ts: float,
        statuses: list[int],
        method: str | None,
        tool: str | None,
        *,
        final: bool,
    ) -> dict[str, Any]:
        record = base_record(
            record_id=self._next_record_id,
            kind=x.kind,
            ts=x.started,
            end_ts=ts,
            server=x.server,
            session=x.session.key,
            client=x.client,
            user_agent=x.user_agent,
            protocol_version=x.protocol_version,
            method=method,
            tool=tool,
            post_count=x.post_count,
            http_statuses=statuses,
            content_type=x.content_type,
            scenario=self.settings.scenario,
        )
        self._next_record_id += 1
        if x.parser is not None:
            record["sse"] = sse_summary(x.events, final, x.stream_end or "error")
        record["notes"] = list(x.notes)
        return record
