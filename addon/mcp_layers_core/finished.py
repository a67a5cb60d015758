"""A finished pairing as a frozen value: everything its record says, nothing more.

(Named tuples rather than frozen dataclasses: one is made per record, on the hot path,
and a tuple is built several times faster than a frozen dataclass sets its fields.)

The tracker makes one of these the moment a story ends (after updating the session and
retry books from it), and `records.py` turns it into the record, a pure function. A
value may wait (`HELD`) before it is written; nothing about it changes meanwhile except
the one thing the wait is for, which the record builder takes as an argument.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .classify import Verdict
from .model_api import ModelCall
from .notes import Note
from .record import EndReason, Kind, StreamEnd
from .retries import RetryInfo


class Head(NamedTuple):
    """The flow a record comes from: who, where, when, and how the transport answered."""

    kind: Kind  # request | notification | response | stream
    started: float
    ended: float
    server: str
    session: str
    client: str | None
    user_agent: str | None
    protocol_version: str | None
    post_count: int | None
    status: int | None
    content_type: str | None
    scenario: str | None
    injected: dict[str, str] | None
    notes: tuple[Note, ...]
    flow: str  # the adapter's flow id: not in the record; lets the adapter find the flow
    header_names: tuple[str, ...] = ()
    accept: tuple[str, ...] = ()


class SseSummary(NamedTuple):
    events: int
    final: bool
    end: StreamEnd
    resumed: bool
    event_ids: bool = False
    retry_ms: int | None = None
    closed_ms: float | None = None  # a resumed answer's own stream: ms to its end
    last_event_ms: float | None = None  # ms from the request to its stream's last event


class SentEvent(NamedTuple):
    """An SSE event of the answer: ms after the request, its `id`, `event`, `retry`, data."""

    ms: float
    id: str | None
    event: str | None
    retry: int | None
    data: str


class Bodies(NamedTuple):
    """What replay needs to serve the answer again: the request, its answer, when the
    response's headers came (ms after the request), and every SSE event of its stream."""

    request: dict[str, Any] | None
    answer: object
    headers_ms: float | None
    events: tuple[SentEvent, ...]


class FinishedRequest(NamedTuple):
    head: Head
    record_id: int
    method: str
    tool: str | None
    rpc_id: object
    verdict: Verdict
    statuses: tuple[int, ...]  # earlier attempts' statuses, then this one's
    sse: SseSummary | None
    answer_on_get_stream: bool
    retry: RetryInfo
    retry_after_ms: int | None
    safety: str | None
    previous_session: str | None
    #: With `record_bodies` only; redacted when the record is built.
    bodies: Bodies | None
    prompt: str | None
    #: The model's tool call this `tools/call` carries out (`modelCall`), if seen.
    model_call: ModelCall | None = None


class FinishedMessage(NamedTuple):
    """A POST of notifications or of answers to server requests: counted, not judged."""

    head: Head
    record_id: int
    method: str | None
    answered: tuple[str, float] | None  # (serverMethod, answerMs)
    had_body: bool


class FinishedSession(NamedTuple):
    """The end of a session's lifeline: a DELETE, a 404, or the proxy stopping."""

    record_id: int
    started: float
    ended: float
    server: str
    session: str
    client: str | None
    user_agent: str | None
    protocol_version: str | None
    posts: int
    status: int | None
    scenario: str | None
    injected: dict[str, str] | None
    end_reason: EndReason | None
    stats: dict[str, int]
    #: The client's DELETE: its flow's notes, then how the DELETE went. None otherwise.
    delete_notes: tuple[Note, ...] | None
    #: The flow that ended the session (a DELETE, a POST answered 404); None at shutdown.
    flow: str | None
    header_names: tuple[str, ...] = ()  # a DELETE's
    accept: tuple[str, ...] = ()


class FinishedStream(NamedTuple):
    """A GET event stream that ended (or was refused: a 405, say)."""

    head: Head
    record_id: int
    sse: SseSummary | None


Finished = FinishedRequest | FinishedMessage | FinishedSession | FinishedStream


def flow_of(finished: Finished) -> str | None:
    """The id of the flow a finished value's record belongs to (None: no flow, the
    proxy's own end of a session)."""
    return finished.flow if isinstance(finished, FinishedSession) else finished.head.flow
