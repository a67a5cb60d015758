"""How fast `mcp-layers replay` serves, and how closely it keeps the recorded pace.

    .venv/bin/python benchmarks/replay_bench.py [--exchanges N] [--clients C]

Throughput: a recording of N JSON `tools/call` exchanges (recorded durations 0), served to
C keep-alive clients on 127.0.0.1, one request at a time each (as an MCP client sends);
exchanges a second, target >= 1,000 (issue 29). Pacing: one SSE answer of 40 events
recorded 25 ms apart, replayed at --speed 1; each event's arrival against its recorded
offset (ms after the request), p50 and max of the error, target <= 5 ms per event.
Every loop is bounded by N; the server is the real command, started as a user would.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from mcp_layers_core.record import new_record

CLI = shutil.which("mcp-layers", path=str(Path(sys.executable).parent)) or "mcp-layers"
SESSION = "s-bench00000"


def _record(rpc_id: int, request: dict[str, Any], response: Any, **more: Any) -> dict[str, Any]:
    events = more.pop("events", [])
    return new_record(
        kind="request",
        method=request["method"],
        session=SESSION,
        httpStatuses=[200],
        requestHeaders=["accept"] if request["method"] == "initialize" else ["mcp-session-id"],
        jsonrpc={"id": rpc_id, "errorCode": None, "errorMessage": None},
        bodies={"request": request, "response": response, "headersMs": 0.0, "events": events},
        **more,
    )


def _call(rpc_id: int, n: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call",
            "params": {"name": "echo", "arguments": {"n": n}}}  # fmt: skip


def _ok(rpc_id: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, "result": {"content": [{"type": "text", "text": "x"}]}}


def recording(path: Path, exchanges: int, events: int, gap_ms: float) -> None:
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
    lines = [_record(0, init, {"jsonrpc": "2.0", "id": 0, "result": {}},
                     contentType="application/json", durationMs=0.0)]  # fmt: skip
    lines += [
        _record(i, _call(i, 0), _ok(i), contentType="application/json", durationMs=0.0)
        for i in range(1, exchanges + 1)
    ]
    progress = [
        {"ms": gap_ms * (k + 1), "id": None, "event": "message", "retry": None, "json": True,
         "data": {"jsonrpc": "2.0", "method": "notifications/message",
                  "params": {"level": "info", "data": k}}}
        for k in range(events - 1)
    ]  # fmt: skip
    final = {"ms": gap_ms * events, "id": None, "event": "message", "retry": None,
             "json": True, "data": _ok(-1)}  # fmt: skip
    lines.append(
        _record(-1, _call(-1, 1), _ok(-1), contentType="text/event-stream",
                durationMs=gap_ms * events, events=[*progress, final],
                sse={"events": events, "final": True, "end": "complete", "resumed": False})
    )  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def _session(port: int) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    body = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}})
    conn.request("POST", "/mcp", body, {"content-type": "application/json"})
    answer = conn.getresponse()
    answer.read()
    session = answer.getheader("mcp-session-id")
    conn.close()
    assert session, "the replay issued no session"
    return session


def throughput(port: int, session: str, exchanges: int, clients: int) -> float:
    per = exchanges // clients
    failures: list[str] = []

    def drive() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        headers = {"content-type": "application/json", "mcp-session-id": session}
        for i in range(per):
            conn.request("POST", "/mcp", json.dumps(_call(i, 0)), headers)
            answer = conn.getresponse()
            data = answer.read()
            if answer.status != 200 or b'"result"' not in data:
                failures.append(data[:200].decode(errors="replace"))
                return
        conn.close()

    threads = [threading.Thread(target=drive) for _ in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    assert not failures, failures[:3]
    return per * clients / elapsed


def pacing(port: int, session: str, events: int, gap_ms: float) -> list[float]:
    """|arrival - recorded offset| of each event, in ms."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"content-type": "application/json", "mcp-session-id": session,
               "accept": "application/json, text/event-stream"}  # fmt: skip
    start = time.perf_counter()
    conn.request("POST", "/mcp", json.dumps(_call(5, 1)), headers)
    answer = conn.getresponse()
    errors: list[float] = []
    buffer = b""
    while len(errors) < events:
        chunk = answer.read1(65536)
        if not chunk:
            break
        now = (time.perf_counter() - start) * 1000
        buffer += chunk
        while b"\n\n" in buffer:
            _, buffer = buffer.split(b"\n\n", 1)
            errors.append(abs(now - gap_ms * (len(errors) + 1)))
    conn.close()
    assert len(errors) == events, f"{len(errors)} of {events} events arrived"
    return errors


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exchanges", type=int, default=20_000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--events", type=int, default=40)
    parser.add_argument("--gap-ms", type=float, default=25.0)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.jsonl"
        recording(path, args.exchanges, args.events, args.gap_ms)
        proc = subprocess.Popen([CLI, "replay", str(path), "--port", "0"],
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        try:
            assert proc.stderr is not None
            found = re.search(r":(\d+)/mcp", proc.stderr.readline())
            assert found, "replay did not start"
            port = int(found.group(1))
            session = _session(port)
            rate = throughput(port, session, args.exchanges, args.clients)
            errors = pacing(port, session, args.events, args.gap_ms)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=10)
    print(
        f"throughput: {rate:,.0f} JSON exchanges/s ({args.exchanges:,} over "
        f"{args.clients} keep-alive clients; target >= 1,000)"
    )
    print(
        f"pacing at --speed 1: {args.events} events {args.gap_ms:g} ms apart; error p50 "
        f"{statistics.median(errors):.2f} ms, max {max(errors):.2f} ms (target <= 5 ms)"
    )
    return 0 if rate >= 1000 and max(errors) <= 5.0 else 1


if __name__ == "__main__":
    sys.exit(main())
