"""What `mcp-layers wrap` costs a stdio server: latency per message, throughput, start-up.

    .venv/bin/python benchmarks/stdio_bench.py           # default sizes (a few minutes)
    .venv/bin/python benchmarks/stdio_bench.py --quick

Each figure is measured twice in the same run, against the same child: directly (the
client starts the child) and through the wrapper (the client starts `mcp-layers wrap --
child`), interleaved so that load from other work on the machine falls on both alike.

- latency: a client writes one `tools/call` line and waits for the answer line, N times;
  the child answers at once. A round trip crosses the wrapper twice (request, answer), so
  the added latency per message is half the difference of the round trips' medians (p50).
  The recorder pairs and writes every call (its records are checked at the end).
- a large answer: the same with an answer of 1 MiB (a large tool result); the added round
  trip, p50 (the recorder reads and parses the answer: it must not hold it back much).
- throughput: the client streams JSON-RPC notifications of 1 KiB through `cat` and reads
  them back (both directions at once); bytes per second, wrapped / direct. `cat` does no
  work per message, so this is the wrapper's own hops at their worst; the recorder reads
  the copies from its spool behind the bytes. The recording is checked afterwards: one
  record per client line, and every server line counted.
- relay alone: the same stream through a process that runs the wrapper's own relay
  (`relay`: splice and tee where the system has them) around the same `cat`, the copies
  written to a spool no one reads: what moving the bytes costs, without the recorder. And
  the CPU time the relay's two threads take per MiB, with splice and with its read/write
  fallback: a figure the machine's load moves far less than a rate.
- real servers' pace: `tools/call`s written all at once (pipelined) to the bundled server
  on the official Python SDK (`python -m mcp_layers_demo.server --stdio`) and to one on
  the official TypeScript SDK (benchmarks/ts_stdio_server.mjs, Node), calls answered a
  second, wrapped / direct; and the same to a Python loop that only answers (`ANSWERER`,
  no work per call, like `cat`). Every call checked in the recording.
- start-up: from spawning the command to the child's first line on stdout, for a child
  that prints at once; median of the differences.

Targets (issue 30): p50 <= 50 us per message, >= 0.9x throughput, <= 100 ms start-up.
The throughput target is read on the real servers; `cat` and `ANSWERER` show the bound of
a server that does nothing per message (docs/stdio.md, Performance).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp_layers_support import node_peers

WRAPPER = shutil.which("mcp-layers", path=os.path.dirname(sys.executable)) or "mcp-layers"

#: The child that answers each line with a result (the same program direct and wrapped).
ANSWERER = r"""
import os, sys
buf = b""
while True:
    data = os.read(0, 65536)
    if not data:
        break
    buf += data
    while (i := buf.find(b"\n")) >= 0:
        line, buf = buf[:i], buf[i + 1:]
        j = line.find(b'"id":') + 5
        k = line.find(b",", j)
        os.write(1, b'{"jsonrpc":"2.0","id":' + line[j:k]
                 + b',"result":{"content":[{"type":"text","text":"ok"}],"isError":false}}\n')
"""

#: The same, answering each call with a text of 1 MiB (a large tool result).
BIG_ANSWERER = ANSWERER.replace(
    'b\',"result":{"content":[{"type":"text","text":"ok"}]',
    'b\',"result":{"content":[{"type":"text","text":"\' + b"x" * (1 << 20) + b\'"}]',
)

CALL = (
    b'{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"echo",'
    b'"arguments":{"text":"hello"}}}\n'
)

#: The wrapper's relay without its recorder: `cat` between this process's stdin and stdout,
#: the copies written to a spool in the directory named second and never read; `splice`
#: (the wrapper's way without fault rules) or `read-write` (its fallback). Says on stderr
#: the CPU seconds its two relay threads took.
RELAY_ALONE = r"""
import os, resource, subprocess, sys, threading
import mcp_layers_stdio as w
child_in_r, child_in_w = os.pipe()
child_out_r, child_out_w = os.pipe()
for fd in (child_in_w, child_out_r):
    w.widen(fd)
