"""The bundled MCP server, built on the official Python SDK (``mcp`` 2.x ``MCPServer``).

Run it with ``python -m mcp_layers_demo.server --port P [--host 127.0.0.1] [--json] [--stateless]``.
It serves Streamable HTTP at ``http://HOST:P/mcp`` and prints one line
``listening on http://HOST:P/mcp`` on stdout once the socket accepts connections.

Tools, chosen so that one client run produces every ordinary outcome:

- ``echo(text)``: read-only success.
- ``fail(reason)``: raises ``ToolError``, which the SDK turns into ``isError: true``.
- ``slow(steps, delay_ms)``: a log and a progress notification per step before the result,
  so on an SSE response the answer is a stream of several events spread over time
  (this is what proves that the proxy does not buffer SSE).
- ``add_note(text)``: side-effecting (not read-only, not destructive, not idempotent).
- ``get_notes()``: read-only.

Besides ``/mcp`` it answers ``GET /stats`` with the POSTs it received on ``/mcp`` (count and
JSON-RPC methods/ids). Tests read it directly, not through the proxy, as the ground truth of
what reached the server.
"""

import argparse
import json
import sys
import warnings
from collections import deque
from contextvars import ContextVar
from typing import Any

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.streamable_http import EventCallback, EventId, EventMessage, EventStore, StreamId
from mcp.shared.exceptions import MCPDeprecationWarning
from mcp_types import ToolAnnotations
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

SERVER_NAME = "mcp-layers-demo-server"
SERVER_VERSION = "0.1.0"
MCP_PATH = "/mcp"
STATS_PATH = "/stats"

# Bounds: the demo must not grow without limit however long a test session keeps it up.
_MAX_NOTES = 1000
_MAX_POST_LOG = 10_000
_MAX_BODY_PEEK = 64 * 1024
_MAX_STEPS = 50
_MAX_DELAY_MS = 5000

_READ_ONLY = ToolAnnotations(read_only_hint=True)
_ADDITIVE_NOT_IDEMPOTENT = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False
)


class PostLog:
    """What the server saw on its MCP endpoint: every POST, in arrival order."""

    def __init__(self) -> None:
        self.count = 0
        self.posts: deque[dict[str, Any]] = deque(maxlen=_MAX_POST_LOG)

    def add(self, body: bytes) -> None:
        self.count += 1
        self.posts.append({"n": self.count, **_describe(body)})

    def snapshot(self) -> dict[str, Any]:
        return {"count": self.count, "posts": list(self.posts)}


def _describe(body: bytes) -> dict[str, Any]:
    """Method and id of a JSON-RPC body (a batch is described by its first message)."""
    try:
        msg = json.loads(body)
    except ValueError:
        return {"method": None, "id": None, "batch": None}
    batch = len(msg) if isinstance(msg, list) else None
    if isinstance(msg, list):
        msg = msg[0] if msg else {}
    if not isinstance(msg, dict):
        return {"method": None, "id": None, "batch": batch}
    return {"method": msg.get("method"), "id": msg.get("id"), "batch": batch}


class CountPosts:
    """ASGI middleware that logs each POST to the MCP path without altering it.

    It peeks at the request body as the app reads it (no extra buffering of the whole
    request ahead of the app), so the server's behaviour is exactly the SDK's.
    """

    def __init__(self, app: ASGIApp, log: PostLog) -> None:
        self.app = app
        self.log = log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != MCP_PATH:
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        logged = False

        async def peek() -> Message:
            nonlocal size, logged
            message = await receive()
            if message["type"] == "http.request" and not logged:
                body = message.get("body", b"")
                if size < _MAX_BODY_PEEK:
                    chunks.append(body[: _MAX_BODY_PEEK - size])
                    size += len(body)
                if not message.get("more_body", False):
                    logged = True
                    self.log.add(b"".join(chunks))
            return message

        try:
            await self.app(scope, peek, send)
        finally:
            # A POST the app rejected before reading its body still reached the server.
            if not logged:
                self.log.add(b"".join(chunks))


