"""Finishing: an exchange's state becomes a frozen value. Pure functions; nothing changes.

The tracker calls these the moment a story ends, then teaches its books from the value
(`RetryBook.finish`, the session book), so the order records are later built in cannot
change a verdict: records are built from these values alone (`records.py`).
"""

from __future__ import annotations

from .classify import Outcome, Verdict, http_error, violation
from .exchanges import Exchange, PendingRequest, StreamState
from .finished import (
    Bodies,
    FinishedMessage,
    FinishedRequest,
    FinishedSession,
    FinishedStream,
    Head,
    SentEvent,
    SseSummary,
)
from .notes import Note
from .record import EndReason, NoteCode, StreamEnd
from .records import duration_ms, elapsed_ms
from .retries import retry_after_ms
from .sessions import Session
from .settings import Settings

#: A verdict, and the note the exchange takes for it (None: none).
Unanswered = tuple[Verdict, Note | None]


def head(x: Exchange, ts: float, scenario: str | None) -> Head:
    # Positional: this runs once per record, and keywords cost twice the time.
    return Head(
        x.kind,
        x.started,
        ts,  # ended
        x.server,
        x.session.key,
        x.client,
        x.user_agent,
        x.protocol_version,
        x.post_count,
        x.status,
        x.content_type,
        scenario,
        x.injected,
        x.notes.snapshot(),
        x.flow,
        x.header_names,
        x.accept,
    )


def unanswered(x: Exchange, p: PendingRequest) -> Unanswered:
    """The verdict on a request whose answer never came, the most specific one the
    exchange allows."""
    if x.status is None:
        return Verdict(Outcome.NO_RESPONSE), None
    if not 200 <= x.status < 300:
        return p.verdict or http_error(None), None
    if x.stream is not None:
        return stream_verdict(x.stream)
    if p.via_stream:  # parked, and the answer never came
        return Verdict(Outcome.STREAM_INCOMPLETE), None
    # Headers arrived and the exchange ended without a body event (shutdown).
    return Verdict(Outcome.NO_RESPONSE), None


def stream_verdict(s: StreamState) -> Unanswered:
    """No answer arrived on the stream for a request: say the most specific thing."""
    if not s.decoder.readable or s.skipped_event:
        return Verdict(Outcome.UNINSPECTED), None
    if s.wrong_event is not None:
        return violation(s.wrong_event), None
    if s.has_unexpected_id:
        return Verdict(Outcome.INVALID_ENVELOPE), Note(
            NoteCode.UNEXPECTED_RESPONSE_ID, s.unexpected_id
        )
    if s.saw_not_json:
        return Verdict(Outcome.MALFORMED_JSON), None
    if s.saw_non_rpc_json:
        return Verdict(Outcome.INVALID_ENVELOPE), None
    return Verdict(Outcome.STREAM_INCOMPLETE), None


def request(
    x: Exchange, p: PendingRequest, verdict: Verdict, ts: float, answered: bool, settings: Settings
) -> FinishedRequest:
    """`p` of `x`, judged `verdict` (its answer's, or `unanswered`'s)."""
    failed = x.status is not None and not 200 <= x.status < 300
    if failed and verdict.outcome is not Outcome.HTTP_ERROR:
        # The transport decides first: an answer inside an error status is kept only
        # for its JSON-RPC error fields (and why they stand without an id, say).
        verdict = Verdict(
            Outcome.HTTP_ERROR, verdict.error_code, verdict.error_message, note=verdict.note
        )
    elif (
        x.fault is not None
        and x.status is not None  # None: the body broke, the client got no answer
        and not p.via_stream
        and verdict.outcome not in (Outcome.HTTP_ERROR, Outcome.TRANSPORT_VIOLATION)
    ):
        # A stream in a 202's clothes: the client discarded it, whatever it carried.
        verdict = violation(x.fault, verdict)
    statuses = (*p.retry.earlier_statuses, *(() if x.status is None else (x.status,)))
    s = x.stream
    return FinishedRequest(  # positional, as in `head`
        head(x, ts, settings.scenario),
        p.record_id,
        p.method,
        p.tool,
        p.rpc_id,
        verdict,
        statuses,
        None
        if s is None
        else SseSummary(
            s.events,
            answered,
            s.end or StreamEnd.ERROR,
            p.resumed,
            s.saw_event_id,
            s.retry_ms,
            # When the client had to reconnect for its answer: it came resumed, or
            # never came after this stream ended.
            duration_ms(x.started, s.ended_at) if p.resumed or not answered else None,
            duration_ms(x.started, s.last_event_at),
        ),
        s is None and p.via_stream and answered,  # answer_on_get_stream
        p.retry,
        retry_after_ms(x.retry_after, ts) if failed else None,
        p.safety,
        p.previous_session,
        _bodies(x, p) if settings.record_bodies else None,
        p.prompt,
        p.model_call,
    )


