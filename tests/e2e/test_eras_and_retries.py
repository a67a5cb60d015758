"""Transport eras, retries and session lifelines through a real mitmdump with the addon.

Two kinds of peers:

- real ones: the TS SDK v1 client (Node) against the bundled Python SDK server, and the
  official Python SDK client driven by conformance 0.1.16 client scenarios (`sse-retry`,
  `elicitation-sep1034-client-defaults`), whose servers do what no bundled server does
  (close a POST stream after a priming event; ask the client for input mid-call).
  conformance's servers bind every interface, so it runs in a network namespace that
  has only `lo`: nothing it opens can be reached from, or reach, outside this machine
  (tests/e2e/conformance_run.py);
- scripted ones, where no real peer produces the case on demand: the scripted upstream
  (exact bytes) and, for the 2024-11-05 HTTP+SSE era, a small legacy server below (the
  scripted upstream answers each request on its own; this era answers POSTs on a GET
  stream that must stay open while they come).

Every POST here is sent with a raw HTTP client (http.client: no SDK, nothing retries or
rewrites behind the test's back). Each scripted case has its own User-Agent, so that
neither the retry book nor the session book links it to another case sharing the proxy.
Expectations follow docs/record-format.md.
"""

from __future__ import annotations

import dataclasses
import http.client
import itertools
import json
import queue
import re
import subprocess
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from conformance_run import CONFORMANCE_PY_CLIENT, ConformanceRun, run_conformance
from mcp_layers_core.redact import pseudonym
from mcp_layers_support import node_peers
from mcp_layers_support.harness import HOST, SSE_STATEFUL, Proxies, Proxy, ServerPool
from mcp_layers_support.scripted_upstream import (
    Received,
    Reply,
    ScriptedUpstream,
    json_reply,
    sse_event,
    sse_reply,
)

pytestmark = pytest.mark.e2e

HTTP_TIMEOUT_S = 10.0
RECORD_WAIT_S = 10.0
NODE_CLIENT_TIMEOUT_S = 60.0

SESSION_HASH = re.compile(r"^s-[0-9a-f]{10}$")
ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
TS_CLIENT = "mcp-layers-ts-peer@1.32.2"
SCRIPTED_CLIENT = {"name": "eras-and-retries", "version": "1.0"}


# -- a raw HTTP client -------------------------------------------------------------------


@dataclass
class Answer:
    """What the client got for one request."""

    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)  # names lower-cased
    body: bytes = b""
    error: str | None = None


def _read(conn: http.client.HTTPConnection) -> Answer:
    resp = conn.getresponse()
    answer = Answer(resp.status, {k.lower(): v for k, v in resp.getheaders()})
    try:
        answer.body = resp.read()
    except http.client.IncompleteRead as e:  # a stream cut mid-body reaches us like this
        answer.body, answer.error = e.partial, repr(e)
    except OSError as e:
        answer.error = repr(e)
    return answer


def send(
    port: int,
    body: Any,
    headers: dict[str, str],
    path: str = "/mcp",
    conn: http.client.HTTPConnection | None = None,
) -> Answer:
    """POST `body` (JSON unless bytes) on `conn`, or on a fresh connection closed after."""
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    own = conn is None
    conn = conn or http.client.HTTPConnection(HOST, port, timeout=HTTP_TIMEOUT_S)
    try:
        conn.request("POST", path, body=raw, headers=headers)
        return _read(conn)
    except OSError as e:
        return Answer(error=repr(e))
    finally:
        if own:
            conn.close()


