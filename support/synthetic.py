"""Seeded synthetic recordings, written by the real core (`mcp_layers_core.tracker`).

Used by the tests (small recordings with every outcome, layer and retry kind in them) and by
`benchmarks/analysis_bench.py` (millions of records). Test and benchmark support: neither
the CLI nor the addon imports it. The same seed and arguments always give the same bytes.

Nothing here builds a record. The generator simulates clients and servers and turns what
they do into the events the proxy adapter feeds the core (`mcp_layers_core.events`:
`PostReceived`, `OtherRequest`, `ResponseStarted`, `ResponseBody`, `StreamChunk`,
`StreamEnded`, `FlowFailed`, `Tick`, `ProxyStopping`), in time order, to one
`Tracker`; the records are what `Tracker.handle` returns, so a generated record is one the
product would write for that traffic. Times come from a seeded simulated clock. It runs at
the core's pace (the core is most of the time): some thousands of records a second.

The model: a few clients, each with its own retry habits, run sessions against two servers;
several runs are in flight at once. A session initialises (clientInfo; the server issues an
`Mcp-Session-Id`), says `notifications/initialized` (202), may open a GET event stream
(one server serves it, the other answers 405), lists the tools (annotations: read-only,
idempotent, destructive; one tool is not listed) and makes calls answered in JSON or SSE.
Some fail at each layer (5xx, 429/503 with `Retry-After`, no answer, a cut stream,
malformed or invalid answers, JSON-RPC errors, tool errors, a body over the cap, an encoded
stream, a 2xx in the wrong media type); the client retries as its policy says (resends
the same message, reissues with a new id, waits out `Retry-After` or not). A server may
ask the user on the stream (elicitation, sampling, roots), answered by the client's POST.
The server may forget the session (404): the client re-initialises and repeats the call,
or gives up. A session ends with a DELETE, by abandonment (the proxy ends it when idle or at
shutdown), or is refused a DELETE after a 404. Clients speaking 2026-07-28 have no session
(their address and user agent stand in), may probe with `server/discover`, fall back to
`initialize` when an older server rejects it (400, -32020), and continue input-required
results. A share of tool calls is marked as altered by a fault rule (`inject_rate`).

Run `python -m mcp_layers_support.synthetic OUT.jsonl -n 1000 --seed 1` to write one.
"""

from __future__ import annotations

import argparse
import gzip
import heapq
import itertools
import random
from collections import abc
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from mcp_layers_core.events import (
    Event,
    FlowFailed,
    OtherRequest,
    PostReceived,
    ProxyStopping,
    ResponseBody,
    ResponseStarted,
    StreamChunk,
    StreamEnded,
    Tick,
)
from mcp_layers_core.record import FIELDS, Kind, Outcome, RetryOrigin
from mcp_layers_core.settings import Settings
from mcp_layers_core.tracker import Emitted, Tracker

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
SSE = "text/event-stream"
JSON = "application/json"

#: Fields added with the retry/session tracker, in the order records carry them (after
#: `retryOrigin`, before `scenario`); `legacy=True` leaves them out, as records written
#: before they existed do (and, like those addons, writes no `stream` records).
TRACKER_FIELDS = tuple(f.name for f in FIELDS if not f.always)

#: The adapter's clock: a `Tick` every this many seconds (`mcp_layers.TICK_S`).
TICK_S = 5.0

# (tool, safety its annotations declare, median ms); `unknown`: the server does not list it.
TOOLS = (
    ("search", "read_only", 40.0),
    ("get_weather", "read_only", 120.0),
    ("read_file", "read_only", 8.0),
    ("set_flag", "idempotent", 15.0),
    ("send_email", "unsafe", 250.0),
    ("create_ticket", "unsafe", 90.0),
    ("echo", "unknown", 3.0),
)
TOOL_WEIGHTS = (30, 15, 20, 8, 6, 8, 13)
INPUT_TOOL = ("book_flight", "unsafe", 180.0)
#: The argument each tool takes (every call gets its own value: a repeat is a retry).
TOOL_ARGUMENT = {
    "search": "query",
    "get_weather": "city",
    "read_file": "path",
    "set_flag": "flag",
    "send_email": "to",
    "create_ticket": "title",
    "echo": "text",
    "book_flight": "destination",
}

# Failure outcomes of one attempt: (outcome, weight). The rest of the mass is success.
TOOL_FAILURES = (
    (Outcome.TOOL_ERROR, 50),
    (Outcome.JSONRPC_ERROR, 30),
    (Outcome.HTTP_ERROR, 40),
    (Outcome.NO_RESPONSE, 10),
    (Outcome.STREAM_INCOMPLETE, 15),
    (Outcome.MALFORMED_JSON, 3),
    (Outcome.INVALID_ENVELOPE, 3),
    (Outcome.INVALID_TOOL_RESULT, 4),
    (Outcome.UNINSPECTED, 2),
    (Outcome.TRANSPORT_VIOLATION, 2),
)
OTHER_FAILURES = (
    (Outcome.JSONRPC_ERROR, 20),
    (Outcome.HTTP_ERROR, 30),
    (Outcome.NO_RESPONSE, 5),
    (Outcome.STREAM_INCOMPLETE, 5),
    (Outcome.INVALID_RESULT, 4),
    (Outcome.MALFORMED_JSON, 2),
)
ERRORS = (
    (-32602, "Invalid params: 'query' is required", 6),
    (-32603, "Internal error", 3),
    (-32601, "Method not found", 1),
)
HTTP_FAILURES = ((503, 35), (429, 15), (500, 30), (502, 20))
# As `retries.UNCERTAIN`: the client cannot know whether the call ran.
UNCERTAIN = frozenset({Outcome.NO_RESPONSE, Outcome.STREAM_INCOMPLETE, Outcome.TRANSPORT_VIOLATION})
#: What the fault rule did, as the fault addon names its actions (`faults/rules.py`).
INJECTED_ACTION = {
    Outcome.HTTP_ERROR: "http_status",
    Outcome.STREAM_INCOMPLETE: "sse_truncate",
    Outcome.NO_RESPONSE: "drop",
}


