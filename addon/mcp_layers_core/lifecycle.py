"""The two lifecycles, each in one table: a pairing's (request and answer) and a session's.

In the spirit of h11's `_state.py`: `TRANSITIONS` is the one place that says what may
move a pairing from which phase to which, `SESSION_TRANSITIONS` the same for a session,
and `step` / `step_session` are the only ways to move, so a move a table does not allow
is caught and named (`LocalUsageError`), not guessed at.

A pairing lives on its own flow first (`AWAITING_HEADERS` -> `AWAITING_BODY` ->
`STREAMING`), moved by the adapter's events. When that flow ends, a request is written
(`DONE`) unless a `Cause` sends it on:

- `PARKED`: its answer will come on another stream of the session (a 2024-11-05 `202`
  while the session's endpoint stream is open, or a 2025-11-25 stream that broke after
  an event id and may be resumed by a GET);
- `HELD`: it is written, but whether its rejection was version negotiation is for the
  client's next POST to say (an `initialize` then makes it negotiation, not failure);
- `UNCLAIMED`: the other side of parking. An answer arrived on a GET stream before its
  request was parked (the GET stream can be faster than the POST's own `202`).

An exchange starts in `AWAITING_HEADERS`, an answer nobody claimed yet in `UNCLAIMED`;
every phase held beyond a flow belongs to its own entry of the waiting room
(`waiting.py`), which moves it by this table when it leaves. Every waiting phase ends by
a cause or by the proxy stopping, and is bounded by a cap (`EVICTED`) and, for parked
requests and unclaimed answers, by `RESUME_WINDOW_S`.

A session (`sessions.py`) is `OPEN` from the moment a server issued it until it ends,
once, for one `EndReason`; a client with no session has a `STAND_IN`, which never ends.
"""

from __future__ import annotations

from enum import Enum

from .events import (
    FlowFailed,
    ProxyStopping,
    ResponseBody,
    ResponseStarted,
    StreamChunk,
    StreamEnded,
)
from .record import EndReason


class LocalUsageError(Exception):
    """The caller fed events in an order no proxy can produce. A bug, not bad traffic."""


class Phase(Enum):
    # Identity hashing (members are singletons): Enum's own `__hash__` is a Python call,
    # and a phase is looked up in the table on every event.
    __hash__ = object.__hash__

    #: The request is in; no response headers yet.
    AWAITING_HEADERS = "awaiting_headers"
    #: Headers are in; a buffered body or a stream follows.
    AWAITING_BODY = "awaiting_body"
    #: Stream chunks are arriving.
    STREAMING = "streaming"
    #: The flow is over; the request waits for its answer on another stream.
    PARKED = "parked"
    #: The record is made; it waits for the client's next POST to say "negotiation".
    HELD = "held"
    #: An answer on a GET stream waits for its request to be parked.
    UNCLAIMED = "unclaimed"
    #: Written; nothing more will be recorded from this pairing.
    DONE = "done"


class Cause(Enum):
    """What moves a pairing when no event of its own flow does."""

    __hash__ = object.__hash__

    #: A `202` (or any answer a client cannot read) while a 2024-11-05 endpoint stream of
    #: the session is open: the answer comes on that stream. Without one it is not a wait
    #: but a `TRANSPORT_VIOLATION`.
    ACCEPTED = "accepted"
    #: The stream ended after an event id, without the answer: a GET may resume it.
    RESUMABLE = "resumable"
    #: A 4xx to a version probe: negotiation or failure, the client's next POST says.
    PROBE_REJECTED = "probe_rejected"
    #: The answer arrived on a GET stream (or was there already).
    ANSWERED = "answered"
    #: The request this answer belongs to was parked and took it.
    CLAIMED = "claimed"
    #: The 2024-11-05 GET stream that was to carry the answer ended.
    STREAM_GONE = "stream_gone"
    #: The same client POSTed again.
    CLIENT_RETURNED = "client_returned"
    #: `RESUME_WINDOW_S` passed.
    EXPIRED = "expired"
    #: A cap was reached; the oldest goes first.
    EVICTED = "evicted"