def rpc(rid: Any, method: str, **params: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params:
        msg["params"] = params
    return msg


def notification(method: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method}


def tool_call(rid: Any, name: str, **arguments: Any) -> dict[str, Any]:
    return rpc(rid, "tools/call", name=name, arguments=arguments)


def initialize(rid: Any, version: str) -> dict[str, Any]:
    return rpc(
        rid, "initialize", protocolVersion=version, capabilities={}, clientInfo=SCRIPTED_CLIENT
    )


def result(rid: Any, **fields: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "result": fields}


def tool_result(rid: Any, is_error: bool = False) -> dict[str, Any]:
    return result(rid, content=[{"type": "text", "text": "done"}], isError=is_error)


def init_result(rid: Any, version: str) -> dict[str, Any]:
    return result(
        rid,
        protocolVersion=version,
        capabilities={"tools": {}},
        serverInfo={"name": "scripted", "version": "1.0"},
    )


def fields(record: dict[str, Any], expected: dict[str, Any]) -> None:
    """The record has exactly these values for these fields (pytest shows the diff)."""
    assert {k: record.get(k, "<absent>") for k in expected} == expected, record


def common(record: dict[str, Any], server: str, scenario: str | None) -> None:
    """What every record of every case shares, by the doc's Fields table."""
    assert record["v"] == 1 and isinstance(record["id"], int)
    assert ISO_MS.match(record["ts"]), record["ts"]
    assert record["durationMs"] is None or record["durationMs"] >= 0
    assert record["server"] == server
    assert record["scenario"] == scenario


# -- the scripted upstream, shared by the module -------------------------------------------


_sentinels = itertools.count(1)


def _not_sentinel(request: Received) -> bool:
    return not str(request.rpc_id).startswith("sentinel-")


def _ping_or_unscripted(request: Received) -> Reply:
    """Answers the sentinel pings; anything else the case did not script is a test bug."""
    if request.rpc_method == "ping":
        return json_reply(result(request.rpc_id))
    return Reply(500, [("Content-Type", "text/plain")], b"unscripted", label="unscripted")


class Wire:
    """One scripted case: its User-Agent, its script and its records."""

    def __init__(self, upstream: ScriptedUpstream, proxy: Proxy, user_agent: str) -> None:
        self.upstream, self.proxy, self.ua = upstream, proxy, user_agent
        self.answers: list[Answer] = []

    @property
    def server(self) -> str:
        return f"{HOST}:{self.upstream.port}"

    def script(self, replies: Sequence[Reply]) -> None:
        # Sentinel pings are the responder's: a case's reply must never go to one.
        mine = [r if r.when else dataclasses.replace(r, when=_not_sentinel) for r in replies]
        self.upstream.script(mine, responder=_ping_or_unscripted)

    def headers(
        self, session: str | None = None, version: str | None = "2025-11-25", **extra: str
    ) -> dict[str, str]:
        h = {
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            "User-Agent": self.ua,
        }
        if version:
            h["MCP-Protocol-Version"] = version
        if session:
            h["Mcp-Session-Id"] = session
        return {**h, **extra}

    def post(
        self,
        body: Any,
        session: str | None = None,
        version: str | None = "2025-11-25",
        conn: http.client.HTTPConnection | None = None,
        **extra: str,
    ) -> Answer:
        answer = send(self.proxy.port, body, self.headers(session, version, **extra), conn=conn)
        self.answers.append(answer)
        return answer

    def records(self, flush_as: str | None = None, done: bool = True) -> list[dict[str, Any]]:
        """This case's records so far, in file order.

        A sentinel ping goes through the proxy after the case's exchanges; once its record
        is in the file, so is every record those exchanges finished. The ping carries
        `flush_as` as its User-Agent (default: the case's own, which also releases
        records held for version negotiation, as any next POST of that client does).
        `done`: the case is over, so its whole script must have been used.
        """
        sentinel = f"sentinel-{next(_sentinels)}"
        headers = self.headers(version=None)
        headers["User-Agent"] = flush_as or self.ua
        got = send(self.proxy.port, rpc(sentinel, "ping"), headers)
        assert got.status == 200, got
        deadline = time.monotonic() + RECORD_WAIT_S
        for _ in range(10_000):
            records = self.proxy.records()
            ids = [(r.get("jsonrpc") or {}).get("id") for r in records]
            if sentinel in ids:
                at = ids.index(sentinel)
                assert [s.label for s in self.upstream.sent if s.label == "unscripted"] == []
                if done:
                    assert self.upstream.unused == [], "the case left part of its script unused"
                return [r for r in records[:at] if r["userAgent"] == self.ua]
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        raise AssertionError(f"no record for {sentinel} within {RECORD_WAIT_S} s")

    def failure_context(self) -> str:
        lines = ["answers:"] + [f"  {a}" for a in self.answers]
        lines += ["upstream received:"] + [f"  {r}" for r in self.upstream.received]
        lines += ["records:"] + [f"  {json.dumps(r)}" for r in self.proxy.records()]
        return "\n".join([*lines, self.proxy.failure_context()])


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as up:
        yield up


@pytest.fixture(scope="module")
def scripted_proxy(
    upstream: ScriptedUpstream, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Proxy]:
    with Proxy(upstream.port, tmp_path_factory.mktemp("eras-scripted")) as proxy:
        yield proxy


@pytest.fixture
def wire(upstream: ScriptedUpstream, scripted_proxy: Proxy, request: pytest.FixtureRequest) -> Wire:
    return Wire(upstream, scripted_proxy, f"{request.node.name[:60]}/1.0")


# -- real peers: the TS SDK client ------------------------------------------------------------


def test_ts_sdk_client_session_get_stream_and_delete(
    peers: node_peers.NodePeers, servers: ServerPool, proxies: Proxies
) -> None:
    server = servers.get(SSE_STATEFUL)
    proxy = proxies(server.port)
    calls = [["echo", {"text": "hi"}], ["fail", {"reason": "on purpose"}]]
    before = server.stats()["count"]
    done = subprocess.run(
        [str(peers.node), str(peers.ts_client), proxy.url, json.dumps(calls), "--terminate"],
        capture_output=True,
        text=True,
        timeout=NODE_CLIENT_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1].removeprefix("RESULT "))
    assert seen["protocolVersion"] == "2025-11-25" and seen["terminated"] is True
    assert seen["calls"] == [
        {"name": "echo", "isError": False},
        {"name": "fail", "isError": True},
    ]
    proxy.stop()
    posts = server.stats()["count"] - before
    records = proxy.records()

    kinds = [(r["kind"], r["method"], r["tool"]) for r in records]
    assert kinds[:5] == [
        ("request", "initialize", None),
        ("notification", "notifications/initialized", None),
        ("request", "tools/list", None),
        ("request", "tools/call", "echo"),
        ("request", "tools/call", "fail"),
    ]
    # The client's standby GET stream ends as its DELETE is answered: which of the two
    # finishes first (and so is written first) is a race on the wire.
    assert sorted(kinds[5:]) == [("session_end", None, None), ("stream", None, None)]
    session = pseudonym("s-", seen["sessionId"])
    for r in records:
        common(r, f"{HOST}:{server.port}", "e2e")
        fields(
            r,
            {
                "session": session,
                "client": TS_CLIENT,
                "userAgent": "node",
                "protocolVersion": "2025-11-25",
            },
        )
    init, initialized, listed, echo, fail = records[:5]
    (stream,) = [r for r in records[5:] if r["kind"] == "stream"]
    (end,) = [r for r in records[5:] if r["kind"] == "session_end"]
    # Its standby GET: asked for an event stream, carried the session and the version.
    assert stream["httpStatuses"] == [200] and stream["accept"] == ["text/event-stream"]
    assert {"mcp-session-id", "mcp-protocol-version"} <= set(stream["requestHeaders"])
    # The TS SDK numbers from 0: id 0 is an id like any other, not a missing one.
    fields(
        init,
        {
            "jsonrpc": {"id": 0, "errorCode": None, "errorMessage": None},
            "outcome": "SUCCESS",
            "layer": "protocol",
            "postCount": 1,
            "httpStatuses": [200],
            "contentType": "text/event-stream",
            "retryOrigin": "none",
            "attempt": 1,
            "previousSession": None,
        },
    )
    assert init["sse"]["final"] is True and init["sse"]["end"] == "complete"
    fields(
        initialized,
        {"postCount": 2, "httpStatuses": [202], "outcome": None, "layer": None, "ackNote": None},
    )
    fields(listed, {"outcome": "SUCCESS", "postCount": 3})
    assert listed["jsonrpc"]["id"] == 1
    # echo is annotated read-only by the bundled server, fail is not annotated.
    fields(
        echo,
        {"outcome": "TOOL_SUCCESS", "isError": False, "toolSafety": "read_only", "postCount": 4},
    )
    fields(
        fail,
        {"outcome": "TOOL_ERROR", "layer": "application", "isError": True, "toolSafety": "unsafe"},
    )
    fields(
        end,
        {
            "endReason": "delete",
            "httpStatuses": [200],
            "postCount": 5,
            "outcome": None,
            "jsonrpc": None,
        },
    )
    # The client opened its GET stream after `initialized`; it counts on the session.
    assert end["sessionStats"]["getStreams"] >= 1, end
    assert end["sessionStats"]["posts"] == 5 == posts


