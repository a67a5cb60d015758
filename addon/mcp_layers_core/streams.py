"""Reading an SSE stream as it passes: what each event carries, returned as values.

`read` and `end` decode a stream's bytes (`decode.StreamDecoder`) and say what the events
carried: an `Answer` (with how it travelled, its `Carrier`), a server request (`Asked`),
a notification (`TOLD`), a 2024-11-05 `Endpoint`, or an array of answers where batches
do not exist (`RefusedBatch`). They change only the stream's own state (`StreamState`:
counts, what was seen, whether it is still worth reading) and its exchange's notes; what
an answer means for a request, a parked request or a session is the tracker's to decide.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final, NamedTuple
from urllib.parse import parse_qs, urlsplit

from . import limits
from .classify import event_type_ok
from .decode import event_value
from .exchanges import MAX_TRANSCRIPT_EVENTS, Exchange, StreamState, WireEvent
from .jsonrpc import NOT_JSON, is_notification, is_request, is_response
from .notes import Note
from .record import Kind, NoteCode, StreamEnd
from .sse import EVENT_OVER_BUDGET, EVENT_OVER_CAP, SseAnomaly, SseEvent

#: A server's SSE event type is kept in a note at most this long.
MAX_EVENT_TYPE_CHARS = 80


def is_unnamed_error(msg: dict[str, Any]) -> bool:
    """An error with no id (or null): the server could not read the request's."""
    return msg.get("id") is None and "error" in msg


@dataclass(frozen=True, slots=True)
class Carrier:
    """How an answer travelled, which decides what a client makes of it: the SSE event
    type a client skips it for (None: `message`), and the array it came in (None: on
    its own)."""

    hidden: Note | None = None
    batch: list[Any] | None = None


#: How most answers travel: on their own, in a `message` event (one value for every event).
ON_ITS_OWN: Final = Carrier()


class Answer(NamedTuple):
    """A JSON-RPC response the stream carried, and how."""

    msg: dict[str, Any]
    carrier: Carrier


class Asked(NamedTuple):
    """A server-to-client request: the client's answer is a POST to come."""

    rpc_id: object
    method: str


class Told:
    """A server notification (counted, nothing more)."""

    __slots__ = ()


TOLD: Final = Told()


class Endpoint(NamedTuple):
    """2024-11-05: a GET stream's `endpoint` event named the session it carries."""

    session_id: str


class AnswerArray(NamedTuple):
    """An array with answers in it, on a POST's stream. Whether it answers anything
    depends on the version the exchange speaks when it is acted on (an `initialize`
    answer earlier in the same chunk may have just set it): where batches exist, its
    messages are `unpack`ed; where they do not, it answers no request of the POST,
    whatever it names (the rule of a JSON body)."""

    value: list[Any]


Found = Answer | Asked | Told | Endpoint | AnswerArray


def read(x: Exchange, s: StreamState, data: bytes, ts: float) -> list[Found]:
    """What this chunk of `x`'s stream (arriving at `ts`) completed."""
    items = s.decoder.feed(data)
    if s.decoder.failure is not None:  # this chunk made the stream unreadable
        x.notes.add_note(s.decoder.failure)
        return []
    found: list[Found] = []
    for item in items:
        _item(x, s, item, found, ts)
    return found


def end(x: Exchange, s: StreamState, how: StreamEnd, ts: float) -> list[Found]:
    """The stream ended `how` at `ts`: what its last, unterminated event held."""
    s.end, s.ended_at = how, ts
    found: list[Found] = []
    for item in s.decoder.end():
        _item(x, s, item, found, ts)
    return found