@dataclass(frozen=True, slots=True)
class Profile:
    """One client's wire habits and retry policy."""

    client: str
    user_agent: str
    protocol: str
    weight: int
    sse: float  # share of responses sent as SSE
    max_attempts: int = 1
    resend_uncertain: bool = False  # resend the same id after NO_RESPONSE / STREAM_INCOMPLETE
    reissue_http: bool = False  # new id after 5xx / 429
    reissue_invalid_params: bool = False  # retries -32602 with the same params: futile
    honours_retry_after: float = 0.0  # probability
    reinit_on_404: bool = False
    deletes: float = 0.8  # probability a finished session is DELETEd
    calls: tuple[int, int] = (3, 30)
    get_stream: float = 0.0  # probability it opens a GET event stream after initialising
    hangs_up: float = 0.0  # probability it closes an SSE answer on the final event


PROFILES = (
    Profile(
        "peer-py-client@0.1",
        "python-httpx2/2.16.2",
        LEGACY,
        30,
        0.7,
        max_attempts=3,
        reissue_http=True,
        resend_uncertain=True,
        honours_retry_after=0.95,
        reinit_on_404=True,
        get_stream=0.9,
    ),
    Profile(
        "peer-ts-client@0.1",
        "node",
        LEGACY,
        25,
        0.9,
        max_attempts=4,
        resend_uncertain=True,
        reissue_http=True,
        honours_retry_after=0.2,
        deletes=0.5,
        get_stream=0.6,
        hangs_up=0.05,
    ),
    Profile("inspector-cli@2.12.0", "node", LEGACY, 10, 0.5, calls=(1, 4), deletes=0.95),
    Profile(
        "conformance-test-client@1.0.0",
        "python-httpx2/2.16.2",
        MODERN,
        15,
        0.6,
        max_attempts=2,
        reissue_http=True,
        reissue_invalid_params=True,
        honours_retry_after=1.0,
        reinit_on_404=True,
    ),
    Profile(
        "mcp-remote@0.15.1",
        "node",
        LEGACY,
        20,
        0.8,
        max_attempts=5,
        reissue_http=True,
        resend_uncertain=True,
        reissue_invalid_params=True,
        honours_retry_after=0.6,
        get_stream=0.3,
        hangs_up=0.05,
    ),
)
SERVERS = ("127.0.0.1:9104", "127.0.0.1:9105")
#: The servers that serve a GET event stream (the other answers 405).
GET_STREAM_SERVERS = frozenset({SERVERS[0]})


# -------------------------------------------------------------- the wire, pre-encoded

ACCEPT_BOTH = f"{JSON}, {SSE}"
JSON_HEADERS = {"content-type": JSON}
SSE_HEADERS = {"content-type": SSE}
NO_HEADERS: dict[str, str] = {}
TEXT_HEADERS = {"content-type": "text/plain"}


def _dumps(value: object) -> bytes:
    return orjson.dumps(value)


def _sse(data: bytes) -> bytes:
    return b"event: message\ndata: " + data + b"\n\n"


def _tool_entry(name: str, safety: str) -> dict[str, Any]:
    hints = {
        "read_only": {"readOnlyHint": True},
        "idempotent": {"readOnlyHint": False, "idempotentHint": True},
        "unsafe": {"readOnlyHint": False, "destructiveHint": True},
    }[safety]
    arg = TOOL_ARGUMENT[name]
    return {
        "name": name,
        "description": f"{name.replace('_', ' ')}",
        "inputSchema": {
            "type": "object",
            "properties": {arg: {"type": "string"}},
            "required": [arg],
        },
        "annotations": hints,
    }


#: A 2026-07-28 result's cache members.
_CACHED = {"resultType": "complete", "ttlMs": 60000, "cacheScope": "public"}
_LISTED = [_tool_entry(n, s) for n, s, _ in (*TOOLS, INPUT_TOOL) if s != "unknown"]