# -- real peers: conformance client scenarios with the Python SDK client ----------------------


@pytest.fixture
def conformance(
    peers: node_peers.NodePeers, tmp_path: Path, request: pytest.FixtureRequest
) -> ConformanceRun:
    return run_conformance(peers, request.param, tmp_path)


@pytest.mark.parametrize("conformance", ["sse-retry"], indirect=True)
def test_conformance_sse_retry_answer_on_the_resumed_get(conformance: ConformanceRun) -> None:
    run = conformance
    assert run.returncode == 0, run.output[-3000:]
    assert run.status("client-sse-graceful-reconnect") == ["SUCCESS"]
    assert run.status("client-sse-last-event-id") == ["SUCCESS"]
    # Reconnecting 200-500 ms late is a WARNING in conformance's own verdict (a loaded
    # machine), not a failure; too early or over 2x late is a FAILURE.
    assert run.status("client-sse-retry-timing") in (["SUCCESS"], ["WARNING"])
    assert [c["id"] for c in run.checks if c["status"] == "FAILURE"] == []
    # That `mcp-layers verdicts` agrees with these statuses, on this run and on others:
    # tests/e2e/test_conformance_verdicts.py.

    calls = [r for r in run.records if r["method"] == "tools/call"]
    (call,) = calls  # one record: not a STREAM_INCOMPLETE one plus a late answer
    common(call, call["server"], "conformance:sse-retry")
    fields(
        call,
        {
            "kind": "request",
            "tool": "test_reconnection",
            "client": CONFORMANCE_PY_CLIENT,
            # The scenario's server answers initialize with 2025-03-26.
            "protocolVersion": "2025-03-26",
            "httpStatuses": [200],
            "contentType": "text/event-stream",
            "outcome": "TOOL_SUCCESS",
            "layer": "application",
            "isError": False,
            "retryOrigin": "none",
            "attempt": 1,
        },
    )
    assert SESSION_HASH.match(call["session"])
    assert {k: call["sse"][k] for k in ("final", "end", "resumed")} == {
        "final": True,
        "end": "complete",
        "resumed": True,
    }
    # The scenario's server refuses DELETE (405): the DELETE ended nothing (no reason),
    # and the session ends once, when the proxy stops.
    ends = [r for r in run.records if r["kind"] == "session_end"]
    assert [(r["endReason"], r["httpStatuses"]) for r in ends] == [
        (None, [405]),
        ("shutdown", []),
    ]
    assert all(r["session"] == call["session"] for r in ends)
    # The first GET (opened after `initialized`) and the one resumed with Last-Event-ID.
    assert ends[-1]["sessionStats"]["getStreams"] == 2


