"""Fuzzed pass-through, part 1: the sans-IO core under arbitrary traffic (issue 6).

Hypothesis drives the tracker the way the adapter does, with many flows interleaved:
POSTs whose bodies are every JSON-RPC shape (requests, notifications, answers, batches,
ids of every JSON type, deep or large values, invalid UTF-8, not JSON at all), GET
streams and DELETEs; answers with any status and headers, JSON bodies, and SSE streams
(any events, line ends, gzip) cut into arbitrary chunks; failures at every phase; clock
jumps past the resume window; and at the end the proxy stopping, followed by the error
hooks of the flows still open (mitmproxy fires `done` first).

What must hold, whatever the input:
- `Tracker.handle` never raises (the adapter's events are legal by construction);
- every record serialises as exactly one JSONL line, and record ids are unique;
- one record per JSON-RPC request of every POST the core took up (one per notification
  or answer POST), none lost, none twice, and nothing after the stop;
- the state stays bounded: every book under its cap (small caps here, to reach them),
  every SSE buffer under the event cap, notes per exchange bounded, nothing left once
  the proxy has stopped.

Then the cases a property test reaches rarely, made explicit: deep JSON (to 100,000
levels), a 20 MiB body against the cap, a long adversarial stream (bounded notes), and
the regressions these proofs found.
"""

from __future__ import annotations

import gzip
import itertools
import json
import random
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest
from hardening_kit import figures
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp_layers_core.events import (
    FlowFailed,
    OtherRequest,
    PostReceived,
    ProxyStopping,
    ResponseBody,
    ResponseStarted,
    StreamChunk,
    StreamEnded,
)
from mcp_layers_core.jsonl import RecordWriter, dumps_line
from mcp_layers_core.jsonrpc import is_request, messages_of, try_loads
from mcp_layers_core.records import base_record
from mcp_layers_core.retries import RetryBook, ToolSafetyBook
from mcp_layers_core.tracker import Settings, Tracker, records_of

SERVERS = ("127.0.0.1:9000", "127.0.0.1:9001")
PEERS = ("127.0.0.1:50000", "127.0.0.1:50001", "10.0.0.2:40000")
#: Small caps, so that a few dozen flows reach every one of them.
CAP = 5
EVENT_CAP = 256
#: Notes one exchange may carry (the fix that bounds them keeps far fewer).
MAX_NOTES = 64
RECORD_KEYS = set(
    base_record(
        record_id=0,
        kind="request",
        ts=0.0,
        end_ts=None,
        server="",
        session=None,
        client=None,
        user_agent=None,
        protocol_version=None,
        method=None,
        tool=None,
        post_count=None,
        http_statuses=[],
        content_type=None,
        scenario=None,
    )
)

# -- strategies: JSON, JSON-RPC, bodies, streams ----------------------------------------------

METHODS = (
    "initialize",
    "tools/call",
    "tools/list",
    "ping",
    "subscriptions/listen",
    "server/discover",
    "resources/read",
    "notifications/initialized",
    "notifications/progress",
    "elicitation/create",
    "sampling/createMessage",
)
SESSIONS = (None, None, "sess-A", "sess-B", "a" * 300, "\u00e9\u2028")
AGENTS = (None, "claude-code/2.1", "python-httpx/0.28", "x" * 2000, "")
VERSIONS = (None, "2024-11-05", "2025-11-25", "2026-07-28", "bogus", "2026-13-99")
CONTENT_TYPES = (
    "application/json",
    "text/event-stream",
    "text/event-stream; charset=utf-8",
    "TEXT/EVENT-STREAM",
    "application/json; charset=latin-1",
    "text/plain",
    "",
    ";;;",
    None,
)
ENCODINGS = (None, None, "identity", "gzip", "x-gzip", "deflate", "br", "zstd", " GZIP ", "x")
RETRY_AFTERS = (None, "2", "0", "99999999999", "Wed, 21 Oct 2015 07:28:00 GMT", "soon", "-1")
STATUSES = (200,) * 10 + (202, 204, 400, 401, 404, 405, 429, 500, 502, 503, 100, 599)

leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=40),
)
json_values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def deep(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


ids = st.one_of(
    st.integers(-5, 5),
    st.integers(-(2**70), 2**70),
    st.text(max_size=12),
    st.none(),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(), max_size=2),
    st.integers(1, 400).map(lambda d: deep(d)),
)
methods = st.one_of(
    st.sampled_from(("tools/call",) * 6 + METHODS), st.sampled_from(METHODS), st.text(max_size=20)
)


