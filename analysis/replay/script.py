"""A recording read as the server's side of a conversation: what each request got back.

Pure: records (dicts, as the addon wrote them) in, a `Script` out. Requests are filed under
the *scope* they were sent in, so the live client's n-th request of a kind can be given
the n-th recorded answer of that kind:

- a request that carried no `Mcp-Session-Id` (an `initialize`, a discover probe, every
  request to a stateless server) is in the scope `None`, counted across the recording;
- a request that carried one is in the scope of the recorded session it named.

Matching is by `Key` (method and canonical params), never by raw body or JSON-RPC id: ids
and `_meta` (progress tokens, agents' call ids, trace context) differ from run to run.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from mcp_layers_core.record import Kind, StreamEnd, is_issued_session
from mcp_layers_core.redact import redact_json

#: The request header whose presence says which scope a request was sent in.
SESSION_HEADER: Final = "mcp-session-id"

#: Methods matched by name alone: what the client says in them (its name, version and
#: capabilities, the version it asks for) differs between releases of one client and
#: changes nothing in the recorded answer.
BY_METHOD_ONLY: Final = frozenset({"initialize", "server/discover"})

#: `params` members that never take part in a match (see the module's docstring).
VOLATILE_PARAMS: Final = frozenset({"_meta"})

#: A request's identity for matching: (method, canonical params as sorted JSON text).
Key = tuple[str, str]


def canonical(value: Any) -> str:
    """`value` as JSON text with sorted keys and no whitespace: equal values, equal text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def key_of(method: str, params: Any, *, redacted: bool, notification: bool = False) -> Key:
    """The match key of a request. `redacted`: the params come from a live request and are
    redacted first, as the recording's were, so that the two compare. A notification is
    matched by method: its acknowledgement never depends on its params (and its record
    holds no body)."""
    if method in BY_METHOD_ONLY or notification:
        return (method, "")
    if isinstance(params, dict):
        params = {k: v for k, v in params.items() if k not in VOLATILE_PARAMS}
    if not redacted:
        params = redact_json(params)
    return (method, canonical(params))


@dataclass(frozen=True, slots=True)
class Event:
    """One SSE event of a recorded answer, `ms` after the request."""

    ms: float
    id: str | None
    event: str | None
    retry: int | None
    data: Any
    json: bool


@dataclass(frozen=True, slots=True)
class Answer:
    """How the server answered one recorded request."""

    #: The HTTP status; None when no response came (the connection was dropped).
    status: int | None
    content_type: str | None
    #: The JSON-RPC message the server sent (redacted at capture), or None.
    body: Any
    #: From the request to the end of the answer, in ms.
    duration_ms: float
    retry_after_ms: int | None = None
    #: SSE answers: how many events, whether the final answer was among them, how it ended.
    sse_events: int = 0
    sse_final: bool = False
    sse_end: StreamEnd | None = None
    event_ids: bool = False
    retry_ms: int | None = None
    #: The recorded session this answer issued (an `initialize` that opened one).
    opens: str | None = None
    #: The recorded request's JSON-RPC id: its answer among `events` carries it.
    rpc_id: Any = None
    #: When the headers came, and every event of an SSE answer (records made since
    #: `bodies` held them; older ones replay the answer alone, as one event).
    headers_ms: float | None = None
    events: tuple[Event, ...] = ()
    #: The answer did not come on the request's own stream but on a later GET that
    #: resumed it (`Last-Event-ID`): served there.
    resumed: bool = False

    @property
    def is_sse(self) -> bool:
        return self.content_type == "text/event-stream"


@dataclass(frozen=True, slots=True)
class Exchange:
    """One recorded request and its answer."""

    where: str  # `path:line`, for messages
    kind: Kind
    method: str
    key: Key
    params: Any
    answer: Answer


@dataclass(frozen=True, slots=True)
class Stream:
    """One recorded GET: its status and how long the server held it open."""

    status: int | None
    duration_ms: float
    end: StreamEnd | None
    #: The server kept it open until the client or the session ended it (no fault cut it,
    #: no reset): replayed the same way, not for the recorded duration, which was the
    #: client's doing and differs from run to run.
    held: bool = True
    #: The GET carried `Last-Event-ID`: a client resuming a cut stream.
    resumes: bool = False


#: A scope: None for requests without a session header, else a recorded session.
Scope = str | None