@pytest.mark.parametrize("conformance", ["elicitation-sep1034-client-defaults"], indirect=True)
def test_conformance_elicitation_answer_is_a_response_record(
    conformance: ConformanceRun,
) -> None:
    run = conformance
    assert run.returncode == 0, run.output[-3000:]
    sep1034 = [c for c in run.checks if c["id"].startswith("client-elicitation-sep1034-")]
    assert len(sep1034) == 5 and {c["status"] for c in sep1034} == {"SUCCESS"}, sep1034
    assert [c["id"] for c in run.checks if c["status"] == "FAILURE"] == []

    (answer,) = [r for r in run.records if r["kind"] == "response"]
    (call,) = [r for r in run.records if r["method"] == "tools/call"]
    for r in (answer, call):
        common(r, call["server"], "conformance:elicitation-sep1034-client-defaults")
        fields(
            r,
            {
                "session": call["session"],
                "client": CONFORMANCE_PY_CLIENT,
                "protocolVersion": "2025-11-25",
            },
        )
    fields(
        answer,
        {
            "method": None,
            "serverMethod": "elicitation/create",
            "httpStatuses": [202],
            "outcome": None,
            "layer": None,
            "jsonrpc": None,
            "ackNote": None,
        },
    )
    assert isinstance(answer["answerMs"], int | float) and 0 <= answer["answerMs"] < 10_000
    assert answer["postCount"] == call["postCount"] + 1
    fields(
        call,
        {
            "tool": "test_client_elicitation_defaults",
            "outcome": "TOOL_SUCCESS",
            "isError": False,
            "httpStatuses": [200],
            "contentType": "text/event-stream",
        },
    )
    (end,) = [r for r in run.records if r["kind"] == "session_end"]
    fields(end, {"endReason": "delete", "httpStatuses": [200]})
    assert end["sessionStats"]["serverRequests"] == 1


# -- scripted: retries ------------------------------------------------------------------------


def test_503_then_sdk_resend_of_the_same_message(wire: Wire) -> None:
    call = tool_call(7, "resend_tool", city="Paris")
    wire.script(
        [
            Reply(503, [("Content-Type", "text/plain")], b"Service Unavailable"),
            json_reply(tool_result(7)),
        ]
    )
    conn = http.client.HTTPConnection(HOST, wire.proxy.port, timeout=HTTP_TIMEOUT_S)
    try:
        assert wire.post(call, conn=conn).status == 503
        time.sleep(0.2)
        # Same id, same bytes, same keep-alive connection: what an HTTP-level resend does.
        assert wire.post(call, conn=conn).status == 200
    finally:
        conn.close()
    first, second = wire.records()
    for r in (first, second):
        common(r, wire.server, "e2e")
        fields(r, {"kind": "request", "method": "tools/call", "tool": "resend_tool"})
    fields(
        first,
        {
            "outcome": "HTTP_ERROR",
            "layer": "transport",
            "httpStatuses": [503],
            "retryOrigin": "none",
            "attempt": 1,
            "retryOf": None,
            "retryAfterMs": None,
        },
    )
    fields(
        second,
        {
            "outcome": "TOOL_SUCCESS",
            "httpStatuses": [503, 200],
            "retryOrigin": "resend",
            "attempt": 2,
            "retryOf": first["id"],
            "retryAfterHonored": None,
            # Never listed by the server: safety unknown, so not an unsafe retry.
            "toolSafety": "unknown",
            "unsafeRetry": False,
        },
    )
    assert isinstance(second["retryDelayMs"], int | float)
    assert 190 <= second["retryDelayMs"] < 5000, second["retryDelayMs"]


