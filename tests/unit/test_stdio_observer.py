"""The stdio observer (mcp_layers_core/stdio.py): lines in, the same records out.

Sans-IO: each test feeds lines and process events by hand and reads the records. The
wrapper process itself is tested with real processes in tests/e2e/test_stdio_wrap.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from mcp_layers_core.stdio import StdioObserver, head_id

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "docs/record.schema.json").read_text())
VALIDATOR = Draft202012Validator(SCHEMA)

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "1.2"},
    },
}
INIT_RESULT = {
    "jsonrpc": "2.0",
    "id": 0,
    "result": {
        "protocolVersion": "2025-06-18",
        "capabilities": {"tools": {}},
        "serverInfo": {"name": "s", "version": "1"},
    },
}


class Run:
    """One observer and the records it wrote so far."""

    def __init__(self) -> None:
        self.o = StdioObserver(server="stdio:test", run_id="7-1", started=100.0)
        self.records: list[dict[str, Any]] = []
        self.t = 100.0

    def tick(self) -> float:
        self.t += 0.01
        return self.t

    def client(self, msg: object) -> None:
        line = msg if isinstance(msg, bytes) else json.dumps(msg).encode()
        self.records += self.o.from_client(line, len(line), self.tick())

    def server(self, msg: object, size: int | None = None) -> None:
        line = msg if isinstance(msg, bytes) else json.dumps(msg).encode()
        self.records += self.o.from_server(line, size or len(line), self.tick())

    def exit(self, code: int | None = 0, signal_name: str | None = None) -> None:
        self.records += self.o.exited(self.tick(), code, signal_name)

    def handshake(self) -> None:
        self.client(INIT)
        self.server(INIT_RESULT)
        self.client({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def kind(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r["kind"] == kind]

    def end(self) -> dict[str, Any]:
        (end,) = self.kind("session_end")
        return end


def call(rpc_id: int, tool: str = "echo") -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rpc_id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": {}},
    }


def result(rpc_id: int, is_error: bool = False) -> dict[str, Any]:
    content = [{"type": "text", "text": "é"}]
    return {"jsonrpc": "2.0", "id": rpc_id, "result": {"content": content, "isError": is_error}}


def test_a_session_pairs_by_id_and_classifies_as_over_http() -> None:
    r = Run()
    r.handshake()
    r.client(call(1))
    r.client(call(2, "fail"))
    r.server(result(2, is_error=True))  # answered out of order
    r.server(result(1))
    r.client({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})
    r.server({"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "no"}})
    r.exit(0)
    requests = {rec["jsonrpc"]["id"]: rec for rec in r.kind("request")}
    assert {i: rec["outcome"] for i, rec in requests.items()} == {
        0: "SUCCESS",
        1: "TOOL_SUCCESS",
        2: "TOOL_ERROR",
        3: "JSONRPC_ERROR",
    }
    assert requests[2]["layer"] == "application" and requests[3]["jsonrpc"]["errorCode"] == -32601
    for rec in r.records:
        assert rec["transport"] == "stdio"
        assert rec["client"] == "probe@1.2"
        assert rec["server"] == "stdio:test"
        assert rec["httpStatuses"] == [] and rec["contentType"] is None
        assert rec["requestHeaders"] == [] and rec["accept"] == []
        assert list(VALIDATOR.iter_errors(rec)) == [], rec
    assert requests[1]["protocolVersion"] == "2025-06-18"
    assert len({rec["session"] for rec in r.records}) == 1
    end = r.end()
    assert end["endReason"] == "exited" and end["notes"] == ["server_exited:code=0"]
    assert end["postCount"] == 5
    ids = [rec["id"] for rec in r.records]
    assert sorted(ids) == list(range(1, len(ids) + 1))  # numbered without a gap


def test_a_crash_mid_call_fails_the_pending_calls_at_the_transport_layer() -> None:
    r = Run()
    r.handshake()
    r.client(call(1, "crash"))
    r.client(call(2))
    r.exit(None, "SIGKILL")
    pending = r.kind("request")[1:]
    assert [rec["outcome"] for rec in pending] == ["NO_RESPONSE", "NO_RESPONSE"]
    assert all(rec["layer"] == "transport" for rec in pending)
    assert all("server_exited:signal=SIGKILL" in rec["notes"] for rec in pending)
    assert r.end()["notes"] == ["server_exited:signal=SIGKILL"]


def test_stdin_closed_with_calls_pending_is_named_only_if_they_stay_unanswered() -> None:
    r = Run()
    r.handshake()
    r.client(call(1))
    r.client(call(2))
    r.o.client_closed(r.tick())
    r.server(result(1))  # answered after the EOF: no failure
    r.exit(0)
    one, two = r.kind("request")[1:]
    assert one["outcome"] == "TOOL_SUCCESS" and "stdin_closed_pending" not in one["notes"]
    assert two["outcome"] == "NO_RESPONSE"
    assert two["notes"] == ["stdin_closed_pending", "server_exited:code=0"]
    assert "stdin_closed_pending:1" in r.end()["notes"]


def test_what_is_not_a_call_is_counted_on_the_session_end() -> None:
    r = Run()
    r.server(b"Server listening on stdio")  # a banner on stdout
    r.handshake()
    r.server({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})
    r.server({"jsonrpc": "2.0", "id": 99, "result": {}})  # answers nothing
    r.client(b"not json either")
    for _ in range(3):
        r.o.stderr_line()
    r.o.server_closed(partial=5)
    r.exit(1)
    assert r.end()["notes"] == [
        "server_exited:code=1",
        "stderr_lines:3",
        "stdout_not_json:1",
        "stdin_not_json:1",
        "partial_last_line:5",
        "unexpected_response_id:99",
    ]
    assert r.end()["sessionStats"]["serverNotifications"] == 1
    # Nothing that is not a call failed one: the handshake is a success.
    assert [rec["outcome"] for rec in r.kind("request")] == ["SUCCESS"]


def test_a_server_request_and_the_clients_answer() -> None:
    r = Run()
    r.handshake()
    r.server({"jsonrpc": "2.0", "id": "s1", "method": "roots/list"})
    r.client({"jsonrpc": "2.0", "id": "s1", "result": {"roots": []}})
    r.exit(0)
    (response,) = r.kind("response")
    assert response["serverMethod"] == "roots/list" and response["answerMs"] == 10.0
    assert response["method"] is None
    assert r.end()["sessionStats"]["serverRequests"] == 1


def test_an_answer_heard_before_its_request_is_paired_with_it() -> None:
    # The pumps report after writing, each on its own thread: a fast server's answer can
    # reach the recorder before the request it answers.
    r = Run()
    r.handshake()
    r.server(result(1))
    r.client(call(1))
    r.server({"jsonrpc": "2.0", "id": 42, "result": {}})  # answers nothing, ever
    r.exit(0)
    assert r.kind("request")[1]["outcome"] == "TOOL_SUCCESS"
    assert r.end()["notes"] == ["server_exited:code=0", "unexpected_response_id:42"]


def test_an_answer_after_the_clients_cancellation_is_late() -> None:
    r = Run()
    r.handshake()
    r.client(call(1))
    cancel = {"requestId": 1, "reason": "user"}
    r.client({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel})
    r.server(result(1))
    r.exit(0)
    answered = r.kind("request")[1]
    assert answered["outcome"] == "TOOL_SUCCESS" and answered["notes"] == ["late_answer"]


def test_a_line_over_the_cap_is_paired_by_the_id_at_its_start_and_left_uninspected() -> None:
    r = Run()
    r.handshake()
    r.client(call(1))
    start = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"xxxx'
    r.server(start, size=20_000_000)
    r.exit(0)
    rec = r.kind("request")[1]
    assert rec["outcome"] == "UNINSPECTED" and rec["notes"] == ["body_over_cap:20000000"]
    assert "line_over_cap:20000000" in r.end()["notes"]


def test_head_id_reads_only_the_envelopes_id() -> None:
    assert head_id(b'{"jsonrpc":"2.0","id":7,"result":') == 7
    assert head_id(b'{"id":"a\\"b","jsonrpc":"2.0"') == 'a"b'
    assert repr(head_id(b'{"jsonrpc":"2.0","result":{"id":3')) == "NOT_JSON"


def test_a_spawn_failure_is_one_session_end() -> None:
    o = StdioObserver(server="stdio:nope", run_id="1-1", started=5.0)
    rec = o.spawn_failed(5.25, "ENOENT")
    assert rec["kind"] == "session_end" and rec["endReason"] == "spawn_failed"
    assert rec["notes"] == ["spawn_failed:ENOENT"] and rec["durationMs"] == 250.0
    assert rec["id"] == 1 and rec["transport"] == "stdio"
    assert list(VALIDATOR.iter_errors(rec)) == []
