"""Mixed MCP load through one mitmdump: the workload, the clients and the record checks.

Shared by the CI-sized proof (`test_load.py`) and the benchmark (`benchmarks/load.py`,
which also runs plain mitmdump for the latency ratio). `respond` answers a
`tools/call` by the mode its arguments name; `drive` runs `clients` concurrent clients,
each on its own keep-alive connection and session, sending its share of `posts` POSTs
one after the other; `check_records` judges a recording of such a run.

    python -m mcp_layers_support.load_run --serve PORT [LIFETIME_S]   # the upstream alone
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp_layers_core.record import Outcome
from mcp_layers_support.messages import jbytes, sse_block, tool_result
from mcp_layers_support.rawhttp import HOST
from mcp_layers_support.recordings import check_dir
from mcp_layers_support.scripted_upstream import Received, Reply, ScriptedUpstream

READ_TIMEOUT_S = 20.0

#: mode -> (share of the POSTs, the outcome its record must have)
MODES: dict[str, tuple[int, Outcome]] = {
    "json_ok": (30, Outcome.TOOL_SUCCESS),
    "sse_ok": (30, Outcome.TOOL_SUCCESS),
    "tool_error": (8, Outcome.TOOL_ERROR),
    "rpc_error": (8, Outcome.JSONRPC_ERROR),
    "http_500": (6, Outcome.HTTP_ERROR),
    "http_503": (6, Outcome.HTTP_ERROR),
    "sse_cut": (6, Outcome.STREAM_INCOMPLETE),
    "reset": (6, Outcome.NO_RESPONSE),
}
MODE_CYCLE = [mode for mode, (share, _) in MODES.items() for _ in range(share)]


def mode_of(n: int) -> str:
    return MODE_CYCLE[(n * 37) % len(MODE_CYCLE)]


def respond(request: Received) -> Reply:
    msg = json.loads(request.body)
    rid, mode = msg["id"], msg["params"]["arguments"]["mode"]
    ctype = [("Content-Type", "application/json")]
    sse = [("Content-Type", "text/event-stream")]
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    if mode == "json_ok":
        return Reply(200, ctype, jbytes(tool_result(rid)))
    if mode == "tool_error":
        return Reply(200, ctype, jbytes(tool_result(rid, "failed", is_error=True)))
    if mode == "rpc_error":
        error = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "bad"}}
        return Reply(200, ctype, jbytes(error))
    if mode == "http_500":
        return Reply(500, [("Content-Type", "text/plain")], b"boom")
    if mode == "http_503":
        return Reply(503, [("Retry-After", "1"), ("Content-Type", "text/plain")], b"later")
    if mode == "reset":
        return Reply(abort="reset")
    events = [(0.0, sse_block(progress)), (0.002, sse_block(tool_result(rid)))]
    if mode == "sse_cut":
        return Reply(200, sse, chunks=events[:1], abort="cut")
    return Reply(200, sse, chunks=events)


# -- the clients ----------------------------------------------------------------------------


async def _read_response(reader: asyncio.StreamReader) -> tuple[int, bool]:
    """Read one response; (status, whether the connection can be reused)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    headers = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", ""):
        for _ in range(100_000):
            size = int((await asyncio.wait_for(reader.readline(), READ_TIMEOUT_S)).strip(), 16)
            await asyncio.wait_for(reader.readexactly(size + 2), READ_TIMEOUT_S)
            if size == 0:
                break
    elif "content-length" in headers:
        await asyncio.wait_for(reader.readexactly(int(headers["content-length"])), READ_TIMEOUT_S)
    else:
        await asyncio.wait_for(reader.read(), READ_TIMEOUT_S)
        return status, False
    return status, headers.get("connection", "").lower() != "close"


@dataclass
class Drive:
    """What the clients saw."""

    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)  # seconds, every POST
    by_mode: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    statuses: Counter[int] = field(default_factory=Counter)
    broken: Counter[str] = field(default_factory=Counter)  # connections that broke

    def quantile(self, q: float, mode: str | None = None) -> float:
        values = sorted(self.by_mode[mode] if mode else self.latencies)
        return values[min(len(values) - 1, round(q * (len(values) - 1)))]

    def figures(self, posts: int) -> dict[str, Any]:
        return {
            "seconds": round(self.seconds, 2),
            "posts_per_s": round(posts / self.seconds),
            "latency_p50_ms": round(statistics.median(self.latencies) * 1000, 2),
            "latency_p99_ms": round(self.quantile(0.99) * 1000, 2),
            "client_broken_connections": dict(self.broken),
        }