def test_404_ends_the_session_and_the_reinit_retry_links_to_it(wire: Wire) -> None:
    version = "2025-11-25"
    lost = {"jsonrpc": "2.0", "id": None, "error": {"code": -32001, "message": "Session not found"}}
    wire.script(
        [
            json_reply(init_result(0, version), headers=[("Mcp-Session-Id", "sess-A")]),
            Reply(202),
            json_reply(lost, status=404),
            json_reply(init_result(0, version), headers=[("Mcp-Session-Id", "sess-B")]),
            Reply(202),
            json_reply(tool_result(5)),
        ]
    )
    assert wire.post(initialize(0, version), version=None).status == 200
    assert wire.post(notification("notifications/initialized"), "sess-A").status == 202
    assert wire.post(tool_call(4, "add_note", text="x"), "sess-A").status == 404
    # The client starts over: a new initialize (the server issues B), then the call again
    # with a new id.
    assert wire.post(initialize(0, version), version=None).status == 200
    assert wire.post(notification("notifications/initialized"), "sess-B").status == 202
    assert wire.post(tool_call(5, "add_note", text="x"), "sess-B").status == 200

    records = wire.records()
    assert [(r["kind"], r["method"]) for r in records] == [
        ("request", "initialize"),
        ("notification", "notifications/initialized"),
        ("request", "tools/call"),
        ("session_end", None),
        ("request", "initialize"),
        ("notification", "notifications/initialized"),
        ("request", "tools/call"),
    ]
    init_a, _, call_a, end_a, init_b, _, call_b = records
    session_a, session_b = pseudonym("s-", "sess-A"), pseudonym("s-", "sess-B")
    for r in records:
        common(r, wire.server, "e2e")
        assert r["client"] == "eras-and-retries@1.0"
    assert [r["session"] for r in records] == [session_a] * 4 + [session_b] * 3
    fields(init_a, {"outcome": "SUCCESS", "previousSession": None, "postCount": 1})
    fields(
        call_a,
        {
            "outcome": "HTTP_ERROR",
            "httpStatuses": [404],
            "jsonrpc": {"id": 4, "errorCode": -32001, "errorMessage": "Session not found"},
            "attempt": 1,
        },
    )
    fields(
        end_a,
        {
            "endReason": "not_found",
            "httpStatuses": [404],
            "postCount": 3,
            "sessionStats": {
                "posts": 3,
                "getStreams": 0,
                "serverRequests": 0,
                "serverNotifications": 0,
            },
        },
    )
    fields(
        init_b,
        {
            "outcome": "SUCCESS",
            "previousSession": session_a,
            "retryOrigin": "none",
            "postCount": 1,
        },
    )
    fields(
        call_b,
        {
            "outcome": "TOOL_SUCCESS",
            "retryOrigin": "reinit",
            "attempt": 2,
            "retryOf": call_a["id"],
            "httpStatuses": [404, 200],
            "postCount": 3,
            # A 404 says the call never ran: repeating it is safe whatever the tool.
            "unsafeRetry": False,
        },
    )
    assert isinstance(call_b["retryDelayMs"], int | float) and call_b["retryDelayMs"] >= 0


def test_429_retry_after_too_early_then_honoured(wire: Wire) -> None:
    call = tool_call(9, "limited_tool", q="x")
    limited = {"jsonrpc": "2.0", "id": 9, "error": {"code": -32000, "message": "rate limited"}}
    wire.script(
        [
            json_reply(limited, status=429, headers=[("Retry-After", "1")]),
            json_reply(limited, status=429, headers=[("Retry-After", "1")]),
            json_reply(tool_result(9)),
        ]
    )
    assert wire.post(call).status == 429
    time.sleep(0.1)  # too early: the server asked for 1 s
    assert wire.post(call).status == 429
    time.sleep(1.1)  # long enough
    assert wire.post(call).status == 200
    first, early, patient = wire.records()
    for r in (first, early, patient):
        common(r, wire.server, "e2e")
    fields(
        first,
        {
            "outcome": "HTTP_ERROR",
            "httpStatuses": [429],
            "retryAfterMs": 1000,
            "retryAfterHonored": None,
            "attempt": 1,
        },
    )
    fields(
        early,
        {
            "outcome": "HTTP_ERROR",
            "httpStatuses": [429, 429],
            "retryAfterMs": 1000,
            "retryAfterHonored": False,
            "retryOrigin": "resend",
            "attempt": 2,
            "retryOf": first["id"],
        },
    )
    assert early["retryDelayMs"] < 1000
    fields(
        patient,
        {
            "outcome": "TOOL_SUCCESS",
            "httpStatuses": [429, 429, 200],
            "retryAfterMs": None,
            "retryAfterHonored": True,
            "retryOrigin": "resend",
            "attempt": 3,
            "retryOf": early["id"],
        },
    )
    assert patient["retryDelayMs"] >= 1000