#: Results by (method, version): valid ones.
RESULTS: dict[tuple[str, str], bytes] = {
    ("tools/list", LEGACY): _dumps({"tools": _LISTED}),
    ("tools/list", MODERN): _dumps({"tools": _LISTED, **_CACHED}),
    ("resources/list", LEGACY): _dumps(
        {"resources": [{"uri": "file:///notes.txt", "name": "notes", "mimeType": "text/plain"}]}
    ),
    ("resources/list", MODERN): _dumps(
        {"resources": [{"uri": "file:///notes.txt", "name": "notes"}], **_CACHED}
    ),
    ("prompts/list", LEGACY): _dumps({"prompts": [{"name": "summarise"}]}),
    ("prompts/list", MODERN): _dumps({"prompts": [{"name": "summarise"}], **_CACHED}),
    ("ping", LEGACY): b"{}",
    ("ping", MODERN): _dumps({"resultType": "complete"}),
    ("server/discover", MODERN): _dumps(
        {
            "supportedVersions": [MODERN, LEGACY],
            "capabilities": {"tools": {"listChanged": True}},
            **_CACHED,
        }
    ),
    ("tools/call", LEGACY): _dumps(
        {"content": [{"type": "text", "text": "done"}], "isError": False}
    ),
    ("tools/call", MODERN): _dumps(
        {"content": [{"type": "text", "text": "done"}], "isError": False, "resultType": "complete"}
    ),
}
TOOL_ERROR_RESULTS = {
    LEGACY: _dumps({"content": [{"type": "text", "text": "upstream refused"}], "isError": True}),
    MODERN: _dumps(
        {
            "content": [{"type": "text", "text": "upstream refused"}],
            "isError": True,
            "resultType": "complete",
        }
    ),
}
INPUT_REQUIRED_RESULT = _dumps(
    {
        "resultType": "input_required",
        "inputRequests": {
            "confirm": {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": "Book this flight?",
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"ok": {"type": "boolean"}},
                    },
                },
            }
        },
        "requestState": "booking-1",
    }
)
#: Tool results a client cannot read: `content` not an array; a block of no known type.
INVALID_TOOL_RESULTS = (
    _dumps({"content": "done", "isError": False}),
    _dumps({"content": [{"type": "html", "html": "<b>done</b>"}]}),
)
#: Results that do not fit their method's shape (any version).
INVALID_RESULTS = {
    "tools/list": _dumps({"tools": "search, echo"}),  # teaches no annotations
    "resources/list": _dumps({"resources": {"notes": "file:///notes.txt"}}),
    "prompts/list": _dumps({"next": None}),
    "ping": b'"pong"',
    "server/discover": _dumps({"resultType": "complete"}),
}
#: The text of an answer cut short (not JSON).
MALFORMED = b'{"jsonrpc":"2.0","id":%d,"result":{"content":[{"type":"text","te'
#: Neither `result` nor `error`.
NO_RESULT = b'{"jsonrpc":"2.0","id":%d}'
ERROR_ANSWER = b'{"jsonrpc":"2.0","id":%d,"error":%s}'
RESULT_ANSWER = b'{"jsonrpc":"2.0","id":%d,"result":%s}'
ERROR_OBJECTS = {(c, m): _dumps({"code": c, "message": m}) for c, m, _ in ERRORS}
UNSUPPORTED_VERSION = _dumps({"code": -32020, "message": "Unsupported protocol version"})
#: What each server answers a POST of a session it forgot (the Python and TypeScript SDKs).
SESSION_NOT_FOUND = {
    SERVERS[0]: _dumps(
        {
            "jsonrpc": "2.0",
            "id": "server-error",
            "error": {"code": -32600, "message": "Session not found"},
        }
    ),
    SERVERS[1]: _dumps(
        {"jsonrpc": "2.0", "error": {"code": -32001, "message": "Session not found"}, "id": None}
    ),
}
HTTP_BODIES = {
    429: b"Too Many Requests",
    500: b"Internal Server Error",
    502: b"Bad Gateway",
    503: b"Service Unavailable",
}
LOG_EVENT = _sse(
    _dumps(
        {
            "jsonrpc": "2.0",
            "method": "notifications/message",
            "params": {"level": "info", "data": "working"},
        }
    )
)
INITIALIZED = _dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
HTML = b"<html><body>Sign in to continue</body></html>"
#: Server requests asked on a tool call's stream, and the client's answers.
SERVER_REQUESTS = {
    "elicitation/create": (
        {
            "mode": "form",
            "message": "Send it?",
            "requestedSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
        },
        {"action": "accept", "content": {"ok": True}},
    ),
    "sampling/createMessage": (
        {
            "messages": [{"role": "user", "content": {"type": "text", "text": "Summarise"}}],
            "maxTokens": 200,
        },
        {"role": "assistant", "content": {"type": "text", "text": "Short."}, "model": "m-1"},
    ),
    "roots/list": ({}, {"roots": [{"uri": "file:///work", "name": "work"}]}),
}
SERVER_METHODS = tuple(SERVER_REQUESTS)


def _server_info(server: str) -> dict[str, str]:
    return {"name": f"server-{server.rsplit(':', 1)[1]}", "version": "1.4.0"}


INITIALIZE_RESULTS = {
    server: _dumps(
        {
            "protocolVersion": LEGACY,
            "capabilities": {"tools": {"listChanged": True}, "logging": {}},
            "serverInfo": _server_info(server),
        }
    )
    for server in SERVERS
}


# ------------------------------------------------------------------- the simulation


@dataclass(slots=True)
class _Call:
    """One logical call: what a retry repeats."""

    method: str
    tool: tuple[str, str, float] | None
    params: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class _Sent:
    """How one attempt went, as its client saw it."""

    outcome: Outcome
    status: int | None = None
    retry_after_ms: int | None = None
    error: tuple[int, str] | None = None


@dataclass(slots=True)
class _Run:
    """One client process: one or more sessions in a row, on one connection address."""

    profile: Profile
    server: str
    clock: float  # ms since the recording's start; the next event happens here or later
    peer: str  # "ip:port": the host stands in for sessionless clients, with the user agent
    protocol: str = LEGACY  # negotiated: a 2026-07-28 client may fall back
    session: str | None = None  # the Mcp-Session-Id the server issued (None: stand-in)
    headers: dict[str, str] = field(default_factory=dict)  # of its POSTs
    meta: dict[str, Any] | None = None  # 2026-07-28: the `_meta` every request carries
    rpc_id: int = 0
    server_rpc_id: int = 0
    get_flow: str | None = None  # its open GET event stream


Events = abc.Generator[Event, None, None]