def build_server() -> MCPServer:
    """The demo MCPServer with its five tools (fresh state: an empty notes list)."""
    mcp = MCPServer(SERVER_NAME, version=SERVER_VERSION, log_level="WARNING")
    notes: list[str] = []

    @mcp.tool(annotations=_READ_ONLY)
    def echo(text: str) -> str:
        """Echo text back."""
        return f"echo: {text}"

    @mcp.tool()
    def fail(reason: str = "boom") -> str:
        """Always fails: the result has isError true."""
        raise ToolError(f"tool failed: {reason}")

    @mcp.tool()
    async def slow(ctx: Context, steps: int = 3, delay_ms: int = 300) -> str:
        """Sends a log and a progress notification per step, delay_ms apart, then answers."""
        steps = max(0, min(steps, _MAX_STEPS))
        delay = max(0, min(delay_ms, _MAX_DELAY_MS)) / 1000
        for i in range(steps):
            await ctx.info(f"step {i + 1}/{steps}")
            await ctx.report_progress(i + 1, steps, f"step {i + 1}")
            await anyio.sleep(delay)
        return f"done after {steps} steps"

    @mcp.tool(annotations=_ADDITIVE_NOT_IDEMPOTENT)
    def add_note(text: str) -> int:
        """Appends a note (a side effect) and returns how many notes there are."""
        if len(notes) >= _MAX_NOTES:
            del notes[0]
        notes.append(text)
        return len(notes)

    @mcp.tool(annotations=_READ_ONLY)
    def get_notes() -> list[str]:
        """Returns the notes added so far."""
        return list(notes)

    return mcp


class _Uvicorn(uvicorn.Server):
    """uvicorn.Server that announces readiness once its socket is bound."""

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        if self.started:
            port = self._announce_port()
            print(f"listening on http://{self.config.host}:{port}{MCP_PATH}", flush=True)

    def _announce_port(self) -> int:
        # --port 0 lets the OS choose; report the port actually bound.
        for server in getattr(self, "servers", []):
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return int(self.config.port)


#: How many events the resumable server keeps, across its streams (oldest dropped first).
MAX_STORED_EVENTS = 10_000

#: The `retry:` delay the resumable server announces, in ms.
RETRY_INTERVAL_MS = 500


class _SessionRef:
    """The MCP session a request belongs to; filled in from the answer for the request that
    opens the session (it has no `Mcp-Session-Id` yet)."""

    __slots__ = ("id",)

    def __init__(self, session_id: str | None) -> None:
        self.id = session_id


#: The session of the request being served. The SDK stores a session's events from two
#: places: the request's own task (the priming event of a POST's or a replay's stream) and
#: the session's message router, a task started while `initialize` was served, so it
#: inherits that request's context: the same `_SessionRef`, filled in once the answer names
#: the session.
_SESSION: ContextVar[_SessionRef | None] = ContextVar("mcp_demo_session", default=None)


