"""Rules grade a client on its own traffic, under the spec version that has the rule.

The recordings are made by the real core (the tracker fed with events, as the addon
feeds it), so each record is one the product writes: two running clients of the same
name, a resumption under a version before the `retry` MUST, an old HTTP+SSE session
that has no DELETE.
"""

from __future__ import annotations

import json
from pathlib import Path

from analysis_helpers import invoke
from mcp_layers_core.events import (
    FlowFailed,
    ResponseBody,
    ResponseStarted,
    StreamChunk,
    StreamEnded,
)
from mcp_layers_core.jsonl import dumps_line
from mcp_layers_core.tracker import records_of

from tests.unit.wire import SSE, Run, call, event, result, rpc

RENEGOTIATE = "mcp-layers/session-renegotiate-on-404"
CONTINUES = "mcp-layers/session-continues-after-renegotiation"
TIMING = "client-sse-retry-timing"
DELETE = "mcp-layers/session-delete"
INITIALIZED = "mcp-layers/initialized-notification"


def headers(version: str, session: str | None, agent: str) -> dict[str, str]:
    found = {
        "user-agent": agent,
        "mcp-protocol-version": version,
        "accept": "application/json, text/event-stream",
        "content-type": "application/json",
    }
    if session is not None:
        found["mcp-session-id"] = session
    return found


def verdicts(records: list[dict], tmp_path: Path) -> dict[tuple[str, str], str]:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"".join(dumps_line(r) for r in records))
    done = invoke("verdicts", path, "--format", "json", "--no-progress")
    assert done.exit_code in (0, 3), done.output
    return {(r["client"], r["check"]): r["verdict"] for r in json.loads(done.stdout)}


def start(r: Run, version: str, session: str, agent: str, peer: str) -> list[dict]:
    hello = rpc(0, "initialize", protocolVersion=version, capabilities={},
                clientInfo={"name": "mcp", "version": "1"})  # fmt: skip
    flow = r.post(hello, headers(version, None, agent), peer=peer)
    info = {"name": "s", "version": "1"}
    answer = result(0, protocolVersion=version, capabilities={}, serverInfo=info)
    out = r.json(flow, 200, answer, {"mcp-session-id": session})
    note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    flow = r.post(note, headers(version, session, agent), peer=peer)
    r.t.handle(ResponseStarted(flow, r.tick(), 202, {}))
    return out + records_of(r.t.handle(ResponseBody(flow, r.tick(), b"", 0)))


def test_another_running_client_of_the_same_name_is_no_evidence(tmp_path: Path) -> None:
    # Two apps keep the SDK's default name `mcp@1`; app A loses its session, app B goes
    # on in its own and opens another. Neither tells what A did: the 404 is undecidable.
    v, r = "2025-06-18", Run()
    records = start(r, v, "SA", "app-a/1", "10.0.0.1:1") + start(
        r, v, "SB", "app-b/1", "10.0.0.2:1"
    )
    flow = r.post(call(5), headers(v, "SA", "app-a/1"), peer="10.0.0.1:1")
    lost = {"jsonrpc": "2.0", "id": 5, "error": {"code": -32001, "message": "Session not found"}}
    records += r.json(flow, 404, lost)
    r.now += 1
    flow = r.post(call(6), headers(v, "SB", "app-b/1"), peer="10.0.0.2:1")
    records += r.json(flow, 200, result(6, content=[]))
    records += start(r, v, "SC", "app-b/1", "10.0.0.2:1")
    got = verdicts(records, tmp_path)
    assert got[("mcp@1", RENEGOTIATE)] == "UNDECIDABLE"
    assert got[("mcp@1", CONTINUES)] == "NOT_EXERCISED"


def resumed_early(version: str) -> list[dict]:
    """A POST's stream asks `retry: 3000` and closes; the client is back in 10 ms."""
    r = Run()
    records = start(r, version, "S1", "cli/1", "10.0.0.1:1")
    h = headers(version, "S1", "cli/1")
    flow = r.post(call(2), h, peer="10.0.0.1:1")
    r.t.handle(ResponseStarted(flow, r.tick(), 200, SSE, True))
    r.t.handle(StreamChunk(flow, r.tick(), b"id: e1\nretry: 3000\ndata: \n\n"))
    records += records_of(r.t.handle(StreamEnded(flow, r.tick())))
    get = r.other("GET", {**h, "last-event-id": "e1", "accept": "text/event-stream"},
                  peer="10.0.0.1:1")  # fmt: skip
    r.t.handle(ResponseStarted(get, r.tick(), 200, SSE, True))
    records += records_of(
        r.t.handle(StreamChunk(get, r.tick(), b"id: e2\n" + event(result(2, content=[]))))
    )
    records += records_of(r.t.handle(StreamEnded(get, r.tick())))
    return records


def test_the_retry_must_binds_from_2025_11_25(tmp_path: Path) -> None:
    assert verdicts(resumed_early("2025-11-25"), tmp_path)[("mcp@1", TIMING)] == "FAIL"
    # 2025-06-18 has no such MUST: the miss is a warning.
    assert verdicts(resumed_early("2025-06-18"), tmp_path)[("mcp@1", TIMING)] == "WARNING"


def test_an_http_sse_session_of_2024_11_05_needs_no_delete(tmp_path: Path) -> None:
    agent = {"user-agent": "legacy-client/1"}
    r = Run()
    get = r.other("GET", {"accept": "text/event-stream", **agent})
    r.t.handle(ResponseStarted(get, r.tick(), 200, SSE))
    r.chunk(get, b"event: endpoint\ndata: /messages?session_id=L1\n\n")

    def accepted(flow: str) -> list[dict]:
        r.t.handle(ResponseStarted(flow, r.tick(), 202, {"content-length": "8"}))
        return records_of(r.t.handle(ResponseBody(flow, r.tick(), b"Accepted", 8)))

    hello = rpc(1, "initialize", protocolVersion="2024-11-05", capabilities={},
                clientInfo={"name": "legacy", "version": "1"})  # fmt: skip
    records = accepted(r.post(hello, agent, query_session="L1"))
    info = {"name": "s", "version": "1"}
    answer = result(1, protocolVersion="2024-11-05", capabilities={}, serverInfo=info)
    records += r.chunk(get, event(answer))
    note = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}).encode()
    records += accepted(r.post(note, agent, query_session="L1"))
    records += accepted(r.post(call(2), agent, query_session="L1"))
    records += r.chunk(get, event(result(2, content=[])))
    records += records_of(r.t.handle(FlowFailed(get, r.tick(), "Client disconnected.")))
    got = verdicts(records, tmp_path)
    assert got[("legacy@1", DELETE)] == "NOT_EXERCISED"
    assert got[("legacy@1", INITIALIZED)] == "PASS"
