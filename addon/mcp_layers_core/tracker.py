"""Pair every MCP POST with its answer and turn each finished story into records.

Theory of operation. The adapter feeds `Tracker.handle` one event at a time (see
`events.py`) and writes whatever records come back. A POST whose body is JSON-RPC opens
an *exchange*; so do a GET (an event stream) and a DELETE on an MCP endpoint. Anything
else is ignored, so no state is held for traffic that is not MCP. Every move a pairing
makes is one of `lifecycle.TRANSITIONS` (one table, in the spirit of h11's `_state.py`):
its flow waits for headers, then for a buffered body or a stream, and ends exactly once,
by its body, the end of its stream, an error or the proxy stopping. A request may then
wait beyond its flow (`waiting.py`): *parked* for an answer on a GET stream of the same
session (a 2024-11-05 `202` while the session's endpoint stream is open; a 2025-11-25
stream that ended after an event id), or *held* when it was a rejected version probe,
until the client's next POST says whether that was negotiation.

Finishing is one path (`_finish` -> `_conclude_*`): the exchange's state is copied into
a frozen value (`finished.py`), the books learn from it explicitly (`retries.finish`,
the session book), and the record is a pure function of the value (`records.py`).
Around that, three books remember what later records need: sessions (`sessions.py`),
attempts (`retries.py`: what a retry repeats) and each server's tool annotations.
Reading streams is `streams.py`; decoding any body is `decode.py`.

Size: over 400 lines because intake (POST, GET, DELETE), responses, parking and endings
all move the same exchange and waiting-room state; the parts that stand alone are out
(`streams.py`, `conclude.py`, `waiting.py`, `identify.py`, `decode.py`).

Errors: `handle` raises `LocalUsageError` only when the caller breaks the event order
(a bug in the adapter); whatever the peers send is recorded, never raised.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from .budget import BufferBudget
from .classify import (
    Outcome,
    Verdict,
    answer_form_fault,
    batch_allowed,
    classify_answer,
    http_error,
    violation,
)
from .conclude import Concluding
from .decode import (
    StreamDecoder,
    answer_value,
    content_coding,
    has_bom,
    media_type,
    post_messages,
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
)
from .exchanges import Exchange, Parked, PendingRequest, StreamState
from .finished import Finished, FinishedRequest, flow_of
from .identify import Agent, Identifier, host, is_sessionless, named_version
from .jsonrpc import (
    NOT_JSON,
    id_key,
    is_notification,
    is_request,
    is_response,
    prompt_of,
    tool_of,
)
from .lifecycle import TRANSITIONS, Cause, LocalUsageError, Phase, step
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
from .sessions import Identity, Session, SessionBook
from .settings import Settings
from .streams import Carried, StreamReading, is_unnamed_error
from .waiting import WaitingRoom

__all__ = ["TRANSITIONS", "LocalUsageError", "Phase", "Settings", "Tracker"]

#: JSON-RPC codes a 2026-07-28 server answers during version negotiation (HTTP 400).
NEGOTIATION_CODES = frozenset({-32020, -32021, -32022})


class Tracker(Concluding, StreamReading):
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
        #: record id -> flow id of each record `handle` returns, while the adapter wants
        #: them (None: it does not; the adapter pops each entry as it takes the record).
        self.record_flows: dict[int, str] | None = None

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

    # -- queries the adapter needs ------------------------------------------------

    def is_tracked(self, flow: str) -> bool:
        """Is this flow an MCP exchange still being recorded?"""
        return flow in self._exchanges

    def wants_stream(self, flow: str) -> bool:
        """Should the adapter feed this flow's body chunk by chunk (an SSE answer)?"""
        x = self._exchanges.get(flow)
        return x is not None and x.stream is not None

    def wants_chunks(self, flow: str) -> bool:
        """Is there still anything to read in this flow's stream? (False: a stream shown
        not to be MCP, an undecodable one, or an exchange already written.)"""
        x = self._exchanges.get(flow)
        return x is not None and x.stream is not None and x.stream.decoder.readable

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

    # -- the one verb ---------------------------------------------------------------

    def handle(self, event: Event) -> list[dict[str, Any]]:
        """Advance the state with one event; return the records it finished (maybe none)."""
        records = self._handle(event)
        if self.sessions.dropped:
            # Sessions the book's cap pushed out while it took this event: their end is
            # written now, not at shutdown.
            records += self._end_sessions(self.sessions.take_dropped(), event.ts)
        return records

    def _handle(self, event: Event) -> list[dict[str, Any]]:
        if isinstance(event, PostReceived):
            return self._expire(event.ts) + self._post(event)
        if isinstance(event, OtherRequest):
            return self._expire(event.ts) + self._other(event)
        if isinstance(event, ProxyStopping):
            return self._stop(event)
        if isinstance(event, Tick):
            return self._expire(event.ts)
        x = self._exchanges.get(event.flow)
        if x is None:
            return []  # not MCP, or already written (an error hook after shutdown)
        self.sessions.touch(x.session, event.ts)
        nxt = TRANSITIONS[x.phase].get(type(event))
        if nxt is None:
            nxt = step(x.phase, type(event), event.flow)  # raises LocalUsageError, named
        if nxt is not Phase.DONE:
            x.phase = nxt  # DONE is entered by `_finish` alone, once
        if isinstance(event, StreamChunk):
            # Parked requests expire on any traffic, not only on the next request.
            return self._expire(event.ts) + self._chunk(x, event.data, event.ts)
        if isinstance(event, ResponseStarted):
            return self._headers(x, event)
        if isinstance(event, ResponseBody):
            return self._body(x, event) + self._finish(x, event.ts)
        if isinstance(event, StreamEnded):
            framed = x.stream is None or x.stream.framed
            return self._stream_closed(x, "complete" if framed else "eof", event.ts)
        assert isinstance(event, FlowFailed)
        return self._failed(x, event)

    # -- requests ---------------------------------------------------------------------

    def _post(self, ev: PostReceived) -> list[dict[str, Any]]:
        messages = post_messages(ev.body, self._settings.max_body_bytes)
        if messages is None:
            return []
        records = self._evict_if_full(ev.ts)
        user_agent = ev.headers.get("user-agent")
        agent = (host(ev.peer), user_agent)
        requests = [m for m in messages if is_request(m)]
        first = requests[0] if requests else messages[0]
        records += self._release_held(
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
            kind = "request"
        elif any(is_response(m) for m in messages):
            kind = "response"
        else:
            kind = "notification"
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
        if kind == "request":
            for msg in requests:
                self._open_request(x, msg, version)
        else:
            x.record_id = self._take_record_id()
            if kind == "notification":
                # A `response` record names the server's method it answers (`serverMethod`),
                # never a notification that shared its batch.
                x.method = next((m["method"] for m in messages if is_notification(m)), None)
            self._match_answers(x, [m for m in messages if is_response(m)])
        if len(messages) > 1:
            x.notes.add("batch", len(messages))
        if any(m.get("method") == "subscriptions/listen" for m in requests):
            x.notes.add("subscription")  # long by design: not slow, not hung
        if has_bom(ev.body):
            x.notes.add("request_bom")  # the server may have read it, or refused it
        self._exchanges[ev.flow] = x
        return records

    def _open_request(self, x: Exchange, msg: dict[str, Any], version: str | None) -> None:
        method, params = msg["method"], msg.get("params")
        p = PendingRequest(msg["id"], method, tool_of(msg), self._take_record_id())
        p.prompt = prompt_of(msg)
        p.task = isinstance(params, dict) and isinstance(params.get("task"), dict)
        if self._settings.record_bodies:
            p.message = msg
        if p.method == "tools/call":
            p.safety = self.safety.safety(x.server, p.tool)
        if method == "initialize":
            p.previous_session = self.sessions.take_lost(self._identity(x))
        if method == "server/discover" or (version or "").startswith("2026"):
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
            safety=p.safety or "unknown",
        )
        x.requests.append(p)
        x.by_id[id_key(p.rpc_id)] = p

    def _session_state(self, key: str) -> tuple[str | None, bool] | None:
        found = self.sessions.find(key)
        return None if found is None else (found.ended, found.real)

    def _match_answers(self, x: Exchange, answers: list[dict[str, Any]]) -> None:
        """A client's POSTed answers to server requests seen earlier on a stream."""
        for msg in answers:
            asked = self._waiting.answered((x.session.key, id_key(msg.get("id"))))
            if asked is not None and x.answered is None:
                server_method, asked_at = asked
                x.answered = (server_method, round((x.started - asked_at) * 1000, 1))

    def _other(self, ev: OtherRequest) -> list[dict[str, Any]]:
        """A GET may be an MCP event stream; a DELETE with a session ends that session."""
        session_id = ev.headers.get("mcp-session-id")
        if ev.method == "DELETE" and session_id:
            kind = "session_end"
        elif ev.method == "GET" and (
            session_id
            or ev.query_session
            or "text/event-stream" in ev.headers.get("accept", "").lower()
        ):
            kind = "stream"
        else:
            return []
        records = self._evict_if_full(ev.ts)
        user_agent = ev.headers.get("user-agent")
        named = named_version(None, ev.headers)
        session = self._who.session_for(
            # A DELETE names the session it ends, whatever the version says.
            session_id,
            ev.query_session,
            ev.peer,
            user_agent,
            named if kind == "stream" else None,
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
        return records

    def _identity(self, x: Exchange) -> Identity:
        return (host(x.peer), x.user_agent, x.client)

    def _take_record_id(self) -> int:
        record_id = self._next_record_id
        self._next_record_id += 1
        return record_id

    # -- response ---------------------------------------------------------------------

    def _headers(self, x: Exchange, ev: ResponseStarted) -> list[dict[str, Any]]:
        x.status = ev.status
        x.content_type = media_type(ev.headers.get("content-type"))
        x.retry_after = ev.headers.get("retry-after")
        x.content_coding = content_coding(ev.headers.get("content-encoding"))
        if x.kind == "request":
            x.fault = answer_form_fault(ev.status, x.content_type)
        issued = ev.headers.get("mcp-session-id")
        if issued and x.kind == "request" and any(p.method == "initialize" for p in x.requests):
            self._adopt_session(x, issued)
        forgotten = ev.status == 404 and x.session.real and x.session.ended is None
        if forgotten and x.kind != "session_end" and not is_sessionless(x.protocol_version):
            # The server forgot the session (2025 rule: 404 means "initialize again").
            self.sessions.lost(x.session)
            x.session_lost = True
            x.notes.add("session_lost")
        # The content-type check: only an event stream is read as one.
        if x.content_type == "text/event-stream":
            # Parsed whatever the status: the verdict stays HTTP_ERROR, but the events
            # (and a JSON-RPC error among them) are worth recording.
            if x.kind == "stream":
                x.session.get_streams += 1
            decoder = StreamDecoder(x.content_coding, self._settings.max_event_bytes, self.buffers)
            x.stream = StreamState(decoder, ev.framed)
            if decoder.failure is not None:
                x.notes.add_note(decoder.failure)
        return []

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

    def _body(self, x: Exchange, ev: ResponseBody) -> list[dict[str, Any]]:
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
            records: list[dict[str, Any]] = []
            for p in x.requests:
                if self._answered_on_legacy_stream(x, p):
                    records += self._park(x, p, ev.ts, Cause.ACCEPTED)
                else:
                    # The client rejects or discards this answer whatever it says.
                    p.verdict = violation(x.fault, http_error(ev.body))
            return records
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
            x.notes.add("empty_body")
        self._answer_requests(x, answer)
        return []

    def _answered_on_legacy_stream(self, x: Exchange, p: PendingRequest) -> bool:
        """2024-11-05: a POST is only acknowledged ("Accepted"); its answer comes on the
        session's GET stream (a client reads nothing else) while one is open, or came
        on one already, which may have ended before the 202 reached the proxy."""
        if x.session.legacy_streams:
            return True
        early = (x.session.key, id_key(p.rpc_id)) in self._waiting.unclaimed
        return early and x.session.protocol_version == "2024-11-05"

    def _answer_requests(self, x: Exchange, answer: object) -> None:
        """Give each request of `x` its verdict on a whole JSON body (`answer`).

        The rules are the ones an SSE answer follows (`streams.py`), so the carrier
        never changes a verdict: where batches do not exist (every version but
        2025-03-26) an array answers no request, whatever it holds; where they do, each
        answer finds its request by id, and an error without an id answers every
        request no answer named (JSON-RPC 2.0 §6: a batch the server cannot take as a
        whole gets one error object, id null).
        """
        if isinstance(answer, list) and not batch_allowed(x.protocol_version):
            self._settle_rest(x, answer)  # INVALID_ENVELOPE, `batch_answer:<version>`
            return
        if len(x.requests) == 1 and not isinstance(answer, list):
            self._settle(x, x.requests[0], answer)
            return
        unnamed: dict[str, Any] | None = None
        for msg in answer if isinstance(answer, list) else [answer]:
            if not is_response(msg) or not isinstance(msg, dict):
                continue
            asked = x.by_id.get(id_key(msg.get("id")))
            if asked is not None and asked.verdict is None:
                self._settle(x, asked, msg)
            elif unnamed is None and is_unnamed_error(msg):
                unnamed = msg
        self._settle_rest(x, unnamed or (answer if answer is NOT_JSON else None))

    def _settle(self, x: Exchange, p: PendingRequest, answer: object) -> None:
        """`answer` is the one `p` gets: judge it, and learn from it."""
        p.verdict = self._judge(x, p, answer)
        self._learn(x, p, answer)

    def _settle_rest(self, x: Exchange, answer: object) -> None:
        """`answer` is the one every request of `x` still without a verdict gets."""
        for p in x.requests:
            if p.verdict is None:
                self._settle(x, p, answer)

    @staticmethod
    def _judge(x: Exchange, p: PendingRequest, answer: object) -> Verdict:
        """The verdict on `answer` to `p`, by the rules of the exchange's version."""
        return classify_answer(p.method, p.rpc_id, answer, version=x.protocol_version, task=p.task)

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
        elif p.method == "tools/list":
            self.safety.learn(x.server, result)

    # -- parked requests ----------------------------------------------------------------

    def _park(
        self, x: Exchange, p: PendingRequest, ts: float, cause: Cause
    ) -> list[dict[str, Any]]:
        """Wait for `p`'s answer on another stream (it may even be there already)."""
        step(x.phase, cause, x.flow)
        p.via_stream = True
        parked = Parked(x, p, ts, resumable=cause is Cause.RESUMABLE)
        early, evicted = self._waiting.park((x.session.key, id_key(p.rpc_id)), parked)
        if early is not None:
            # The GET stream delivered the answer before the POST's own 202 was processed.
            msg, seen = early
            assert isinstance(msg, Carried)  # the only kind a stream keeps (`streams.py`)
            return self._answer_parked(parked, msg, seen, msg.carrier)
        if evicted is not None:
            return self._finish_parked(evicted, ts, "evicted_parked_cap")
        return []

    def _finish_parked(self, parked: Parked, ts: float, note: str) -> list[dict[str, Any]]:
        parked.x.notes.add_once(note)
        return [self._record(self._conclude_request(parked.x, parked.p, ts, answered=False))]

    def _orphan_legacy_requests(self, session: Session, ts: float) -> list[dict[str, Any]]:
        """The GET stream that was to carry 2024-11-05 answers is gone: they are lost."""
        records: list[dict[str, Any]] = []
        for parked in self._waiting.stream_gone(session.key):
            records += self._finish_parked(parked, ts, "answer_stream_closed")
        return records

    def _expire(self, now: float) -> list[dict[str, Any]]:
        idle = self.sessions.idle(now)  # one comparison, unless a session may be idle
        records = self._end_sessions(idle, now) if idle else []
        if not self._waiting.parked and not self._waiting.unclaimed:
            return records  # the usual case, on every request and every stream chunk
        for parked in self._waiting.expire(now):
            records += self._finish_parked(parked, now, "not_resumed")
        return records

    # -- endings ----------------------------------------------------------------------

    def _failed(self, x: Exchange, ev: FlowFailed) -> list[dict[str, Any]]:
        if x.stream is not None:
            self.settle_unnamed(x)
            if x.requests and all(p.verdict is not None for p in x.requests):
                # Every answer was delivered, then a side hung up (SDK clients close the
                # stream on the final event): the stream did its job.
                x.notes.add("closed_after_answer")
                return self._stream_closed(x, "complete", ev.ts)
            return self._stream_closed(x, "error", ev.ts)
        if x.status is not None and 200 <= x.status < 300 and x.kind == "request":
            # mitmproxy buffered this body and the upstream broke inside it: the client
            # never got the upstream's answer (mitmproxy answers 502 instead).
            x.notes.add("upstream_broke_mid_body", x.status)
            x.status = None
        return self._finish(x, ev.ts)

    def _stop(self, ev: ProxyStopping) -> list[dict[str, Any]]:
        # Parked requests first: closing their GET stream below would otherwise call
        # them `answer_stream_closed`, when it is the proxy that stopped.
        records = self._finish_all_parked(ev.ts)
        for x in list(self._exchanges.values()):
            x.notes.add("proxy_shutdown")
            if x.stream is not None:
                records += self._stream_closed(x, "error", ev.ts)
            else:
                records += self._finish(x, ev.ts)
        records += self._finish_all_parked(ev.ts)  # streams closed just now may park
        for agent in list(self._waiting.held):
            records += self._release_held(agent, negotiation=False, why=ProxyStopping)
        self._waiting.unclaimed.clear()  # nothing is left to claim them
        for session in self.sessions.live_real():
            session.ended = "shutdown"
            records.append(self._record(self._conclude_session(session, None, ev.ts, ev.ts, None)))
        return records

    def _end_sessions(self, sessions: list[Session], now: float) -> list[dict[str, Any]]:
        """The `session_end` of sessions that ended idle or were forgotten past the cap:
        `ts` is their last traffic, `durationMs` how long after it they were ended."""
        return [
            self._record(self._conclude_session(s, None, min(s.last_seen, now), now, None))
            for s in sessions
        ]

    def _finish_all_parked(self, ts: float) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        for parked in self._waiting.drain_parked():
            step(Phase.PARKED, ProxyStopping)
            records += self._finish_parked(parked, ts, "proxy_shutdown")
        return records

    def _evict_if_full(self, ts: float) -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        while len(self._exchanges) >= self._settings.max_pending:
            oldest = next(iter(self._exchanges.values()))
            oldest.notes.add("evicted_pending_cap")
            if oldest.stream is not None:
                records += self._stream_closed(oldest, "error", ts)
            else:
                records += self._finish(oldest, ts)
        return records

    def _finish(self, x: Exchange, ts: float) -> list[dict[str, Any]]:
        """Write what this exchange still owes. Called once per exchange."""
        self._exchanges.pop(x.flow, None)
        phase, x.phase = x.phase, Phase.DONE
        if x.stream is not None:
            x.stream.decoder.release()  # its bytes leave the budget with it
        finished: list[Finished] = []
        if x.kind == "session_end":
            finished.append(self._conclude_delete(x, ts))
        elif x.kind == "request":
            finished += [
                self._conclude_request(x, p, ts, answered=p.verdict is not None)
                for p in x.requests
                if not p.via_stream
            ]
        elif x.kind == "stream":
            finished.append(self._conclude_stream(x, ts))
        else:
            finished.append(self._conclude_message(x, ts))
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
        return [self._record(f) for f in finished]

    def _record(self, f: Finished, negotiation: bool | None = None) -> dict[str, Any]:
        """Every record is built here: the one place that notes which flow it is of."""
        record = record_of(f, negotiation)
        if self.record_flows is not None:
            flow = flow_of(f)
            if flow is not None:
                self.record_flows[record["id"]] = flow
        return record

    def _release_held(
        self, agent: Agent, *, negotiation: bool, why: Cause | type
    ) -> list[dict[str, Any]]:
        if not self._waiting.held:
            return []  # the usual case, on every POST
        return [self._record(f, negotiation) for f in self._waiting.release(agent, why)]


def _is_negotiation_candidate(f: Finished) -> bool:
    if not isinstance(f, FinishedRequest):
        return False  # a session's end (a 404) is not a probe
    if not f.statuses or not 400 <= f.statuses[-1] < 500:
        return False
    return f.method == "server/discover" or f.verdict.error_code in NEGOTIATION_CODES
