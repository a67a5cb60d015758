"""Session churn as real clients make it, over raw HTTP: each session initialises, lists
tools, calls 2-5 tools; some end with DELETE, the others just vanish; some calls are
answered 503 and sent again. Used by the long-run proof (`tests/hardening/
test_longrun_e2e.py`) and the soak benchmark (`benchmarks/soak.py`).

The upstream (`respond`) issues a session id on every `initialize` and answers the rest
with small JSON bodies; everything is on 127.0.0.1 and every loop is bounded.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import random
import threading
from dataclasses import dataclass, field

from mcp_layers_support.messages import jbytes, mcp_headers, tool_call, tool_result
from mcp_layers_support.rawhttp import RawClient
from mcp_layers_support.scripted_upstream import Received, Reply

JSON = [("Content-Type", "application/json")]
TOOLS = 50  # tool names the upstream lists (the 5,000 only grows the book)
_ids = itertools.count(1)
_lock = threading.Lock()


def respond(request: Received) -> Reply:
    """A stateful upstream: session ids on `initialize`, 503 when a call asks for it."""
    if request.method == "DELETE":
        return Reply(200, JSON, b"")
    msg = request.json()
    if not isinstance(msg, dict) or "id" not in msg:
        return Reply(202, JSON, b"")
    rid, method = msg["id"], msg.get("method")
    if method == "initialize":
        with _lock:
            sid = f"sess-{next(_ids):08d}"
        result = {"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {}}
        body = jbytes({"jsonrpc": "2.0", "id": rid, "result": result})
        return Reply(200, [*JSON, ("Mcp-Session-Id", sid)], body)
    if method == "tools/list":
        tools = [{"name": f"tool{n}", "inputSchema": {"type": "object"}} for n in range(TOOLS)]
        body = jbytes({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools}})
        return Reply(200, JSON, body)
    params = msg.get("params") or {}
    if isinstance(params, dict) and (params.get("arguments") or {}).get("busy"):
        return Reply(503, JSON, b"busy")
    return Reply(200, JSON, jbytes(tool_result(rid)))


@dataclass
class Churned:
    """What the clients did: the session ids they got, and which of them they deleted."""

    sessions: list[str] = field(default_factory=list)
    deleted: set[str] = field(default_factory=set)
    requests: int = 0
    failures: list[str] = field(default_factory=list)


def one_session(port: int, n: int, rnd: random.Random, out: Churned) -> None:
    """initialize, notifications/initialized, tools/list, 2-5 calls (5 % answered 503 and
    sent again), then DELETE or vanish."""
    version = f"{n % 1000}.0"  # many client versions
    ua = f"churn/{version}"
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "churn", "version": version},
        },
    }
    with RawClient(port) as c:
        got = c.post(jbytes(init), mcp_headers(user_agent=ua))
        sid = got.header("mcp-session-id")
        if got.status != 200 or sid is None:
            out.failures.append(f"initialize {n}: {got.status} {got.error}")
            return
        headers = mcp_headers(sid, user_agent=ua)
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        sent = [c.post(jbytes(note), headers)]
        sent.append(c.post(jbytes({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}), headers))
        for k in range(rnd.randint(2, 5)):
            tool = f"tool{rnd.randrange(TOOLS)}"
            if rnd.random() < 0.05:
                sent.append(c.post(jbytes(tool_call(k + 2, tool, busy=True)), headers))
            sent.append(c.post(jbytes(tool_call(k + 2, tool)), headers))
        deleted = rnd.random() < 0.5
        if deleted:
            sent.append(c.request("DELETE", b"", headers))
    bad = [g for g in sent if g.status not in (200, 202, 503)]
    with _lock:
        out.sessions.append(sid)
        if deleted:
            out.deleted.add(sid)
        out.requests += 1 + len(sent)
        out.failures += [f"{sid}: {g.status} {g.error}" for g in bad]


def churn(port: int, sessions: int, threads: int = 4, seed: int = 19) -> Churned:
    """Run `sessions` sessions through the proxy at `port`, `threads` at a time."""
    out = Churned()
    seeds = random.Random(seed)
    jobs = [(n, random.Random(seeds.random())) for n in range(sessions)]
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        for f in [pool.submit(one_session, port, n, rnd, out) for n, rnd in jobs]:
            f.result()
    return out