def _item(
    x: Exchange, s: StreamState, item: SseEvent | SseAnomaly, found: list[Found], ts: float
) -> None:
    if isinstance(item, SseAnomaly):
        if item.kind in (EVENT_OVER_CAP, EVENT_OVER_BUDGET):
            s.skipped_event = True
        x.notes.repeat(f"sse_{item.kind}", item.skipped_bytes)
        return
    s.events += 1
    s.last_event_at = ts
    if s.transcript is not None and len(s.transcript) < MAX_TRANSCRIPT_EVENTS:
        s.transcript.append(WireEvent(ts, item.id, item.event, item.retry, item.data))
    if item.id:
        s.saw_event_id = True
    if item.retry is not None:
        s.retry_ms = item.retry
    # The SSE event type: only a GET stream's `endpoint` event means something else.
    if item.event == "endpoint" and x.kind is Kind.STREAM:
        session_id = _endpoint_session(item.data)
        if session_id:
            s.saw_jsonrpc = True
            found.append(Endpoint(session_id))
        return
    if not item.data:
        return  # priming events and keep-alives carry no message
    value = event_value(item.data)
    if not event_type_ok(item.event):
        _hidden(x, s, item, value, found)
    elif value is NOT_JSON:
        s.saw_not_json = True
        _give_up_on_foreign_stream(x, s)
    elif not isinstance(value, list):
        _message(x, s, value, ON_ITS_OWN, found)
    elif x.kind is Kind.REQUEST and any(map(is_response, value)):
        # Where batches do not exist, mcp 2.3.0 validates an event's data as ONE message
        # and fails the POST's request on an array (PARSE_ERROR); the TS SDK (1.32.2)
        # drops the event. Which applies is the tracker's to say (`AnswerArray`).
        s.saw_jsonrpc = True
        found.append(AnswerArray(value))
    else:
        found += unpack(x, s, value)


def unpack(x: Exchange, s: StreamState, value: list[Any]) -> list[Found]:
    """The messages of an array, each carried by it."""
    found: list[Found] = []
    carrier = Carrier(batch=value)
    for msg in value:
        _message(x, s, msg, carrier, found)
    return found


def _hidden(x: Exchange, s: StreamState, item: SseEvent, value: object, found: list[Found]) -> None:
    """An event whose type is not `message`: clients skip it, so an answer in it never
    reaches them. Passed on with the reason, never to be taken as the answer."""
    carrier = Carrier(hidden=Note(NoteCode.SSE_EVENT_TYPE, item.event[:MAX_EVENT_TYPE_CHARS]))
    for msg in value if isinstance(value, list) else [value]:
        if is_response(msg) and isinstance(msg, dict):
            s.saw_jsonrpc = True  # MCP, if sent wrongly
            found.append(Answer(msg, carrier))
    # A feed of custom event types and no JSON-RPC is no MCP stream: stop reading it.
    _give_up_on_foreign_stream(x, s)


def _message(
    x: Exchange, s: StreamState, msg: object, carrier: Carrier, found: list[Found]
) -> None:
    if is_response(msg):
        assert isinstance(msg, dict)
        s.saw_jsonrpc = True
        found.append(Answer(msg, carrier))
    elif is_request(msg):
        assert isinstance(msg, dict)
        s.saw_jsonrpc = True
        found.append(Asked(msg["id"], msg["method"]))
    elif is_notification(msg):
        s.saw_jsonrpc = True
        found.append(TOLD)
    else:
        s.saw_non_rpc_json = True
        _give_up_on_foreign_stream(x, s)


def _give_up_on_foreign_stream(x: Exchange, s: StreamState) -> None:
    """A GET stream that shows no JSON-RPC after a few events is not MCP: stop parsing."""
    if (
        x.kind is Kind.STREAM
        and not s.saw_jsonrpc
        and s.events >= limits.NON_MCP_STREAM_PROBE_EVENTS
    ):
        s.decoder.readable = False


def _endpoint_session(data: str) -> str | None:
    """2024-11-05: the session an `endpoint` event's POST URL names, if any."""
    try:
        query = parse_qs(urlsplit(data.strip()).query)
    except ValueError:  # not a URL at all (`http://[x/…`): no session to learn
        return None
    return next(iter(query.get("session_id") or query.get("sessionId") or []), None)
