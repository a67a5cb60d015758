"""What the addon costs: `mitmdump -q -s addon/mcp_layers.py` against plain `mitmdump -q`,
against mitmproxy's own flow recording (`mitmdump -q -w FILE`), and against a script addon
that does nothing.

The proxies run side by side in reverse mode in front of the same upstream (the
scripted upstream of the end-to-end tests, in a process of its own) and get the same
workload: JSON-RPC `tools/call` POSTs on keep-alive connections, answered either with
a small JSON body or with an SSE stream of three events (two progress notifications and
the response, `--sse-gap-ms` apart). The upstream stamps its send time into every
event, and the client subtracts it on arrival: that is the per-event delay.

Runs rotate between the proxies (the first one changes every time) and the whole set
repeats `--reps` times; the table shows, per configuration, the median over the reps
of each run's median latency, p99 latency, throughput, CPU per request and per-event
delay, and the addon/baseline ratios. The targets (ratios <= 1.05, per-event delay
within 0.1 ms of a streaming plain proxy) are printed next to the numbers, never
asserted: timings belong in a report, not in a test that fails on a busy machine. The
report ends with the addon's Python calls per exchange (call_count.py): a count, steady
where the timings are not.

    .venv/bin/python benchmarks/addon_bench.py            # 2,000 requests per run
    .venv/bin/python benchmarks/addon_bench.py --requests 500 --reps 1   # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
WORKLOADS = ("json", "sse")
#: The proxies compared, with the extra mitmdump arguments and the workloads each runs.
#: Plain mitmdump *buffers* an SSE answer until it ends (mitmproxy issue #4469), while
#: the addon streams it; so for SSE the fair baseline is a plain mitmdump told to stream
#: (`stream_large_bodies=1`), and the buffering plain one is shown for reference.
#: `noop-addon` is a script with the addon's hooks doing nothing but stream SSE: the
#: floor any script addon pays in mitmproxy's hook dispatch, whatever it does.
#: `plain-w` is mitmproxy's own recording, `-w FILE` (every flow saved whole): the peer a
#: user would otherwise reach for. Like plain mitmdump it buffers an SSE answer, so for SSE
#: it is shown for reference, and the fair peer is `plain-w-stream`: it streams SSE as the
#: addon does (`stream_large_bodies=1`) *and* still saves each event, as the addon records
#: each one (`store_streamed_bodies`; without it mitmproxy saves a streamed flow with no
#: body, less work than the addon does). Like `plain-stream`, it streams the (small)
#: request bodies too, which the addon does not: the only built-in switch streams both.
CONFIGS: dict[str, tuple[list[str], tuple[str, ...]]] = {
    "plain": (["-q"], WORKLOADS),
    "plain-stream": (["-q", "--set", "stream_large_bodies=1"], ("sse",)),
    "plain-w": (["-q", "-w", "{flows}"], WORKLOADS),
    "plain-w-stream": (
        [
            "-q",
            "-w",
            "{flows}",
            "--set",
            "stream_large_bodies=1",
            "--set",
            "store_streamed_bodies=true",
        ],
        ("sse",),
    ),
    "noop-addon": (["-q", "-s", "{noop}"], WORKLOADS),
    "addon": (["-q"], WORKLOADS),
    "addon-clocked": (["-q"], WORKLOADS),
}
#: `addon-clocked` is the addon loaded through `hook_clock.py`: its hooks and batches
#: timed inside the running proxy (reported on their own, never used as the addon's row).
CLOCK_SCRIPT = Path(__file__).resolve().parent / "hook_clock.py"
BASELINES = ("plain", "plain-stream", "plain-w", "plain-w-stream", "noop-addon")

NOOP_ADDON = """\
import gc
import json
import time

from mitmproxy import http

# Garbage collection timed as in hook_clock.py, to compare the process's GC with the addon's.
_gc = {"start": 0, "ns": {}}