def test_tool_safety_from_annotations_and_an_unsafe_retry_after_a_cut_stream(wire: Wire) -> None:
    tools = [
        {
            "name": "ts_read",
            "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": True},
        },
        {
            "name": "ts_put",
            "inputSchema": {"type": "object"},
            "annotations": {"idempotentHint": True},
        },
        {"name": "ts_pay", "inputSchema": {"type": "object"}},
    ]
    progress = {
        "jsonrpc": "2.0",
        "method": "notifications/progress",
        "params": {"progressToken": 1, "progress": 1},
    }
    # No event ids: a 2025-11-25 stream with ids could still be resumed; this one cannot.
    cut = sse_reply([sse_event(progress)], abort="cut")
    wire.script(
        [
            json_reply(result(1, tools=tools)),
            cut,
            sse_reply([sse_event(tool_result(3))]),
            cut,
            sse_reply([sse_event(tool_result(5))]),
            json_reply(tool_result(6)),
        ]
    )
    assert wire.post(rpc(1, "tools/list")).status == 200
    broken = wire.post(tool_call(2, "ts_pay", amount=5))
    assert broken.status == 200 and broken.error is not None, broken
    assert wire.post(tool_call(3, "ts_pay", amount=5)).status == 200
    assert wire.post(tool_call(4, "ts_read", key="k")).error is not None
    assert wire.post(tool_call(5, "ts_read", key="k")).status == 200
    assert wire.post(tool_call(6, "ts_put", key="k")).status == 200

    listed, pay_cut, pay_again, read_cut, read_again, put = wire.records()
    for r in (listed, pay_cut, pay_again, read_cut, read_again, put):
        common(r, wire.server, "e2e")
    fields(listed, {"method": "tools/list", "outcome": "SUCCESS", "toolSafety": None})
    for r, tool in ((pay_cut, "ts_pay"), (read_cut, "ts_read")):
        fields(
            r,
            {
                "tool": tool,
                "outcome": "STREAM_INCOMPLETE",
                "layer": "transport",
                "attempt": 1,
                "unsafeRetry": None,
            },
        )
        assert r["sse"]["final"] is False and r["sse"]["end"] == "error", r["sse"]
    fields(
        pay_again,
        {
            "outcome": "TOOL_SUCCESS",
            "toolSafety": "unsafe",
            "retryOrigin": "reissue",
            "attempt": 2,
            "retryOf": pay_cut["id"],
            "httpStatuses": [200, 200],
            "unsafeRetry": True,
        },
    )
    assert pay_cut["toolSafety"] == "unsafe"
    fields(
        read_again,
        {
            "toolSafety": "read_only",
            "retryOrigin": "reissue",
            "retryOf": read_cut["id"],
            "unsafeRetry": False,
        },
    )
    fields(put, {"toolSafety": "idempotent", "retryOrigin": "none", "unsafeRetry": None})


# -- scripted: eras -----------------------------------------------------------------------------


def test_2025_03_26_batch_answered_by_an_array(wire: Wire) -> None:
    version = "2025-03-26"
    wire.script(
        [
            json_reply(init_result(0, version), headers=[("Mcp-Session-Id", "batch-sess")]),
            # The answers in another order than the requests: they pair by id.
            json_reply([result(3), result(2, tools=[])]),
        ]
    )
    assert wire.post(initialize(0, version), version=None).status == 200
    batch = [
        rpc(2, "tools/list"),
        notification("notifications/roots/list_changed"),
        rpc(3, "ping"),
    ]
    # 2025-03-26 had no MCP-Protocol-Version header yet.
    assert wire.post(batch, "batch-sess", version=None).status == 200
    init, listed, pinged = wire.records()
    session = pseudonym("s-", "batch-sess")
    for r in (init, listed, pinged):
        common(r, wire.server, "e2e")
        fields(r, {"session": session, "protocolVersion": version, "kind": "request"})
    for r, method, rid in ((listed, "tools/list", 2), (pinged, "ping", 3)):
        fields(
            r,
            {
                "method": method,
                "outcome": "SUCCESS",
                "postCount": 2,
                "httpStatuses": [200],
                "contentType": "application/json",
            },
        )
        assert r["jsonrpc"]["id"] == rid
        assert "batch:3" in r["notes"]


