"""The state an exchange carries through the tracker, and the table of its phases.

Plain data: the tracker (`tracker.py`) owns every transition. `TRANSITIONS` is the one
place that says which event may move an exchange from which phase to which (h11's
`_state.py` rule), so a misuse by the adapter is caught and named, not guessed at.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from . import limits
from .classify import Verdict
from .events import (
    FlowFailed,
    ProxyStopping,
    ResponseBody,
    ResponseStarted,
    StreamChunk,
    StreamEnded,
)
from .retries import NOT_A_RETRY, Attempt, RetryInfo
from .sessions import Session
from .sse import SseParser


class LocalUsageError(Exception):
    """The caller fed events in an order no proxy can produce. A bug, not bad traffic."""


class Phase(Enum):
    #: The request is in; no response headers yet.
    AWAITING_HEADERS = "awaiting_headers"
    #: Headers are in; a buffered body or a stream follows.
    AWAITING_BODY = "awaiting_body"
    #: Stream chunks are arriving.
    STREAMING = "streaming"
    #: Finished; nothing more will be recorded from this exchange's own events.
    DONE = "done"


#: Which event moves an exchange from which phase to which. Anything else is misuse.
TRANSITIONS: dict[Phase, dict[type, Phase]] = {
    Phase.AWAITING_HEADERS: {
        ResponseStarted: Phase.AWAITING_BODY,
        FlowFailed: Phase.DONE,
        ProxyStopping: Phase.DONE,
    },
    Phase.AWAITING_BODY: {
        ResponseBody: Phase.DONE,
        StreamChunk: Phase.STREAMING,
        StreamEnded: Phase.DONE,
        FlowFailed: Phase.DONE,
        ProxyStopping: Phase.DONE,
    },
    Phase.STREAMING: {
        StreamChunk: Phase.STREAMING,
        StreamEnded: Phase.DONE,
        FlowFailed: Phase.DONE,
        ProxyStopping: Phase.DONE,
    },
    Phase.DONE: {},
}

#: JSON-RPC codes a 2026-07-28 server answers during version negotiation (HTTP 400).
NEGOTIATION_CODES = frozenset({-32020, -32021, -32022})


@dataclass(slots=True)
class Settings:
    scenario: str | None = None
    raw_session_ids: bool = False
    max_body_bytes: int = limits.MAX_BODY_BYTES
    max_event_bytes: int = limits.MAX_EVENT_BYTES
    max_pending: int = limits.MAX_PENDING_EXCHANGES
    max_sessions: int = limits.MAX_SESSIONS
    max_parked: int = limits.MAX_PARKED
    resume_window_s: float = limits.RESUME_WINDOW_S
    #: Opt-in: keep redacted request and answer messages in the records.
    record_bodies: bool = False


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
    message: dict[str, Any] | None = None  # kept only with `record_bodies`
    answer: object = None  # likewise


@dataclass(slots=True)
class Exchange:
    flow: str
    started: float
    server: str
    peer: str
    session: Session
    kind: str  # request | notification | response | stream | session_end
    user_agent: str | None
    client: str | None = None
    protocol_version: str | None = None
    post_count: int | None = None
    method: str | None = None
    record_id: int | None = None
    requests: list[PendingRequest] = field(default_factory=list)
    by_id: dict[tuple[str, object], PendingRequest] = field(default_factory=dict)
    phase: Phase = Phase.AWAITING_HEADERS
    status: int | None = None
    content_type: str | None = None
    retry_after: str | None = None
    framed: bool = True
    had_body: bool = False
    notes: list[str] = field(default_factory=list)
    answered: list[tuple[str, float]] = field(default_factory=list)  # (serverMethod, answerMs)
    negotiating: bool = False
    injected: dict[str, str] | None = None  # a fault rule's {rule, action}
    # Streaming state, set when the answer is text/event-stream.
    parser: SseParser | None = None
    inflater: Any = None  # zlib decompressobj for gzip/deflate streams
    stream_readable: bool = True
    events: int = 0
    saw_event_id: bool = False
    saw_jsonrpc: bool = False
    stream_end: str | None = None
    unexpected_ids: list[object] = field(default_factory=list)  # the first one only
    saw_not_json: bool = False
    saw_non_rpc_json: bool = False
    skipped_event: bool = False
    #: How often each repeatable note occurred (see `_repeatable_note`); None until one does.
    repeats: dict[str, int] | None = None


@dataclass(slots=True)
class Parked:
    x: Exchange
    p: PendingRequest
    since: float
    resumable: bool  # True: 2025 resumption; False: a 2024-11-05 answer on the GET stream