def _gc_clock(phase, info):
    if phase == "start":
        _gc["start"] = time.thread_time_ns()
    else:
        name = f"gc (gen {info.get('generation')}, whole process)"
        _gc["ns"][name] = _gc["ns"].get(name, 0) + time.thread_time_ns() - _gc["start"]


gc.callbacks.append(_gc_clock)


def _is_sse(flow):
    ctype = flow.response.headers.get("content-type", "")
    return ctype.split(";", 1)[0].strip().lower() == "text/event-stream"


class Noop:
    def request(self, flow):
        if flow.request.path == "/__hook_clock":
            body = json.dumps({"ns": _gc["ns"]})
            flow.response = http.Response.make(200, body, {"content-type": "application/json"})

    def responseheaders(self, flow):
        if _is_sse(flow):
            flow.response.stream = lambda data: data

    def response(self, flow):
        pass

    def error(self, flow):
        pass


addons = [Noop()]
"""

#: Bounds: no run, read or process may outlive these.
RUN_TIMEOUT_S = 300.0
READ_TIMEOUT_S = 10.0
UPSTREAM_LIFETIME_S = 3600.0
SSE_EVENTS = 3
#: Pause after each run before the proxy's CPU is read again: longer than the recorder's
#: longest batching delay, so its deferred work is charged to the run that caused it.
SETTLE_S = 0.15


# -- the upstream (runs in its own process: `--serve-upstream PORT`) -----------------------


def serve_upstream(port: int, gap_s: float, lifetime_s: float) -> None:
    """Answer /json with a small JSON result and /sse with three stamped events."""
    from mcp_layers_support.scripted_upstream import Received, Reply, ScriptedUpstream

    json_headers = [("Content-Type", "application/json")]
    sse_headers = [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache")]

    def event(message: dict[str, Any]) -> bytes:
        return b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"

    def stamped(rid: Any, n: int) -> bytes:
        # Evaluated right before the write, so the stamp is the send time.
        meta = {"sentAt": time.time()}
        if n < SSE_EVENTS:
            params = {"progressToken": rid, "progress": n, "total": SSE_EVENTS, "_meta": meta}
            return event({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})
        result = {"content": [{"type": "text", "text": "ok"}], "isError": False, "_meta": meta}
        return event({"jsonrpc": "2.0", "id": rid, "result": result})

    def respond(request: Received) -> Reply:
        rid = json.loads(request.body)["id"]
        if request.target.endswith("/sse"):
            chunks = [
                (gap_s if n > 1 else 0.0, lambda n=n: stamped(rid, n))
                for n in range(1, SSE_EVENTS + 1)
            ]
            return Reply(200, sse_headers, chunks=chunks)
        result = {"content": [{"type": "text", "text": "ok"}], "isError": False}
        body = json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()
        return Reply(200, json_headers, body)

    with ScriptedUpstream(responder=respond, keep_log=False, port=port):
        # SIGTERM from the parent ends the process; the lifetime bounds it regardless.
        time.sleep(lifetime_s)


# -- the load client ------------------------------------------------------------------------


@dataclass
class Run:
    config: str
    workload: str
    concurrency: int
    requests: int
    seconds: float
    latency_p50_ms: float
    latency_p99_ms: float
    rps: float
    event_p50_ms: float | None = None
    event_p99_ms: float | None = None
    cpu_us: float | None = None  # the proxy process's CPU (user + system) per request
    hook_us: dict[str, float] | None = None  # addon-clocked: CPU per request in each hook
    errors: int = 0


@dataclass
class _Tally:
    latencies: list[float] = field(default_factory=list)
    delays: list[float] = field(default_factory=list)
    errors: int = 0


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    return int(lines[0].split(" ", 2)[1]), headers


async def _read_body(
    reader: asyncio.StreamReader, headers: dict[str, str], sse: bool, tally: _Tally
) -> None:
    if "chunked" not in headers.get("transfer-encoding", ""):
        await asyncio.wait_for(
            reader.readexactly(int(headers.get("content-length", "0"))), READ_TIMEOUT_S
        )
        return
    pending = b""
    for _ in range(100_000):  # bounded: a response has a handful of chunks
        size = int((await asyncio.wait_for(reader.readline(), READ_TIMEOUT_S)).strip(), 16)
        if size == 0:
            await asyncio.wait_for(reader.readline(), READ_TIMEOUT_S)  # the final CRLF
            return
        data = await asyncio.wait_for(reader.readexactly(size + 2), READ_TIMEOUT_S)
        arrived = time.time()
        if not sse:
            continue
        pending += data[:-2]
        *events, pending = pending.split(b"\n\n")
        for block in events:
            for line in block.split(b"\n"):
                if line.startswith(b"data: "):
                    message = json.loads(line[6:])
                    holder = message.get("params") or message.get("result") or {}
                    tally.delays.append(arrived - holder["_meta"]["sentAt"])
    raise ValueError("endless chunked body")


async def _connection(
    port: int, workload: str, budget: itertools.count[int], total: int, tally: _Tally, conn: int
) -> None:
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        for _ in range(total):
            n = next(budget)
            if n >= total:
                return
            body = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": n,
                    "method": "tools/call",
                    "params": {"name": "echo", "arguments": {"text": "hello", "n": n}},
                }
            ).encode()
            head = (
                f"POST /mcp/{workload} HTTP/1.1\r\nHost: {HOST}\r\n"
                "Content-Type: application/json\r\n"
                "Accept: application/json, text/event-stream\r\n"
                "MCP-Protocol-Version: 2025-11-25\r\n"
                f"Mcp-Session-Id: bench-{workload}-{conn}\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode()
            start = time.perf_counter()
            writer.write(head + body)
            status, headers = await _read_head(reader)
            await _read_body(reader, headers, workload == "sse", tally)
            tally.latencies.append(time.perf_counter() - start)
            if status != 200:
                tally.errors += 1
    finally:
        writer.close()


async def _load(port: int, workload: str, concurrency: int, total: int) -> tuple[_Tally, float]:
    tally = _Tally()
    budget = itertools.count()
    start = time.perf_counter()
    await asyncio.wait_for(
        asyncio.gather(
            *(_connection(port, workload, budget, total, tally, c) for c in range(concurrency))
        ),
        RUN_TIMEOUT_S,
    )
    return tally, time.perf_counter() - start


def _cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU of a process so far (Linux `/proc`; None elsewhere)."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _hook_clock(port: int) -> dict[str, int]:
    """The CPU nanoseconds the clocked addon spent so far, per hook (see hook_clock.py)."""
    import urllib.request

    with urllib.request.urlopen(f"http://{HOST}:{port}/__hook_clock", timeout=10) as answer:
        clock: dict[str, int] = json.load(answer)["ns"]
    return clock


def measure(
    config: str, port: int, workload: str, concurrency: int, total: int, pid: int | None = None
) -> Run:
    clocked = config in ("addon-clocked", "noop-addon")
    hooks_before = _hook_clock(port) if clocked else {}
    cpu_before = _cpu_seconds(pid)
    tally, seconds = asyncio.run(_load(port, workload, concurrency, total))
    # Work a proxy does after the last answer (a recorder's batch) belongs to this run.
    time.sleep(SETTLE_S)
    cpu_after = _cpu_seconds(pid)
    hooks_after = _hook_clock(port) if clocked else {}
    ms = [x * 1000 for x in tally.latencies]
    run = Run(
        config=config,
        workload=workload,
        concurrency=concurrency,
        requests=len(ms),
        seconds=round(seconds, 3),
        latency_p50_ms=statistics.median(ms),
        latency_p99_ms=_quantile(ms, 0.99),
        rps=len(ms) / seconds,
        errors=tally.errors,
    )
    if cpu_before is not None and cpu_after is not None and ms:
        run.cpu_us = (cpu_after - cpu_before) / len(ms) * 1e6
    if clocked and ms:
        run.hook_us = {
            name: (ns - hooks_before.get(name, 0)) / len(ms) / 1000
            for name, ns in hooks_after.items()
        }
    if tally.delays:
        delays = [x * 1000 for x in tally.delays]
        run.event_p50_ms = statistics.median(delays)
        run.event_p99_ms = _quantile(delays, 0.99)
    return run


# -- orchestration ---------------------------------------------------------------------------


def _flows_file(work: Path, config: str) -> Path:
    """Where a `-w` baseline saves its flows."""
    return work / f"flows-{config}.mitm"


def _saved_flows(path: Path) -> tuple[int, int]:
    """The flows in a `-w` file, and how many have a response body (streamed SSE ones only
    with `store_streamed_bodies`)."""
    from mitmproxy import http, io

    flows = bodies = 0
    with path.open("rb") as f:
        for flow in io.FlowReader(f).stream():
            flows += 1
            if isinstance(flow, http.HTTPFlow) and flow.response and flow.response.raw_content:
                bodies += 1
    return flows, bodies


def _call_counts(workloads: Sequence[str]) -> str:
    """The addon's Python calls per exchange (call_count.py), or why they are missing."""
    try:
        from call_count import count_calls, format_table

        return format_table(count_calls(workloads))
    except Exception as e:  # the timings above stand on their own
        return f"Python calls per exchange: not counted ({e!r})"


