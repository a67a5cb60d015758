"""What the tracker holds while a pairing is in flight: plain, mutable, short-lived.

An `Exchange` is one flow (a POST, a GET stream, a DELETE) until it is finished; a
`PendingRequest` is one JSON-RPC request of it (a batch has several); `StreamState` is
what reading its SSE answer has shown so far. Once finished, what a record needs is
copied into a frozen value (`finished.py`) and this state is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from .classify import Verdict
from .decode import StreamDecoder
from .lifecycle import Phase
from .model_api import ModelCall
from .notes import Note, NoteLog
from .record import Kind, StreamEnd
from .retries import NOT_A_RETRY, Attempt, RetryInfo
from .sessions import Session


@dataclass(slots=True)
class PendingRequest:
    rpc_id: object
    method: str
    tool: str | None
    record_id: int
    prompt: str | None = None
    attempt: Attempt | None = None
    retry: RetryInfo = NOT_A_RETRY
    safety: str | None = None
    previous_session: str | None = None
    verdict: Verdict | None = None
    resumed: bool = False
    via_stream: bool = False
    task: bool = False  # task-augmented (`params.task`, 2025-11-25)
    message: dict[str, Any] | None = None  # kept only with `record_bodies`
    answer: object = None  # likewise
    #: The model's tool call this `tools/call` carries out, when the proxy saw it.
    model_call: ModelCall | None = None


class WireEvent(NamedTuple):
    """One SSE event as it came, for replay (kept only with `record_bodies`)."""

    ts: float
    id: str | None
    event: str | None
    retry: int | None
    data: str


#: The most events of one stream a transcript keeps: replay needs the events around an
#: answer (progress, logs, server requests), not an endless stream's every keep-alive.
MAX_TRANSCRIPT_EVENTS: Final = 256


@dataclass(slots=True)
class StreamState:
    """An SSE answer (or GET stream) as read so far."""

    decoder: StreamDecoder
    framed: bool  # False: the stream ends when the server closes (`eof`, not `complete`)
    events: int = 0
    saw_event_id: bool = False
    saw_jsonrpc: bool = False
    saw_not_json: bool = False
    saw_non_rpc_json: bool = False
    skipped_event: bool = False
    #: The first answer whose id matched no request (later ones are not kept: bounded).
    unexpected_id: object = None
    has_unexpected_id: bool = False
    #: Why an answer on this stream never reached the client: the first SSE event type
    #: other than `message` that carried one.
    wrong_event: Note | None = None
    #: A 2024-11-05 GET stream that announced its session (`endpoint` event), counted in
    #: the session's `legacy_streams` while open.
    endpoint: bool = False
    end: StreamEnd | None = None
    retry_ms: int | None = None  # the last `retry:` the stream sent
    ended_at: float | None = None  # when the stream itself ended
    last_event_at: float | None = None  # when its last event came
    answers: int = 0  # a GET stream: answers it delivered to requests of its session
    #: The first error without an id on a POST's stream: it answers the requests no
    #: answer named, once the stream has ended.
    unnamed_error: dict[str, Any] | None = None
    #: Every event as it came (at most MAX_TRANSCRIPT_EVENTS), with `record_bodies` only.
    transcript: list[WireEvent] | None = None


@dataclass(slots=True)
class Exchange:
    flow: str
    started: float
    server: str
    peer: str
    session: Session
    kind: Kind
    user_agent: str | None
    client: str | None = None
    protocol_version: str | None = None
    post_count: int | None = None
    phase: Phase = Phase.AWAITING_HEADERS
    # A POST of requests: one pending request each, and a way to find them by id.
    requests: list[PendingRequest] = field(default_factory=list)
    by_id: dict[tuple[str, object], PendingRequest] = field(default_factory=dict)
    negotiating: bool = False  # a rejection here may be version negotiation
    # A POST of notifications or answers: one record of its own.
    method: str | None = None
    record_id: int | None = None
    answered: tuple[str, float] | None = None  # (serverMethod, answerMs) of the first answer
    # The response, as far as it came.
    status: int | None = None
    content_type: str | None = None
    retry_after: str | None = None
    headers_at: float | None = None  # when the response's headers arrived
    content_coding: str = "identity"
    #: Why this 2xx answer to a request cannot reach the client (`answer_form_fault`).
    fault: Note | None = None
    had_body: bool = False
    stream: StreamState | None = None  # set when the answer is text/event-stream
    session_lost: bool = False  # a 404 said the server forgot the session
    injected: dict[str, str] | None = None  # a fault rule's {rule, action}
    notes: NoteLog = field(default_factory=NoteLog)
    # The request's MCP header names and `Accept` media types (`request_headers.py`).
    header_names: tuple[str, ...] = ()
    accept: tuple[str, ...] = ()


@dataclass(slots=True)
class Parked:
    """A request waiting beyond its flow for its answer on another stream."""

    x: Exchange
    p: PendingRequest
    since: float
    resumable: bool  # True: 2025 resumption; False: a 2024-11-05 answer on the GET stream
    phase: Phase = Phase.PARKED
