"""What the proxy saw, as plain values: the input of the exchange tracker.

The adapter turns mitmproxy hooks into these events; tests build them by hand. Each
carries only what the core needs: `headers` hold the few lower-case names the core
reads (see `WANTED_REQUEST_HEADERS` / `WANTED_RESPONSE_HEADERS`), so secrets such as
`Authorization` or cookies never even reach the core. Times are seconds since the epoch.

Events are values: nothing changes one once it is made. They are not `frozen`
dataclasses all the same, because a frozen dataclass sets each field through
`object.__setattr__` and is built about eight times slower, and the proxy builds
three or four events per exchange.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

#: Request headers the core reads. Everything else stays in the proxy.
WANTED_REQUEST_HEADERS: tuple[str, ...] = (
    "mcp-session-id",
    "mcp-protocol-version",
    "user-agent",
    "last-event-id",
    "accept",
)

#: Response headers the core reads.
WANTED_RESPONSE_HEADERS: tuple[str, ...] = (
    "content-type",
    "content-encoding",
    "mcp-session-id",
    "retry-after",
)


@dataclass(slots=True)
class PostReceived:
    """A POST reached the proxy, body complete."""

    flow: str
    ts: float
    server: str  # upstream "host:port"
    peer: str  # the client connection, "ip:port"
    headers: Mapping[str, str]
    body: bytes | None  # None when over the body cap (`body_size` tells how large)
    body_size: int = 0
    query_session: str | None = None  # 2024-11-05: `session_id`/`sessionId` of the POST URL
    #: The request's path and query (a model API is recognised by it; `model_api.py`).
    path: str | None = None


@dataclass(slots=True)
class OtherRequest:
    """A GET (an event stream) or a DELETE (the end of a session) reached the proxy."""

    flow: str
    ts: float
    method: str
    server: str
    peer: str
    headers: Mapping[str, str]
    query_session: str | None = None


@dataclass(slots=True)
class ResponseStarted:
    """Response headers arrived (the body has not been read yet)."""

    flow: str
    ts: float
    status: int
    headers: Mapping[str, str] = field(default_factory=dict)
    framed: bool = True  # Content-Length or chunked; False = the body ends when the server closes


@dataclass(slots=True)
class ResponseBody:
    """A buffered (non-streamed) response is complete."""

    flow: str
    ts: float
    body: bytes | None  # decoded content; None when over the body cap
    body_size: int = 0


@dataclass(slots=True)
class StreamChunk:
    """A chunk of a streamed response, as the socket delivered it (raw wire bytes)."""

    flow: str
    ts: float
    data: bytes


@dataclass(slots=True)
class StreamEnded:
    """A streamed response ended normally (the proxy saw the end of the message)."""

    flow: str
    ts: float


@dataclass(slots=True)
class FlowFailed:
    """The exchange broke: no response, or the response was interrupted."""

    flow: str
    ts: float
    reason: str


@dataclass(slots=True)
class WsMessage:
    """A WebSocket message on a connection whose handshake went to `path` (OpenAI
    Responses over WebSocket: Codex's `response.create` frames and the server's events).
    `data` is None when the message was larger than the body cap (only its size is known)."""

    flow: str
    ts: float
    from_client: bool
    data: bytes | None
    path: str
    server: str = ""
    user_agent: str | None = None


@dataclass(slots=True)
class WsEnded:
    """A WebSocket connection closed (`reason`: why, when it broke)."""

    flow: str
    ts: float
    reason: str | None = None


@dataclass(slots=True)
class ProxyStopping:
    """The proxy is shutting down; whatever is still open must be written now."""

    ts: float


@dataclass(frozen=True, slots=True)
class Tick:
    """Time passed without traffic (the adapter's clock, every few seconds): sessions
    may have gone idle and parked requests may have expired."""

    ts: float


Event = (
    PostReceived
    | OtherRequest
    | ResponseStarted
    | ResponseBody
    | StreamChunk
    | StreamEnded
    | FlowFailed
    | ProxyStopping
    | Tick
    | WsMessage
    | WsEnded
)