@st.composite
def params(draw: st.DrawFn, method: str) -> Any:
    kind = draw(st.integers(0, 9))
    if kind == 0:
        return draw(json_values)
    out: dict[str, Any] = {}
    if method == "tools/call" or kind == 1:
        out["name"] = draw(st.one_of(st.sampled_from(["echo", "add", "weather"]), json_values))
        out["arguments"] = draw(json_values)
    if method == "initialize" or kind == 2:
        out["clientInfo"] = draw(
            st.one_of(
                st.fixed_dictionaries(
                    {"name": st.text(max_size=10), "version": st.text(max_size=5)}
                ),
                json_values,
            )
        )
        out["protocolVersion"] = draw(st.sampled_from(VERSIONS))
    if kind in (3, 4):
        out["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": draw(st.sampled_from(VERSIONS)),
            "io.modelcontextprotocol/clientInfo": {
                "name": "c",
                "version": draw(st.text(max_size=4)),
            },
        }
    if kind == 5:
        out["inputResponses"] = draw(json_values)
    if kind == 6:
        out["requestState"] = draw(st.text(max_size=10))
    if kind == 7:
        out["deep"] = deep(draw(st.integers(100, 1000)))
    return out


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    method = draw(methods)
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": draw(ids), "method": method}
    if draw(st.booleans()):
        msg["params"] = draw(params(method))
    return msg


@st.composite
def notifications(draw: st.DrawFn) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": draw(methods)}
    if draw(st.booleans()):
        msg["params"] = draw(json_values)
    return msg


@st.composite
def results(draw: st.DrawFn) -> Any:
    # Hypothesis favours small draws: small numbers pick the well-formed shapes.
    kind = draw(st.integers(0, 8))
    if kind in (0, 1):  # a well-formed tool result, success or error
        return {"content": [{"type": "text", "text": "ok"}], "isError": kind == 1}
    if kind == 8:
        return draw(json_values)
    result: dict[str, Any] = {}
    if kind in (7, 2):
        result["content"] = draw(st.one_of(st.just([{"type": "text", "text": "ok"}]), json_values))
    if kind == 2:
        result["isError"] = draw(st.one_of(st.booleans(), json_values))
    if kind == 3:
        result["resultType"] = draw(st.sampled_from(["complete", "input_required", "other", 7]))
    if kind == 4:
        result["tools"] = draw(
            st.lists(
                st.fixed_dictionaries({"name": st.text(max_size=6), "annotations": json_values}),
                max_size=3,
            )
        )
    if kind == 5:
        result["protocolVersion"] = draw(st.sampled_from(VERSIONS))
    return result


@st.composite
def answers(draw: st.DrawFn, rid: Any) -> dict[str, Any]:
    """A response-shaped message for `rid` (or a wrong id), valid or broken."""
    msg: dict[str, Any] = {}
    msg["jsonrpc"] = draw(json_values) if draw(st.integers(0, 9)) == 9 else "2.0"
    msg["id"] = draw(ids) if draw(st.integers(0, 4)) == 4 else rid
    shape = draw(st.integers(0, 5))
    if shape in (0, 1, 2, 5):
        msg["result"] = draw(results())
    if shape in (3, 4, 5):
        msg["error"] = draw(
            st.one_of(
                st.fixed_dictionaries(
                    {
                        "code": st.one_of(st.integers(-33000, -32000), json_values),
                        "message": st.one_of(st.text(max_size=60), json_values),
                        "data": json_values,
                    }
                ),
                json_values,
            )
        )
    return msg


def encode(value: Any) -> bytes:
    """JSON as bytes; values `json` cannot write (very deep) become not-JSON bytes."""
    try:
        return json.dumps(value, separators=(",", ":")).encode()
    except (ValueError, RecursionError):
        return b"[" * 50


