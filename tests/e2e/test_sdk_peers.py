"""The real Python SDK client, through a real mitmdump with the addon, to the bundled server.

Each run (client mode x server mode) happens once per module; the tests then judge its
recording against docs/record-format.md. The truth the records are compared with is not
the addon's view: it is what the client itself put on the wire (an httpx2 hook sees every
POST and its response headers) and what the server counted on its side (``GET /stats``).
"""

import re
import secrets
from collections import Counter, defaultdict
from typing import Any

import anyio
import pytest
from client_run import ClientRun, Post
from mcp_layers_core.record import FIELDS
from mcp_layers_demo.client import CLIENT_NAME, CLIENT_VERSION, LIST_TOOLS, CallResult, run_calls
from mcp_layers_support.harness import (
    JSON_STATEFUL,
    JSON_STATELESS,
    SSE_STATEFUL,
    SSE_STATELESS,
    Proxies,
    Proxy,
    ServerMode,
    ServerPool,
)

pytestmark = pytest.mark.e2e

CLIENT = f"{CLIENT_NAME}@{CLIENT_VERSION}"
LEGACY_VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"
SSE = "text/event-stream"
JSON = "application/json"

# A body marker: it travels in a request body and comes back in a response body; the
# recording must contain neither.
BODY_MARKER = f"body-{secrets.token_hex(8)}"

# (tool, arguments) -> what the real server answers. The last two were found by running the
# SDK 2.3.0 server: an unknown tool and bad arguments are not JSON-RPC errors, they are
# results with isError true ("Unknown tool: ...", "Error executing tool echo: 1 validation
# error ..."), HTTP 200.
CALLS: list[tuple[str, dict[str, Any]]] = [
    (LIST_TOOLS, {}),
    ("echo", {"text": BODY_MARKER}),
    ("fail", {"reason": "on purpose"}),
    ("slow", {"steps": 2, "delay_ms": 50}),
    ("add_note", {"text": "a note"}),
    ("get_notes", {}),
    ("no_such_tool", {}),
    ("echo", {"text": 42, "unexpected": True}),
]
EXPECTED_TOOL_OUTCOME = {
    # call index -> (outcome, isError)
    1: ("TOOL_SUCCESS", False),
    2: ("TOOL_ERROR", True),
    3: ("TOOL_SUCCESS", False),
    4: ("TOOL_SUCCESS", False),
    5: ("TOOL_SUCCESS", False),
    6: ("TOOL_ERROR", True),
    7: ("TOOL_ERROR", True),
}

RUNS: list[tuple[str, ServerMode]] = [
    ("legacy", SSE_STATEFUL),
    ("legacy", JSON_STATEFUL),
    ("legacy", SSE_STATELESS),
    ("legacy", JSON_STATELESS),
    ("auto", SSE_STATEFUL),
    ("auto", JSON_STATEFUL),
]


# Every record carries the base fields (null when not applicable); the later ones may be
# missing from older recordings (a reader treats a missing one as null).
BASE_FIELDS = {f.name for f in FIELDS if f.always}
TRACKER_FIELDS = {f.name for f in FIELDS if not f.always}
ALLOWED_FIELDS = BASE_FIELDS | TRACKER_FIELDS
POST_KINDS = {"request", "notification", "response"}
# The SDK client closes an SSE response as soon as it has the final event
# (streamable_http.py: `await response.aclose()`), without waiting for the chunked
# terminator. Whether the proxy sees the server's end of message or the client's disconnect
# first is a race on the real wire, so a complete exchange may legitimately end as "error"
# ("client gone"). "eof" would be wrong: the demo server frames its streams (chunked).
SSE_ENDS_AFTER_FINAL = ("complete", "error")
TS_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
STATEFUL_SESSION_RE = re.compile(r"^s-[0-9a-f]{10}$")
CONNECTION_SESSION_RE = re.compile(r"^c-[0-9a-f]+$")


def _run_id(item: tuple[str, ServerMode]) -> str:
    return f"{item[0]}-{item[1].name}"


@pytest.fixture(scope="module", params=RUNS, ids=[_run_id(r) for r in RUNS])
def run(
    request: pytest.FixtureRequest, servers: ServerPool, tmp_path_factory: pytest.TempPathFactory
) -> ClientRun:
    client_mode, mode = request.param
    server = servers.get(mode)
    workdir = tmp_path_factory.mktemp(_run_id(request.param))
    with Proxy(server.port, workdir) as proxy:
        done = ClientRun(server, proxy, client_mode, CALLS)
        try:
            done.execute(CLIENT_NAME)
        except Exception as exc:
            raise RuntimeError(f"the client run failed: {exc}\n{proxy.failure_context()}") from exc
    return done