proc = subprocess.Popen(["cat"], stdin=child_in_r, stdout=child_out_w)
os.close(child_in_r)
os.close(child_out_w)
os.makedirs(sys.argv[2], exist_ok=True)
spool = w.Spool(sys.argv[2])
class Unread(w.Feed):
    # No recorder: none to wake (the wrapper wakes only a sleeping one).
    def _wake(self):
        pass
feed = Unread(spool.fd, spool.wake_w)
tee = w.load_tee() if sys.argv[1] == "splice" else None
cpu = []
def timed(src, dst, tag, end):
    r0 = resource.getrusage(resource.RUSAGE_THREAD)
    w.relay(src, dst, w.Copier(feed, tag), tee, lambda _: os.close(end))
    r1 = resource.getrusage(resource.RUSAGE_THREAD)
    cpu.append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
threads = [
    threading.Thread(target=timed, args=(0, child_in_w, b"c", child_in_w)),
    threading.Thread(target=timed, args=(child_out_r, 1, b"s", 1)),
]
for t in threads:
    t.start()
proc.wait()
threads[0].join()
threads[1].join()
feed.close()
os.write(2, b"cpu %f\n" % sum(cpu))
"""

PRINT_AT_ONCE = "import os; os.write(1, b'ready\\n')"


def command(wrapped: bool | str, record_dir: str, *child: str) -> list[str]:
    """`child` directly, through the wrapper, or through the relay alone (`splice`,
    `read-write`)."""
    if isinstance(wrapped, str):
        return [sys.executable, "-c", RELAY_ALONE, wrapped, record_dir]
    return [WRAPPER, "wrap", "--record-dir", record_dir, "--", *child] if wrapped else list(child)


def latency(wrapped: bool, n: int, record_dir: str, child: str = ANSWERER) -> list[float]:
    proc = subprocess.Popen(
        command(wrapped, record_dir, sys.executable, "-c", child),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    out, inp = proc.stdout.fileno(), proc.stdin.fileno()
    times: list[float] = []
    for i in range(n + 50):
        line = CALL.replace(b"ID", str(i).encode())
        t0 = time.perf_counter()
        os.write(inp, line)
        got = bytearray()
        while not got.endswith(b"\n"):
            got += os.read(out, 1 << 20)
        if i >= 50:  # the first calls warm up both processes
            times.append(time.perf_counter() - t0)
    proc.stdin.close()
    proc.wait()
    return times


LINE = b'{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"' + b"x" * 950
LINE += b'"}}\n'


def stream_size(megabytes: int) -> int:
    return megabytes * 1024 * 1024 // len(LINE) * len(LINE)


def throughput(
    wrapped: bool | str, megabytes: int, record_dir: str, cpu: list[float] | None = None
) -> float:
    """Bytes per second; the relay alone's CPU seconds go to `cpu`."""
    total = stream_size(megabytes)
    chunk = LINE * 64
    proc = subprocess.Popen(
        command(wrapped, record_dir, "cat"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if cpu is not None else None,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def feed() -> None:
        assert proc.stdin is not None
        sent = 0
        while sent < total:
            piece = chunk[: total - sent]
            proc.stdin.write(piece)
            sent += len(piece)
        proc.stdin.close()

    t0 = time.perf_counter()
    feeder = threading.Thread(target=feed)
    feeder.start()
    got = 0
    fd = proc.stdout.fileno()
    while got < total and (data := os.read(fd, 1 << 20)):
        got += len(data)
    elapsed = time.perf_counter() - t0  # the bytes are through (the recorder a pipe behind)
    assert os.read(fd, 1) == b""  # and nothing more: EOF
    feeder.join()
    proc.wait()
    assert got == total, (got, total)
    if cpu is not None:
        assert proc.stderr is not None
        cpu.append(float(proc.stderr.read().split()[-1]))
    return total / elapsed


INITIALIZE = (
    b'{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":'
    b'"2025-06-18","capabilities":{},"clientInfo":{"name":"stdio-bench","version":"1"}}}\n'
    b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
)


#: The most calls in flight in `pipelined`: well under the core's bound on exchanges
#: awaiting their answer (`MAX_PENDING_EXCHANGES`, 10,000), past which the oldest is
#: written early (`evicted_pending_cap`), as it is for the proxy.
WINDOW = 2000

TS_SERVER = Path(__file__).resolve().parent / "ts_stdio_server.mjs"
SDK_SERVER = (sys.executable, "-m", "mcp_layers_demo.server", "--stdio")


def pipelined(wrapped: bool, calls: int, record_dir: str, *child: str) -> float:
    """`tools/call`s answered a second by `child`, the calls written ahead of their
    answers (pipelined, at most `WINDOW` waiting: a client with that many calls in flight)
    after the handshake (an SDK's server; `ANSWERER` needs none); timed from the first
    call to the last answer."""
    proc = subprocess.Popen(
        command(wrapped, record_dir, *child),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    if child[-1] != ANSWERER:
        proc.stdin.write(INITIALIZE)
        proc.stdin.flush()
        assert b'"id":"init"' in proc.stdout.readline()
    step = WINDOW // 2
    batches = [
        b"".join(CALL.replace(b"ID", str(i).encode()) for i in range(n, min(n + step, calls)))
        for n in range(0, calls, step)
    ]
    room = threading.Semaphore(2)  # two batches in flight

    def feed() -> None:
        assert proc.stdin is not None
        for batch in batches:
            room.acquire()
            proc.stdin.write(batch)
            proc.stdin.flush()

    t0 = time.perf_counter()
    feeder = threading.Thread(target=feed)
    feeder.start()
    for i in range(calls):
        assert b'"result"' in proc.stdout.readline()
        if i % step == step - 1:
            room.release()
    elapsed = time.perf_counter() - t0
    feeder.join()
    proc.stdin.close()
    proc.wait()
    return calls / elapsed


def answered(
    reps: int, calls: int, record_dir: str, child: tuple[str, ...]
) -> tuple[list[float], list[float]]:
    """`pipelined` direct and wrapped, `reps` times each (`interleaved`); every call must
    be in the recording, answered (`TOOL_SUCCESS`)."""
    direct, wrapped = interleaved(reps, lambda w: pipelined(w, calls, record_dir, *child))
    recorded = [r for r in records_in(record_dir) if r["method"] == "tools/call"]
    assert sum(r["outcome"] == "TOOL_SUCCESS" for r in recorded) == reps * calls
    return direct, wrapped


def startup(wrapped: bool, record_dir: str) -> float:
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        command(wrapped, record_dir, sys.executable, "-c", PRINT_AT_ONCE),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stdin is not None
    os.read(proc.stdout.fileno(), 100)
    elapsed = time.perf_counter() - t0
    proc.stdin.close()
    proc.wait()
    return elapsed


def records_in(directory: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for path in Path(directory).glob("*.jsonl"):
        out += [json.loads(line) for line in path.read_text().splitlines()]
    return out


def interleaved(reps: int, measure: Callable[[bool], float]) -> tuple[list[float], list[float]]:
    """`measure(False)` (direct) and `measure(True)` (wrapped), `reps` times each,
    alternated so that the machine's load falls on both alike."""
    direct: list[float] = []
    wrapped: list[float] = []
    for _ in range(reps):
        direct.append(measure(False))
        wrapped.append(measure(True))
    return direct, wrapped


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()
    calls, megabytes, starts, reps = (500, 64, 10, 2) if args.quick else (3000, 256, 30, 3)
    sdk_calls = calls // 2
    fast_calls = calls * 20
    ts_calls = calls * 2

    with tempfile.TemporaryDirectory() as tmp:
        rec = os.path.join(tmp, "rec")
        direct_rtt: list[float] = []
        wrapped_rtt: list[float] = []
        for _ in range(reps):  # interleaved
            direct_rtt += latency(False, calls, rec)
            wrapped_rtt += latency(True, calls, rec)
        recorded = [r for r in records_in(rec) if r["kind"] == "request"]
        assert len(recorded) == reps * (calls + 50), len(recorded)
        assert all(r["outcome"] == "TOOL_SUCCESS" for r in recorded)

        direct_big: list[float] = []
        wrapped_big: list[float] = []
        big = os.path.join(tmp, "big")
        for _ in range(reps):
            direct_big += latency(False, calls // 10, big, BIG_ANSWERER)
            wrapped_big += latency(True, calls // 10, big, BIG_ANSWERER)
        assert sum(r["outcome"] == "TOOL_SUCCESS" for r in records_in(big)) == reps * (
            calls // 10 + 50
        )

        flood = os.path.join(tmp, "flood")
        direct_bps, wrapped_bps = interleaved(reps, lambda w: throughput(w, megabytes, flood))
        flooded = records_in(flood)
        lines = reps * stream_size(megabytes) // len(LINE)
        # Nothing lost: each client line is a record, each server line counted.
        assert sum(r["kind"] == "notification" for r in flooded) == lines
        assert (
            sum(
                r["sessionStats"]["serverNotifications"]
                for r in flooded
                if r["kind"] == "session_end"
            )
            == lines
        )

        direct_relay: list[float] = []
        wrapped_relay: list[float] = []
        cpu: dict[str, list[float]] = {"splice": [], "read-write": []}
        for _ in range(reps):
            direct_relay.append(throughput(False, megabytes, flood))
            wrapped_relay.append(throughput("splice", megabytes, flood, cpu["splice"]))
            throughput("read-write", megabytes, flood, cpu["read-write"])
        moved = 2 * stream_size(megabytes) / 2**20  # MiB through the relay, both ways

        direct_sdk, wrapped_sdk = answered(reps, sdk_calls, os.path.join(tmp, "sdk"), SDK_SERVER)

        # The official TypeScript SDK's server: faster than the Python one.
        peers = node_peers.ensure()
        direct_ts: list[float] = []
        wrapped_ts: list[float] = []
        if peers is not None:
            sdk_dir = peers.ts_client.parent / "node_modules" / "@modelcontextprotocol" / "sdk"
            ts_server = (str(peers.node), str(TS_SERVER), str(sdk_dir))
            direct_ts, wrapped_ts = answered(reps, ts_calls, os.path.join(tmp, "ts"), ts_server)

        # A server that does nothing but answer: its pace is the pipes', far past the
        # recorder's, which reads behind.
        direct_fast, wrapped_fast = answered(
            reps, fast_calls, os.path.join(tmp, "fast"), (sys.executable, "-c", ANSWERER)
        )

        direct_start: list[float] = []
        wrapped_start: list[float] = []
        for _ in range(starts):
            direct_start.append(startup(False, rec))
            wrapped_start.append(startup(True, rec))
        dropped = [
            n
            for r in records_in(rec)
            for n in r["notes"]
            if str(n).startswith(("observer_dropped", "observer_skipped"))
        ]

    def p50(xs: list[float]) -> float:
        return statistics.median(xs)

    added_us = (p50(wrapped_rtt) - p50(direct_rtt)) / 2 * 1e6
    big_ms = (p50(wrapped_big) - p50(direct_big)) * 1000
    ratio = p50(wrapped_bps) / p50(direct_bps)
    start_ms = (p50(wrapped_start) - p50(direct_start)) * 1000
    relay_ratio = p50(wrapped_relay) / p50(direct_relay)
    sdk_ratio = p50(wrapped_sdk) / p50(direct_sdk)
    fast_ratio = p50(wrapped_fast) / p50(direct_fast)
    ts_ratio = p50(wrapped_ts) / p50(direct_ts) if direct_ts else None
    cpu_ms = {way: p50(secs) * 1000 / moved for way, secs in cpu.items()}
    figures = {
        "round_trip_p50_us": {"direct": p50(direct_rtt) * 1e6, "wrapped": p50(wrapped_rtt) * 1e6},
        "added_latency_per_message_p50_us": added_us,
        "large_answer_round_trip_p50_ms": {
            "direct": p50(direct_big) * 1000,
            "wrapped": p50(wrapped_big) * 1000,
        },
        "large_answer_added_ms": big_ms,
        "throughput_MiB_s": {
            "direct": p50(direct_bps) / 2**20,
            "wrapped": p50(wrapped_bps) / 2**20,
        },
        "throughput_ratio": ratio,
        "relay_alone_MiB_s": {
            "direct": p50(direct_relay) / 2**20,
            "wrapped": p50(wrapped_relay) / 2**20,
        },
        "relay_alone_ratio": relay_ratio,
        "relay_cpu_ms_per_MiB": cpu_ms,
        "sdk_server_calls_per_s": {"direct": p50(direct_sdk), "wrapped": p50(wrapped_sdk)},
        "sdk_server_throughput_ratio": sdk_ratio,
        "ts_sdk_server_calls_per_s": (
            {"direct": p50(direct_ts), "wrapped": p50(wrapped_ts)} if direct_ts else None
        ),
        "ts_sdk_server_throughput_ratio": ts_ratio,
        "answering_server_calls_per_s": {"direct": p50(direct_fast), "wrapped": p50(wrapped_fast)},
        "answering_server_throughput_ratio": fast_ratio,
        "startup_ms": {"direct": p50(direct_start) * 1000, "wrapped": p50(wrapped_start) * 1000},
        "startup_overhead_ms": start_ms,
        "observer_dropped_notes": dropped,
    }
    print(
        f"round trip p50: direct {p50(direct_rtt) * 1e6:.0f} us, "
        f"wrapped {p50(wrapped_rtt) * 1e6:.0f} us"
    )
    print(f"added latency per message, p50: {added_us:.0f} us (target <= 50 us)")
    print(
        f"a call answered with 1 MiB, round trip p50: direct {p50(direct_big) * 1000:.2f} ms, "
        f"wrapped {p50(wrapped_big) * 1000:.2f} ms: +{big_ms:.2f} ms"
    )
    print(
        f"throughput: direct {p50(direct_bps) / 2**20:.0f} MiB/s, wrapped "
        f"{p50(wrapped_bps) / 2**20:.0f} MiB/s: {ratio:.2f}x (no work per message: the "
        "relay's bound; every line recorded)"
    )
    print(
        f"relay alone: direct {p50(direct_relay) / 2**20:.0f} MiB/s, relayed "
        f"{p50(wrapped_relay) / 2**20:.0f} MiB/s: {relay_ratio:.2f}x"
    )
    print(
        f"relay CPU per MiB (its two threads): splice {cpu_ms['splice']:.3f} ms, "
        f"read-write {cpu_ms['read-write']:.3f} ms"
    )
    print(
        f"pipelined tools/call to the Python SDK server: direct {p50(direct_sdk):.0f}/s, "
        f"wrapped {p50(wrapped_sdk):.0f}/s: {sdk_ratio:.2f}x (target >= 0.9x; every call "
        "recorded)"
    )
    if direct_ts:
        print(
            f"pipelined tools/call to the TypeScript SDK server: direct {p50(direct_ts):.0f}/s, "
            f"wrapped {p50(wrapped_ts):.0f}/s: {ts_ratio:.2f}x (target >= 0.9x; every "
            "call recorded)"
        )
    else:
        print(f"the TypeScript SDK server: not measured ({node_peers.NO_NPM})")
    print(
        f"pipelined tools/call to a server that only answers: direct {p50(direct_fast):.0f}/s, "
        f"wrapped {p50(wrapped_fast):.0f}/s: {fast_ratio:.2f}x (no work per call: the "
        "relay's bound; every call recorded)"
    )
    print(
        f"start-up to the first line: direct {p50(direct_start) * 1000:.0f} ms, wrapped "
        f"{p50(wrapped_start) * 1000:.0f} ms: +{start_ms:.0f} ms (target <= 100 ms)"
    )
    print(f"passed but not recorded (lines dropped, bytes skipped): {dropped or 'none'}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