class Generator:
    """Simulates client runs as event streams; see the module docstring for the model.

    Each run is a generator of events in time order; `records` merges them by time,
    feeds them to the tracker and yields what it writes.
    """

    def __init__(
        self,
        *,
        seed: int,
        scenario: str | None,
        inject_rate: float,
        legacy: bool,
        start_epoch_ms: int,
    ) -> None:
        self.rng = random.Random(seed)
        self.scenario = scenario
        self.inject_rate = inject_rate
        self.legacy = legacy
        self.epoch = start_epoch_ms / 1000
        self.tracker = Tracker(Settings(scenario=scenario))
        self._flows = itertools.count(1)
        self._values = itertools.count(1)
        self._runs = itertools.count(0)

    # ----------------------------------------------------------------- helpers

    def at(self, ms: float) -> float:
        """Seconds since the epoch, `ms` after the recording's start."""
        return self.epoch + ms / 1000.0

    def flow(self) -> str:
        return f"f{next(self._flows)}"

    def duration(self, median: float, spread: float = 0.6) -> float:
        return round(self.rng.lognormvariate(0.0, spread) * median, 1)

    def next_id(self, run: _Run) -> int:
        run.rpc_id += 1
        return run.rpc_id

    def body(self, run: _Run, rpc_id: int, call: _Call) -> bytes:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rpc_id, "method": call.method}
        params = call.params
        if run.meta is not None:
            params = {**(params or {}), "_meta": run.meta}
        if params is not None:
            msg["params"] = params
        return orjson.dumps(msg)

    def new_call(self, method: str, tool: tuple[str, str, float] | None) -> _Call:
        if tool is None:
            return _Call(method, None, None)
        arg = TOOL_ARGUMENT[tool[0]]
        return _Call(
            method, tool, {"name": tool[0], "arguments": {arg: f"{arg}-{next(self._values)}"}}
        )

    # ------------------------------------------------------------ one attempt

    def attempt(
        self,
        run: _Run,
        call: _Call,
        rpc_id: int,
        outcome: Outcome,
        *,
        injected: bool = False,
        ask_user: bool = False,
        error: tuple[int, str] | None = None,
        status: int | None = None,
        issue: str | None = None,
    ) -> abc.Generator[Event, None, _Sent]:
        """POST one request and answer it so that its verdict is `outcome`; the run's
        clock ends at the end of the exchange. `status` forces the HTTP error status,
        `error` the JSON-RPC error, `issue` a session id for an `initialize` answer."""
        rng = self.rng
        method, tool = call.method, call.tool
        median = tool[2] if tool else (6.0 if method == "initialize" else 12.0)
        start = run.clock
        flow = self.flow()
        body = self.body(run, rpc_id, call)
        yield PostReceived(flow, self.at(start), run.server, run.peer, run.headers, body, len(body))
        if injected:
            action = INJECTED_ACTION[outcome]
            self.tracker.mark_injected(flow, {"rule": self.scenario or "fault", "action": action})
        sse = ask_user or rng.random() < run.profile.sse
        version = run.protocol
        sent = _Sent(outcome)
        if outcome == Outcome.NO_RESPONSE:
            end = start + (30000.0 if rng.random() < 0.3 else round(rng.uniform(0.3, 4), 1))
            reason = "timeout" if end - start >= 30000 else "Server disconnected"
            yield FlowFailed(flow, self.at(end), reason)
        elif outcome == Outcome.HTTP_ERROR:
            code = status or _weighted(rng, HTTP_FAILURES)
            end = start + round(rng.uniform(0.5, 20), 1)
            headers: dict[str, str]
            answer: bytes
            if code == 404:
                headers, answer = JSON_HEADERS, SESSION_NOT_FOUND[run.server]
            elif code == 400:
                headers, answer = JSON_HEADERS, ERROR_ANSWER % (rpc_id, UNSUPPORTED_VERSION)
                error = (-32020, "Unsupported protocol version")
            elif code == 500 and rng.random() < 0.3:
                error = (-32603, "Internal error")
                headers, answer = JSON_HEADERS, ERROR_ANSWER % (rpc_id, ERROR_OBJECTS[error])
            elif rng.random() < 0.7:
                headers, answer = JSON_HEADERS, _dumps({"error": HTTP_BODIES[code].decode()})
            else:
                headers, answer = TEXT_HEADERS, HTTP_BODIES[code]
            after = None
            if code in (429, 503) and rng.random() < 0.8:
                after = rng.choice((1, 2, 5))
                headers = {**headers, "retry-after": str(after)}
            yield ResponseStarted(flow, self.at(end - 0.2), code, headers)
            yield ResponseBody(flow, self.at(end), answer, len(answer))
            sent = _Sent(outcome, code, None if after is None else after * 1000, error)
        elif outcome == Outcome.STREAM_INCOMPLETE:
            end = start + self.duration(median * 4)
            eof = rng.random() < 0.5
            first = start + min(1.0, (end - start) / 4)
            yield ResponseStarted(flow, self.at(first), 200, SSE_HEADERS, framed=not eof)
            logged = rng.randint(0, 2)
            if logged:
                yield StreamChunk(flow, self.at(first), LOG_EVENT * logged)
            if eof:
                yield StreamEnded(flow, self.at(end))
            else:
                yield FlowFailed(flow, self.at(end), "peer closed connection")
            sent = _Sent(outcome, 200)
        elif outcome == Outcome.UNINSPECTED:
            end = start + self.duration(median)
            if rng.random() < 0.5:  # a body over the proxy's cap
                yield ResponseStarted(flow, self.at(_headers_at(start, end)), 200, JSON_HEADERS)
                yield ResponseBody(flow, self.at(end), None, 17825792)
            else:  # a stream in an encoding the proxy does not decode
                headers = {"content-type": SSE, "content-encoding": "br"}
                yield ResponseStarted(flow, self.at(_headers_at(start, end)), 200, headers)
                yield StreamChunk(flow, self.at(end), b"\x1b\x8f\x00\xf8\x05\x9e\x0e")
                yield StreamEnded(flow, self.at(end))
            sent = _Sent(outcome, 200)
        elif outcome == Outcome.TRANSPORT_VIOLATION:
            # A gateway's sign-in page instead of the answer.
            end = start + self.duration(median)
            html = {"content-type": "text/html"}
            yield ResponseStarted(flow, self.at(_headers_at(start, end)), 200, html)
            yield ResponseBody(flow, self.at(end), HTML, len(HTML))
            sent = _Sent(outcome, 200)
        else:  # an answer arrived
            if outcome == Outcome.JSONRPC_ERROR:
                error = error or _error(rng, method)
                answer = ERROR_ANSWER % (rpc_id, ERROR_OBJECTS[error])
            elif outcome == Outcome.MALFORMED_JSON:
                answer = MALFORMED % rpc_id
            elif outcome == Outcome.INVALID_ENVELOPE:
                # On a stream, half the time an answer to another id.
                wrong = sse and rng.random() < 0.5
                answer = (
                    RESULT_ANSWER % (rpc_id + 1, RESULTS[(method, version)])
                    if wrong
                    else NO_RESULT % rpc_id
                )
            elif outcome == Outcome.INVALID_TOOL_RESULT:
                answer = RESULT_ANSWER % (rpc_id, rng.choice(INVALID_TOOL_RESULTS))
            elif outcome == Outcome.INVALID_RESULT:
                answer = RESULT_ANSWER % (rpc_id, INVALID_RESULTS[method])
            elif outcome == Outcome.INPUT_REQUIRED:
                answer = RESULT_ANSWER % (rpc_id, INPUT_REQUIRED_RESULT)
            elif outcome == Outcome.TOOL_ERROR:
                answer = RESULT_ANSWER % (rpc_id, TOOL_ERROR_RESULTS[version])
            elif method == "initialize":
                answer = RESULT_ANSWER % (rpc_id, INITIALIZE_RESULTS[run.server])
            else:
                answer = RESULT_ANSWER % (rpc_id, RESULTS[(method, version)])
            headers = SSE_HEADERS if sse else JSON_HEADERS
            if issue is not None:
                headers = {**headers, "mcp-session-id": issue}
            end = start + self.duration(median)
            if not sse:
                yield ResponseStarted(flow, self.at(_headers_at(start, end)), 200, headers)
                yield ResponseBody(flow, self.at(end), answer, len(answer))
            else:
                first = start + min(1.0, (end - start) / 4)
                yield ResponseStarted(flow, self.at(first), 200, headers)
                logged = rng.randint(0, 2)  # log messages, in one chunk
                if logged:
                    yield StreamChunk(flow, self.at(first), LOG_EVENT * logged)
                if ask_user:
                    end = yield from self.asked_on_stream(run, flow, first)
                yield StreamChunk(flow, self.at(end), _sse(answer))
                if rng.random() < run.profile.hangs_up:
                    yield FlowFailed(flow, self.at(end + 0.1), "client disconnected")
                else:
                    yield StreamEnded(flow, self.at(end + 0.1))
                end += 0.1
            sent = _Sent(outcome, 200, None, error)
        run.clock = end
        return sent

    def asked_on_stream(self, run: _Run, flow: str, at: float) -> abc.Generator[Event, None, float]:
        """The server asks the client (the user, the model) on the call's stream; the client
        answers in a POST of its own (202). Returns when the stream goes on."""
        rng = self.rng
        method = rng.choice(SERVER_METHODS)
        params, result = SERVER_REQUESTS[method]
        run.server_rpc_id += 1
        asked = {"jsonrpc": "2.0", "id": run.server_rpc_id, "method": method, "params": params}
        at += self.duration(20.0)
        yield StreamChunk(flow, self.at(at), _sse(_dumps(asked)))
        at += self.duration(400.0)
        answer = _dumps({"jsonrpc": "2.0", "id": run.server_rpc_id, "result": result})
        posted = self.flow()
        yield PostReceived(
            posted, self.at(at), run.server, run.peer, run.headers, answer, len(answer)
        )
        took = round(rng.uniform(0.5, 5), 1)
        yield ResponseStarted(posted, self.at(at + took - 0.1), 202, NO_HEADERS)
        yield ResponseBody(posted, self.at(at + took), b"", 0)
        return at + took + self.duration(median=30.0)

    def sample_outcome(self, method: str, attempt: int, injected: bool) -> Outcome:
        rng = self.rng
        if injected:
            return rng.choice((Outcome.HTTP_ERROR, Outcome.STREAM_INCOMPLETE, Outcome.NO_RESPONSE))
        fail = 0.12 if method == "tools/call" else 0.03
        if attempt > 1:
            fail *= 0.5  # transient faults mostly clear
        if rng.random() >= fail:
            return Outcome.TOOL_SUCCESS if method == "tools/call" else Outcome.SUCCESS
        return _weighted(rng, TOOL_FAILURES if method == "tools/call" else OTHER_FAILURES)

    # ---------------------------------------------------------------- a run

    def run(self, run: _Run) -> Events:
        """A client run's events, in time order."""
        yield from self.sessions(run)
        if run.get_flow is not None:  # the client exits: its event stream breaks
            yield FlowFailed(run.get_flow, self.at(run.clock), "client disconnected")
            run.get_flow = None

    def sessions(self, run: _Run) -> Events:
        p = run.profile
        rng = self.rng
        previous = False
        retry: tuple[_Call, _Sent] | None = None  # a 404'd call to repeat after re-initialising
        for _ in range(3):  # at most three sessions (re-initialisations) per run
            yield from self.open_session(run, previous)
            calls = rng.randint(*p.calls)
            expiring = rng.random() < 0.08 and run.session is not None
            expired_at = rng.randint(1, calls) if expiring else None
            if retry is not None:
                yield from self.call(run, retry=retry)
                retry = None
            for n in range(1, calls + 1):
                run.clock += self.duration(30.0, 1.0)
                if n == expired_at:
                    lost = yield from self.expired(run)
                    if not p.reinit_on_404:
                        # Abandoned, never re-initialised; some clients still DELETE the
                        # session on the way out, and the server refuses it (404).
                        if rng.random() < p.deletes:
                            yield from self.delete(run, 404)
                        return
                    previous, retry = True, lost
                    break
                yield from self.call(run)
                if run.get_flow is not None and rng.random() < 0.1:
                    # The server logs something on the session's event stream.
                    yield StreamChunk(run.get_flow, self.at(run.clock), LOG_EVENT)
            else:
                yield from self.close(run)
                return

    def open_session(self, run: _Run, previous: bool) -> Events:
        """Start talking: initialize (2025-11-25), or for a 2026-07-28 client, nothing
        (no sessions; the client stands in for one) unless the server is older and
        rejects its first request, when it falls back to initialize."""
        p = run.profile
        rng = self.rng
        name, _, version = p.client.partition("@")
        info = {"name": name, "version": version}
        run.session, run.rpc_id, run.protocol, run.meta = None, 0, p.protocol, None
        if p.protocol == MODERN and not previous:
            run.headers = {
                "user-agent": p.user_agent,
                "accept": ACCEPT_BOTH,
                "mcp-protocol-version": MODERN,
            }
            run.meta = {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientInfo": info,
            }
            older_server = rng.random() < 0.15
            if older_server or rng.random() < 0.3:
                discover = _Call("server/discover", None, None)
                outcome = Outcome.HTTP_ERROR if older_server else Outcome.SUCCESS
                status = 400 if older_server else None
                yield from self.attempt(run, discover, self.next_id(run), outcome, status=status)
                run.clock += 1
            if not older_server:  # 2026-07-28 all the way: no initialize, no session
                if rng.random() < 0.9:
                    yield from self.call(run, method="tools/list")
                return
            run.protocol, run.meta = LEGACY, None  # the fallback
        run.headers = {"user-agent": p.user_agent, "accept": ACCEPT_BOTH}
        session = f"{rng.getrandbits(128):032x}"
        params = {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": info}
        initialize = _Call("initialize", None, params)
        yield from self.attempt(run, initialize, self.next_id(run), Outcome.SUCCESS, issue=session)
        run.session = session
        run.headers = {**run.headers, "mcp-session-id": session, "mcp-protocol-version": LEGACY}
        run.clock += 1
        yield from self.initialized(run)
        run.clock += 1
        if rng.random() < p.get_stream:
            yield from self.open_stream(run)
        if rng.random() < 0.9:
            yield from self.call(run, method="tools/list")

    def initialized(self, run: _Run) -> Events:
        """`notifications/initialized`: accepted (202), now and then with a 200 and a body."""
        start, flow = run.clock, self.flow()
        yield PostReceived(
            flow, self.at(start), run.server, run.peer, run.headers, INITIALIZED, len(INITIALIZED)
        )
        end = start + round(self.rng.uniform(0.5, 6), 1)
        if self.rng.random() < 0.05:
            yield ResponseStarted(flow, self.at(end - 0.1), 200, JSON_HEADERS)
            yield ResponseBody(flow, self.at(end), b"{}", 2)
        else:
            yield ResponseStarted(flow, self.at(end - 0.1), 202, NO_HEADERS)
            yield ResponseBody(flow, self.at(end), b"", 0)
        run.clock = end

    def open_stream(self, run: _Run) -> Events:
        """A GET event stream for the session: served by one server, 405 from the other."""
        assert run.session is not None
        flow = self.flow()
        headers = {
            "user-agent": run.profile.user_agent,
            "accept": SSE,
            "mcp-session-id": run.session,
            "mcp-protocol-version": run.protocol,
        }
        start = run.clock
        yield OtherRequest(flow, self.at(start), "GET", run.server, run.peer, headers)
        if run.server in GET_STREAM_SERVERS:
            yield ResponseStarted(flow, self.at(start + 1.5), 200, SSE_HEADERS)
            run.get_flow = flow
        else:
            yield ResponseStarted(flow, self.at(start + 1), 405, TEXT_HEADERS)
            yield ResponseBody(flow, self.at(start + 1.5), b"Method Not Allowed", 18)
        run.clock = start + 2

    def end_stream(self, run: _Run) -> Events:
        """The server closes the session's event stream (the session is over)."""
        if run.get_flow is not None:
            yield StreamEnded(run.get_flow, self.at(run.clock))
            run.get_flow = None

    def call(
        self,
        run: _Run,
        method: str | None = None,
        retry: tuple[_Call, _Sent] | None = None,
    ) -> Events:
        """One logical call and its retries; input-required turns are continued."""
        rng = self.rng
        p = run.profile
        prev: _Sent | None = None
        if retry is not None:  # repeated in a new session after a 404
            call, prev = retry
        elif method is None:
            if rng.random() < 0.8:
                chosen = (
                    INPUT_TOOL
                    if run.protocol == MODERN and rng.random() < 0.15
                    else TOOLS[_weighted_index(rng, TOOL_WEIGHTS)]
                )
                call = self.new_call("tools/call", chosen)
            else:
                call = _Call(rng.choice(("resources/list", "prompts/list", "ping")), None, None)
        else:
            call = _Call(method, None, None)
        tool = call.tool
        origin = RetryOrigin.REINIT if retry is not None else RetryOrigin.NONE
        attempt = 2 if retry is not None else 1
        rpc_id = self.next_id(run)
        continuing = False
        while True:
            injected = (
                self.inject_rate > 0
                and call.method == "tools/call"
                and rng.random() < self.inject_rate
            )
            outcome = self.sample_outcome(call.method, attempt, injected)
            if not continuing and tool is INPUT_TOOL and outcome == Outcome.TOOL_SUCCESS:
                outcome = Outcome.INPUT_REQUIRED
            elif continuing and outcome == Outcome.TOOL_SUCCESS and rng.random() < 0.2:
                outcome = Outcome.INPUT_REQUIRED  # a second round
            error = None
            if (
                prev is not None
                and origin != RetryOrigin.NONE
                and prev.error is not None
                and prev.outcome == Outcome.JSONRPC_ERROR
                and prev.error[0] == -32602
            ):
                outcome, error = Outcome.JSONRPC_ERROR, prev.error  # same params, same answer
                injected = False  # the server answered before any rule could act
            ask_user = (
                run.protocol == LEGACY
                and tool is not None
                and tool[1] == "unsafe"
                and outcome == Outcome.TOOL_SUCCESS
                and rng.random() < 0.1
            )
            # The server asks the user on the stream; the client answers in a POST.
            sent = yield from self.attempt(
                run, call, rpc_id, outcome, injected=injected, ask_user=ask_user, error=error
            )
            if sent.outcome == Outcome.INPUT_REQUIRED:
                if rng.random() < 0.15:
                    return  # the user walked away
                run.clock += self.duration(800.0)  # the user answers
                params = {**(call.params or {}), "inputResponses": {"confirm": {"ok": True}}}
                params["requestState"] = "booking-1"
                call = _Call(call.method, tool, params)
                continuing, prev, origin, attempt = True, None, RetryOrigin.NONE, 1
                rpc_id = self.next_id(run)
                continue
            choice = self.retry_choice(p, sent, attempt)
            if choice is None:
                return
            origin, delay = choice
            run.clock += delay
            prev, attempt = sent, attempt + 1
            if origin == RetryOrigin.REISSUE:
                rpc_id = self.next_id(run)

    def retry_choice(
        self, p: Profile, sent: _Sent, attempt: int
    ) -> tuple[RetryOrigin, float] | None:
        """Whether and how this client retries a failed attempt: (origin, delay ms)."""
        outcome = sent.outcome
        if attempt >= p.max_attempts or outcome in (
            Outcome.SUCCESS,
            Outcome.TOOL_SUCCESS,
            Outcome.TOOL_ERROR,
        ):
            return None
        rng = self.rng
        backoff = round(rng.uniform(50, 400) * attempt, 1)
        if outcome in UNCERTAIN and p.resend_uncertain:
            return (RetryOrigin.RESEND, backoff)
        status = sent.status
        if outcome == Outcome.HTTP_ERROR and p.reissue_http and status and status >= 429:
            after = sent.retry_after_ms
            if after and rng.random() < p.honours_retry_after:
                return (RetryOrigin.REISSUE, round(after + rng.uniform(5, 300), 1))
            return (RetryOrigin.REISSUE, backoff)
        if outcome == Outcome.JSONRPC_ERROR and p.reissue_invalid_params:
            return (RetryOrigin.REISSUE, backoff)
        return None

    def expired(self, run: _Run) -> abc.Generator[Event, None, tuple[_Call, _Sent]]:
        """The server forgot the session: a call gets 404 (the proxy ends the session),
        and the session's event stream ends with it."""
        tool = TOOLS[_weighted_index(self.rng, TOOL_WEIGHTS)]
        call = self.new_call("tools/call", tool)
        sent = yield from self.attempt(run, call, self.next_id(run), Outcome.HTTP_ERROR, status=404)
        yield from self.end_stream(run)
        run.clock += self.duration(40.0)
        return call, sent

    def delete(self, run: _Run, status: int) -> Events:
        """DELETE the session; the server ends (200) or refuses (404) it."""
        assert run.session is not None
        flow = self.flow()
        start = run.clock
        headers = {
            "user-agent": run.profile.user_agent,
            "mcp-session-id": run.session,
            "mcp-protocol-version": run.protocol,
        }
        yield OtherRequest(flow, self.at(start), "DELETE", run.server, run.peer, headers)
        end = start + round(self.rng.uniform(0.5, 4 if status == 200 else 3), 1)
        run.clock = start + 0.2
        yield from self.end_stream(run)
        yield ResponseStarted(flow, self.at(end - 0.1), status, NO_HEADERS)
        yield ResponseBody(flow, self.at(end), b"", 0)
        run.clock = end

    def close(self, run: _Run) -> Events:
        if run.session is None:
            return  # nothing to DELETE: the server keeps no session
        if self.rng.random() < run.profile.deletes:
            yield from self.delete(run, 200)
        # Otherwise abandoned: the proxy ends it when it has been idle, or at shutdown.

    # ------------------------------------------------------------- the recording

    def records(self, n_records: int, concurrency: int) -> Iterator[dict[str, Any]]:
        """Merge the runs' events by time into the tracker; yield what it writes."""
        rng = self.rng
        handle = self.tracker.handle
        weights = tuple(p.weight for p in PROFILES)
        heap: list[tuple[float, int, Event, _Run, Events]] = []
        seq = itertools.count()

        def push(run: _Run, events: Events) -> bool:
            event = next(events, None)
            if event is None:
                return False
            heapq.heappush(heap, (event.ts, next(seq), event, run, events))
            return True

        def spawn(at: float) -> None:
            profile = PROFILES[_weighted_index(rng, weights)]
            n = next(self._runs)
            if profile.protocol == MODERN:
                # Three hosts: clients on one host with one user agent share a stand-in
                # session (and, to the core, look alike).
                host = f"10.0.0.{rng.randrange(3) + 1}"
            else:  # a machine of its own
                host = f"10.1.{n // 250 % 250}.{n % 250 + 1}"
            run = _Run(profile, rng.choice(SERVERS), at, f"{host}:{40000 + n % 20000}")
            if not push(run, self.run(run)):
                raise AssertionError("a run without events")

        last_start = 0.0
        for _ in range(concurrency):
            last_start += rng.expovariate(1 / 200.0)
            spawn(last_start)
        keep = self.keep
        written = 0
        now = self.epoch
        next_tick = self.epoch + TICK_S
        while heap and written < n_records:
            now, _, event, run, events = heapq.heappop(heap)
            emitted: list[Emitted] = []
            while now >= next_tick:  # the adapter's clock, between hooks
                emitted += handle(Tick(next_tick))
                next_tick += TICK_S
            emitted += handle(event)
            for e in emitted:
                record = keep(e.record)
                if record is not None:
                    written += 1
                    yield record
            if not push(run, events):  # the run ended: start another in its place
                spawn(run.clock + rng.expovariate(1 / 200.0))
        for e in handle(ProxyStopping(now)):  # the proxy stops: it writes what is open
            record = keep(e.record)
            if record is not None:
                yield record

    def keep(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """The record as this recording has it (`legacy`: as an older addon wrote it)."""
        if not self.legacy:
            return record
        if record["kind"] == Kind.STREAM:
            return None
        for name in TRACKER_FIELDS:
            del record[name]
        return record


def _headers_at(start: float, end: float) -> float:
    """When the response headers of an exchange from `start` to `end` arrive."""
    return start + (end - start) * 0.9


def _weighted[T](rng: random.Random, table: tuple[tuple[T, int], ...]) -> T:
    total = sum(w for _, w in table)
    r = rng.random() * total
    for value, w in table:
        r -= w
        if r < 0:
            return value
    return table[-1][0]


def _weighted_index(rng: random.Random, weights: tuple[int, ...]) -> int:
    r = rng.random() * sum(weights)
    for i, w in enumerate(weights):
        r -= w
        if r < 0:
            return i
    return len(weights) - 1


def _error(rng: random.Random, method: str) -> tuple[int, str]:
    table = ERRORS if method == "tools/call" else ERRORS[1:]
    total = sum(w for *_, w in table)
    r = rng.random() * total
    for code, message, w in table:
        r -= w
        if r < 0:
            return code, message
    return table[-1][0], table[-1][1]


def generate(
    n_records: int,
    *,
    seed: int = 0,
    scenario: str | None = None,
    inject_rate: float = 0.0,
    concurrency: int = 12,
    legacy: bool = False,
    start_epoch_ms: int = 1_796_050_800_000,
) -> Iterator[dict[str, Any]]:
    """Yield `n_records` records, and a few more: those the last event finished, and
    what the proxy writes when it stops (exchanges in flight, sessions still open).

    Ids are unique but, as in the addon's files, not in order: given at arrival,
    written at the end of each exchange.

    `inject_rate` is the share of tools/call attempts a fault rule alters (`injected`);
    `legacy` leaves out the retry/session/fault fields.
    """
    gen = Generator(
        seed=seed,
        scenario=scenario,
        inject_rate=inject_rate,
        legacy=legacy,
        start_epoch_ms=start_epoch_ms,
    )
    return gen.records(n_records, concurrency)


def write(path: Path, records: Iterator[dict[str, Any]]) -> int:
    """Write records as JSONL (gzip when the name ends in .gz); return how many."""
    n = 0
    if path.name.endswith(".gz"):  # mtime 0: the same records give the same bytes
        f: Any = gzip.GzipFile(path, "wb", mtime=0)
    else:
        f = open(path, "wb")  # noqa: SIM115 - closed below, with the gzip one
    with f:
        buf: list[bytes] = []
        for rec in records:
            buf.append(orjson.dumps(rec))
            n += 1
            if len(buf) >= 4096:
                f.write(b"\n".join(buf) + b"\n")
                buf.clear()
        if buf:
            f.write(b"\n".join(buf) + b"\n")
    return n


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("-n", "--records", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scenario", default=None)
    parser.add_argument("--inject-rate", type=float, default=0.0)
    parser.add_argument("--legacy", action="store_true", help="leave out the tracker fields")
    args = parser.parse_args(argv)
    n = write(
        args.out,
        generate(
            args.records,
            seed=args.seed,
            scenario=args.scenario,
            inject_rate=args.inject_rate,
            legacy=args.legacy,
        ),
    )
    print(f"{args.out}: {n} records")


if __name__ == "__main__":
    main()