async def _client(port: int, c: int, numbers: list[int], out: Drive) -> None:
    conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    for n in numbers:
        mode = mode_of(n)
        body = jbytes(
            {
                "jsonrpc": "2.0",
                "id": f"load-{n}",
                "method": "tools/call",
                "params": {"name": "work", "arguments": {"mode": mode, "n": n}},
            }
        )
        head = (
            f"POST /mcp HTTP/1.1\r\nHost: {HOST}:{port}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nUser-Agent: load-client/{c}\r\n"
            f"Mcp-Session-Id: load-session-{c}\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        started = time.monotonic()
        reusable = False
        if conn is None:
            conn = await asyncio.open_connection(HOST, port)
        reader, writer = conn
        try:
            writer.write(head.encode() + body)
            await writer.drain()
            status, reusable = await _read_response(reader)
            out.statuses[status] += 1
        except (OSError, asyncio.IncompleteReadError, ValueError) as e:
            # A cut stream (or a reset upstream) ends the connection: expected.
            out.broken[type(e).__name__] += 1
        elapsed = time.monotonic() - started
        out.latencies.append(elapsed)
        out.by_mode[mode].append(elapsed)
        if not reusable:
            writer.close()
            conn = None
    if conn is not None:
        conn[1].close()


async def drive(port: int, clients: int, posts: int) -> Drive:
    out = Drive()
    per_client: dict[int, list[int]] = defaultdict(list)
    for n in range(posts):
        per_client[n % clients].append(n)
    started = time.monotonic()
    await asyncio.gather(*(_client(port, c, per_client[c], out) for c in range(clients)))
    out.seconds = time.monotonic() - started
    return out


# -- the recording --------------------------------------------------------------------------


def check_records(record_dir: Path, clients: int, posts: int) -> tuple[dict[str, Any], list[str]]:
    """Figures of a load run's recording, and what is wrong with it (empty: nothing)."""
    files = check_dir(record_dir)
    records = [r for f in files for r in f.records]
    requests = [r for r in records if r["kind"] == "request"]
    ends = [r for r in records if r["kind"] == "session_end"]
    bad = sum(len(f.bad_lines) for f in files) + sum(not f.ends_whole for f in files)
    ids = Counter(r["id"] for r in records)
    rpc_ids = Counter(r["jsonrpc"]["id"] for r in requests)
    by_session: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in requests:
        by_session[r["session"]].append(r)
    not_monotone = []
    for session, rs in by_session.items():
        in_file = [r["postCount"] for r in rs]
        in_sent = [r["postCount"] for r in sorted(rs, key=lambda r: r["id"])]
        if in_sent != list(range(1, len(rs) + 1)) or in_file != sorted(in_file):
            not_monotone.append(session)
    wrong = [
        (r["jsonrpc"]["id"], r["outcome"])
        for r in requests
        if r["outcome"] != MODES[mode_of(int(str(r["jsonrpc"]["id"]).split("-")[1]))][1]
    ]
    figures = {
        "request_records": len(requests),
        "session_end_records": len(ends),
        "distinct_rpc_ids": len(rpc_ids),
        "torn_or_bad_lines": bad,
        "duplicate_record_ids": sum(n > 1 for n in ids.values()),
        "sessions": len(by_session),
        "sessions_not_monotone": len(not_monotone),
        "wrong_outcomes": len(wrong),
        "recording_bytes": sum(f.size for f in files),
    }
    problems = []
    if len(requests) != posts or len(rpc_ids) != posts or max(rpc_ids.values(), default=0) > 1:
        problems.append(f"{len(requests)} request records for {posts} POSTs ({len(rpc_ids)} ids)")
    if bad:
        problems.append(f"{bad} torn or bad lines")
    if any(n > 1 for n in ids.values()):
        problems.append("a record id was written twice")
    if len(by_session) != clients or not_monotone:
        problems.append(f"postCount not 1..n in order for {not_monotone[:5]}")
    if len(ends) != clients or any(r["postCount"] != posts // clients for r in ends):
        problems.append(f"{len(ends)} session ends for {clients} sessions")
    if wrong:
        problems.append(f"wrong outcomes: {wrong[:10]}")
    return figures, problems


def serve(port: int, lifetime_s: float) -> None:
    with ScriptedUpstream(responder=respond, keep_log=False, port=port):
        time.sleep(lifetime_s)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--serve":
        serve(int(sys.argv[2]), float(sys.argv[3]) if len(sys.argv) > 3 else 3600.0)
    else:
        sys.exit(__doc__)