def message(x: Exchange, ts: float, scenario: str | None) -> FinishedMessage:
    assert x.record_id is not None
    return FinishedMessage(head(x, ts, scenario), x.record_id, x.method, x.answered, x.had_body)


def stream(x: Exchange, ts: float, record_id: int, scenario: str | None) -> FinishedStream:
    s = x.stream
    resumed = "last-event-id" in x.header_names
    return FinishedStream(
        head(x, ts, scenario),
        record_id,
        None
        if s is None
        else SseSummary(
            s.events,
            s.answers > 0,
            s.end or StreamEnd.ERROR,
            resumed,
            s.saw_event_id,
            s.retry_ms,
        ),
    )


def delete(x: Exchange, ts: float, record_id: int, scenario: str | None) -> FinishedSession:
    """A DELETE's `session_end`. Its `end_reason` is `delete` when it ends the session
    (the tracker then ends it in the book), None when it ends nothing.

    An unanswered DELETE (the client exits while it is in flight) still ends the session
    for the client: it will not come back, so no `shutdown` end follows. A DELETE that
    ends nothing (refused, or the lifeline already ended by a 404, idleness or eviction)
    is still recorded, with no `endReason`: every session has exactly one `session_end`
    that names a reason.
    """
    accepted = x.status is None or 200 <= x.status < 300
    already = x.session.ended
    notes = x.notes.snapshot()
    if x.status is None:
        notes += (Note(NoteCode.DELETE_UNANSWERED),)
    elif not accepted:
        notes += (Note(NoteCode.NOT_ENDED, x.status),)
    if already is not None:
        notes += (Note(NoteCode.ALREADY_ENDED, already),)
    reason = EndReason.DELETE if accepted and already is None else None
    return FinishedSession(
        record_id=record_id,
        started=x.started,
        ended=ts,
        server=x.server,
        session=x.session.key,
        client=x.session.client,
        user_agent=x.user_agent,
        # A DELETE's record: the version of its own request (its header), as for a POST.
        protocol_version=x.protocol_version,
        posts=x.session.posts,
        status=x.status,
        scenario=scenario,
        injected=x.injected,
        end_reason=reason,
        stats=x.session.stats(),
        delete_notes=notes,
        flow=x.flow,
        header_names=x.header_names,
        accept=x.accept,
    )


def session(
    s: Session,
    status: int | None,
    start: float,
    ts: float,
    x: Exchange | None,
    record_id: int,
    scenario: str | None,
) -> FinishedSession:
    """The `session_end` of `s` that ended by itself (a 404 on `x`, idleness, the cap,
    the proxy stopping): its reason is the one the session book gave it."""
    return FinishedSession(
        record_id=record_id,
        started=start,
        ended=ts,
        server=x.server if x else s.server,
        session=s.key,
        client=s.client,
        user_agent=x.user_agent if x else None,
        protocol_version=s.protocol_version,
        posts=s.posts,
        status=status,
        scenario=scenario,
        injected=x.injected if x else None,
        end_reason=s.ended,
        stats=s.stats(),
        delete_notes=None,
        flow=x.flow if x else None,
    )


def _bodies(x: Exchange, p: PendingRequest) -> Bodies:
    """The request, its answer and how it came (`record_bodies`)."""
    s = x.stream
    events = (
        ()
        if s is None or s.transcript is None
        else tuple(
            SentEvent(elapsed_ms(x.started, e.ts), e.id, e.event, e.retry, e.data)
            for e in s.transcript
        )
    )
    headers_ms = None if x.headers_at is None else duration_ms(x.started, x.headers_at)
    return Bodies(p.message, p.answer, headers_ms, events)
