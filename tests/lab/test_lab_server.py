"""The lab's MCP server is resumable (`--resumable`), as the spec describes it: every SSE
event carries an id, a POST's stream opens with `retry:`, and a GET with `Last-Event-ID`
gets what followed that event on the same stream of the same session, and nothing of
another session's. Checked on the wire against the real server process."""

from __future__ import annotations

import contextlib
import http.client
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_layers_demo import procs
from mcp_layers_demo.server import RETRY_INTERVAL_MS

pytestmark = pytest.mark.e2e

VERSION = "2025-11-25"
ACCEPT = "application/json, text/event-stream"


def _events(response: http.client.HTTPResponse, until_id: Any = None) -> list[dict[str, Any]]:
    """The SSE events of an answer (field -> value; `data` parsed), up to the one that
    answers `until_id` (the stream may stay open after it) or to the end."""
    out: list[dict[str, Any]] = []
    event: dict[str, Any] = {}
    for raw in iter(response.readline, b""):
        line = raw.decode().rstrip("\r\n")
        if line == "":
            if event:
                out.append(event)
                data = event.get("data")
                if until_id is not None and isinstance(data, dict) and data.get("id") == until_id:
                    return out
            event = {}
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        event[name] = json.loads(value) if name == "data" and value else value
    if event:
        out.append(event)
    return out


class Session:
    def __init__(self, port: int) -> None:
        self.port, self.id = port, ""
        init = self.post(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": VERSION,
                    "capabilities": {},
                    "clientInfo": {"name": "lab-test", "version": "0"},
                },
            }
        )
        assert init[-1]["data"]["result"]["protocolVersion"] == VERSION
        with self.request("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"}) as r:
            assert r.status == 202

    @contextlib.contextmanager
    def request(
        self, method: str, body: dict[str, Any] | None = None, **extra: str
    ) -> Iterator[http.client.HTTPResponse]:
        headers = {"accept": ACCEPT, "content-type": "application/json", **extra}
        if self.id:
            headers |= {"mcp-session-id": self.id, "mcp-protocol-version": VERSION}
        conn = http.client.HTTPConnection(procs.HOST, self.port, timeout=10)
        try:
            data = None if body is None else json.dumps(body).encode()
            conn.request(method, procs.MCP_PATH, body=data, headers=headers)
            yield conn.getresponse()
        finally:
            conn.close()

    def post(self, message: dict[str, Any]) -> list[dict[str, Any]]:
        with self.request("POST", message) as r:
            assert r.status == 200 and "text/event-stream" in r.headers["content-type"]
            self.id = self.id or r.headers["mcp-session-id"]
            return _events(r)

    def call(self, rpc_id: int, tool: str, **args: Any) -> list[dict[str, Any]]:
        params = {"name": tool, "arguments": args}
        return self.post({"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": params})

    def resume(self, last_event_id: str, until_id: Any) -> list[dict[str, Any]]:
        extra = {"last-event-id": last_event_id, "accept": "text/event-stream"}
        with self.request("GET", **extra) as r:
            assert r.status == 200, r.read()
            return _events(r, until_id)


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    port = procs.free_port()
    log: Path = tmp_path_factory.mktemp("server") / "server.log"
    server = procs.start_server(port, log, resumable=True)
    try:
        yield port
    finally:
        procs.stop(server)


def test_every_event_has_an_id_and_a_post_stream_opens_with_retry(port: int) -> None:
    events = Session(port).call(2, "slow", steps=2, delay_ms=10)
    assert events and all(e.get("id") for e in events), events
    assert len({e["id"] for e in events}) == len(events)
    priming = events[0]
    assert priming.get("data") is None or priming["data"] == ""
    assert priming["retry"] == str(RETRY_INTERVAL_MS)
    assert events[-1]["data"]["id"] == 2 and "result" in events[-1]["data"]
    # the priming event, a log per step (no progress: no token was asked), the result
    assert len(events) == 4, events


def test_last_event_id_redelivers_what_followed_on_that_stream(port: int) -> None:
    s = Session(port)
    sent = s.call(2, "slow", steps=2, delay_ms=10)
    # A client that saw only the priming event gets every message after it, ids kept.
    replayed = s.resume(sent[0]["id"], until_id=2)
    messages = [e for e in replayed if e.get("data")]
    assert [(e["id"], e["data"]) for e in messages] == [(e["id"], e["data"]) for e in sent[1:]]
    # After the second event: only what came after it.
    later = s.resume(sent[2]["id"], until_id=2)
    assert [e["id"] for e in later if e.get("data")] == [e["id"] for e in sent[3:]]
    assert all(e.get("id") for e in replayed + later)


def test_a_replay_never_crosses_sessions(port: int) -> None:
    a = Session(port)
    first = a.call(2, "echo", text="from a")
    b = Session(port)
    second = b.call(2, "echo", text="from b")  # the same request id, so the same stream id
    assert first[0]["id"].split(":")[0] == second[0]["id"].split(":")[0]
    # b resumes its own stream: b's answer, never a's
    mine = b.resume(second[0]["id"], until_id=2)
    texts = [e["data"]["result"]["content"][0]["text"] for e in mine if e.get("data")]
    assert texts == ["echo: from b"], mine
    # b asks for a's event: nothing is replayed (the stream ends at once)
    theirs = b.resume(first[0]["id"], until_id=None)
    assert not [e for e in theirs if e.get("data")], theirs
    # an id the server never handed out replays nothing either
    assert not [e for e in b.resume("2:999999", until_id=None) if e.get("data")]