def _key(method: str | None, rpc_id: Any) -> tuple[str | None, str]:
    # repr keeps 1 and "1" apart, as the record format does.
    return (method, repr(rpc_id))


def _post_records(run: ClientRun) -> list[dict[str, Any]]:
    return [r for r in run.records if r.get("kind") in POST_KINDS]


def _pairs(run: ClientRun) -> list[tuple[Post, dict[str, Any]]]:
    """Each client POST with its record (the keys are unique: checked below)."""
    by_key = {
        _key(r.get("method"), (r.get("jsonrpc") or {}).get("id")): r for r in _post_records(run)
    }
    return [(p, by_key[_key(p.method, p.id)]) for p in run.posts]


def _is_stateful(run: ClientRun) -> bool:
    return run.client_mode == "legacy" and not run.server.mode.stateless


def _version(run: ClientRun) -> str:
    return LEGACY_VERSION if run.client_mode == "legacy" else MODERN_VERSION


def _call_of_each_post(run: ClientRun) -> dict[int, int]:
    """Index in run.posts -> index in CALLS, for the POSTs that carried one of our calls.

    The SDK adds requests of its own (initialize, server/discover, a tools/list it needs to
    validate a result), so POSTs are matched to calls in order, by method and tool name.
    """
    out: dict[int, int] = {}
    wanted = 0
    for i, post in enumerate(run.posts):
        if wanted >= len(CALLS):
            break
        tool, _args = CALLS[wanted]
        listing = tool == LIST_TOOLS and post.method == "tools/list"
        if listing or (post.method == "tools/call" and post.tool == tool):
            out[i] = wanted
            wanted += 1
    assert wanted == len(CALLS), f"only {wanted} of {len(CALLS)} calls reached the wire"
    return out


def test_documented_fields_were_read() -> None:
    # Guards the parser above: a reformatted doc must not silently empty the allow-list.
    assert {"v", "id", "kind", "session", "outcome", "layer", "sse", "notes"} <= BASE_FIELDS
    assert {"attempt", "retryOf", "endReason", "toolSafety"} <= TRACKER_FIELDS


# The ground truth itself: the client and the server agree, and the calls did what we think.


def test_client_saw_the_expected_answers(run: ClientRun) -> None:
    results: list[CallResult] = run.results
    assert [r.tool for r in results] == [tool for tool, _ in CALLS]
    assert all(r.error is None for r in results), [r.summary() for r in results]
    for index, (_outcome, is_error) in EXPECTED_TOOL_OUTCOME.items():
        assert results[index].is_error is is_error, results[index].summary()
    assert results[0].text == "echo,fail,slow,add_note,get_notes"
    assert results[6].text == "Unknown tool: no_such_tool"
    assert "validation error" in (results[7].text or "")
    assert all(p.status is not None for p in run.posts), "a POST got no response"


def test_server_received_exactly_the_client_posts(run: ClientRun) -> None:
    assert [(p["method"], p["id"]) for p in run.server_posts] == [
        (p.method, p.id) for p in run.posts
    ]


# The recording.


def test_one_record_per_post(run: ClientRun) -> None:
    post_records = _post_records(run)
    assert len(post_records) == len(run.posts) == len(run.server_posts)
    sent = Counter(_key(p.method, p.id) for p in run.posts)
    assert max(sent.values()) == 1, "the client reused a key: pairing would be ambiguous"
    recorded = Counter(
        _key(r.get("method"), (r.get("jsonrpc") or {}).get("id")) for r in post_records
    )
    assert recorded == sent
    assert {r.get("kind") for r in run.records} <= POST_KINDS | {"session_end", "stream"}


def test_file_is_whole_and_numbered(run: ClientRun) -> None:
    assert len(run.records) > 0
    assert run.text.endswith("\n"), "torn last line after a clean SIGTERM"
    assert len(run.text.splitlines()) == len(run.records)
    assert [r["id"] for r in run.records] == list(range(1, len(run.records) + 1))


def test_common_fields(run: ClientRun) -> None:
    for record in run.records:
        assert record.keys() >= BASE_FIELDS, f"missing {BASE_FIELDS - record.keys()} in {record}"
        assert record["v"] == 1
        assert TS_RE.match(record["ts"]), record["ts"]
        assert record["server"] == f"127.0.0.1:{run.server.port}"
        assert record["scenario"] == "e2e"
        assert record["retryOrigin"] == "none"
    for record in _post_records(run):
        assert isinstance(record["durationMs"], int | float) and record["durationMs"] >= 0
        assert record["userAgent"].startswith("python-httpx2/"), record["userAgent"]
        assert record["client"] == CLIENT, record
        assert record["protocolVersion"] == _version(run), record
        # SDK clients hang up on the final SSE event; the addon notes that, nothing else.
        assert set(record["notes"]) <= {"closed_after_answer"}, record


