"""What the live OTLP export costs the traffic: the addon alone against the addon with
`--set mcp_otlp_endpoint=…` pointing at a working collector, a dead one (a port nobody
listens on) and a slow one (answers each export 2 s late).

Same upstream, workload and client as `addon_bench.py` (JSON and SSE `tools/call`s on
keep-alive connections); runs rotate between the proxies and repeat `--reps` times; the
table shows the median p50/p99 latency and the ratio to the addon without export.
Reported, never asserted.

    .venv/bin/python benchmarks/otel_bench.py                    # 2,000 requests per run
    .venv/bin/python benchmarks/otel_bench.py --requests 500 --reps 1
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import addon_bench
from mcp_layers_demo import procs
from mcp_layers_support.otlp_receiver import OtlpReceiver

CONFIGS = ("addon", "otel-live", "otel-down", "otel-slow")
SLOW_COLLECTOR_S = 2.0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--warmup", type=int, default=300)
    args = parser.parse_args(argv)
    if not 1 <= args.requests <= 1_000_000 or not 1 <= args.reps <= 100:
        parser.error("--requests must be 1..1,000,000 and --reps 1..100")

    work = Path(tempfile.mkdtemp(prefix="otel-bench-"))
    started: list[Any] = []
    with OtlpReceiver() as live, OtlpReceiver(delay_s=SLOW_COLLECTOR_S) as slow:
        endpoints = {
            "addon": None,
            "otel-live": live.url,
            "otel-down": f"http://127.0.0.1:{procs.free_port()}",
            "otel-slow": slow.url,
        }
        try:
            up_port = procs.free_port()
            cmd = [procs.python(), addon_bench.__file__, "--serve-upstream", str(up_port)]
            started.append(upstream := procs.start(cmd, work / "upstream.log"))
            procs.wait_for_port(up_port, upstream, what="the upstream", log=work / "upstream.log")
            ports: dict[str, int] = {}
            for config in CONFIGS:
                ports[config] = procs.free_port()
                endpoint = endpoints[config]
                extra = ["-q"] + (["--set", f"mcp_otlp_endpoint={endpoint}"] if endpoint else [])
                cmd = procs.mitmdump_cmd(
                    up_port, ports[config], record_dir=work / f"records-{config}"
                )
                log = work / f"mitmdump-{config}.log"
                started.append(proc := procs.start([*cmd, *extra], log))
                procs.wait_for_port(ports[config], proc, what=f"mitmdump ({config})", log=log)
            for config in CONFIGS:
                for workload in addon_bench.WORKLOADS:
                    addon_bench.measure(config, ports[config], workload, 1, args.warmup)

            results: dict[tuple[str, str, int], list[addon_bench.Run]] = {}
            turn = itertools.count()
            for rep in range(args.reps):
                for workload in addon_bench.WORKLOADS:
                    for conc in args.concurrency:
                        shift = next(turn) % len(CONFIGS)
                        for config in CONFIGS[shift:] + CONFIGS[:shift]:
                            run = addon_bench.measure(
                                config, ports[config], workload, conc, args.requests
                            )
                            results.setdefault((config, workload, conc), []).append(run)
                            print(
                                f"rep {rep + 1} {config:<10} {workload:<4} c={conc}: "
                                f"p50 {run.latency_p50_ms:.2f} ms"
                                + (f", errors {run.errors}" if run.errors else ""),
                                file=sys.stderr,
                            )
            print(report(results, args))
            print(f"\nspans the live collector received: {len(live.spans())}")
        finally:
            for proc in reversed(started):
                procs.stop(proc)
    return 0


def report(results: dict[tuple[str, str, int], list[addon_bench.Run]], args: Any) -> str:
    out = [
        f"OTLP export cost: {args.requests} requests per run, {args.reps} reps (medians)",
        "",
        "workload conc  config      p50 ms   p99 ms  errors | p50 / addon  p99 / addon",
        "-" * 82,
    ]
    for workload in addon_bench.WORKLOADS:
        for conc in args.concurrency:
            base = results[("addon", workload, conc)]
            b50 = statistics.median(r.latency_p50_ms for r in base)
            b99 = statistics.median(r.latency_p99_ms for r in base)
            for config in CONFIGS:
                runs = results[(config, workload, conc)]
                p50 = statistics.median(r.latency_p50_ms for r in runs)
                p99 = statistics.median(r.latency_p99_ms for r in runs)
                errors = sum(r.errors for r in runs)
                out.append(
                    f"{workload:<8} {conc:>4}  {config:<10} {p50:7.2f} {p99:8.2f} {errors:7d} "
                    f"| {p50 / b50:11.3f} {p99 / b99:12.3f}"
                )
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
