"""Build the JSONL records from finished pairings: pure functions.

The fields, their order and types are defined once, in `record.py`; this module fills
them. Every field is present; what does not apply is null. Notes are rendered to their
strings here, and only here.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from .classify import Verdict
from .finished import (
    Bodies,
    Finished,
    FinishedMessage,
    FinishedRequest,
    FinishedSession,
    FinishedStream,
    Head,
    SseSummary,
)
from .jsonrpc import NOT_JSON, try_loads
from .notes import NO_DETAIL, Note
from .record import LAYER_OF, Kind, NoteCode, new_record
from .redact import error_message, redact_json

#: Longest note a peer's data can make (an unexpected response id is the server's).
MAX_NOTE_CHARS = 120


def _iso_ms_slow(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


#: The date-and-seconds part of the last second `iso_ms` wrote: records come in bursts
#: within the same second, and building a datetime is most of the cost.
_last_second: list[Any] = [None, ""]


def iso_ms(ts: float) -> str:
    """`2026-11-30T15:02:51.925Z`: ISO-8601 UTC with milliseconds (as `datetime` writes it)."""
    if not 0 <= ts < 32503680000:  # before 1970 or after 2999: rare, done the long way
        return _iso_ms_slow(ts)
    # The microseconds as `datetime.fromtimestamp` rounds them (half to even), then cut.
    frac, whole = math.modf(ts)
    micros = round(frac * 1e6)
    if micros >= 1_000_000:
        whole, micros = whole + 1, micros - 1_000_000
    second = int(whole)
    if _last_second[0] != second:
        _last_second[:] = [
            second,
            datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S"),
        ]
    return f"{_last_second[1]}.{micros // 1000:03d}Z"


def duration_ms(start: float, end: float | None) -> float | None:
    return None if end is None else round(max(0.0, end - start) * 1000, 1)


def elapsed_ms(start: float, end: float) -> float:
    return round(max(0.0, end - start) * 1000, 1)


def base_record(
    *,
    record_id: int,
    kind: str,
    ts: float,
    end_ts: float | None,
    server: str,
    session: str | None,
    client: str | None,
    user_agent: str | None,
    protocol_version: str | None,
    method: str | None,
    tool: str | None,
    post_count: int | None,
    http_statuses: list[int],
    content_type: str | None,
    scenario: str | None,
) -> dict[str, Any]:
    """The fields every record kind shares, in the documented order."""
    return new_record(
        id=record_id,
        kind=kind,
        ts=iso_ms(ts),
        durationMs=duration_ms(ts, end_ts),
        server=server,
        session=session,
        client=client,
        userAgent=user_agent,
        protocolVersion=protocol_version,
        method=method,
        tool=tool,
        postCount=post_count,
        httpStatuses=http_statuses,
        contentType=content_type,
        scenario=scenario,
    )


def record_of(finished: Finished, negotiation: bool | None = None) -> dict[str, Any]:
    """The record of a finished pairing. `negotiation`: the verdict of a `HELD` wait."""
    if isinstance(finished, FinishedRequest):
        return request_record(finished, negotiation)
    if isinstance(finished, FinishedMessage):
        return message_record(finished)
    if isinstance(finished, FinishedStream):
        return stream_record(finished)
    return session_record(finished)


def request_record(f: FinishedRequest, negotiation: bool | None = None) -> dict[str, Any]:
    record = _flow_record(f.head, f.record_id, f.method, f.tool)
    record["prompt"] = f.prompt
    add_verdict(record, f.rpc_id, f.verdict)
    if f.sse is not None:
        add_sse(record, f.sse)
    elif f.answer_on_get_stream:
        record["notes"].append("answer_on_get_stream")
    r = f.retry
    record.update(
        httpStatuses=list(f.statuses),
        retryOrigin=r.origin,
        attempt=r.attempt,
        retryOf=r.retry_of,
        retryDelayMs=r.delay_ms,
        retryAfterMs=f.retry_after_ms,
        retryAfterHonored=r.after_ms_honored,
        toolSafety=f.safety,
        unsafeRetry=r.unsafe,
        continues=r.continues,
        previousSession=f.previous_session,
        negotiation=negotiation,
    )
    if f.model_call is not None:
        record["modelCall"] = f.model_call.record()
    if f.bodies is not None:
        record["bodies"] = _bodies(f.bodies)
    return record


def message_record(f: FinishedMessage) -> dict[str, Any]:
    """A POST of notifications or of answers to server requests: counted, not classified."""
    record = _flow_record(f.head, f.record_id, f.method, None)
    if f.answered is not None:
        record["method"] = None
        record["serverMethod"], record["answerMs"] = f.answered
    status = f.head.status
    if status is not None and status != 202:
        record["ackNote"] = f"{status} with body" if f.had_body else f"{status} without body"
    return record


def stream_record(f: FinishedStream) -> dict[str, Any]:
    """A GET event stream: when it opened, how long it lasted, what it carried."""
    record = _flow_record(f.head, f.record_id, None, None)
    if f.sse is not None:
        add_sse(record, f.sse)
    return record


def add_sse(record: dict[str, Any], s: SseSummary) -> None:
    record["sse"] = sse_summary(s.events, s.final, s.end, s.resumed)
    record["eventIds"] = s.event_ids
    record["retryMs"] = s.retry_ms
    record["streamClosedMs"] = s.closed_ms
    record["lastEventMs"] = s.last_event_ms


def session_record(f: FinishedSession) -> dict[str, Any]:
    record = base_record(
        record_id=f.record_id,
        kind=Kind.SESSION_END,
        ts=f.started,
        end_ts=f.ended,
        server=f.server,
        session=f.session,
        client=f.client,
        user_agent=f.user_agent,
        protocol_version=f.protocol_version,
        method=None,
        tool=None,
        post_count=f.posts,
        http_statuses=[] if f.status is None else [f.status],
        content_type=None,
        scenario=f.scenario,
    )
    record["injected"] = f.injected
    record["requestHeaders"] = list(f.header_names)
    record["accept"] = list(f.accept)
    record["endReason"] = f.end_reason
    record["sessionStats"] = f.stats
    if f.delete_notes is not None:
        record["notes"] = render_notes(f.delete_notes)
    return record


def _flow_record(
    head: Head, record_id: int, method: str | None, tool: str | None
) -> dict[str, Any]:
    # `new_record` directly, not through `base_record`: this runs once per record.
    return new_record(
        id=record_id,
        kind=head.kind,
        ts=iso_ms(head.started),
        durationMs=elapsed_ms(head.started, head.ended),
        server=head.server,
        session=head.session,
        client=head.client,
        userAgent=head.user_agent,
        protocolVersion=head.protocol_version,
        method=method,
        tool=tool,
        postCount=head.post_count,
        httpStatuses=[] if head.status is None else [head.status],
        contentType=head.content_type,
        scenario=head.scenario,
        injected=head.injected,
        requestHeaders=list(head.header_names),
        accept=list(head.accept),
        notes=[render_note(n) for n in head.notes],
    )


def render_notes(notes: tuple[Note, ...]) -> list[str]:
    return [render_note(n) for n in notes]


def render_note(note: Note) -> str:
    """`code` or `code:detail`; an id a server sent is shown as its repr, cut short."""
    if note.detail is NO_DETAIL:
        return note.code
    if note.code == NoteCode.UNEXPECTED_RESPONSE_ID:
        text = f"{note.code}:{note.detail!r}"
        if len(text) > MAX_NOTE_CHARS:  # the id is the server's: any size
            text = text[: MAX_NOTE_CHARS - 1] + "…"
        return text
    return f"{note.code}:{note.detail}"


def add_verdict(record: dict[str, Any], request_id: object, verdict: Verdict) -> None:
    """Fill the classification fields of a request record."""
    message = verdict.error_message
    record["jsonrpc"] = {
        "id": request_id,
        "errorCode": verdict.error_code,
        "errorMessage": None if message is None else error_message(message),
    }
    record["resultType"] = verdict.result_type
    record["isError"] = verdict.is_error
    # `str()`: the plain value, without the two Python calls of an enum's `.value`.
    record["outcome"] = str(verdict.outcome)
    record["layer"] = str(LAYER_OF[verdict.outcome])
    if verdict.note is not None:
        record["notes"].append(render_note(verdict.note))


def sse_summary(events: int, final: bool, end: str, resumed: bool = False) -> dict[str, Any]:
    return {"events": events, "final": final, "end": end, "resumed": resumed}


def _bodies(b: Bodies) -> dict[str, Any]:
    """`bodies`, redacted: each event's data as the JSON it holds (redacted), else as text
    scrubbed and cut like any string of a body."""
    return {
        "request": redact_json(b.request),
        "response": redact_json(None if b.answer is NOT_JSON else b.answer),
        "headersMs": b.headers_ms,
        "events": [
            {
                "ms": e.ms,
                "id": e.id,
                "event": e.event,
                "retry": e.retry,
                **_event_data(e.data),
            }
            for e in b.events
        ],
    }


def _event_data(data: str) -> dict[str, object]:
    """`{data, json}`: the JSON value the data held (`json: true`), else the text."""
    value = try_loads(data) if data else NOT_JSON
    if value is NOT_JSON:
        return {"data": redact_json(data), "json": False}
    return {"data": redact_json(value), "json": True}