def test_each_record_matches_its_post(run: ClientRun) -> None:
    calls = _call_of_each_post(run)
    for index, (post, record) in enumerate(_pairs(run)):
        where = f"POST #{index + 1} {post.method} id={post.id!r}: {record}"
        assert record["method"] == post.method, where
        assert record["tool"] == post.tool, where
        assert record["httpStatuses"] == [post.status], where
        assert record["contentType"] == post.content_type, where
        if post.id is None:  # a notification
            assert record["kind"] == "notification", where
            assert record["jsonrpc"] is None, where
            for name in ("outcome", "layer", "resultType", "isError", "sse"):
                assert record[name] is None, f"{name}: {where}"
            continue
        assert record["kind"] == "request", where
        assert record["jsonrpc"] == {"id": post.id, "errorCode": None, "errorMessage": None}, where
        assert record["resultType"] == "complete", where
        if post.method == "tools/call":
            outcome, is_error = (
                EXPECTED_TOOL_OUTCOME[calls[index]] if index in calls else (None, None)
            )
            if outcome is not None:
                assert (record["outcome"], record["isError"]) == (outcome, is_error), where
            assert record["layer"] == "application", where
        else:
            assert record["outcome"] == "SUCCESS", where
            assert record["layer"] == "protocol", where
            assert record["isError"] is None, where


def test_content_types_and_sse(run: ClientRun) -> None:
    calls = _call_of_each_post(run)
    for index, (post, record) in enumerate(_pairs(run)):
        where = f"POST #{index + 1} {post.method} {post.tool or ''}: {record}"
        if post.id is None:
            assert post.status == 202, where
            continue
        # What this server sends, mode by mode (an environment check, before the record's).
        streamed = CALLS[calls[index]][0] == "slow" if index in calls else False
        if run.server.mode.json:
            assert post.content_type == JSON, where
        elif run.client_mode == "legacy":
            assert post.content_type == SSE, where
        else:  # 2026-07-28: SSE only when the handler sends notifications
            assert post.content_type == (SSE if streamed else JSON), where
        if post.content_type == SSE:
            result = run.results[calls[index]] if index in calls else None
            notifications = len(result.progress) + result.logs if result is not None else 0
            sse = record["sse"]
            assert sse is not None, where
            assert (sse["events"], sse["final"]) == (1 + notifications, True), where
            assert sse["end"] in SSE_ENDS_AFTER_FINAL, where
        else:
            assert record["sse"] is None, where


def test_handshake_records(run: ClientRun) -> None:
    first = [(p.method, p.id) for p in run.posts[:2]]
    by_method = {r["method"]: r for r in _post_records(run)}
    if run.client_mode == "legacy":
        assert first == [("initialize", 1), ("notifications/initialized", None)]
        init = by_method["initialize"]
        assert (init["kind"], init["outcome"], init["layer"]) == ("request", "SUCCESS", "protocol")
        note = by_method["notifications/initialized"]
        assert (note["kind"], note["httpStatuses"]) == ("notification", [202])
        assert note["contentType"] == JSON
        assert note.get("ackNote") is None
        assert "server/discover" not in by_method
    else:
        assert first[0] == ("server/discover", 1)
        discover = by_method["server/discover"]
        assert (discover["kind"], discover["outcome"], discover["layer"]) == (
            "request",
            "SUCCESS",
            "protocol",
        )
        assert discover.get("negotiation") is None
        assert "initialize" not in by_method
        assert "notifications/initialized" not in by_method


def test_sessions_and_post_counts(run: ClientRun) -> None:
    pairs = _pairs(run)
    sessions = {record["session"] for _, record in pairs}
    if _is_stateful(run):
        assert len(run.raw_session_ids()) == 1, "the server issued one session"
        assert len(sessions) == 1, sessions
        (session,) = sessions
        assert STATEFUL_SESSION_RE.match(session), session
        assert [record["postCount"] for _, record in pairs] == list(range(1, len(pairs) + 1))
    else:
        assert run.raw_session_ids() == set(), "no session id expected from this server/mode"
        counts: dict[str, list[int]] = defaultdict(list)
        for _, record in pairs:
            assert CONNECTION_SESSION_RE.match(record["session"] or ""), record
            counts[record["session"]].append(record["postCount"])
        for session, seen in counts.items():
            assert seen == list(range(1, len(seen) + 1)), f"{session}: {seen}"