@st.composite
def post_bodies(draw: st.DrawFn) -> tuple[bytes, list[Any]]:
    """A POST body and the request ids in it (for answers that match)."""
    kind = draw(st.integers(0, 11))
    messages: list[Any]
    if kind <= 4:
        messages = [draw(requests())]
    elif kind == 5:
        messages = [draw(notifications())]
    elif kind == 6:
        messages = [draw(answers(draw(ids)))]
    elif kind == 7:
        messages = draw(
            st.lists(st.one_of(requests(), notifications(), answers(1)), min_size=1, max_size=5)
        )
        body = encode(messages)
        return body, [m["id"] for m in messages if is_request(m)]
    elif kind == 8:
        return draw(st.binary(max_size=200)), []
    elif kind == 9:
        # Invalid UTF-8 inside an otherwise well-formed request.
        raw = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"\xff\xfe\xc3"}}'
        return raw, [1]
    elif kind == 10:
        return encode(draw(json_values)), []
    else:
        depth = draw(st.sampled_from([500, 1023, 1024, 1025, 5000]))
        return (b'{"jsonrpc":"2.0","id":1,"method":"x","params":' + b"[" * depth + b"]" * depth
                + b"}"), [1]  # fmt: skip
    body = encode(messages[0])
    return body, [m["id"] for m in messages if is_request(m)]


@st.composite
def sse_streams(draw: st.DrawFn, rids: list[Any]) -> bytes:
    """An event stream: answers (to these ids or others), notifications, server
    requests, endpoint and priming events, comments, junk; any line ends."""
    eol = draw(st.sampled_from([b"\n", b"\r\n", b"\r"]))
    out = bytearray()
    if draw(st.booleans()):
        out += b"\xef\xbb\xbf"
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.integers(0, 9))
        lines: list[bytes]
        if kind <= 2:
            rid = draw(st.sampled_from(rids)) if rids else draw(ids)
            lines = [b"data: " + encode(draw(answers(rid)))]
        elif kind == 3:
            lines = [b"data: " + encode(draw(notifications()))]
        elif kind == 4:
            lines = [b"event: message", b"data: " + encode(draw(requests()))]
        elif kind == 5:
            session = draw(st.sampled_from(["abc", "def", "", "x" * 50]))
            lines = [b"event: endpoint", b"data: /messages?session_id=" + session.encode()]
        elif kind == 6:
            lines = [b"id: " + str(draw(st.integers(0, 9))).encode(), b"data: "]
        elif kind == 7:
            lines = [b": keep-alive", b"retry: " + draw(st.sampled_from([b"10", b"x", b"9" * 40]))]
        elif kind == 8:
            lines = [b"data: " + b"x" * draw(st.integers(0, 2 * EVENT_CAP))]
        else:
            lines = [draw(st.binary(max_size=40)).replace(b"\n", b"").replace(b"\r", b"")]
        if draw(st.booleans()):
            lines.insert(0, b"id: " + draw(st.text(max_size=6)).encode())
        out += eol.join(lines) + eol + eol
    if draw(st.booleans()):
        out += b'data: {"partial'  # an event left unterminated
    return bytes(out)


def cut(data: bytes, points: list[int]) -> list[bytes]:
    edges = sorted({0, len(data), *(p % (len(data) + 1) for p in points)})
    return [data[a:b] for a, b in itertools.pairwise(edges) if b > a]


# -- the simulated proxy -----------------------------------------------------------------------


@dataclass
class Flow:
    name: str
    kind: str  # post | get | delete
    rids: list[Any]
    plan: Any  # what the response does (drawn lazily)
    phase: str = "start"  # start | requested | headers | streaming | done
    tracked: bool = False


@dataclass
class Tally:
    examples: int = 0
    events: int = 0
    flows: int = 0
    posts_taken: int = 0
    requests_expected: int = 0
    messages_expected: int = 0
    records: int = 0
    by_outcome: Counter[str] = field(default_factory=Counter)
    peak: Counter[str] = field(default_factory=Counter)
    bytes_fed: int = 0


def bounded_tracker() -> Tracker:
    settings_ = Settings(
        max_event_bytes=EVENT_CAP,
        max_body_bytes=64 * 1024,
        max_pending=CAP,
        max_sessions=CAP,
        max_parked=CAP,
        resume_window_s=5.0,
    )
    t = Tracker(settings_)
    t.retries = RetryBook(max_entries=CAP)
    t.safety = ToolSafetyBook(max_servers=2, max_tools=CAP)
    return t


