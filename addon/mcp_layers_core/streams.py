"""Reading an SSE stream as it passes: answers, server requests, notifications, endpoints.

A mixin of `Tracker` (it shares the tracker's books): one place for everything a stream
item can mean. The stream bytes are decoded by `decode.StreamDecoder`; what each event
is (its SSE event type, its data) is judged in `_stream_item`, and each JSON-RPC message
in it in `_stream_message`, where an answer finds its request on this stream, a parked
request of the session, or waits as unclaimed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from . import limits
from .classify import Outcome, Verdict, batch_allowed, event_type_ok, violation
from .decode import event_value
from .exchanges import Exchange, PendingRequest, StreamState
from .jsonrpc import NOT_JSON, id_key, is_notification, is_request, is_response
from .lifecycle import Cause
from .notes import Note
from .record import NoteCode
from .sse import EVENT_OVER_BUDGET, EVENT_OVER_CAP, SseAnomaly, SseEvent

#: A server's SSE event type is kept in a note at most this long.
MAX_EVENT_TYPE_CHARS = 80

if TYPE_CHECKING:
    from .exchanges import Parked
    from .finished import Finished, FinishedRequest
    from .sessions import Session, SessionBook
    from .settings import Settings
    from .waiting import WaitingRoom


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
ON_ITS_OWN = Carrier()


class Carried(dict[str, Any]):
    """An answer a GET stream carried before its request was parked (the POST's 202
    comes later): the message, as the waiting room keeps it, and its `Carrier`."""

    __slots__ = ("carrier",)

    def __init__(self, msg: dict[str, Any], carrier: Carrier) -> None:
        super().__init__(msg)
        self.carrier = carrier


class StreamReading:
    """The stream half of the tracker."""

    if TYPE_CHECKING:
        _settings: Settings
        _waiting: WaitingRoom
        sessions: SessionBook

        def _learn(self, x: Exchange, p: PendingRequest, answer: object) -> None: ...
        def _judge(self, x: Exchange, p: PendingRequest, answer: object) -> Verdict: ...
        def _settle_rest(self, x: Exchange, answer: object) -> None: ...
        def _record(self, f: Finished, negotiation: bool | None = None) -> dict[str, Any]: ...
        def _conclude_request(
            self, x: Exchange, p: PendingRequest, ts: float, *, answered: bool
        ) -> FinishedRequest: ...
        def _park(
            self, x: Exchange, p: PendingRequest, ts: float, cause: Cause
        ) -> list[dict[str, Any]]: ...
        def _orphan_legacy_requests(self, session: Session, ts: float) -> list[dict[str, Any]]: ...
        def _finish(self, x: Exchange, ts: float) -> list[dict[str, Any]]: ...

    def _chunk(self, x: Exchange, data: bytes, ts: float) -> list[dict[str, Any]]:
        if data:
            x.had_body = True
        s = x.stream
        if s is None or not s.decoder.readable or not data:
            return []
        items = s.decoder.feed(data)
        if s.decoder.failure is not None:  # this chunk made the stream unreadable
            x.notes.add_note(s.decoder.failure)
            return []
        records: list[dict[str, Any]] = []
        for item in items:
            records += self._stream_item(x, s, item, ts)
        return records

    def _stream_item(
        self, x: Exchange, s: StreamState, item: SseEvent | SseAnomaly, ts: float
    ) -> list[dict[str, Any]]:
        if isinstance(item, SseAnomaly):
            if item.kind in (EVENT_OVER_CAP, EVENT_OVER_BUDGET):
                s.skipped_event = True
            x.notes.repeat(f"sse_{item.kind}", item.skipped_bytes)
            return []
        s.events += 1
        if item.id:
            s.saw_event_id = True
        if item.retry is not None:
            s.retry_ms = item.retry
        # The SSE event type: only a GET stream's `endpoint` event means something else.
        if item.event == "endpoint" and x.kind == "stream":
            self._legacy_endpoint(x, s, item.data, ts)
            return []
        if not item.data:
            return []  # priming events and keep-alives carry no message
        value = event_value(item.data)
        if not event_type_ok(item.event):
            return self._hidden_answer(x, s, item, value, ts)
        if value is NOT_JSON:
            s.saw_not_json = True
            self._give_up_on_foreign_stream(x, s)
            return []
        if not isinstance(value, list):
            return self._stream_message(x, s, value, ts, ON_ITS_OWN)
        if x.kind == "request" and not self._batches(x) and any(map(is_response, value)):
            # Where batches do not exist, an array answers no request of the POST it
            # came on, whatever it names: the rule of a JSON body (`_answer_requests`).
            # mcp 2.3.0 validates an event's data as ONE message and fails the POST's
            # request on an array (PARSE_ERROR); the TS SDK (1.32.2) drops the event.
            s.saw_jsonrpc = True
            self._settle_rest(x, value)  # INVALID_ENVELOPE, `batch_answer:<version>`
            return []
        records: list[dict[str, Any]] = []
        carrier = Carrier(batch=value)
        for msg in value:
            records += self._stream_message(x, s, msg, ts, carrier)
        return records

    @staticmethod
    def _batches(x: Exchange) -> bool:
        return batch_allowed(x.protocol_version)

    def _hidden_answer(
        self, x: Exchange, s: StreamState, item: SseEvent, value: object, ts: float
    ) -> list[dict[str, Any]]:
        """An event whose type is not `message`: clients skip it, so an answer in it never
        reaches them. Remembered as the reason, never taken as the answer."""
        why = Note(NoteCode.SSE_EVENT_TYPE, item.event[:MAX_EVENT_TYPE_CHARS])
        carrier = Carrier(hidden=why)
        records: list[dict[str, Any]] = []
        for msg in value if isinstance(value, list) else [value]:
            if is_response(msg) and isinstance(msg, dict):
                s.saw_jsonrpc = True  # MCP, if sent wrongly
                records += self._stream_answer(x, s, msg, ts, carrier)
        # A feed of custom event types and no JSON-RPC is no MCP stream: stop reading it.
        self._give_up_on_foreign_stream(x, s)
        return records

    def _stream_message(
        self, x: Exchange, s: StreamState, msg: object, ts: float, carrier: Carrier
    ) -> list[dict[str, Any]]:
        if is_response(msg):
            assert isinstance(msg, dict)
            s.saw_jsonrpc = True
            return self._stream_answer(x, s, msg, ts, carrier)
        if is_request(msg):
            assert isinstance(msg, dict)
            s.saw_jsonrpc = True
            x.session.server_requests += 1
            self._waiting.asked((x.session.key, id_key(msg["id"])), msg["method"], ts)
        elif is_notification(msg):
            s.saw_jsonrpc = True
            x.session.server_notifications += 1
        else:
            s.saw_non_rpc_json = True
            self._give_up_on_foreign_stream(x, s)
        return []

    def _stream_answer(
        self, x: Exchange, s: StreamState, msg: dict[str, Any], ts: float, carrier: Carrier
    ) -> list[dict[str, Any]]:
        """An answer on a stream finds its request: one of this POST's (by id), a request
        parked for it, or none yet (kept for a POST whose 202 is still to come)."""
        p = x.by_id.get(id_key(msg.get("id")))
        if p is not None:
            if p.verdict is None:
                self._deliver(x, s, p, msg, carrier)
            return []
        if x.kind == "request" and is_unnamed_error(msg):
            if carrier.hidden is not None:
                s.wrong_event = s.wrong_event or carrier.hidden
            elif s.unnamed_error is None:
                # It answers every request no answer names, as in a JSON body; which
                # those are is known when the stream ends (`settle_unnamed`).
                s.unnamed_error = msg
            return []
        key = (x.session.key, id_key(msg.get("id")))
        parked = self._waiting.claim(key)
        if parked is not None:
            s.answers += self._readable(parked.x, carrier)
            return self._answer_parked(parked, msg, ts, carrier)
        if x.kind == "stream":
            # Delivered now, even if its POST is parked only later (the 202 may reach
            # the proxy after this event, or after this stream's end): kept with how it
            # came, and counted now, while this stream's record is still to be written.
            s.answers += self._readable(x, carrier)
            self._waiting.keep_unclaimed(key, Carried(msg, carrier), ts)
        elif carrier.hidden is None and not s.has_unexpected_id:
            # Only the first is reported; keeping them all grew without bound
            # on a long stream of wrong ids (found by tests/hardening).
            s.unexpected_id, s.has_unexpected_id = msg.get("id"), True
        return []

    def _readable(self, x: Exchange, c: Carrier) -> bool:
        """Does a client read an answer to a request of `x` carried so (`sse.final`)?"""
        return c.hidden is None and (c.batch is None or self._batches(x))

    def _deliver(
        self, x: Exchange, s: StreamState, p: PendingRequest, msg: dict[str, Any], c: Carrier
    ) -> None:
        """An answer to one of this POST's own requests."""
        if c.hidden is not None:
            s.wrong_event = s.wrong_event or c.hidden  # the reason, if no answer follows
            return
        p.verdict = self._judge_carried(x, p, msg, c)
        self._learn(x, p, msg)

    def _judge_carried(
        self, x: Exchange, p: PendingRequest, msg: dict[str, Any], c: Carrier
    ) -> Verdict:
        """Where batches do not exist (`x`'s version), an answer that came in an array is
        judged as the array: the client could not read it (`batch_answer`)."""
        if c.batch is not None and not self._batches(x):
            return self._judge(x, p, c.batch)
        return self._judge(x, p, msg)

    def _answer_parked(
        self, parked: Parked, msg: dict[str, Any], ts: float, c: Carrier
    ) -> list[dict[str, Any]]:
        """A parked request's answer came, on the stream `c` says, maybe in an event its
        client skips (a 2024-11-05 answer in an event not named `message`)."""
        p, x = parked.p, parked.x
        if c.hidden is not None:
            p.verdict = violation(c.hidden)
        else:
            p.verdict = self._judge_carried(x, p, msg, c)
            p.resumed = parked.resumable
            self._learn(x, p, msg)
        return [self._record(self._conclude_request(x, p, ts, answered=True))]

    def settle_unnamed(self, x: Exchange) -> None:
        """The stream ends (or its client hung up): an error without an id it carried
        answers every request of the POST that no answer named."""
        s = x.stream
        if s is not None and s.unnamed_error is not None:
            self._settle_rest(x, s.unnamed_error)

    def _give_up_on_foreign_stream(self, x: Exchange, s: StreamState) -> None:
        """A GET stream that shows no JSON-RPC after a few events is not MCP: stop parsing."""
        if (
            x.kind == "stream"
            and not s.saw_jsonrpc
            and s.events >= limits.NON_MCP_STREAM_PROBE_EVENTS
        ):
            s.decoder.readable = False

    def _legacy_endpoint(self, x: Exchange, s: StreamState, data: str, ts: float) -> None:
        """2024-11-05: the stream names the POST URL, and with it the session."""
        try:
            query = parse_qs(urlsplit(data.strip()).query)
        except ValueError:  # not a URL at all (`http://[x/…`): no session to learn
            return
        found = next(iter(query.get("session_id") or query.get("sessionId") or []), None)
        if found:
            s.saw_jsonrpc = True
            x.session.get_streams = max(0, x.session.get_streams - 1)
            if s.endpoint:
                x.session.legacy_streams = max(0, x.session.legacy_streams - 1)
            x.session = self.sessions.real(found, ts)
            x.session.get_streams += 1
            # While this stream is open, the session's POSTs are answered on it.
            x.session.legacy_streams += 1
            s.endpoint = True
            x.session.protocol_version = x.session.protocol_version or "2024-11-05"
            x.protocol_version = x.protocol_version or x.session.protocol_version

    def _stream_closed(self, x: Exchange, how: str, ts: float) -> list[dict[str, Any]]:
        """The flow's stream (or body) ended `how`: read what is left, then finish."""
        s = x.stream
        records: list[dict[str, Any]] = []
        if s is not None:
            s.end, s.ended_at = how, ts
            for item in s.decoder.end():
                records += self._stream_item(x, s, item, ts)
            self.settle_unnamed(x)
        if x.kind == "stream":
            if s is not None and s.endpoint:
                s.endpoint = False
                x.session.legacy_streams = max(0, x.session.legacy_streams - 1)
            records += self._orphan_legacy_requests(x.session, ts)
        elif (
            x.kind == "request"
            and s is not None
            and s.saw_event_id
            and x.status is not None
            and 200 <= x.status < 300
            and x.fault is None  # a client that discarded the stream resumes nothing
            and not (x.protocol_version or "").startswith("2026")
        ):
            # 2025-11-25 polling: a stream with event ids may resume on a GET; the story
            # of its unanswered requests is not over yet.
            for p in x.requests:
                if p.verdict is None:
                    records += self._park(x, p, ts, Cause.RESUMABLE)
        return records + self._finish(x, ts)

    def _stream_verdict(self, x: Exchange, s: StreamState) -> Verdict:
        """No answer arrived on the stream for a request: say the most specific thing."""
        if not s.decoder.readable or s.skipped_event:
            return Verdict(Outcome.UNINSPECTED)
        if s.wrong_event is not None:
            return violation(s.wrong_event)
        if s.has_unexpected_id:
            # One note per exchange, not one per request of a batch.
            x.notes.add_once("unexpected_response_id", s.unexpected_id)
            return Verdict(Outcome.INVALID_ENVELOPE)
        if s.saw_not_json:
            return Verdict(Outcome.MALFORMED_JSON)
        if s.saw_non_rpc_json:
            return Verdict(Outcome.INVALID_ENVELOPE)
        return Verdict(Outcome.STREAM_INCOMPLETE)