def test_session_end_records(run: ClientRun) -> None:
    """A DELETE gives one session_end record (docs: kind `session_end`, "a DELETE or the
    proxy's end of a session"); the SDK sends one only for a stateful legacy session."""
    sessions = {record["session"] for _, record in _pairs(run)}
    ends = [r for r in run.records if r["kind"] == "session_end"]
    for end in ends:
        assert end["session"] in sessions, end
    if _is_stateful(run):
        assert run.other_requests.count("DELETE") == 1, run.other_requests
        (delete_status,) = [status for method, status in run.other_responses if method == "DELETE"]
        assert len(ends) == 1, f"the client sent one DELETE; session_end records: {ends}"
        (end,) = ends
        assert end["session"] == next(iter(sessions)), end
        assert end["endReason"] == "delete", end
        assert end["httpStatuses"] == [delete_status], end
        assert end["postCount"] == len(run.posts), end
        # What the client itself saw over the session's life.
        notifications = sum(len(r.progress) + r.logs for r in run.results)
        assert end["sessionStats"] == {
            "posts": len(run.posts),
            "getStreams": run.other_requests.count("GET"),
            "serverRequests": 0,
            "serverNotifications": notifications,
        }, end
    else:
        assert "DELETE" not in run.other_requests, run.other_requests
        assert all(e.get("endReason") != "delete" for e in ends), ends


def test_privacy(run: ClientRun) -> None:
    text = run.text
    assert run.canary not in text, "the Authorization header value leaked into the recording"
    assert "bearer" not in text.lower()
    assert BODY_MARKER not in text, "a request or response body leaked into the recording"
    for raw in run.raw_session_ids():
        assert raw not in text, "a raw Mcp-Session-Id leaked into the recording"
    assert "/mcp" not in text, "a URL path leaked into the recording"
    # Values of headers outside the allow-list (Connection, Cache-Control, Server, Accept...).
    for value in ("keep-alive", "no-transform", "uvicorn", "gzip", "x-accel-buffering"):
        assert value not in text.lower(), value
    for record in run.records:
        assert record.keys() <= ALLOWED_FIELDS, (
            f"fields not in docs/record-format.md: {record.keys() - ALLOWED_FIELDS}"
        )


def test_proxy_ran_cleanly(run: ClientRun) -> None:
    assert run.proxy.exit_code == 0, run.proxy_log[-2000:]
    for marker in ("Addon error", "Traceback", "has crashed"):
        assert marker not in run.proxy_log, run.proxy_log[-4000:]


# Streaming: the addon must not buffer SSE.

SLOW_STEPS = 4
SLOW_DELAY_MS = 300
SLOW_CALL = [("slow", {"steps": SLOW_STEPS, "delay_ms": SLOW_DELAY_MS})]
# Once the first progress has arrived, (steps - 1) delays remain before the result; allow
# generous slack for a loaded machine and still tell streamed from buffered apart.
REMAINING_S = (SLOW_STEPS - 1) * SLOW_DELAY_MS / 1000


@pytest.mark.parametrize("client_mode", ["legacy", "auto"])
def test_sse_passes_through_unbuffered(
    client_mode: str, servers: ServerPool, proxies: Proxies
) -> None:
    server = servers.get(SSE_STATEFUL)
    proxy = proxies(server.port)
    done = ClientRun(server, proxy, client_mode, SLOW_CALL)
    done.execute(CLIENT_NAME)
    (result,) = done.results
    assert result.error is None and result.is_error is False, result.summary()
    assert len(result.progress_at) == SLOW_STEPS
    first, last = result.progress_at[0], result.progress_at[-1]
    assert first < result.elapsed_s - REMAINING_S / 2, (
        f"first progress at {first:.3f} s of {result.elapsed_s:.3f} s: the stream was buffered"
    )
    assert last - first > REMAINING_S / 2, result.progress_at

    (record,) = [r for r in done.records if r.get("tool") == "slow"]
    assert record["outcome"] == "TOOL_SUCCESS", record
    assert record["contentType"] == SSE, record
    assert record["sse"]["final"] is True, record
    assert record["sse"]["end"] in SSE_ENDS_AFTER_FINAL, record
    assert record["sse"]["events"] >= 5, record
    assert record["sse"]["events"] == 1 + len(result.progress) + result.logs, record
    assert record["durationMs"] >= SLOW_STEPS * SLOW_DELAY_MS * 0.9, record


def test_control_plain_mitmdump_buffers_sse(servers: ServerPool, proxies: Proxies) -> None:
    """Without the addon mitmdump holds the SSE answer until its end: proof that the
    timing assertion above can tell a buffering proxy from a streaming one."""
    server = servers.get(SSE_STATEFUL)
    proxy = proxies(server.port, addon=None)
    (result,) = anyio.run(lambda: run_calls(proxy.url, "legacy", CLIENT_NAME, SLOW_CALL))
    assert result.error is None, result.summary()
    assert len(result.progress_at) == SLOW_STEPS
    assert result.progress_at[0] > result.elapsed_s - REMAINING_S / 2, result.progress_at
