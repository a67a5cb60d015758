"""The report of the real agent recordings, and headless Chromium to look at it (from the
test support, `mcp_layers_support.chromium`, shared with the lab's tests; a unique module
name: tests/ is no package)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
from analysis_helpers import FIXTURES, invoke
from mcp_layers_support.chromium import (  # noqa: F401 (the report's tests import them here)
    chromium,
    run_chromium,
    selftest_result,
)

#: The lab's first four agents.
_AGENTS = ("claude-code", "codex", "gemini-cli", "opencode")

#: The real recordings of the lab's first four agents: the golden data of the report's
#: tests (the page's figures and stories for them are pinned below).
REAL = sorted(p for a in _AGENTS for p in FIXTURES.glob(f"real_lab_{a}_*.jsonl"))

#: The clients in them, as the page names them.
REAL_CLIENTS = (
    "claude-code@2.1.197",
    "codex-mcp-client@0.171.0",
    "gemini-cli-mcp-client@0.61.0",
    "opencode@1.18.33",
)


def write_report(target: Path, *args: str | Path) -> str:
    result = invoke("report", *REAL, "-o", target, *args)
    assert result.exit_code == 0, result.stderr
    assert f"report written to {target}" in result.stderr
    return target.read_text(encoding="utf-8")


# --------------------------------------------------------------------- model turns

#: The lab fake model's real answers (captured by tests/fixtures/model/capture.py).
MODEL_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "model"
_T0 = 1_796_000_000.0
_PEER = "127.0.0.1:5000"
_MCP = "127.0.0.1:9000"
_MODEL = "127.0.0.1:9001"
_JSON_H = {"content-type": "application/json"}
_SSE_H = {"content-type": "text/event-stream"}


class AgentRun:
    """An agent's run as the proxy records it: the core itself (`Tracker`) fed the fake
    model's real answers and MCP exchanges at chosen times (seconds from the start), so
    the records, `modelTurn` and the `modelCall` join included, are what mitmdump writes.
    A session is opened by `initialize` with the client's name."""

    def __init__(self, session: str = "sess-1", client: str = "agent") -> None:
        from mcp_layers_core.tracker import Tracker

        self.tracker = Tracker()
        self.records: list[dict[str, Any]] = []
        self.session = session
        self.client = client
        self.n = 0
        self.rpc = 0

    def feed(self, event: Any) -> None:
        self.records += [e.record for e in self.tracker.handle(event)]

    def _flow(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    def initialize(self, at: float) -> None:
        from mcp_layers_core.events import PostReceived, ResponseBody, ResponseStarted

        flow = self._flow("i")
        self.rpc += 1
        params = {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": self.client, "version": "1.0"},
        }
        body = json.dumps(
            {"jsonrpc": "2.0", "id": self.rpc, "method": "initialize", "params": params}
        ).encode()
        headers = {"user-agent": f"{self.client}/1.0"}
        self.feed(PostReceived(flow, _T0 + at, _MCP, _PEER, headers, body, len(body), None, "/mcp"))
        result = {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "echo", "version": "1"},
        }
        answer = json.dumps({"jsonrpc": "2.0", "id": self.rpc, "result": result}).encode()
        got = {**_JSON_H, "mcp-session-id": self.session}
        self.feed(ResponseStarted(flow, _T0 + at + 0.01, 200, got))
        self.feed(ResponseBody(flow, _T0 + at + 0.01, answer, len(answer)))

    def model(
        self,
        at: float,
        name: str,
        *,
        until: float | None = None,
        hang: bool = False,
        cut: bool = False,
    ) -> None:
        """A model request answered by fixture `name` (`until`: when its stream ends;
        `hang`: headers, then nothing; `cut`: the stream ends after its first event)."""
        from mcp_layers_core.events import PostReceived, ResponseStarted, StreamChunk, StreamEnded

        req = json.loads((MODEL_FIXTURES / f"{name}.request.json").read_text())
        raw = (MODEL_FIXTURES / f"{name}.response.sse").read_bytes()
        flow = self._flow("m")
        body = json.dumps(req["body"]).encode()
        self.feed(
            PostReceived(flow, _T0 + at, _MODEL, _PEER, {}, body, len(body), None, req["path"])
        )
        self.feed(ResponseStarted(flow, _T0 + at + 0.05, 200, _SSE_H, False))
        if hang:
            return
        if cut:
            raw = raw.split(b"\n\n", 1)[0] + b"\n\n"
        self.feed(StreamChunk(flow, _T0 + at + 0.1, raw))
        self.feed(StreamEnded(flow, _T0 + (until or at + 0.2)))

    def call(
        self,
        at: float,
        *,
        answer_at: float | None,
        method: str = "tools/call",
        status: int = 200,
        is_error: bool = False,
    ) -> None:
        """An MCP request on the session (a `tools/call` of echo with the arguments the
        fake model asks for); `answer_at` None: never answered; `status` other than 200:
        answered with that status and no JSON; `is_error`: a tool error."""
        from mcp_layers_core.events import PostReceived, ResponseBody, ResponseStarted

        flow = self._flow("c")
        self.rpc += 1
        params = {"name": "echo", "arguments": {"text": "hello"}} if method == "tools/call" else {}
        body = json.dumps(
            {"jsonrpc": "2.0", "id": self.rpc, "method": method, "params": params}
        ).encode()
        headers = {"mcp-session-id": self.session, "user-agent": f"{self.client}/1.0"}
        self.feed(PostReceived(flow, _T0 + at, _MCP, _PEER, headers, body, len(body), None, "/mcp"))
        if answer_at is None:
            return
        result = {"content": [{"type": "text", "text": "hello"}], "isError": is_error}
        answer = json.dumps({"jsonrpc": "2.0", "id": self.rpc, "result": result}).encode()
        if status != 200:
            answer = b"busy"
        self.feed(ResponseStarted(flow, _T0 + answer_at, status, _JSON_H))
        self.feed(ResponseBody(flow, _T0 + answer_at, answer, len(answer)))

    def streamed_call(self, at: float, events_at: list[float]) -> None:
        """A tools/call answered on an SSE stream that carries progress and no answer."""
        from mcp_layers_core.events import PostReceived, ResponseStarted, StreamChunk

        flow = self._flow("c")
        self.rpc += 1
        params = {"name": "echo", "arguments": {"text": "hello"}, "_meta": {"progressToken": 7}}
        body = json.dumps(
            {"jsonrpc": "2.0", "id": self.rpc, "method": "tools/call", "params": params}
        ).encode()
        headers = {"mcp-session-id": self.session, "user-agent": f"{self.client}/1.0"}
        self.feed(PostReceived(flow, _T0 + at, _MCP, _PEER, headers, body, len(body), None, "/mcp"))
        self.feed(ResponseStarted(flow, _T0 + at + 0.05, 200, _SSE_H, False))
        for i, t in enumerate(events_at):
            note = {
                "jsonrpc": "2.0",
                "method": "notifications/progress",
                "params": {"progressToken": 7, "progress": i + 1},
            }
            self.feed(StreamChunk(flow, _T0 + t, f"data: {json.dumps(note)}\n\n".encode()))

    def write(self, path: Path, stop_at: float) -> Path:
        """The recording, as the proxy leaves it when it stops at `stop_at`."""
        from mcp_layers_core.events import ProxyStopping

        self.feed(ProxyStopping(_T0 + stop_at))
        path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in self.records))
        return path