def _median_of(runs: list[Run], name: str) -> float | None:
    values = [getattr(r, name) for r in runs if getattr(r, name) is not None]
    return statistics.median(values) if values else None


def _stats(runs: list[Run], *names: str) -> list[float]:
    values = [_median_of(runs, name) for name in names]
    assert None not in values
    return values  # type: ignore[return-value]


def _spread(runs: list[Run], name: str) -> str:
    values = [getattr(r, name) for r in runs if getattr(r, name) is not None]
    return f"{min(values):.0f}-{max(values):.0f}" if values else "-"


def _report(results: dict[tuple[str, str, int], list[Run]], args: argparse.Namespace) -> str:
    out = [
        f"addon overhead: {args.requests} requests per run, {args.reps} reps (medians of the "
        f"reps); SSE answer = {SSE_EVENTS} events {args.sse_gap_ms:g} ms apart; CPU = the "
        "mitmdump process's user+system time per request",
        "",
        "workload conc  baseline       | base p50  p99       req/s  CPU/req "
        "| addon p50 p99       req/s  CPU/req "
        "| addon/base p50  p99    req/s  CPU",
        "-" * 138,
    ]
    keys = ("latency_p50_ms", "latency_p99_ms", "rps", "cpu_us")
    for workload in args.workloads:
        for conc in args.concurrency:
            a = _stats(results[("addon", workload, conc)], *keys)
            for base in BASELINES:
                if (base, workload, conc) not in results:
                    continue
                p = _stats(results[(base, workload, conc)], *keys)
                r = [x / y for x, y in zip(a, p, strict=True)]
                out.append(
                    f"{workload:<8} {conc:>4}  {base:<14} "
                    f"| {p[0]:6.2f} ms {p[1]:6.2f} ms {p[2]:6.0f} {p[3]:5.0f} µs "
                    f"| {a[0]:6.2f} ms {a[1]:6.2f} ms {a[2]:6.0f} {a[3]:5.0f} µs "
                    f"| {r[0]:14.3f} {r[1]:6.3f} {r[2]:6.3f} {r[3]:6.3f}"
                )
    out += ["", "CPU per request, min-max over the reps (µs):"]
    for workload in args.workloads:
        for conc in args.concurrency:
            spreads = [
                f"{c} {_spread(results[(c, workload, conc)], 'cpu_us')}"
                for c in CONFIGS
                if (c, workload, conc) in results
            ]
            out.append(f"{workload:<4} c={conc}: " + "; ".join(spreads))
    out += [
        "",
        "inside the running proxy (addon-clocked): the addon's CPU per request, by hook; "
        "GC of the whole process, and the same in noop-addon:",
    ]
    for workload in args.workloads:
        for conc in args.concurrency:
            runs = [r for r in results[("addon-clocked", workload, conc)] if r.hook_us]
            noop = [r for r in results[("noop-addon", workload, conc)] if r.hook_us]
            noop_gc = {
                n: statistics.median((r.hook_us or {}).get(n, 0.0) for r in noop)
                for n in sorted({n for r in noop for n in r.hook_us or {}})
            }
            names = sorted({n for r in runs for n in r.hook_us or {}})
            parts = {
                n: statistics.median((r.hook_us or {}).get(n, 0.0) for r in runs) for n in names
            }
            total = sum(v for n, v in parts.items() if not n.startswith("gc"))
            out.append(
                f"{workload:<4} c={conc}: hooks and batches {total:.1f} µs; "
                + ", ".join(f"{n} {v:.1f}" for n, v in parts.items() if v >= 0.05)
                + "; noop-addon: "
                + (", ".join(f"{n} {v:.1f}" for n, v in noop_gc.items() if v >= 0.05) or "-")
            )
    out += ["", "SSE per-event delay (upstream send stamp -> client arrival), p50 / p99:"]
    for conc in args.concurrency if "sse" in args.workloads else []:
        row = {
            c: _stats(results[(c, "sse", conc)], "event_p50_ms", "event_p99_ms")
            for c in CONFIGS
            if c != "addon-clocked"
        }
        a, s = row["addon"], row["plain-stream"]
        out.append(
            f"c={conc}: "
            + "; ".join(f"{c} {v[0]:.3f} / {v[1]:.3f} ms" for c, v in row.items())
            + f"; addon - plain-stream {a[0] - s[0]:+.3f} / {a[1] - s[1]:+.3f} ms"
        )
    out += [
        "",
        "targets (reported, never asserted): addon/plain CPU per request, p50 and p99 <= 1.05, "
        "throughput >= 0.95; per-event delay within 0.1 ms of a streaming plain mitmdump",
    ]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000, help="requests per run")
    parser.add_argument("--reps", type=int, default=3, help="repetitions of the whole set")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--warmup", type=int, default=300, help="requests per proxy first")
    parser.add_argument("--sse-gap-ms", type=float, default=2.0)
    parser.add_argument("--json", type=Path, help="also write every run here")
    parser.add_argument(
        "--workloads", nargs="+", choices=WORKLOADS, default=list(WORKLOADS), help="a subset"
    )
    parser.add_argument(
        "--addon-before",
        type=Path,
        help="another build of the addon script (a checkout before a change, its core "
        "package renamed so the installed one does not shadow it), run as one more proxy "
        "in the same interleaved set: its row is `addon-before`",
    )
    parser.add_argument("--serve-upstream", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_upstream:
        serve_upstream(args.serve_upstream, args.sse_gap_ms / 1000, UPSTREAM_LIFETIME_S)
        return 0
    if not 1 <= args.requests <= 1_000_000 or not 1 <= args.reps <= 100:
        parser.error("--requests must be 1..1,000,000 and --reps 1..100")

    from mcp_layers_demo import procs
    from mcp_layers_support import recordings

    scripts: dict[str, Path] = {"addon": procs.ADDON, "addon-clocked": CLOCK_SCRIPT}
    if args.addon_before is not None:
        CONFIGS["addon-before"] = (["-q"], WORKLOADS)
        scripts["addon-before"] = args.addon_before.resolve()
    work = Path(tempfile.mkdtemp(prefix="addon-bench-"))
    started: list[Any] = []
    try:
        up_port = procs.free_port()
        cmd = [
            procs.python(),
            str(Path(__file__).resolve()),
            "--serve-upstream",
            str(up_port),
            "--sse-gap-ms",
            str(args.sse_gap_ms),
        ]
        started.append(upstream := procs.start(cmd, work / "upstream.log"))
        procs.wait_for_port(up_port, upstream, what="the upstream", log=work / "upstream.log")
        ports: dict[str, int] = {}
        proxies: dict[str, Any] = {}
        noop = work / "noop_addon.py"
        noop.write_text(NOOP_ADDON)
        for config, (extra, _workloads) in CONFIGS.items():
            # `-w` writes into the work folder, removed at the end like everything in it.
            fill = {"{noop}": str(noop), "{flows}": str(_flows_file(work, config))}
            extra = [fill.get(x, x) for x in extra]
            ports[config] = procs.free_port()
            cmd = procs.mitmdump_cmd(
                up_port,
                ports[config],
                addon=scripts.get(config),
                record_dir=work / ("records" if config == "addon" else f"records-{config}"),
            )
            log = work / f"mitmdump-{config}.log"
            started.append(proc := procs.start([*cmd, *extra], log))
            proxies[config] = proc
            procs.wait_for_port(ports[config], proc, what=f"mitmdump ({config})", log=log)

        sent = dict.fromkeys(CONFIGS, 0)
        for config, (_extra, workloads) in CONFIGS.items():
            for workload in workloads:
                if workload not in args.workloads:
                    continue
                measure(config, ports[config], workload, 1, args.warmup, proxies[config].pid)
                sent[config] += args.warmup

        results: dict[tuple[str, str, int], list[Run]] = {}
        turn = itertools.count()
        for rep in range(args.reps):
            for workload in args.workloads:
                for conc in args.concurrency:
                    configs = [c for c, (_x, w) in CONFIGS.items() if workload in w]
                    # Rotate which proxy goes first, so drift hits them all alike.
                    shift = next(turn) % len(configs)
                    for config in configs[shift:] + configs[:shift]:
                        run = measure(
                            config,
                            ports[config],
                            workload,
                            conc,
                            args.requests,
                            proxies[config].pid,
                        )
                        sent[config] += run.requests
                        results.setdefault((config, workload, conc), []).append(run)
                        print(
                            f"rep {rep + 1} {config:<12} {workload:<4} c={conc}: "
                            f"p50 {run.latency_p50_ms:.2f} ms, {run.rps:.0f} req/s, "
                            f"{run.cpu_us or 0:.0f} µs CPU/req"
                            + (f", errors {run.errors}" if run.errors else ""),
                            file=sys.stderr,
                        )
        print(_report(results, args))

        # Sanity: the addon really recorded every POST it proxied (after a clean stop).
        procs.stop(proxies["addon"])
        records = sum(
            1
            for path in recordings.recording_files(work / "records")
            for r in recordings.read_jsonl(path)
            if r.get("kind") == "request"
        )
        print(f"\naddon recorded {records} request records for {sent['addon']} POSTs")
        # The same of the `-w` baselines: every flow saved, with its answer's body.
        for config in (c for c, (x, _w) in CONFIGS.items() if "-w" in x):
            procs.stop(proxies[config])  # mitmproxy writes out the last flows as it stops
            flows, bodies = _saved_flows(_flows_file(work, config))
            print(
                f"{config} saved {flows} flows ({bodies} with the answer's body) for "
                f"{sent[config]} POSTs"
            )
        print("\n" + _call_counts(args.workloads))
        if args.json:
            runs = [asdict(r) for rs in results.values() for r in rs]
            args.json.parent.mkdir(parents=True, exist_ok=True)
            args.json.write_text(json.dumps(runs, indent=1))
        return 0
    finally:
        for proc in reversed(started):
            procs.stop(proc)
        shutil.rmtree(work, ignore_errors=True)  # the recordings and `-w` files can be large


if __name__ == "__main__":
    sys.exit(main())