def test_2026_07_28_discover_rejected_then_initialize_is_negotiation(wire: Wire) -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": SCRIPTED_CLIENT,
    }
    unsupported = {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": ["2025-11-25"]},
        },
    }
    wire.script(
        [
            json_reply(unsupported, status=400),
            json_reply(init_result(2, "2025-11-25"), headers=[("Mcp-Session-Id", "neg-sess")]),
        ]
    )
    discover = rpc(1, "server/discover", _meta=meta)
    assert (
        wire.post(discover, version="2026-07-28", **{"Mcp-Method": "server/discover"}).status == 400
    )
    # Until the client's next POST, the rejection may be a negotiation or a failure: the
    # record waits (flushing with another client's ping must not release it).
    assert wire.records(flush_as="eras-sentinel/1.0", done=False) == []
    assert wire.post(initialize(2, "2025-11-25"), version=None).status == 200
    probe, init = wire.records()
    for r in (probe, init):
        common(r, wire.server, "e2e")
    fields(
        probe,
        {
            "method": "server/discover",
            "protocolVersion": "2026-07-28",
            "client": "eras-and-retries@1.0",
            "outcome": "HTTP_ERROR",
            "httpStatuses": [400],
            "jsonrpc": {
                "id": 1,
                "errorCode": -32022,
                "errorMessage": "Unsupported protocol version",
            },
            "negotiation": True,
        },
    )
    fields(
        init,
        {
            "method": "initialize",
            "outcome": "SUCCESS",
            "protocolVersion": "2025-11-25",
            "session": pseudonym("s-", "neg-sess"),
            "negotiation": None,
            "retryOrigin": "none",
        },
    )
    assert probe["id"] < init["id"]


# -- scripted: the 2024-11-05 HTTP+SSE era ------------------------------------------------------


