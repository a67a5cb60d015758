"""Soak: a day of session churn at 100 requests per second through the core, then a
shorter run through a real mitmdump; memory and state sizes over time (issue 19).

    .venv/bin/python benchmarks/soak.py            # 24 h at 100 req/s in the core, then mitmdump
    .venv/bin/python benchmarks/soak.py --hours 2 --proxy-sessions 0   # a quick look, core only
    .venv/bin/python benchmarks/soak.py --json soak.json

Core: the tracker alone (no sockets) on a simulated clock, fed the events the adapter
would feed: each session initialises, sends `notifications/initialized`, lists tools and
calls 2-5 tools (5 % answered 503 and sent again); half end with DELETE, half vanish.
1,000 client versions, 5,000 tool names over 20 servers, a tick every 5 simulated
seconds. Records are serialised as the writer would (`dumps_line`) and counted, not
written. Twelve samples over the run: RSS, the live heap (`sys.getallocatedblocks`,
blocks of the interpreter's allocator), and the size of every book.

mitmdump: `support/churn.py` drives real sessions over raw HTTP through
`mitmdump -s addon/mcp_layers.py` to a scripted upstream, sampling mitmdump's RSS.
Nothing is asserted: these are figures (docs/hardening.md).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from mcp_layers_core.events import (
    OtherRequest,
    PostReceived,
    ProxyStopping,
    ResponseBody,
    ResponseStarted,
    Tick,
)
from mcp_layers_core.jsonl import dumps_line
from mcp_layers_core.tracker import Tracker, records_of
from mcp_layers_support.gauges import rss_kib

JSON = {"content-type": "application/json"}
SERVERS = [f"10.0.0.{n}:443" for n in range(20)]
TOOLS_PER_SERVER = 250  # 5,000 tool names


def _tools(server: int) -> bytes:
    tools = [
        {"name": f"s{server}-tool{n}", "annotations": {"readOnlyHint": n % 3 == 0}}
        for n in range(TOOLS_PER_SERVER)
    ]
    return json.dumps({"jsonrpc": "2.0", "id": 1, "result": {"tools": tools}}).encode()


class CoreSoak:
    """Drives the tracker; counts records by kind and end reason."""

    def __init__(self, rps: float, seed: int) -> None:
        self.t = Tracker()
        self.rnd = random.Random(seed)
        self.now = 1_800_000_000.0
        self.step = 1.0 / rps
        self.n = 0
        self.requests = 0
        self.bytes = 0
        self.kinds: Counter[str] = Counter()
        self.ends: Counter[str] = Counter()
        self.next_tick = self.now + 5.0
        self.tools = [_tools(s) for s in range(len(SERVERS))]

    def _emit(self, records: list[dict[str, Any]]) -> None:
        for r in records:
            self.bytes += len(dumps_line(r))
            self.kinds[r["kind"]] += 1
            if r["kind"] == "session_end":
                self.ends[str(r["endReason"])] += 1

    def _advance(self) -> float:
        self.now += self.step
        if self.now >= self.next_tick:
            self.next_tick = self.now + 5.0
            self._emit(records_of(self.t.handle(Tick(self.now))))
        return self.now

    def _exchange(
        self,
        server: str,
        headers: dict[str, str],
        body: bytes,
        status: int,
        answer: bytes,
        more: dict[str, str] | None = None,
    ) -> None:
        self.n += 1
        flow = f"f{self.n}"
        self.requests += 1
        ts = self._advance()
        h = self.t.handle
        records = h(PostReceived(flow, ts, server, "10.1.0.1:5000", headers, body, len(body)))
        records += h(ResponseStarted(flow, ts + 0.002, status, {**JSON, **(more or {})}))
        records += h(ResponseBody(flow, ts + 0.003, answer, len(answer)))
        self._emit(records)

    def session(self, k: int) -> None:
        rnd = self.rnd
        s = rnd.randrange(len(SERVERS))
        server = SERVERS[s]
        version = f"{rnd.randrange(1000)}.0"
        ua = {"user-agent": f"agent/{version}"}
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "clientInfo": {"name": "a", "version": version},
            },
        }
        ok = b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":"2025-11-25"}}'
        sid = f"soak-{k:09d}"
        self._exchange(server, ua, json.dumps(init).encode(), 200, ok, {"mcp-session-id": sid})
        hs = {**ua, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        note = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'
        self._exchange(server, hs, note, 202, b"")
        self._exchange(
            server, hs, b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}', 200, self.tools[s]
        )
        for c in range(rnd.randint(2, 5)):
            tool = f"s{s}-tool{rnd.randrange(TOOLS_PER_SERVER)}"
            call = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": c + 2,
                    "method": "tools/call",
                    "params": {"name": tool, "arguments": {"q": c}},
                }
            ).encode()
            answer = b'{"jsonrpc":"2.0","id":%d,"result":{"content":[],"isError":false}}' % (c + 2)
            if rnd.random() < 0.05:
                self._exchange(server, hs, call, 503, b"busy")
            self._exchange(server, hs, call, 200, answer)
        if rnd.random() < 0.5:
            self.n += 1
            flow = f"f{self.n}"
            ts = self._advance()
            records = records_of(
                self.t.handle(OtherRequest(flow, ts, "DELETE", server, "10.1.0.1:5000", hs))
            )
            records += records_of(self.t.handle(ResponseStarted(flow, ts + 0.001, 200, {})))
            records += records_of(self.t.handle(ResponseBody(flow, ts + 0.002, b"", 0)))
            self.requests += 1
            self._emit(records)

    def state(self) -> dict[str, int]:
        t = self.t
        return {
            "session_book": len(t.sessions),
            "ended_memo": t.sessions.ended_memo,
            "retry_signatures": len(t.retries._last),
            "tool_names": len(t.safety),
            "client_names": len(t._who.client_by_agent),
            "open": t.pending,
            "buffered": t.buffers.held,
        }


def core_run(hours: float, rps: float, samples: int = 12, seed: int = 19) -> dict[str, Any]:
    soak = CoreSoak(rps, seed)
    target = int(hours * 3600 * rps)
    rows = []
    started = time.perf_counter()
    k = 0
    for i in range(1, samples + 1):
        while soak.requests < target * i // samples:
            soak.session(k)
            k += 1
        gc.collect()
        rows.append(
            {
                "sim_hours": round((soak.now - 1_800_000_000.0) / 3600, 2),
                "requests": soak.requests,
                "sessions_started": k,
                "rss_mib": round(rss_kib_self() / 1024, 1),
                "heap_blocks": sys.getallocatedblocks(),
                **soak.state(),
                "wall_s": round(time.perf_counter() - started, 1),
            }
        )
        print("core", rows[-1], flush=True)
    soak._emit(records_of(soak.t.handle(ProxyStopping(soak.now + 1))))
    return {
        "hours": hours,
        "rps": rps,
        "requests": soak.requests,
        "sessions": k,
        "records": dict(soak.kinds),
        "ends": dict(soak.ends),
        "record_bytes": soak.bytes,
        "bytes_per_record": round(soak.bytes / max(1, sum(soak.kinds.values())), 1),
        "wall_s": round(time.perf_counter() - started, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rows": rows,
    }


def rss_kib_self() -> int:
    import os

    return rss_kib(os.getpid())


def proxy_run(sessions: int, samples: int = 8) -> dict[str, Any]:
    from mcp_layers_support.churn import churn, respond
    from mcp_layers_support.gauges import hwm_kib, proxy_pid
    from mcp_layers_support.harness import Proxy
    from mcp_layers_support.scripted_upstream import ScriptedUpstream

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        upstream = ScriptedUpstream(responder=respond, keep_log=False)
        with upstream, Proxy(upstream.port, Path(tmp), extra_sets=("flow_detail=0",)) as proxy:
            pid = proxy_pid(proxy)
            rows.append({"sessions": 0, "rss_mib": round(rss_kib(pid) / 1024, 1)})
            started = time.perf_counter()
            done = 0
            requests = 0
            for i in range(1, samples + 1):
                part = sessions * i // samples - done
                got = churn(proxy.port, part, threads=8, seed=i)
                done += part
                requests += got.requests
                rows.append(
                    {
                        "sessions": done,
                        "requests": requests,
                        "rss_mib": round(rss_kib(pid) / 1024, 1),
                        "hwm_mib": round(hwm_kib(pid) / 1024, 1),
                        "wall_s": round(time.perf_counter() - started, 1),
                    }
                )
                print("mitmdump", rows[-1], flush=True)
        records = proxy.records()
    ends = Counter(str(r["endReason"]) for r in records if r["kind"] == "session_end")
    return {"sessions": sessions, "records": len(records), "ends": dict(ends), "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hours", type=float, default=24.0, help="simulated hours (core)")
    ap.add_argument("--rps", type=float, default=100.0, help="requests per simulated second")
    ap.add_argument("--proxy-sessions", type=int, default=12_000, help="0: skip mitmdump")
    ap.add_argument("--json", type=Path, help="also write all figures here")
    args = ap.parse_args()
    out: dict[str, Any] = {"core": core_run(args.hours, args.rps)}
    core = out["core"]
    print(
        f"core: {core['requests']:,} requests, {core['sessions']:,} sessions "
        f"in {core['wall_s']} s; "
        f"records {core['records']}, ends {core['ends']}; {core['bytes_per_record']} bytes/record "
        f"({core['record_bytes'] / 1e9:.2f} GB); peak RSS {core['peak_rss_mib']} MiB"
    )
    if args.proxy_sessions:
        out["mitmdump"] = proxy_run(args.proxy_sessions)
        print("mitmdump:", {k: v for k, v in out["mitmdump"].items() if k != "rows"})
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
