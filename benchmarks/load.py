"""What the addon adds under concurrent MCP load: 50 clients, 2,000 mixed POSTs, against
plain mitmdump (issue 6, the timed run of `tests/hardening/test_load.py`).

    .venv/bin/python benchmarks/load.py                    # 3 reps × 3 configs (~2 min)
    .venv/bin/python benchmarks/load.py --reps 1 --posts 1000
    .venv/bin/python benchmarks/load.py --json runs.json

The upstream (the tests' scripted upstream, `mcp_layers_support.load_run --serve`, in a
process of its own) answers by mode: JSON and SSE successes, tool and JSON-RPC errors,
500s, 503s, SSE cut before the answer, resets. Each config gets a fresh mitmdump
(`flow_detail=0`, reverse mode, lazy) and the same workload; configs rotate between
reps. `plain` is mitmdump alone; `plain-stream` adds `stream_large_bodies=1` (plain
mitmdump buffers SSE; the addon streams it, so this is the fair baseline for SSE);
`addon` is `-s addon/mcp_layers.py`, and its recording is checked as the test checks
it (2,000 records, whole lines, monotone `postCount`, right outcomes). Printed per
config: the median over reps of each run's latency p50 / p99 (send to last byte),
throughput and mitmdump CPU per POST, then the addon's ratios. Timings are reported,
never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from mcp_layers_demo import procs
from mcp_layers_support.gauges import cpu_s, proxy_pid
from mcp_layers_support.harness import Proxy
from mcp_layers_support.load_run import check_records, drive

CONFIGS: dict[str, tuple[Path | None, tuple[str, ...]]] = {
    "plain": (None, ("flow_detail=0",)),
    "plain-stream": (None, ("flow_detail=0", "stream_large_bodies=1")),
    "addon": (procs.ADDON, ("flow_detail=0",)),
}


def one_run(config: str, upstream_port: int, clients: int, posts: int) -> dict[str, Any]:
    addon, sets = CONFIGS[config]
    with tempfile.TemporaryDirectory(prefix=f"load-{config}-") as tmp:
        proxy = Proxy(upstream_port, Path(tmp), addon=addon, scenario=None, extra_sets=sets)
        with proxy:
            pid = proxy_pid(proxy)
            before = cpu_s(pid)
            seen = asyncio.run(drive(proxy.port, clients, posts))
            cpu = cpu_s(pid) - before
        run: dict[str, Any] = {
            "config": config,
            "p50_ms": seen.quantile(0.5) * 1000,
            "p99_ms": seen.quantile(0.99) * 1000,
            "rps": posts / seen.seconds,
            "cpu_ms_per_post": cpu / posts * 1000,
            "p50_ms_by_mode": {m: seen.quantile(0.5, m) * 1000 for m in sorted(seen.by_mode)},
            "statuses": dict(seen.statuses),
        }
        if addon is not None:
            found, problems = check_records(proxy.record_dir, clients, posts)
            run["records"] = found
            run["problems"] = problems
    return run


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--posts", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    port = procs.free_port()
    with tempfile.TemporaryDirectory(prefix="load-upstream-") as tmp:
        log = Path(tmp) / "upstream.log"
        cmd = [sys.executable, "-m", "mcp_layers_support.load_run", "--serve", str(port)]
        upstream = procs.start(cmd, log)
        try:
            procs.wait_for_port(port, upstream, what="load upstream", log=log)
            runs: list[dict[str, Any]] = []
            names = list(CONFIGS)
            for rep in range(args.reps):
                order = names[rep % len(names) :] + names[: rep % len(names)]
                for config in order:
                    run = one_run(config, port, args.clients, args.posts)
                    runs.append(run)
                    print(
                        f"rep {rep + 1} {config:<13} p50 {run['p50_ms']:7.1f} ms  "
                        f"p99 {run['p99_ms']:7.1f} ms  {run['rps']:6.0f} req/s  "
                        f"cpu {run['cpu_ms_per_post']:.2f} ms/post"
                        + (f"  problems {run['problems']}" if run.get("problems") else ""),
                        flush=True,
                    )
        finally:
            procs.stop(upstream)
    print()
    print(f"{args.clients} clients, {args.posts} POSTs per run, median of {args.reps} reps")
    table: dict[str, dict[str, float]] = {}
    for config in CONFIGS:
        mine = [r for r in runs if r["config"] == config]
        table[config] = {
            k: statistics.median(r[k] for r in mine)
            for k in ("p50_ms", "p99_ms", "rps", "cpu_ms_per_post")
        }
        t = table[config]
        print(
            f"{config:<13} p50 {t['p50_ms']:7.1f} ms  p99 {t['p99_ms']:7.1f} ms  "
            f"{t['rps']:6.0f} req/s  cpu {t['cpu_ms_per_post']:.2f} ms/post"
        )
    addon = table["addon"]
    for base in ("plain", "plain-stream"):
        b = table[base]
        print(
            f"addon/{base:<13} p50 x{addon['p50_ms'] / b['p50_ms']:.3f}  "
            f"p99 x{addon['p99_ms'] / b['p99_ms']:.3f}  "
            f"throughput x{addon['rps'] / b['rps']:.3f}  "
            f"cpu/post x{addon['cpu_ms_per_post'] / b['cpu_ms_per_post']:.3f}"
        )
    problems = [p for r in runs for p in r.get("problems", [])]
    print(f"recording checks: {problems or 'all passed'}")
    last = next(r for r in reversed(runs) if r["config"] == "addon")
    print(f"last addon run's recording: {last['records']}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"runs": runs, "table": table}, indent=1))


if __name__ == "__main__":
    main()