class SessionScope:
    """ASGI middleware that tells the event store which session a request belongs to."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != MCP_PATH:
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        sent = headers.get(b"mcp-session-id")
        ref = _SessionRef(sent.decode("latin-1") if sent is not None else None)

        async def named(message: Message) -> None:
            if ref.id is None and message["type"] == "http.response.start":
                for key, value in message.get("headers") or []:
                    if key.lower() == b"mcp-session-id":
                        ref.id = value.decode("latin-1")
            await send(message)

        token = _SESSION.set(ref)
        try:
            await self.app(scope, receive, named)
        finally:
            _SESSION.reset(token)


class MemoryEventStore(EventStore):
    """Events kept in memory, so a client can resume a cut stream with `Last-Event-ID`.

    Ids are `<stream>:<n>`, `n` counting every event the server stored (so an id is unique
    across streams and sessions). A stream is the SDK's: a request's id for a POST's
    answer, `_GET_stream` for the standby GET. A replay after `<stream>:<n>` sends what
    followed event `n` on the same stream of the same session: request ids repeat from one
    session to the next, and a session never gets another session's messages. An id this
    store does not hold (unknown, dropped, or another session's) replays nothing.
    """

    def __init__(self, limit: int = MAX_STORED_EVENTS) -> None:
        self._events: deque[tuple[StreamId, int, Any]] = deque(maxlen=limit)
        self._refs: dict[int, _SessionRef | None] = {}
        self._count = 0

    async def store_event(self, stream_id: StreamId, message: Any) -> EventId:
        self._count += 1
        if len(self._events) == self._events.maxlen:
            self._refs.pop(self._events[0][1], None)
        # The session is read at replay time: the opening request's ref is filled in
        # when its answer starts, after the events stored while it was served.
        self._refs[self._count] = _SESSION.get()
        self._events.append((stream_id, self._count, message))
        return f"{stream_id}:{self._count}"

    def _session_of(self, number: int) -> str | None:
        ref = self._refs.get(number)
        return None if ref is None else ref.id

    async def replay_events_after(
        self, last_event_id: EventId, send_callback: EventCallback
    ) -> StreamId | None:
        stream_id, _, n = last_event_id.rpartition(":")
        if not stream_id or not n.isdigit() or int(n) not in self._refs:
            return None
        after = int(n)
        ref = _SESSION.get()
        session = self._session_of(after)
        if session is None or ref is None or ref.id != session:
            return None
        for sid, number, message in list(self._events):
            if (
                number > after
                and sid == stream_id
                and message is not None
                and self._session_of(number) == session
            ):
                await send_callback(EventMessage(message, f"{sid}:{number}"))
        return stream_id


def build_app(
    json_response: bool, stateless: bool, host: str, resumable: bool = False
) -> tuple[ASGIApp, PostLog]:
    mcp = build_server()
    log = PostLog()

    # The SDK's custom_route has no return annotation, so mypy calls the result untyped.
    @mcp.custom_route(STATS_PATH, methods=["GET"])  # type: ignore[untyped-decorator]
    async def stats(_request: Request) -> Response:
        return JSONResponse(log.snapshot())

    app = mcp.streamable_http_app(
        streamable_http_path=MCP_PATH,
        json_response=json_response,
        stateless_http=stateless,
        host=host,
        event_store=MemoryEventStore() if resumable else None,
        retry_interval=RETRY_INTERVAL_MS if resumable else None,
    )
    served: ASGIApp = SessionScope(app) if resumable else app
    return CountPosts(served, log), log


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcp_layers_demo.server", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--port", type=int, help="TCP port (0: any free port)")
    parser.add_argument(
        "--stdio",
        action="store_true",
        help="serve the same tools over stdin/stdout (a server a client starts as a command)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    parser.add_argument(
        "--json", action="store_true", help="answer application/json instead of SSE"
    )
    parser.add_argument("--stateless", action="store_true", help="no sessions (stateless_http)")
    parser.add_argument(
        "--resumable",
        action="store_true",
        help=f"SSE events carry ids; a cut stream can be resumed (retry: {RETRY_INTERVAL_MS} ms)",
    )
    args = parser.parse_args(argv)

    # The SDK flags logging notifications as deprecated in 2026-07-28; the demo sends them on
    # purpose (they make the SSE stream), so the warning is noise here.
    warnings.simplefilter("ignore", MCPDeprecationWarning)

    if args.stdio:
        build_server().run("stdio")
        return 0
    if args.port is None:
        parser.error("--port is required (or --stdio)")
    app, _log = build_app(args.json, args.stateless, args.host, args.resumable)
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", lifespan="on")
    server = _Uvicorn(config)
    # uvicorn handles SIGINT and SIGTERM itself and returns from run().
    server.run()
    return 0 if server.started else 1


if __name__ == "__main__":
    sys.exit(main())
