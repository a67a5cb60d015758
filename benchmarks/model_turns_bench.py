"""What a model request costs the core, against an MCP `tools/call` (issue 28).

The core (`Tracker`) is fed one exchange at a time, as the adapter feeds it: the POST, the
answer's headers, its SSE stream in one chunk, the stream's end. Workloads:

- `mcp`: a `tools/call` answered by an SSE stream with the result;
- `anthropic`, `chat`, `responses`, `gemini`: the lab fake model's streamed answers asking
  for a tool (tests/fixtures/model), each with its request;
- `anthropic-100k`: the same Anthropic request with a 100 KB system prompt (real agents
  send tens to hundreds of KB: the tool list and the system prompt).

Two figures per workload: Python calls per exchange (`sys.setprofile` call events: a count
that does not wander with the machine's load) and microseconds per exchange (the fastest
of `--reps` runs of `--n` exchanges: on a shared machine, timings wander).

    .venv/bin/python benchmarks/model_turns_bench.py
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from mcp_layers_core.events import PostReceived, ResponseStarted, StreamChunk, StreamEnded
from mcp_layers_core.tracker import Tracker

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "model"
SSE = {"content-type": "text/event-stream"}
MCP_BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": {"text": "hello"}},
    }
).encode()
MCP_ANSWER = (
    b'event: message\ndata: {"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text",'
    b'"text":"echo: hello"}],"isError":false}}\n\n'
)


def workloads() -> dict[str, tuple[str, bytes, bytes]]:
    """name -> (path, request body, SSE answer)."""
    out = {"mcp": ("/mcp", MCP_BODY, MCP_ANSWER)}
    for name in ("anthropic", "chat", "responses", "gemini"):
        req = json.loads((FIXTURES / f"{name}-tool-stream.request.json").read_text())
        raw = (FIXTURES / f"{name}-tool-stream.response.sse").read_bytes()
        out[name] = (req["path"], json.dumps(req["body"]).encode(), raw)
    path, body, raw = out["anthropic"]
    big = {**json.loads(body), "system": "x" * 100_000}
    out["anthropic-100k"] = (path, json.dumps(big).encode(), raw)
    return out


def exchange(t: Tracker, n: int, path: str, body: bytes, answer: bytes) -> None:
    flow, ts = f"f{n}", 1.7e9 + n
    headers = {"mcp-session-id": "s", "user-agent": "bench"}
    t.handle(PostReceived(flow, ts, "h:1", "p:1", headers, body, len(body), None, path))
    t.handle(ResponseStarted(flow, ts, 200, SSE))
    t.handle(StreamChunk(flow, ts, answer))
    t.handle(StreamEnded(flow, ts))


def calls(path: str, body: bytes, answer: bytes) -> int:
    t = Tracker()
    for i in range(10):  # warm: a running session, the books filled
        exchange(t, i, path, body, answer)
    count = [0]

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            count[0] += 1

    sys.setprofile(profile)
    try:
        exchange(t, 10, path, body, answer)
    finally:
        sys.setprofile(None)
    return count[0]


def micros(path: str, body: bytes, answer: bytes, n: int, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t = Tracker()
        start = time.perf_counter()
        for i in range(n):
            exchange(t, i, path, body, answer)
        best = min(best, (time.perf_counter() - start) / n * 1e6)
    return best


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    print(f"{'workload':<16} {'calls':>6} {'us':>8}")
    for name, (path, body, answer) in workloads().items():
        print(
            f"{name:<16} {calls(path, body, answer):>6} "
            f"{micros(path, body, answer, args.n, args.reps):>8.1f}"
        )


if __name__ == "__main__":
    main()