Trigger = type | Cause

#: Which trigger moves a pairing from which phase to which. Anything else is misuse.
#: Adapter events (classes) move a flow; causes move what waits beyond it.
TRANSITIONS: dict[Phase, dict[Trigger, Phase]] = {
    Phase.AWAITING_HEADERS: {
        ResponseStarted: Phase.AWAITING_BODY,
        FlowFailed: Phase.DONE,
        ProxyStopping: Phase.DONE,
        # No answer, but a probe's earlier attempt was rejected: its statuses say so.
        Cause.PROBE_REJECTED: Phase.HELD,
    },
    Phase.AWAITING_BODY: {
        ResponseBody: Phase.DONE,
        StreamChunk: Phase.STREAMING,
        StreamEnded: Phase.DONE,
        FlowFailed: Phase.DONE,
        ProxyStopping: Phase.DONE,
        Cause.ACCEPTED: Phase.PARKED,
        Cause.RESUMABLE: Phase.PARKED,
        Cause.PROBE_REJECTED: Phase.HELD,
    },
    Phase.STREAMING: {
        StreamChunk: Phase.STREAMING,
        StreamEnded: Phase.DONE,
        FlowFailed: Phase.DONE,
        ProxyStopping: Phase.DONE,
        Cause.RESUMABLE: Phase.PARKED,
        Cause.PROBE_REJECTED: Phase.HELD,
    },
    Phase.PARKED: {
        Cause.ANSWERED: Phase.DONE,
        Cause.STREAM_GONE: Phase.DONE,
        Cause.EXPIRED: Phase.DONE,
        Cause.EVICTED: Phase.DONE,
        ProxyStopping: Phase.DONE,
    },
    Phase.HELD: {
        Cause.CLIENT_RETURNED: Phase.DONE,
        Cause.EVICTED: Phase.DONE,
        ProxyStopping: Phase.DONE,
    },
    Phase.UNCLAIMED: {
        Cause.CLAIMED: Phase.DONE,
        Cause.EXPIRED: Phase.DONE,
        Cause.EVICTED: Phase.DONE,
        ProxyStopping: Phase.DONE,
    },
    Phase.DONE: {},
}

#: The phases a flow's own events move through (the adapter's part of the table).
FLOW_PHASES = frozenset({Phase.AWAITING_HEADERS, Phase.AWAITING_BODY, Phase.STREAMING})


def step(phase: Phase, trigger: Trigger, flow: str = "-") -> Phase:
    """The phase `trigger` moves `phase` to; `LocalUsageError` if the table forbids it."""
    nxt = TRANSITIONS[phase].get(trigger)
    if nxt is None:
        name = trigger.__name__ if isinstance(trigger, type) else trigger.name
        raise LocalUsageError(f"can't handle {name} for flow {flow} in phase {phase.name}")
    return nxt


class SessionPhase(Enum):
    __hash__ = object.__hash__

    #: A client with no session (stateless servers, 2026-07-28): a home for its counts.
    STAND_IN = "stand_in"
    #: A server issued it; it has not ended.
    OPEN = "open"
    #: It ended, for the reason its `ended` names; nothing moves it again.
    ENDED = "ended"


#: Which end moves a session from which phase. Anything else is misuse: a session ends
#: exactly once, and a stand-in never.
SESSION_TRANSITIONS: dict[SessionPhase, dict[EndReason, SessionPhase]] = {
    SessionPhase.STAND_IN: {},
    SessionPhase.OPEN: {reason: SessionPhase.ENDED for reason in EndReason},
    SessionPhase.ENDED: {},
}


def step_session(phase: SessionPhase, reason: EndReason, key: str = "-") -> SessionPhase:
    """The phase ending for `reason` moves `phase` to; `LocalUsageError` if none."""
    nxt = SESSION_TRANSITIONS[phase].get(reason)
    if nxt is None:
        raise LocalUsageError(f"can't end session {key} ({reason}) in phase {phase.name}")
    return nxt