def state_sizes(t: Tracker) -> dict[str, int]:
    """Every collection the tracker keeps, by size (the bound the caps promise)."""
    exchanges = list(t._exchanges.values())
    waiting = t._waiting
    return {
        "exchanges": len(t._exchanges),
        "parked": len(waiting.parked),
        "unclaimed": len(waiting.unclaimed),
        "server_requests": len(waiting.server_requests),
        "client_by_agent": len(t._who.client_by_agent),
        "held": sum(len(v.finished) for v in waiting.held.values()),
        "held_agents": len(waiting.held),
        "sessions": len(t.sessions),
        "lost_sessions": len(t.sessions._lost),
        "retry_signatures": len(t.retries._last),
        "servers_known": len(t.safety._servers),
        "notes": max((len(x.notes) for x in exchanges), default=0),
        "unexpected_ids": max(
            (int(x.stream.has_unexpected_id) for x in exchanges if x.stream is not None),
            default=0,
        ),
        "sse_buffer": max(
            (x.stream.decoder.parser.buffered_bytes for x in exchanges if x.stream is not None),
            default=0,
        ),
    }


BOUNDS = {
    "exchanges": CAP,
    "parked": CAP,
    "unclaimed": CAP,
    "server_requests": CAP,
    "client_by_agent": CAP,
    "held": CAP * 8,
    "held_agents": CAP,
    "sessions": CAP,
    "lost_sessions": CAP,
    "retry_signatures": CAP,
    "servers_known": 2,
    "notes": MAX_NOTES,
    "unexpected_ids": 1,
    "sse_buffer": EVENT_CAP + 2,
}


def check_records(records: list[dict[str, Any]], seen_ids: set[int], tally: Tally) -> None:
    for record in records:
        line = dumps_line(record)
        assert line.endswith(b"\n") and line.count(b"\n") == 1, line[:200]
        assert json.loads(line) == json.loads(line)  # parses
        assert set(record) >= RECORD_KEYS, set(RECORD_KEYS) - set(record)
        assert record["v"] == 1
        assert record["id"] not in seen_ids, f"record id {record['id']} written twice"
        seen_ids.add(record["id"])
        tally.records += 1
        tally.by_outcome[str(record["outcome"] or record["kind"])] += 1


