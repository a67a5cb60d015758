"""A 1 GB event stream over minutes through mitmdump with the addon: flat memory, constant
per-event cost (issue 6, the large run of `tests/hardening/test_long_stream.py`).

    .venv/bin/python benchmarks/long_stream.py                     # 1 GiB GET stream, ~6 MiB/s
    .venv/bin/python benchmarks/long_stream.py --kind listen       # a subscriptions/listen answer
    .venv/bin/python benchmarks/long_stream.py --rate-mib 0        # as fast as it goes
    .venv/bin/python benchmarks/long_stream.py --mib 128 --json out.json

The stream (1 KiB JSON-RPC notifications in 64 KiB writes, paced to `--rate-mib`)
comes from the scripted upstream of the tests and goes through a fresh
`mitmdump -s addon/mcp_layers.py` to a raw-socket client; both ends hash it. Every
0.25 s the run samples mitmdump's CPU time and resident memory. Printed: the summary
(bytes compared, RSS after the first tenth and at peak, CPU per event over tenths 2-4
and 8-10), a row per tenth, and then the core alone (the tracker in this
process, no proxy) over the same number of events, timed per tenth, with the memory
it holds (tracemalloc) early and late. Nothing is asserted: these are figures.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from mcp_layers_core.events import OtherRequest, ResponseStarted, StreamChunk
from mcp_layers_core.tracker import Tracker
from mcp_layers_support.long_stream_run import StreamResult, run_long_stream


def core_run(events: int, event_bytes: int) -> dict[str, Any]:
    """The tracker alone: `events` notifications on one GET stream, timed per tenth."""
    t = Tracker()
    t.handle(OtherRequest("g", 1.0, "GET", "127.0.0.1:1", "127.0.0.1:2", {"mcp-session-id": "s"}))
    t.handle(ResponseStarted("g", 1.0, 200, {"content-type": "text/event-stream"}))
    head = b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/message","params":{'
    pad = event_bytes - len(head) - len(b'"data":""}}\n\n')
    event = head + b'"data":"' + b"x" * max(0, pad) + b'"}}\n\n'
    per_piece = max(1, 65536 // len(event))
    piece = event * per_piece
    pieces_per_tenth = max(1, events // per_piece // 10)
    tenths = []
    for _ in range(10):
        started = time.perf_counter()
        for _ in range(pieces_per_tenth):
            t.handle(StreamChunk("g", 1.0, piece))
        tenths.append((time.perf_counter() - started) / (pieces_per_tenth * per_piece) * 1e6)
    # Then what the tracker holds, measured apart (tracemalloc slows every allocation).
    tracemalloc.start()
    for _ in range(pieces_per_tenth):
        t.handle(StreamChunk("g", 1.0, piece))
    held_early = tracemalloc.get_traced_memory()[0]
    for _ in range(pieces_per_tenth):
        t.handle(StreamChunk("g", 1.0, piece))
    held_late, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "events": pieces_per_tenth * per_piece * 10,
        "us_per_event_by_tenth": [round(x, 2) for x in tenths],
        "early_us": round(tenths[1], 2),
        "late_us": round(tenths[-1], 2),
        "late_over_early": round(tenths[-1] / tenths[1], 3),
        "held_bytes_after_one_more_tenth": held_early,
        "held_bytes_after_two_more_tenths": held_late,
        "traced_peak_bytes": peak,
    }


def print_result(result: StreamResult) -> None:
    print(json.dumps(result.summary()))
    print(f"{'tenth':>5} {'events':>9} {'cpu us/event':>13} {'MiB/s':>8} {'RSS MiB':>8}")
    for d in result.deciles:
        print(
            f"{d.n:>5} {d.events:>9} {d.cpu_us_per_event:>13.2f} {d.mb_per_s:>8.1f} "
            f"{d.rss_mib:>8.1f}"
        )
    print(f"peak RSS (VmHWM) {result.hwm_mib:.1f} MiB; client complete {result.client_complete}")
    kinds = [r["kind"] for r in result.records]
    print(f"records: {kinds}")
    for r in result.records:
        if r["kind"] == "session_end":
            print(f"  session_end sessionStats {r['sessionStats']}")
        else:
            print(f"  {r['kind']} {r['outcome']} sse {r['sse']} notes {r['notes']}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=1024, help="stream size (MiB)")
    parser.add_argument("--kind", choices=["get", "listen", "both"], default="get")
    parser.add_argument("--rate-mib", type=float, default=6.0, help="MiB/s; 0: unpaced")
    parser.add_argument("--event-bytes", type=int, default=1024)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    kinds = ["get", "listen"] if args.kind == "both" else [args.kind]
    out: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}}
    for kind in kinds:
        print(f"== {kind} stream, {args.mib} MiB at {args.rate_mib or 'max'} MiB/s")
        with tempfile.TemporaryDirectory(prefix="long-stream-") as tmp:
            result = run_long_stream(
                kind,
                args.mib * 2**20,
                Path(tmp),
                event_bytes=args.event_bytes,
                rate_bytes_per_s=args.rate_mib * 2**20 or None,
                sample_s=0.25,
                deadline_s=max(1800.0, 4 * args.mib / max(args.rate_mib, 1.0)),
            )
        print_result(result)
        out[kind] = {
            "summary": result.summary(),
            "hwm_mib": result.hwm_mib,
            "tenths": [d.__dict__ for d in result.deciles],
            "samples": [s.__dict__ for s in result.samples],
        }
        out.setdefault("events", result.events)
    print("== the core alone (this process, no proxy)")
    core = core_run(out["events"], args.event_bytes)
    print(json.dumps(core))
    out["core"] = core
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
