"""Pair every MCP POST with its answer and turn each finished story into records.

Theory of operation. The adapter feeds `Tracker.handle` one event at a time (see
`events.py`) and writes whatever it returns: records, each with the flow it belongs to
(`Emitted`). A POST whose body is JSON-RPC opens an *exchange*; so do a GET (an event
stream) and a DELETE on an MCP endpoint. Anything else is ignored, so no state is held
for traffic that is not MCP. Every move a pairing makes is one of
`lifecycle.TRANSITIONS` (one table, in the spirit of h11's `_state.py`): its flow waits
for headers, then for a buffered body or a stream, and ends exactly once, by its body,
the end of its stream, an error or the proxy stopping. A request may then wait beyond
its flow (`waiting.py`): *parked* for an answer on a GET stream of the same session (a
2024-11-05 `202` while the session's endpoint stream is open; a 2025-11-25 stream that
ended after an event id), or *held* when it was a rejected version probe, until the
client's next POST says whether that was negotiation. A session ends once, by
`lifecycle.SESSION_TRANSITIONS`.

The tracker decides; its collaborators compute and return values. `streams.read` says
what a stream's bytes carried; `pairing` says which answer each request gets and the
verdict on it; `conclude` turns a finished exchange into a frozen value (`finished.py`)
and `records.record_of` that value into the record. The books remember what later
records need: sessions (`sessions.py`), attempts (`retries.py`: what a retry repeats)
and each server's tool annotations; the tracker teaches them from each finished value.

Errors: `handle` raises `LocalUsageError` only when the caller breaks the event order
(a bug in the adapter); whatever the peers send is recorded, never raised.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import replace
from typing import Any, NamedTuple

from . import conclude, pairing, streams
from .budget import BufferBudget
from .classify import (
    Outcome,
    Verdict,
    answer_form_fault,
    http_error,
    violation,
)
from .decode import (
    StreamDecoder,
    answer_value,
    content_coding,
    has_bom,
    media_type,
    post_json,
    unread_body_note,
)
from .events import (
    Event,
    FlowFailed,
    OtherRequest,
    PostReceived,
    ProxyStopping,
    ResponseBody,
    ResponseStarted,
    StreamChunk,
    StreamEnded,
    Tick,
    WsEnded,
    WsMessage,
)
from .exchanges import Exchange, Parked, PendingRequest, StreamState
from .finished import Finished, FinishedRequest, FinishedSession, flow_of
from .identify import Agent, Identifier, host, named_version
from .jsonrpc import (
    NOT_JSON,
    id_key,
    is_notification,
    is_request,
    is_response,
    messages_of,
    prompt_of,
    tool_of,
    try_loads,
)
from .lifecycle import TRANSITIONS, Cause, LocalUsageError, Phase, Trigger, step
from .model_api import read_request
from .model_turns import ModelBook, ModelFlow
from .record import EndReason, Kind, NoteCode, RetryOrigin, StreamEnd, ToolSafety
from .records import record_of
from .request_headers import accept_types, header_names
from .retries import (
    Attempt,
    RetryBook,
    SessionView,
    ToolSafetyBook,
    call_signature,
    is_continuation,
    message_digest,
)
from .sessions import TOUCH_EVERY_S, Identity, Session, SessionBook
from .settings import Settings
from .streams import Answer, AnswerArray, Asked, Carrier, Endpoint, is_unnamed_error
from .versions import (
    V2024_11_05,
    answers_on_get_stream,
    batch_allowed,
    is_sessionless,
    names_version_per_request,
    resumes_streams,
)
from .waiting import Unclaimed, WaitingRoom

#: Joined `tools/call`s remembered for the model's retries (`Tracker._model_retry`).
MAX_JOINED = 4096

#: The events of a flow the tracker follows (the rest open an exchange, or none).
FlowEvent = ResponseStarted | ResponseBody | StreamChunk | StreamEnded | FlowFailed

__all__ = [
    "TRANSITIONS",
    "Emitted",
    "LocalUsageError",
    "Phase",
    "Settings",
    "Tracker",
    "records_of",
]

#: JSON-RPC codes a 2026-07-28 server answers during version negotiation (HTTP 400).
NEGOTIATION_CODES = frozenset({-32020, -32021, -32022})


class Emitted(NamedTuple):
    """A record `handle` finished, and the id of the flow it belongs to (None: the
    proxy's own end of a session, which has no flow)."""

    record: dict[str, Any]
    flow: str | None


def records_of(emitted: list[Emitted]) -> list[dict[str, Any]]:
    """The records alone, in order."""
    return [e.record for e in emitted]


class Tracker:
    """The pairing, session and retry state machine. Feed it events; write what it returns."""

    def __init__(self, settings: Settings | None = None) -> None:
        self._settings = settings or Settings()
        self._exchanges: OrderedDict[str, Exchange] = OrderedDict()
        self.sessions = SessionBook(
            self._settings.raw_session_ids,
            self._settings.max_sessions,
            self._settings.session_idle_s,
        )
        self.retries = RetryBook()
        self.safety = ToolSafetyBook()
        self.buffers = BufferBudget(self._settings.max_buffered_bytes)
        self._waiting = WaitingRoom(self._settings)
        self._who = Identifier(self.sessions, self._settings.max_sessions)
        self._next_record_id = 1
        #: Model API exchanges in the same proxy, and the join (`model_turns.py`).
        self.models = ModelBook(self._settings.max_event_bytes, self.buffers)
        #: record id -> (model turn, tool call id) of recent joined `tools/call`s: a repeat
        #: joined to another tool call is the model's decision, not a transport retry.
        self._joined: OrderedDict[int, tuple[int, str | None]] = OrderedDict()

    @property
    def settings(self) -> Settings:
        return self._settings

    @settings.setter
    def settings(self, value: Settings) -> None:
        self._settings = value
        self.sessions.raw_ids = value.raw_session_ids
        self.sessions.max_sessions = value.max_sessions
        self.sessions.idle_s = value.session_idle_s
        self.buffers.limit = value.max_buffered_bytes
        self._waiting.settings = value
        self._who.max_agents = value.max_sessions
        self.models.max_event_bytes = value.max_event_bytes

    # -- queries the adapter needs ------------------------------------------------

    def is_tracked(self, flow: str) -> bool:
        """Is this flow an MCP (or model API) exchange still being recorded?"""
        return flow in self._exchanges or flow in self.models.open

    def wants_stream(self, flow: str) -> bool:
        """Should the adapter feed this flow's body chunk by chunk (an SSE answer)?"""
        x = self._exchanges.get(flow)
        if x is None:
            m = self.models.open.get(flow)
            return m is not None and m.decoder is not None
        return x.stream is not None

    def wants_chunks(self, flow: str) -> bool:
        """Is there still anything to read in this flow's stream? (False: a stream shown
        not to be MCP, an undecodable one, or an exchange already written.)"""
        x = self._exchanges.get(flow)
        if x is None:
            m = self.models.open.get(flow)
            return m is not None and m.decoder is not None and m.decoder.readable
        return x.stream is not None and x.stream.decoder.readable

    def describe(self, flow: str) -> tuple[str, str | None, str | None] | None:
        """(session, client, protocol version) of a tracked flow, as its records show them."""
        x = self._exchanges.get(flow)
        return None if x is None else (x.session.key, x.client, x.protocol_version)

    def mark_injected(self, flow: str, injected: dict[str, str] | None) -> None:
        """A fault rule replaced, altered or dropped this exchange: its records say so
        (None takes the mark back: the rule ended up not touching the exchange)."""
        x = self._exchanges.get(flow)
        if x is not None:
            x.injected = injected

    @property
    def pending(self) -> int:
        """Exchanges still open plus requests parked for an answer elsewhere."""
        return len(self._exchanges) + len(self._waiting.parked)

    def phases(self) -> Counter[Phase]:
        """How many exchanges, and entries waiting beyond their flow, are in each phase."""
        counts = Counter(x.phase for x in self._exchanges.values())
        counts.update(self._waiting.phases())
        return counts

    # -- the one verb ---------------------------------------------------------------

    def handle(self, event: Event) -> list[Emitted]:
        """Advance the state with one event; return the records it finished (maybe none)."""
        ts = event.ts
        if isinstance(event, ProxyStopping):
            out = self._stop(event)
        elif isinstance(event, (PostReceived, OtherRequest, Tick)):
            out = self._expire(ts) if self._expiring(ts) else []
            if isinstance(event, PostReceived):
                out += self._post(event)
            elif isinstance(event, OtherRequest):
                out += self._other(event)
        elif isinstance(event, WsMessage):
            out = self._ws_message(event)
        elif isinstance(event, WsEnded):
            out = self._ws_ended(event)
        elif (x := self._exchanges.get(event.flow)) is not None:
            out = self._flow_event(x, event)
        elif (m := self.models.open.get(event.flow)) is not None:
            out = self._model_event(m, event)
        else:
            out = []  # not MCP, or already written (an error hook after shutdown)
        if self.sessions.dropped:
            # Sessions the book's cap pushed out while it took this event: their end is
            # written now, not at shutdown.
            out += self._end_sessions(self.sessions.take_dropped(), ts)
        return out

    def _expiring(self, now: float) -> bool:
        """Is a session's idle time or a wait's window possibly up at `now`? (Asked on
        every request and stream chunk, answered without a call into the books.)"""
        self.sessions.now = now
        waiting = self._waiting
        return now >= self.sessions.next_idle_check or bool(waiting.parked or waiting.unclaimed)

    def _flow_event(self, x: Exchange, event: FlowEvent) -> list[Emitted]:
        """An event of a tracked flow: the table moves it, then the event is read."""
        ts = event.ts
        session = x.session
        if ts - session.last_seen > TOUCH_EVERY_S:
            self.sessions.touch(session, ts)
        nxt = TRANSITIONS[x.phase].get(type(event))
        if nxt is None:
            nxt = step(x.phase, type(event), event.flow)  # raises LocalUsageError, named
        if nxt is not Phase.DONE:
            x.phase = nxt  # DONE is entered by `_finish` alone, once
        if isinstance(event, StreamChunk):
            # Waits expire on any traffic, not only on the next request.
            out = self._expire(ts) if self._expiring(ts) else []
            return out + self._chunk(x, event.data, ts)
        if isinstance(event, ResponseStarted):
            self._headers(x, event)
            return []
        if isinstance(event, ResponseBody):
            return self._body(x, event) + self._finish(x, ts)
        if isinstance(event, StreamEnded):
            framed = x.stream is None or x.stream.framed
            return self._stream_closed(x, StreamEnd.COMPLETE if framed else StreamEnd.EOF, ts)
        return self._failed(x, event)

    # -- requests ---------------------------------------------------------------------

    def _post(self, ev: PostReceived) -> list[Emitted]:
        value = post_json(ev.body, self._settings.max_body_bytes)
        messages = messages_of(value)  # None for NOT_JSON too
        if messages is None:
            return self._model_post(ev, value) if ev.path is not None else []
        out = self._evict_if_full(ev.ts) if self._full() else []
        user_agent = ev.headers.get("user-agent")
        agent = (host(ev.peer), user_agent)
        requests = [m for m in messages if is_request(m)]
        first = requests[0] if requests else messages[0]
        if self._waiting.held:
            out += self._release_held(
                agent, negotiation=first.get("method") == "initialize", why=Cause.CLIENT_RETURNED
            )
        session = self._who.session_for(
            ev.headers.get("mcp-session-id"),
            ev.query_session,
            ev.peer,
            user_agent,
            named_version(first, ev.headers),
        )
        session.server = ev.server
        session.posts += 1  # a batch counts once
        client, version = self._who.identify(session, first, ev.headers, agent)
        if requests:
            kind = Kind.REQUEST
        elif any(is_response(m) for m in messages):
            kind = Kind.RESPONSE
        else:
            kind = Kind.NOTIFICATION
        x = Exchange(
            flow=ev.flow,
            started=ev.ts,
            server=ev.server,
            peer=ev.peer,
            session=session,
            kind=kind,
            user_agent=user_agent,
            client=client,
            protocol_version=version,
            post_count=session.posts,
            header_names=header_names(ev.headers),
            accept=accept_types(ev.headers),
        )
        if kind is Kind.REQUEST:
            for msg in requests:
                self._open_request(x, msg, version)
        else:
            x.record_id = self._take_record_id()
            if kind is Kind.NOTIFICATION:
                # A `response` record names the server's method it answers (`serverMethod`),
                # never a notification that shared its batch.
                x.method = next((m["method"] for m in messages if is_notification(m)), None)
            self._match_answers(x, [m for m in messages if is_response(m)])
        if len(messages) > 1:
            x.notes.add(NoteCode.BATCH, len(messages))
        if any([m.get("method") == "subscriptions/listen" for m in requests]):
            x.notes.add(NoteCode.SUBSCRIPTION)  # long by design: not slow, not hung
        if has_bom(ev.body):
            x.notes.add(NoteCode.REQUEST_BOM)  # the server may have read it, or refused it
        self._exchanges[ev.flow] = x
        return out

    def _open_request(self, x: Exchange, msg: dict[str, Any], version: str | None) -> None:
        method, params = msg["method"], msg.get("params")
        p = PendingRequest(msg["id"], method, tool_of(msg), self._take_record_id())
        p.prompt = prompt_of(msg)
        p.task = isinstance(params, dict) and isinstance(params.get("task"), dict)
        if self._settings.record_bodies:
            p.message = msg
        if p.method == "tools/call":
            p.safety = self.safety.safety(x.server, p.tool)
            p.model_call = self.models.join(p.tool, params)
        if method == "initialize":
            p.previous_session = self.sessions.take_lost(self._identity(x))
        if method == "server/discover" or names_version_per_request(version):
            x.negotiating = True  # a rejection here may be version negotiation
        # record_id, rpc_id, digest, session, start, attempt, statuses
        p.attempt = Attempt(
            p.record_id, p.rpc_id, message_digest(msg), x.session.key, x.started, 1, []
        )
        p.retry = self.retries.begin(
            ((x.client, x.user_agent, host(x.peer), x.server), call_signature(method, params)),
            p.attempt,
            continuation=is_continuation(params),
            session=SessionView(x.session.real, x.session.created, self._session_state),
            safety=p.safety or ToolSafety.UNKNOWN,
        )
        if p.model_call is not None:
            self._model_retry(p, p.model_call.turn, p.model_call.tool_call_id)
        x.requests.append(p)
        x.by_id[id_key(p.rpc_id)] = p

    def _model_retry(self, p: PendingRequest, turn: int, call_id: str | None) -> None:
        """A repeat of a `tools/call` carrying out another model tool call than its
        predecessor did is the model asking again (`retryOrigin: model`), not a transport
        retry: neither `Retry-After` nor the tool's safety is the client's to answer for."""
        prev = self._joined.get(p.retry.retry_of) if p.retry.retry_of is not None else None
        self._joined[p.record_id] = (turn, call_id)
        if len(self._joined) > MAX_JOINED:
            self._joined.popitem(last=False)
        if prev is not None and prev != (turn, call_id):
            p.retry = replace(p.retry, origin=RetryOrigin.MODEL, after_ms_honored=None, unsafe=None)

    # -- model API exchanges (`model_turns.py`) ---------------------------------------

    def _model_post(self, ev: PostReceived, value: Any) -> list[Emitted]:
        """A POST that is not MCP: a model request, if its path and body say so. `value`:
        its body's JSON, parsed once for both readers."""
        assert ev.path is not None
        unread = ev.body is None or len(ev.body) > self._settings.max_body_bytes
        req = read_request(ev.path, value, ev.body_size, unread=unread)
        if req is None:
            return []
        pushed = self.models.start(
            ev.flow,
            self._take_record_id(),
            ev.ts,
            ev.server,
            ev.headers.get("user-agent"),
            req,
        )
        return [] if pushed is None else [self._model_record(pushed, ev.ts, None)]

    def _model_event(self, m: ModelFlow, event: FlowEvent) -> list[Emitted]:
        book = self.models
        if isinstance(event, ResponseStarted):
            book.headers(m, event.status, event.headers)
            return []
        if isinstance(event, StreamChunk):
            book.chunk(m, event.data, event.ts)
            return []
        if isinstance(event, ResponseBody):
            book.body(m, event.body, event.body_size, event.ts)
            return [self._model_record(m, event.ts, None)]
        if isinstance(event, StreamEnded):
            return [self._model_record(m, event.ts, None)]
        return [self._model_record(m, event.ts, event.reason)]

    def _model_record(self, m: ModelFlow, ts: float, failed: str | None) -> Emitted:
        record = self.models.finish(m, ts, failed=failed)
        record["scenario"] = self._settings.scenario
        # A WebSocket turn is one of many on its connection's flow: no flow comment.
        return Emitted(record, None if m.ws is not None else m.flow)

    def _ws_message(self, ev: WsMessage) -> list[Emitted]:
        """Responses over WebSocket: a client's `response.create` opens a turn, the
        server's events answer it, its terminal event (or the next turn) ends it."""
        book = self.models
        key = book.ws.get(ev.flow)
        m = book.open.get(key) if key is not None else None
        if not ev.from_client:
            if m is None:
                return []
            book.ws_event(m, ev.data, ev.ts)
            return [self._model_record(m, ev.ts, None)] if m.reader.terminal else []
        value = NOT_JSON if ev.data is None else try_loads(ev.data)
        if ev.data is not None and not (
            isinstance(value, dict) and value.get("type") == "response.create"
        ):
            return []  # another client frame: not a turn
        size = 0 if ev.data is None else len(ev.data)
        req = read_request(ev.path, value, size, unread=ev.data is None)
        if req is None:
            return []
        out = [] if m is None else [self._model_record(m, ev.ts, "superseded")]
        req.streamed = True
        record_id = self._take_record_id()
        turn = f"{ev.flow}/{record_id}"
        pushed = book.start(turn, record_id, ev.ts, ev.server, ev.user_agent, req)
        if pushed is not None:
            out.append(self._model_record(pushed, ev.ts, None))
        book.open[turn].ws = ev.flow
        book.ws[ev.flow] = turn
        return out

    def _ws_ended(self, ev: WsEnded) -> list[Emitted]:
        key = self.models.ws.get(ev.flow)
        m = self.models.open.get(key) if key is not None else None
        return [] if m is None else [self._model_record(m, ev.ts, ev.reason)]

    def _session_state(self, key: str) -> tuple[EndReason | None, bool] | None:
        found = self.sessions.find(key)
        return None if found is None else (found.ended, found.real)

    def _match_answers(self, x: Exchange, answers: list[dict[str, Any]]) -> None:
        """A client's POSTed answers to server requests seen earlier on a stream."""
        for msg in answers:
            asked = self._waiting.answered((x.session.key, id_key(msg.get("id"))))
            if asked is not None and x.answered is None:
                server_method, asked_at = asked
                x.answered = (server_method, round((x.started - asked_at) * 1000, 1))

    def _other(self, ev: OtherRequest) -> list[Emitted]:
        """A GET may be an MCP event stream; a DELETE with a session ends that session."""
        session_id = ev.headers.get("mcp-session-id")
        if ev.method == "DELETE" and session_id:
            kind = Kind.SESSION_END
        elif ev.method == "GET" and (
            session_id
            or ev.query_session
            or "text/event-stream" in ev.headers.get("accept", "").lower()
        ):
            kind = Kind.STREAM
        else:
            return []
        out = self._evict_if_full(ev.ts) if self._full() else []
        user_agent = ev.headers.get("user-agent")
        named = named_version(None, ev.headers)
        session = self._who.session_for(
            # A DELETE names the session it ends, whatever the version says.
            session_id,
            ev.query_session,
            ev.peer,
            user_agent,
            named if kind is Kind.STREAM else None,
        )
        session.server = ev.server
        self._exchanges[ev.flow] = Exchange(
            flow=ev.flow,
            started=ev.ts,
            server=ev.server,
            peer=ev.peer,
            session=session,
            kind=kind,
            user_agent=user_agent,
            client=session.client,
            # The version the GET or DELETE was sent under, as a POST's record shows it.
            protocol_version=named or session.protocol_version,
            header_names=header_names(ev.headers),
            accept=accept_types(ev.headers),
        )
        return out

    def _identity(self, x: Exchange) -> Identity:
        return (host(x.peer), x.user_agent, x.client)

    def _take_record_id(self) -> int:
        record_id = self._next_record_id
        self._next_record_id += 1
        return record_id

    # -- response ---------------------------------------------------------------------

    def _headers(self, x: Exchange, ev: ResponseStarted) -> None:
        x.status, x.headers_at = ev.status, ev.ts
        x.content_type = media_type(ev.headers.get("content-type"))
        x.retry_after = ev.headers.get("retry-after")
        x.content_coding = content_coding(ev.headers.get("content-encoding"))
        if x.kind is Kind.REQUEST:
            x.fault = answer_form_fault(ev.status, x.content_type)
        issued = ev.headers.get("mcp-session-id")
        if (
            issued
            and x.kind is Kind.REQUEST
            and any([p.method == "initialize" for p in x.requests])
        ):
            self._adopt_session(x, issued)
        forgotten = ev.status == 404 and x.session.real and x.session.ended is None
        if forgotten and x.kind is not Kind.SESSION_END and not is_sessionless(x.protocol_version):
            # The server forgot the session (2025 rule: 404 means "initialize again").
            self.sessions.lost(x.session)
            x.session_lost = True
            x.notes.add(NoteCode.SESSION_LOST)
        # The content-type check: only an event stream is read as one.
        if x.content_type == "text/event-stream":
            # Parsed whatever the status: the verdict stays HTTP_ERROR, but the events
            # (and a JSON-RPC error among them) are worth recording.
            if x.kind is Kind.STREAM:
                x.session.get_streams += 1
            decoder = StreamDecoder(x.content_coding, self._settings.max_event_bytes, self.buffers)
            x.stream = StreamState(decoder, ev.framed)
            if self._settings.record_bodies:
                x.stream.transcript = []
            if decoder.failure is not None:
                x.notes.add_note(decoder.failure)

    def _adopt_session(self, x: Exchange, issued: str) -> None:
        """`initialize` was answered with a session id: that POST opened the session."""
        old = x.session
        if old.posts == x.post_count:
            old.posts -= 1  # the connection stand-in no longer counts this POST
        session = self.sessions.real(issued, x.started)
        session.client = x.client or session.client
        session.identity = self._identity(x)
        session.posts = max(session.posts, 1)
        x.session, x.post_count = session, 1
        for p in x.requests:
            if p.attempt is not None:
                p.attempt.session = session.key

    def _body(self, x: Exchange, ev: ResponseBody) -> list[Emitted]:
        """A buffered answer: each request gets its verdict, or is parked (a `202`)."""
        assert x.status is not None
        x.had_body = bool(ev.body) or ev.body_size > 0
        if not x.requests:
            return []  # notifications and answers expect no body (normally 202)
        if not 200 <= x.status < 300:
            verdict = http_error(ev.body)
            for p in x.requests:
                p.verdict = verdict
            return []
        if x.fault is not None:
            out: list[Emitted] = []
            for p in x.requests:
                if self._answered_on_legacy_stream(x, p):
                    out += self._park(x, p, ev.ts, Cause.ACCEPTED)
                else:
                    # The client rejects or discards this answer whatever it says.
                    p.verdict = violation(x.fault, http_error(ev.body))
            return out
        if ev.body is None:
            # Over the cap, undecodable, or streamed past the addon unseen (size 0).
            x.notes.add_note(
                unread_body_note(ev.body_size, x.content_coding, self._settings.max_body_bytes)
            )
            for p in x.requests:
                p.verdict = Verdict(Outcome.UNINSPECTED)
            return []
        answer = answer_value(ev.body)
        if not ev.body:
            x.notes.add(NoteCode.EMPTY_BODY)
        self._settle(x, pairing.pair_body(x, answer))
        return []

    def _answered_on_legacy_stream(self, x: Exchange, p: PendingRequest) -> bool:
        """2024-11-05: a POST is only acknowledged ("Accepted"); its answer comes on the
        session's GET stream (a client reads nothing else) while one is open, or came
        on one already, which may have ended before the 202 reached the proxy."""
        if x.session.legacy_streams:
            return True
        early = self._waiting.has_unclaimed((x.session.key, id_key(p.rpc_id)))
        return early and answers_on_get_stream(x.session.protocol_version)

    def _settle(self, x: Exchange, pairs: list[tuple[PendingRequest, object]]) -> None:
        """Each request of `pairs` gets its answer: judge it, and learn from it (in
        order: an `initialize` answer sets the version its batch-mates are judged by)."""
        for p, answer in pairs:
            p.verdict = pairing.judge(x, p, answer)
            self._learn(x, p, answer)

    def _learn(self, x: Exchange, p: PendingRequest, answer: object) -> None:
        """What an answer teaches: the negotiated version, the tools' annotations."""
        if self._settings.record_bodies:
            p.answer = answer
        if not isinstance(answer, dict):
            return
        result = answer.get("result")
        if p.method == "initialize" and isinstance(result, dict):
            version = result.get("protocolVersion")
            if isinstance(version, str):
                x.protocol_version = x.session.protocol_version = version
        elif p.method == "tools/list" and self._client_took(x, p):
            self.safety.learn(x.server, result)

    @staticmethod
    def _client_took(x: Exchange, p: PendingRequest) -> bool:
        """Did the client take `p`'s answer as a success? A result it refused, or one an
        error status or a wrong form kept from it, declared nothing to it. (An answer on
        a GET stream is judged by that stream, not by its POST's `202`.)"""
        if p.verdict is None or p.verdict.outcome is not Outcome.SUCCESS:
            return False
        if p.via_stream:
            return True
        return x.fault is None and x.status is not None and 200 <= x.status < 300

    # -- streams ------------------------------------------------------------------------

    def _chunk(self, x: Exchange, data: bytes, ts: float) -> list[Emitted]:
        if data:
            x.had_body = True
        s = x.stream
        if s is None or not s.decoder.readable or not data:
            return []
        return self._take(x, s, streams.read(x, s, data, ts), ts)

    def _take(
        self, x: Exchange, s: StreamState, found: list[streams.Found], ts: float
    ) -> list[Emitted]:
        """Act on what `x`'s stream carried."""
        out: list[Emitted] = []
        for item in found:
            if type(item) is Answer:
                out += self._stream_answer(x, s, item.msg, ts, item.carrier)
            elif type(item) is Asked:
                x.session.server_requests += 1
                self._waiting.asked((x.session.key, id_key(item.rpc_id)), item.method, ts)
            elif type(item) is Endpoint:
                self._legacy_endpoint(x, s, item.session_id, ts)
            elif type(item) is AnswerArray:
                if batch_allowed(x.protocol_version):  # as known now, not when read
                    out += self._take(x, s, streams.unpack(x, s, item.value), ts)
                else:
                    # Where batches do not exist, an array answers no request of the POST
                    # it came on, whatever it names: the rule of a JSON body.
                    self._settle(x, pairing.unsettled(x, item.value))
            else:  # a notification
                x.session.server_notifications += 1
        return out

    def _stream_answer(
        self, x: Exchange, s: StreamState, msg: dict[str, Any], ts: float, carrier: Carrier
    ) -> list[Emitted]:
        """An answer on a stream finds its request: one of this POST's (by id), a request
        parked for it, or none yet (kept for a POST whose 202 is still to come)."""
        p = x.by_id.get(id_key(msg.get("id")))
        if p is not None:
            if p.verdict is None:
                if carrier.hidden is not None:
                    s.wrong_event = s.wrong_event or carrier.hidden  # why, if none follows
                else:
                    p.verdict = pairing.judge_carried(x, p, msg, carrier)
                    self._learn(x, p, msg)
            return []
        if x.kind is Kind.REQUEST and is_unnamed_error(msg):
            if carrier.hidden is not None:
                s.wrong_event = s.wrong_event or carrier.hidden
            elif s.unnamed_error is None:
                # It answers every request no answer names, as in a JSON body; which
                # those are is known when the stream ends (`_settle_unnamed`).
                s.unnamed_error = msg
            return []
        key = (x.session.key, id_key(msg.get("id")))
        parked = self._waiting.claim(key)
        if parked is not None:
            s.answers += pairing.readable(parked.x, carrier)
            return self._answer_parked(parked, msg, ts, carrier)
        if x.kind is Kind.STREAM:
            # Delivered now, even if its POST is parked only later (the 202 may reach
            # the proxy after this event, or after this stream's end): kept with how it
            # came, and counted now, while this stream's record is still to be written.
            s.answers += pairing.readable(x, carrier)
            self._waiting.keep_unclaimed(key, Unclaimed(msg, carrier, ts))
        elif carrier.hidden is None and not s.has_unexpected_id:
            # Only the first is reported; keeping them all grew without bound
            # on a long stream of wrong ids (found by tests/hardening).
            s.unexpected_id, s.has_unexpected_id = msg.get("id"), True
        return []

    def _answer_parked(
        self, parked: Parked, msg: dict[str, Any], ts: float, c: Carrier
    ) -> list[Emitted]:
        """A parked request's answer came, on the stream `c` says, maybe in an event its
        client skips (a 2024-11-05 answer in an event not named `message`)."""
        p, x = parked.p, parked.x
        if c.hidden is not None:
            p.verdict = violation(c.hidden)
        else:
            p.verdict = pairing.judge_carried(x, p, msg, c)
            p.resumed = parked.resumable
            self._learn(x, p, msg)
        return [self._emit(self._conclude_request(x, p, ts, answered=True))]

    def _settle_unnamed(self, x: Exchange) -> None:
        """The stream ends (or its client hung up): an error without an id it carried
        answers every request of the POST that no answer named."""
        s = x.stream
        if s is not None and s.unnamed_error is not None:
            self._settle(x, pairing.unsettled(x, s.unnamed_error))

    def _legacy_endpoint(self, x: Exchange, s: StreamState, session_id: str, ts: float) -> None:
        """2024-11-05: the stream named the POST URL, and with it the session."""
        x.session.get_streams = max(0, x.session.get_streams - 1)
        if s.endpoint:
            x.session.legacy_streams = max(0, x.session.legacy_streams - 1)
        x.session = self.sessions.real(session_id, ts)
        x.session.get_streams += 1
        # While this stream is open, the session's POSTs are answered on it.
        x.session.legacy_streams += 1
        s.endpoint = True
        x.session.protocol_version = x.session.protocol_version or V2024_11_05
        x.protocol_version = x.protocol_version or x.session.protocol_version

    def _stream_closed(self, x: Exchange, how: StreamEnd, ts: float) -> list[Emitted]:
        """The flow's stream (or body) ended `how`: read what is left, then finish."""
        s = x.stream
        out: list[Emitted] = []
        if s is not None:
            out += self._take(x, s, streams.end(x, s, how, ts), ts)
            self._settle_unnamed(x)
        if x.kind is Kind.STREAM:
            if s is not None and s.endpoint:
                s.endpoint = False
                x.session.legacy_streams = max(0, x.session.legacy_streams - 1)
            out += self._orphan_legacy_requests(x.session, ts)
        elif (
            x.kind is Kind.REQUEST
            and s is not None
            and s.saw_event_id
            and x.status is not None
            and 200 <= x.status < 300
            and x.fault is None  # a client that discarded the stream resumes nothing
            and resumes_streams(x.protocol_version)
        ):
            # 2025-11-25 polling: a stream with event ids may resume on a GET; the story
            # of its unanswered requests is not over yet.
            for p in x.requests:
                if p.verdict is None:
                    out += self._park(x, p, ts, Cause.RESUMABLE)
        return out + self._finish(x, ts)

    # -- parked requests ----------------------------------------------------------------

    def _park(self, x: Exchange, p: PendingRequest, ts: float, cause: Cause) -> list[Emitted]:
        """Wait for `p`'s answer on another stream (it may even be there already)."""
        step(x.phase, cause, x.flow)  # the flow's phase allows it; the entry waits
        p.via_stream = True
        parked = Parked(x, p, ts, resumable=cause is Cause.RESUMABLE)
        early, evicted = self._waiting.park((x.session.key, id_key(p.rpc_id)), parked)
        if early is not None:
            # The GET stream delivered the answer before the POST's own 202 was processed.
            return self._answer_parked(parked, early.msg, early.seen, early.carrier)
        if evicted is not None:
            return self._finish_parked(evicted, ts, NoteCode.EVICTED_PARKED_CAP)
        return []

    def _finish_parked(self, parked: Parked, ts: float, note: NoteCode) -> list[Emitted]:
        parked.x.notes.add_once(note)
        return [self._emit(self._conclude_request(parked.x, parked.p, ts, answered=False))]

    def _orphan_legacy_requests(self, session: Session, ts: float) -> list[Emitted]:
        """The GET stream that was to carry 2024-11-05 answers is gone: they are lost."""
        out: list[Emitted] = []
        for parked in self._waiting.stream_gone(session.key):
            out += self._finish_parked(parked, ts, NoteCode.ANSWER_STREAM_CLOSED)
        return out

    def _expire(self, now: float) -> list[Emitted]:
        idle = self.sessions.idle(now)
        out = self._end_sessions(idle, now) if idle else []
        for parked in self._waiting.expire(now):
            out += self._finish_parked(parked, now, NoteCode.NOT_RESUMED)
        return out

    # -- endings ----------------------------------------------------------------------

    def _failed(self, x: Exchange, ev: FlowFailed) -> list[Emitted]:
        if x.stream is not None:
            self._settle_unnamed(x)
            if x.requests and all(p.verdict is not None for p in x.requests):
                # Every answer was delivered, then a side hung up (SDK clients close the
                # stream on the final event): the stream did its job.
                x.notes.add(NoteCode.CLOSED_AFTER_ANSWER)
                return self._stream_closed(x, StreamEnd.COMPLETE, ev.ts)
            return self._stream_closed(x, StreamEnd.ERROR, ev.ts)
        if x.status is not None and 200 <= x.status < 300 and x.kind is Kind.REQUEST:
            # mitmproxy buffered this body and the upstream broke inside it: the client
            # never got the upstream's answer (mitmproxy answers 502 instead).
            x.notes.add(NoteCode.UPSTREAM_BROKE_MID_BODY, x.status)
            x.status = None
        return self._finish(x, ev.ts)

    def _stop(self, ev: ProxyStopping) -> list[Emitted]:
        # Parked requests first: closing their GET stream below would otherwise call
        # them `answer_stream_closed`, when it is the proxy that stopped.
        out = self._finish_all_parked(ev.ts)
        for m in list(self.models.open.values()):
            m.notes.append(NoteCode.PROXY_SHUTDOWN.value)
            out.append(self._model_record(m, ev.ts, None))
        for x in list(self._exchanges.values()):
            x.notes.add(NoteCode.PROXY_SHUTDOWN)
            if x.stream is not None:
                out += self._stream_closed(x, StreamEnd.ERROR, ev.ts)
            else:
                out += self._finish(x, ev.ts)
        out += self._finish_all_parked(ev.ts)  # streams closed just now may park
        for agent in list(self._waiting.held):
            out += self._release_held(agent, negotiation=False, why=ProxyStopping)
        # Last: a stream closed above may still have parked a request its answer awaited.
        self._waiting.drop_unclaimed(ProxyStopping)
        for session in self.sessions.live_real():
            self.sessions.end(session, EndReason.SHUTDOWN)
            out.append(self._emit(self._conclude_session(session, None, ev.ts, ev.ts, None)))
        return out

    def _end_sessions(self, sessions: list[Session], now: float) -> list[Emitted]:
        """The `session_end` of sessions that ended idle or were forgotten past the cap:
        `ts` is their last traffic, `durationMs` how long after it they were ended."""
        return [
            self._emit(self._conclude_session(s, None, min(s.last_seen, now), now, None))
            for s in sessions
        ]

    def _finish_all_parked(self, ts: float) -> list[Emitted]:
        out: list[Emitted] = []
        for parked in self._waiting.drain(ProxyStopping):
            out += self._finish_parked(parked, ts, NoteCode.PROXY_SHUTDOWN)
        return out

    def _full(self) -> bool:
        return len(self._exchanges) >= self._settings.max_pending

    def _evict_if_full(self, ts: float) -> list[Emitted]:
        out: list[Emitted] = []
        while len(self._exchanges) >= self._settings.max_pending:
            oldest = next(iter(self._exchanges.values()))
            oldest.notes.add(NoteCode.EVICTED_PENDING_CAP)
            if oldest.stream is not None:
                out += self._stream_closed(oldest, StreamEnd.ERROR, ts)
            else:
                out += self._finish(oldest, ts)
        return out

    def _finish(self, x: Exchange, ts: float) -> list[Emitted]:
        """Write what this exchange still owes. Called once per exchange."""
        self._exchanges.pop(x.flow, None)
        phase, x.phase = x.phase, Phase.DONE
        if x.stream is not None:
            x.stream.decoder.release()  # its bytes leave the budget with it
        finished: list[Finished] = []
        if x.kind is Kind.SESSION_END:
            finished.append(self._conclude_delete(x, ts))
        elif x.kind is Kind.REQUEST:
            finished += [
                self._conclude_request(x, p, ts, answered=p.verdict is not None)
                for p in x.requests
                if not p.via_stream
            ]
        elif x.kind is Kind.STREAM:
            finished.append(conclude.stream(x, ts, self._take_record_id(), self._settings.scenario))
        else:
            finished.append(conclude.message(x, ts, self._settings.scenario))
        if x.session_lost:
            finished.append(self._conclude_session(x.session, x.status, x.started, ts, x))
        if x.negotiating and finished and _is_negotiation_candidate(finished[0]):
            step(phase, Cause.PROBE_REJECTED, x.flow)
            overflow = self._waiting.hold((host(x.peer), x.user_agent), finished)
            if overflow is not None:
                # A client that never comes back must not keep its records (and our
                # memory) until the proxy stops: past the cap the oldest are written as
                # if the proxy stopped.
                return self._release_held(overflow, negotiation=False, why=Cause.EVICTED)
            return []
        return [self._emit(f) for f in finished]

    # -- concluding: a frozen value, then what the books learn from it -------------------

    def _conclude_request(
        self, x: Exchange, p: PendingRequest, ts: float, *, answered: bool
    ) -> FinishedRequest:
        if answered and p.verdict is not None:
            verdict = p.verdict
        else:
            verdict, note = conclude.unanswered(x, p)
            if note is not None:
                x.notes.add_once(note.code, note.detail)  # once per exchange, not per request
        f = conclude.request(x, p, verdict, ts, answered, self._settings)
        if p.attempt is not None:
            self.retries.finish(
                p.attempt, ts, f.verdict.outcome, list(f.statuses), f.retry_after_ms
            )
        return f

    def _conclude_delete(self, x: Exchange, ts: float) -> FinishedSession:
        f = conclude.delete(x, ts, self._take_record_id(), self._settings.scenario)
        if f.end_reason is not None:
            self.sessions.end(x.session, EndReason.DELETE)
        return f

    def _conclude_session(
        self, session: Session, status: int | None, start: float, ts: float, x: Exchange | None
    ) -> FinishedSession:
        return conclude.session(
            session, status, start, ts, x, self._take_record_id(), self._settings.scenario
        )

    def _emit(self, f: Finished, negotiation: bool | None = None) -> Emitted:
        """Every record is built here, with the flow it is of."""
        return Emitted(record_of(f, negotiation), flow_of(f))

    def _release_held(self, agent: Agent, *, negotiation: bool, why: Trigger) -> list[Emitted]:
        if not self._waiting.held:
            return []  # the usual case, on every POST
        return [self._emit(f, negotiation) for f in self._waiting.release(agent, why)]


def _is_negotiation_candidate(f: Finished) -> bool:
    if not isinstance(f, FinishedRequest):
        return False  # a session's end (a 404) is not a probe
    if not f.statuses or not 400 <= f.statuses[-1] < 500:
        return False
    return f.method == "server/discover" or f.verdict.error_code in NEGOTIATION_CODES