class Simulation:
    """Feeds a tracker the events of many interleaved flows, as mitmproxy would."""

    def __init__(self, data: st.DataObject, tally: Tally) -> None:
        self.data, self.tally = data, tally
        self.t = bounded_tracker()
        self.now = 1_700_000_000.0
        self.records: list[dict[str, Any]] = []
        self.seen: set[int] = set()
        self.requests_expected = 0
        self.messages_expected = 0

    def draw(self, strategy: st.SearchStrategy[Any]) -> Any:
        return self.data.draw(strategy)

    def feed(self, event: Any) -> list[dict[str, Any]]:
        self.tally.events += 1
        out = records_of(self.t.handle(event))
        check_records(out, self.seen, self.tally)
        self.records += out
        sizes = state_sizes(self.t)
        for name, size in sizes.items():
            self.tally.peak[name] = max(self.tally.peak[name], size)
            assert size <= BOUNDS[name], f"{name} grew to {size} (bound {BOUNDS[name]})"
        return out

    def tick(self) -> float:
        jump = self.draw(st.sampled_from([0.001, 0.01, 0.2, 1.0, 7.0]))
        self.now += jump
        return self.now

    def start(self, flow: Flow) -> None:
        if flow.kind == "post":
            body, flow.rids = flow.plan
            headers = self.request_headers()
            self.tally.bytes_fed += len(body)
            over = self.draw(st.integers(0, 19)) == 0  # the adapter's body cap
            self.feed(
                PostReceived(
                    flow.name,
                    self.tick(),
                    self.draw(st.sampled_from(SERVERS)),
                    self.draw(st.sampled_from(PEERS)),
                    headers,
                    None if over else body,
                    len(body),
                    self.draw(st.sampled_from([None, None, "abc", "def"])),
                )
            )
            flow.tracked = self.t.is_tracked(flow.name)
            if flow.tracked:
                self.tally.posts_taken += 1
                messages = messages_of(try_loads(body)) or []
                n = sum(1 for m in messages if is_request(m))
                if n:
                    self.requests_expected += n
                else:
                    self.messages_expected += 1
        else:
            headers = self.request_headers()
            if flow.kind == "get" and self.draw(st.booleans()):
                headers["accept"] = "text/event-stream"
            if self.draw(st.booleans()):
                headers["last-event-id"] = "1"
            self.feed(
                OtherRequest(
                    flow.name,
                    self.tick(),
                    flow.kind.upper(),
                    self.draw(st.sampled_from(SERVERS)),
                    self.draw(st.sampled_from(PEERS)),
                    headers,
                    self.draw(st.sampled_from([None, "abc"])),
                )
            )
            flow.tracked = self.t.is_tracked(flow.name)
        flow.phase = "requested"

    def request_headers(self) -> dict[str, str]:
        headers: dict[str, str] = {}
        for name, pool in (
            ("mcp-session-id", SESSIONS),
            ("user-agent", AGENTS),
            ("mcp-protocol-version", VERSIONS),
        ):
            value = self.draw(st.sampled_from(pool))
            if value is not None:
                headers[name] = value
        return headers

    def step(self, flow: Flow) -> None:
        """Advance one flow by one hook, the way mitmproxy orders them."""
        if flow.phase == "start":
            self.start(flow)
            return
        if flow.phase == "requested":
            what = self.draw(st.sampled_from(["headers"] * 6 + ["fail"]))
            if what == "fail":
                self.feed(FlowFailed(flow.name, self.tick(), "connect failed"))
                flow.phase = "done"
                return
            headers: dict[str, str] = {}
            ctype = self.draw(st.sampled_from(CONTENT_TYPES))
            if ctype is not None:
                headers["content-type"] = ctype
            encoding = self.draw(st.sampled_from(ENCODINGS))
            if encoding is not None:
                headers["content-encoding"] = encoding
            retry_after = self.draw(st.sampled_from(RETRY_AFTERS))
            if retry_after is not None:
                headers["retry-after"] = retry_after
            session = self.draw(st.sampled_from(SESSIONS))
            if session is not None:
                headers["mcp-session-id"] = session
            self.feed(
                ResponseStarted(
                    flow.name,
                    self.tick(),
                    self.draw(st.sampled_from(STATUSES)),
                    headers,
                    self.draw(st.booleans()),
                )
            )
            flow.phase = "headers"
            flow.plan = (encoding or "").strip().lower()
            return
        if flow.phase == "headers":
            if self.t.wants_stream(flow.name):
                stream = self.draw(sse_streams(flow.rids))
                if flow.plan in ("gzip", "x-gzip"):
                    stream = gzip.compress(stream)
                elif flow.plan == "deflate":
                    stream = zlib.compress(stream)
                elif self.draw(st.integers(0, 9)) == 0:
                    stream = self.draw(st.binary(max_size=100))
                points = self.draw(st.lists(st.integers(0, 10_000), max_size=10))
                flow.plan = cut(stream, points)
                flow.phase = "streaming"
                return
            what = self.draw(st.sampled_from(["body"] * 5 + ["fail", "over_cap"]))
            if what == "fail":
                self.feed(FlowFailed(flow.name, self.tick(), "upstream broke"))
            else:
                rid = self.draw(st.sampled_from(flow.rids)) if flow.rids else 1
                if what == "over_cap":
                    body, size = None, 10**9
                else:
                    body = self.draw(
                        st.one_of(
                            answers(rid).map(encode),
                            st.lists(answers(rid), max_size=3).map(encode),
                            st.binary(max_size=60),
                            st.just(b""),
                            st.just(b"Accepted"),
                        )
                    )
                    size = len(body)
                    self.tally.bytes_fed += size
                self.feed(ResponseBody(flow.name, self.tick(), body, size))
            flow.phase = "done"
            return
        if flow.phase == "streaming":
            chunks: list[bytes] = flow.plan
            if chunks:
                chunk = chunks.pop(0)
                self.tally.bytes_fed += len(chunk)
                self.feed(StreamChunk(flow.name, self.tick(), chunk))
                return
            end = self.draw(st.sampled_from(["ended", "ended", "failed"]))
            if end == "ended":
                self.feed(StreamEnded(flow.name, self.tick()))
            else:
                self.feed(FlowFailed(flow.name, self.tick(), "peer closed"))
            flow.phase = "done"

    def run(self, flows: list[Flow]) -> None:
        live = list(flows)
        for _ in range(10_000):  # bounded: every flow ends within a few dozen steps
            if not live:
                break
            flow = self.draw(st.sampled_from(live))
            # Some flows stay open until the proxy stops.
            if flow.phase != "start" and self.draw(st.integers(0, 30)) == 0:
                live.remove(flow)
                continue
            self.step(flow)
            if flow.phase == "done":
                live.remove(flow)
        # `done` comes first, then the error hooks of the flows still open.
        self.feed(ProxyStopping(self.tick()))
        for flow in flows:
            if flow.phase not in ("start", "done"):
                assert self.feed(FlowFailed(flow.name, self.tick(), "shutdown")) == []