@dataclass(slots=True)
class Script:
    """Every recorded exchange, by scope and key, in the order they were sent."""

    exchanges: dict[Scope, dict[Key, list[Exchange]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )
    streams: dict[Scope, list[Stream]] = field(default_factory=lambda: defaultdict(list))
    #: The status each session's DELETE got (the last one recorded).
    deletes: dict[str, int] = field(default_factory=dict)
    #: Recorded sessions, in the order they were first seen.
    sessions: list[str] = field(default_factory=list)
    #: Whether the server issued session ids at all.
    issued: bool = False
    count: int = 0

    def candidates(self, scope: Scope, method: str) -> list[Exchange]:
        """Every recorded exchange of `method` in `scope`, for a miss's explanation."""
        return [x for k, xs in self.exchanges.get(scope, {}).items() if k[0] == method for x in xs]


class ScriptError(Exception):
    """The recording cannot be replayed; the message says why and what to do."""


def _last_status(record: dict[str, Any]) -> int | None:
    statuses = record.get("httpStatuses") or []
    return statuses[-1] if statuses else None


def _events(bodies: dict[str, Any]) -> tuple[Event, ...]:
    events = bodies.get("events")
    if not isinstance(events, list):
        return ()
    return tuple(
        Event(
            float(e.get("ms") or 0.0),
            e.get("id"),
            e.get("event"),
            e.get("retry"),
            e.get("data"),
            bool(e.get("json")),
        )
        for e in events
        if isinstance(e, dict)
    )


def _answer(record: dict[str, Any], bodies: dict[str, Any]) -> Answer:
    sse = record.get("sse") or {}
    session = record.get("session")
    status = _last_status(record)
    opens = (
        session
        if record.get("method") == "initialize"
        and is_issued_session(session)
        and status is not None
        and 200 <= status < 300
        else None
    )
    return Answer(
        status=status,
        content_type=record.get("contentType"),
        body=bodies.get("response"),
        duration_ms=float(record.get("durationMs") or 0.0),
        retry_after_ms=record.get("retryAfterMs"),
        sse_events=int(sse.get("events") or 0),
        sse_final=bool(sse.get("final")),
        sse_end=_end(sse.get("end")),
        event_ids=bool(record.get("eventIds")),
        retry_ms=record.get("retryMs"),
        opens=opens,
        rpc_id=(record.get("jsonrpc") or {}).get("id"),
        headers_ms=bodies.get("headersMs"),
        events=_events(bodies),
        resumed=bool(sse.get("resumed")),
    )


def _scope(record: dict[str, Any]) -> Scope:
    carried = SESSION_HEADER in (record.get("requestHeaders") or [])
    session = record.get("session")
    return session if carried and is_issued_session(session) else None


def build(records: list[tuple[str, dict[str, Any]]], session: str | None = None) -> Script:
    """The script of `records` (each with its `path:line`); only `session`'s when given.

    Raises ScriptError when the recording holds no bodies (it was made without
    `mcp_record_bodies`) or `session` names none of its sessions.
    """
    script = Script()
    with_bodies = 0
    gets: list[dict[str, Any]] = []
    ended: dict[str, float] = {}  # session -> when it ended (s since the epoch)
    for where, record in records:
        rec_session = record.get("session")
        if (
            isinstance(rec_session, str)
            and is_issued_session(rec_session)
            and rec_session not in script.sessions
        ):
            script.sessions.append(rec_session)
            script.issued = True
        if session is not None and rec_session != session:
            continue
        bodies = record.get("bodies")
        if isinstance(bodies, dict):
            with_bodies += 1
        kind = record.get("kind")
        if kind == Kind.STREAM:
            gets.append(record)
            continue
        if kind == Kind.SESSION_END:
            if isinstance(rec_session, str):
                ended[rec_session] = _at(record)
            status = _last_status(record)
            if (
                status is not None
                and isinstance(rec_session, str)
                and is_issued_session(rec_session)
            ):
                script.deletes[rec_session] = status
            continue
        if kind == Kind.NOTIFICATION and isinstance(record.get("method"), str):
            # Its record has no bodies (nothing is classified): its method is enough.
            method, params = record["method"], None
            bodies = bodies if isinstance(bodies, dict) else {}
        elif kind == Kind.REQUEST and isinstance(bodies, dict):
            message = bodies.get("request")
            if not isinstance(message, dict) or not isinstance(message.get("method"), str):
                continue  # a batch, or a body the addon could not parse: nothing to match
            method, params = message["method"], message.get("params")
        else:
            continue  # a client's answer to a server request: acknowledged as it comes
        exchange = Exchange(
            where=where,
            kind=Kind(kind),
            method=method,
            key=key_of(method, params, redacted=True, notification=kind == Kind.NOTIFICATION),
            params=params,
            answer=_answer(record, bodies),
        )
        script.exchanges[_scope(record)][exchange.key].append(exchange)
        script.count += 1
    # GET streams are written when they end: in the order they were opened, they are the
    # n-th GET of their scope.
    for record in sorted(gets, key=_at):
        script.streams[_scope(record)].append(_stream(record, ended))
    if session is not None and session not in script.sessions:
        known = ", ".join(script.sessions[:20]) or "none"
        raise ScriptError(f"no session {session!r} in the recording; its sessions: {known}")
    if records and with_bodies == 0:
        raise ScriptError(
            "the recording holds no message bodies, and replay serves the recorded answers: "
            "record again with `--set mcp_record_bodies=true`"
        )
    return script


def _end(value: object) -> StreamEnd | None:
    return StreamEnd(value) if value in _ENDS else None


_ENDS: Final = frozenset(e.value for e in StreamEnd)


def _stream_end(record: dict[str, Any]) -> StreamEnd | None:
    return _end((record.get("sse") or {}).get("end"))


#: How close to its session's end a stream must end to have been ended by it.
SAME_END_S: Final = 0.25


def _at(record: dict[str, Any]) -> float:
    """When the record's exchange began, in seconds since the epoch (0 if unreadable)."""
    try:
        return datetime.fromisoformat(str(record.get("ts"))).timestamp()
    except ValueError:
        return 0.0


def _stream(record: dict[str, Any], ended: dict[str, float]) -> Stream:
    """A recorded GET, and whether the replay holds it open (see `Stream.held`): a fault
    cut it (not held: cut again after its duration); it ended in an error (the client
    left or the proxy stopped: held); it ended cleanly with its session (held until the
    session ends); or the server ended it cleanly before that (not held)."""
    end = _stream_end(record)
    duration = float(record.get("durationMs") or 0.0)
    session = record.get("session")
    closed_at = _at(record) + duration / 1000.0
    with_session = isinstance(session, str) and closed_at >= ended.get(session, 1e18) - SAME_END_S
    held = record.get("injected") is None and (end is StreamEnd.ERROR or with_session)
    resumes = bool((record.get("sse") or {}).get("resumed"))
    return Stream(_last_status(record), duration, end, held=held, resumes=resumes)