class LegacyServer:
    """A 2024-11-05 HTTP+SSE server, as the Python SDK's `SseServerTransport` behaves.

    `GET /sse` opens an event stream whose first event names the POST endpoint
    (`event: endpoint`, `data: /messages/?session_id=<id>`); each POST there is acknowledged
    with 202 (`ack_body`; the SDK sends `Accepted`) and the JSON-RPC answer travels on the
    stream, when the test calls `push` (so it always follows the acknowledgement, as in
    the SDK, and the test never races the proxy). Lines end in CRLF, as sse-starlette's do.
    """

    #: A stream lives at most this long; `push(None)` or `stop` ends it earlier.
    STREAM_MAX_S = 30.0
    MAX_EVENTS = 1000

    def __init__(self) -> None:
        self.streams: dict[str, queue.Queue[bytes | None]] = {}
        self.posts: list[tuple[str | None, bytes]] = []
        self.ack_body = b""
        self.ack_type: str | None = None
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = HTTP_TIMEOUT_S  # an idle keep-alive connection ends its thread

            def log_message(self, *_args: Any) -> None:  # quiet: the test reports
                pass

            def do_GET(self) -> None:
                if urlsplit(self.path).path != "/sse":
                    self._plain(404, b"Not Found")
                    return
                session = uuid.uuid4().hex
                events: queue.Queue[bytes | None] = queue.Queue(maxsize=owner.MAX_EVENTS)
                owner.streams[session] = events
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                self.send_header("Cache-Control", "no-store")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                self._chunk(f"event: endpoint\r\ndata: /messages/?session_id={session}\r\n\r\n")
                deadline = time.monotonic() + owner.STREAM_MAX_S
                for _ in range(owner.MAX_EVENTS):
                    try:
                        data = events.get(timeout=max(0.01, deadline - time.monotonic()))
                    except queue.Empty:
                        break
                    if data is None:
                        break
                    self._chunk(f"event: message\r\ndata: {data.decode()}\r\n\r\n")
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                self.close_connection = True

            def do_POST(self) -> None:
                query = parse_qs(urlsplit(self.path).query)
                session = (query.get("session_id") or [None])[0]
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.posts.append((session, body))
                if session not in owner.streams:
                    self._plain(404, b"Could not find session")
                    return
                self.send_response(202)
                if owner.ack_type:
                    self.send_header("Content-Type", owner.ack_type)
                self.send_header("Content-Length", str(len(owner.ack_body)))
                self.end_headers()
                self.wfile.write(owner.ack_body)

            def _chunk(self, text: str) -> None:
                data = text.encode()
                self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                self.wfile.flush()

            def _plain(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer((HOST, 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    def push(self, session: str, message: dict[str, Any] | None) -> None:
        """Send `message` on the session's stream (None ends the stream)."""
        data = None if message is None else json.dumps(message).encode()
        self.streams[session].put(data, timeout=HTTP_TIMEOUT_S)

    def stop(self) -> None:
        for events in self.streams.values():
            events.put_nowait(None)
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5.0)


@pytest.fixture(scope="module")
def legacy() -> Iterator[LegacyServer]:
    server = LegacyServer()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def legacy_proxy(legacy: LegacyServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Proxy]:
    with Proxy(legacy.port, tmp_path_factory.mktemp("eras-legacy")) as proxy:
        yield proxy


def _next_event(stream: http.client.HTTPResponse) -> tuple[str | None, str]:
    """The next SSE event (its `event` name and `data`) from a streamed response."""
    name, data = None, []
    for _ in range(1000):
        line = stream.readline()
        if not line:
            raise EOFError("the stream ended inside an event")
        text = line.decode().rstrip("\r\n")
        if not text:
            if data:
                return name, "\n".join(data)
            continue
        key, _, value = text.partition(":")
        value = value.removeprefix(" ")
        if key == "event":
            name = value
        elif key == "data":
            data.append(value)
    raise ValueError("no event in 1000 lines")


@pytest.mark.parametrize(
    ("ack_body", "ack_type"),
    [
        pytest.param(b"", None, id="empty-202"),
        # Byte for byte what mcp's SseServerTransport (1.x and 2.3.0) acknowledges with.
        pytest.param(b"Accepted", None, id="sdk-202-Accepted"),
    ],
)
def test_2024_11_05_answers_on_the_get_stream(
    legacy: LegacyServer,
    legacy_proxy: Proxy,
    ack_body: bytes,
    ack_type: str | None,
    request: pytest.FixtureRequest,
) -> None:
    legacy.ack_body, legacy.ack_type = ack_body, ack_type
    ua = f"legacy-client/{request.node.callspec.id}"
    posted = len(legacy.posts)
    conn = http.client.HTTPConnection(HOST, legacy_proxy.port, timeout=HTTP_TIMEOUT_S)
    try:
        conn.request("GET", "/sse", headers={"Accept": "text/event-stream", "User-Agent": ua})
        stream = conn.getresponse()
        assert stream.status == 200
        name, endpoint = _next_event(stream)
        assert name == "endpoint" and "session_id=" in endpoint
        session_id = parse_qs(urlsplit(endpoint).query)["session_id"][0]
        headers = {"Content-Type": "application/json", "User-Agent": ua}

        def exchange(message: dict[str, Any], answer: dict[str, Any] | None) -> None:
            got = send(legacy_proxy.port, message, headers, path=endpoint)
            assert (got.status, got.body) == (202, ack_body), got
            if answer is not None:
                legacy.push(session_id, answer)
                assert json.loads(_next_event(stream)[1]) == answer

        exchange(initialize(0, "2024-11-05"), init_result(0, "2024-11-05"))
        exchange(notification("notifications/initialized"), None)
        exchange(tool_call(1, "legacy_fail"), tool_result(1, is_error=True))

        records: list[dict[str, Any]] = []
        deadline = time.monotonic() + RECORD_WAIT_S
        for _ in range(1000):
            records = [r for r in legacy_proxy.records() if r["userAgent"] == ua]
            if len(records) >= 3 or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        legacy.push(session_id, None)  # the server ends the stream
    finally:
        conn.close()
    assert [s for s, _ in legacy.posts[posted:]] == [session_id] * 3

    assert [(r["kind"], r["method"]) for r in records] == [
        ("request", "initialize"),
        ("notification", "notifications/initialized"),
        ("request", "tools/call"),
    ], records
    init, initialized, call = records
    for r in records:
        common(r, f"{HOST}:{legacy.port}", "e2e")
        fields(
            r,
            {
                "session": pseudonym("s-", session_id),
                "client": "eras-and-retries@1.0",
                "protocolVersion": "2024-11-05",
                "httpStatuses": [202],
            },
        )
    fields(
        init,
        {
            "outcome": "SUCCESS",
            "layer": "protocol",
            "jsonrpc": {"id": 0, "errorCode": None, "errorMessage": None},
            "postCount": 1,
        },
    )
    fields(initialized, {"outcome": None, "postCount": 2, "ackNote": None})
    fields(
        call,
        {
            "tool": "legacy_fail",
            "outcome": "TOOL_ERROR",
            "layer": "application",
            "isError": True,
            "postCount": 3,
        },
    )