@st.composite
def flow_plans(draw: st.DrawFn) -> list[Flow]:
    flows = []
    for n in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(["post"] * 6 + ["get", "delete"]))
        plan = draw(post_bodies()) if kind == "post" else None
        flows.append(Flow(f"f{n}", kind, [], plan))
    return flows


def test_core_never_raises_loses_nothing_and_stays_bounded() -> None:
    tally = Tally()

    @settings(
        derandomize=True,
        max_examples=200,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(flow_plans(), st.data())
    def run(flows: list[Flow], data: st.DataObject) -> None:
        tally.examples += 1
        tally.flows += len(flows)
        sim = Simulation(data, tally)
        sim.run(flows)
        kinds = Counter(r["kind"] for r in sim.records)
        summary = f"expected {sim.requests_expected} request records, got {kinds}"
        assert kinds["request"] == sim.requests_expected, summary
        assert kinds["notification"] + kinds["response"] == sim.messages_expected, summary
        assert sim.t.pending == 0 and not sim.t._waiting.held, "state left after the proxy stopped"
        tally.requests_expected += sim.requests_expected
        tally.messages_expected += sim.messages_expected

    started = time.monotonic()
    run()
    peaks = " ".join(f"{k}:{v}/{BOUNDS[k]}" for k, v in sorted(tally.peak.items()))
    figures(
        "core-fuzz",
        cases=tally.examples,
        flows=tally.flows,
        events=tally.events,
        bytes_fed=tally.bytes_fed,
        posts_taken=tally.posts_taken,
        request_records_expected=tally.requests_expected,
        message_records_expected=tally.messages_expected,
        records_written=tally.records,
        seconds=round(time.monotonic() - started, 1),
    )
    figures("core-fuzz-peak-state", peaks=peaks)
    figures("core-fuzz-outcomes", **dict(sorted(tally.by_outcome.items())))
    assert tally.examples >= 100


# -- split invariance at the tracker level -----------------------------------------------------


@st.composite
def one_stream(draw: st.DrawFn) -> tuple[bytes, list[Any], list[int], list[int]]:
    body, rids = draw(post_bodies().filter(lambda b: bool(b[1])))
    stream = draw(sse_streams(rids))
    a = draw(st.lists(st.integers(0, 10_000), max_size=12))
    b = draw(st.lists(st.integers(0, 10_000), max_size=12))
    return body, stream, a, b


def _stream_records(body: bytes, chunks: list[bytes]) -> list[dict[str, Any]]:
    t = Tracker(Settings(max_event_bytes=EVENT_CAP))
    ts = 1_700_000_000.0
    sse = {"content-type": "text/event-stream"}
    out = records_of(t.handle(PostReceived("f", ts, SERVERS[0], PEERS[0], {}, body, len(body))))
    if not t.is_tracked("f"):
        return out
    out += records_of(t.handle(ResponseStarted("f", ts, 200, sse)))
    for chunk in chunks:
        out += records_of(t.handle(StreamChunk("f", ts, chunk)))
    out += records_of(t.handle(StreamEnded("f", ts)))
    return out + records_of(t.handle(ProxyStopping(ts)))


def test_records_do_not_depend_on_how_a_stream_is_cut() -> None:
    tried = []

    @settings(derandomize=True, max_examples=300, deadline=None)
    @given(one_stream())
    def run(case: tuple[bytes, bytes, list[int], list[int]]) -> None:
        body, stream, a, b = case
        first = _stream_records(body, cut(stream, a))
        assert first == _stream_records(body, cut(stream, b))
        assert first == _stream_records(body, [stream[i : i + 1] for i in range(len(stream))])
        tried.append(len(stream))

    run()
    figures("core-split-invariance", cases=len(tried), stream_bytes=sum(tried), cuttings=3)


# -- explicit extremes -----------------------------------------------------------------------


#: Nesting orjson decodes (deeper input is "not JSON" to the core).
ORJSON_MAX_DEPTH = 1024


def _one_exchange(body: bytes, answer: bytes, sse: bool = False) -> list[dict[str, Any]]:
    t = Tracker()
    ctype = {"content-type": "text/event-stream" if sse else "application/json"}
    ts = 1_700_000_000.0
    out = records_of(t.handle(PostReceived("f", ts, SERVERS[0], PEERS[0], {}, body, len(body))))
    out += records_of(t.handle(ResponseStarted("f", ts, 200, ctype)))
    if sse:
        out += records_of(t.handle(StreamChunk("f", ts, answer)))
        out += records_of(t.handle(StreamEnded("f", ts)))
    else:
        out += records_of(t.handle(ResponseBody("f", ts, answer, len(answer))))
    return out + records_of(t.handle(ProxyStopping(ts)))


@pytest.mark.parametrize("depth", [100, 254, 255, 256, 1000, 1024, 1025, 100_000])
@pytest.mark.parametrize("where", ["params", "id", "answer", "sse_answer"])
def test_deep_json_is_recorded_in_one_line(depth: int, where: str) -> None:
    nested = b"[" * depth + b"]" * depth
    rid = nested if where == "id" else b"1"
    body = b'{"jsonrpc":"2.0","id":' + rid + b',"method":"tools/call","params":'
    body += (nested if where == "params" else b"{}") + b"}"
    answer = b'{"jsonrpc":"2.0","id":1,"result":' + (nested if "answer" in where else b"{}") + b"}"
    if where == "sse_answer":
        answer = b"data: " + answer + b"\n\n"
    records = _one_exchange(body, answer, sse=where == "sse_answer")
    # Valid JSON past orjson's depth limit is read by the standard library, as the
    # Python SDK reads it; past Python's recursion limit no Python peer reads it either.
    if where in ("id", "params") and not _python_reads(body):
        # Not JSON to the core's decoder: not MCP, so passed through unrecorded.
        assert records == []
        return
    assert len(records) == 1
    if "answer" in where and depth + 1 > ORJSON_MAX_DEPTH:
        # Read, the answer's result is a list: no tool result.
        expected = "INVALID_TOOL_RESULT" if _python_reads(nested) else "MALFORMED_JSON"
        assert records[0]["outcome"] == expected
    writer = RecordWriter(None, started=0, outfile=_Sink())
    writer.write(records)
    assert writer.written == 1 and writer.lost == 0, f"depth {depth} in {where}"


def _python_reads(text: bytes) -> bool:
    try:
        json.loads(text)
    except RecursionError:
        return False
    return True


class _Sink:
    def __init__(self) -> None:
        self.lines: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.lines.append(data)

    def flush(self) -> None:
        pass


def test_a_20_mib_body_is_not_parsed_past_the_cap() -> None:
    body = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"x":"' + b"a" * (20 << 20)
    body += b'"}}'
    t = Tracker()
    started = time.perf_counter()
    out = records_of(t.handle(PostReceived("f", 1.0, SERVERS[0], PEERS[0], {}, body, len(body))))
    assert out == [] and not t.is_tracked("f")  # over the cap: passed, not recorded
    huge_answer = b'{"jsonrpc":"2.0","id":1,"result":{"s":"' + b"b" * (20 << 20) + b'"}}'
    records = _one_exchange(b'{"jsonrpc":"2.0","id":1,"method":"ping"}', huge_answer[:100])
    assert len(records) == 1
    elapsed = time.perf_counter() - started
    assert elapsed < 2.0


def test_a_long_adversarial_stream_keeps_notes_and_memory_bounded() -> None:
    """Found by these proofs: every over-cap event and every unexpected id used to add a
    note (and keep the id) for the rest of the exchange, so a long stream grew them
    without bound (and wrote a record as large as the stream was long)."""
    t = Tracker(Settings(max_event_bytes=64))
    sse = {"content-type": "text/event-stream"}
    body = b'{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen"}'
    t.handle(PostReceived("f", 1.0, SERVERS[0], PEERS[0], {}, body, len(body)))
    t.handle(ResponseStarted("f", 1.0, 200, sse))
    t.handle(OtherRequest("g", 1.0, "GET", SERVERS[0], PEERS[0], {"mcp-session-id": "s"}))
    t.handle(ResponseStarted("g", 1.0, 200, sse))
    over = b"data: " + b"x" * 100 + b"\n\n"
    n = 20_000
    for i in range(n):
        wrong = f'data: {{"jsonrpc":"2.0","id":{i + 2},"result":{{}}}}\n\n'.encode()
        for flow in ("f", "g"):
            t.handle(StreamChunk(flow, 1.0, over + wrong))
    sizes = state_sizes(t)
    assert sizes["notes"] <= MAX_NOTES and sizes["unexpected_ids"] <= 1, sizes
    [record] = records_of(t.handle(StreamEnded("f", 2.0)))
    line = dumps_line(record)
    figures("core-long-adversarial-stream", events=4 * n, notes=len(record["notes"]),
            record_bytes=len(line))  # fmt: skip
    assert len(line) < 4096, record["notes"][:5]
    assert record["outcome"] == "UNINSPECTED"  # events were skipped: no verdict
    assert any(note.startswith("sse_event_over_cap:") for note in record["notes"])
    assert f"sse_event_over_cap_more:{n - 1}" in record["notes"], record["notes"]


def test_a_record_that_orjson_cannot_write_is_written_or_counted_lost() -> None:
    """Found by these proofs: an id nested deeper than orjson writes (255 levels) made
    the writer raise, so that record and the rest of its batch were lost uncounted."""
    deep_id = deep(300)
    records = [
        {"v": 1, "id": 1, "jsonrpc": {"id": deep_id}},
        {"v": 1, "id": 2, "jsonrpc": {"id": deep(100_000)}},  # past any JSON writer
        {"v": 1, "id": 3, "jsonrpc": {"id": 1}},
    ]
    sink = _Sink()
    errors: list[str] = []
    writer = RecordWriter(None, started=0, outfile=sink, on_error=errors.append)
    writer.write(records)
    assert writer.written == 2 and writer.lost == 1
    assert [json.loads(line)["id"] for line in sink.lines] == [1, 3]
    assert json.loads(sink.lines[0])["jsonrpc"]["id"] == deep_id
    # One warning when the loss happens, one when writing works again (record 3).
    assert len(errors) == 2 and "being lost" in errors[0] and "1 records lost" in errors[1]


def test_records_held_for_a_client_that_never_returns_are_bounded() -> None:
    """Found by these proofs: the records of a rejected version probe wait for the
    client's next POST (is it a fallback `initialize`?), and a client that never came
    back kept them, and an entry, until the proxy stopped: one per client, unbounded."""
    t = Tracker(Settings(max_sessions=50))
    rejected = {"content-type": "application/json"}
    error = b'{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"unsupported"}}'
    probe = b'{"jsonrpc":"2.0","id":1,"method":"server/discover"}'
    written = []
    clients = 2000
    for n in range(clients):
        flow = f"f{n}"
        ts = 1_700_000_000.0 + n
        written += records_of(
            t.handle(
                PostReceived(flow, ts, SERVERS[0], PEERS[0], {"user-agent": f"ua-{n}"}, probe, 50)
            )
        )
        written += records_of(t.handle(ResponseStarted(flow, ts, 400, rejected)))
        written += records_of(t.handle(ResponseBody(flow, ts, error, len(error))))
        assert len(t._waiting.held) <= 50
    before_stop = len(written)
    written += records_of(t.handle(ProxyStopping(2e9)))
    figures("core-held-bound", clients=clients, written_before_stop=before_stop,
            written=len(written), held_peak=50)  # fmt: skip
    assert before_stop == clients - 50
    assert len(written) == clients
    assert {r["negotiation"] for r in written} == {False}
    assert len({r["id"] for r in written}) == clients


def test_random_byte_storm_through_one_tracker() -> None:
    """Many flows of pure noise through one long-lived tracker (default caps): nothing
    raises and nothing is kept for traffic that is not MCP."""
    rng = random.Random(6)
    t = Tracker()
    ts = 1_700_000_000.0
    fed = 0
    for n in range(3000):
        flow = f"n{n}"
        body = rng.randbytes(rng.randint(0, 300))
        if rng.random() < 0.3:
            body = b"{" + body
        t.handle(PostReceived(flow, ts, SERVERS[0], PEERS[0], {}, body, len(body)))
        if t.is_tracked(flow):  # noise that happens to be JSON-RPC is fine; answer it
            t.handle(ResponseStarted(flow, ts, 200, {"content-type": "text/event-stream"}))
            t.handle(StreamChunk(flow, ts, rng.randbytes(200)))
            t.handle(FlowFailed(flow, ts, "x"))
        fed += len(body)
    t.handle(ProxyStopping(ts))
    figures("core-noise", posts=3000, bytes=fed, sessions=len(t.sessions), pending=t.pending)
    assert t.pending == 0 and len(t.sessions) == 0
