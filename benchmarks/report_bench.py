"""Time `mcp-layers report` against `mcp-layers summary` on the same records, in one run.

    .venv/bin/python benchmarks/report_bench.py                     # 1M records, 3 rounds
    .venv/bin/python benchmarks/report_bench.py --records 100000 --repeat 1

The targets (issue 27): the page of N records is written in at most twice the time
`summary` takes on them, and it stays under 8 MB, whatever N (past its limits the page
samples, and says so). The recording is the synthetic one `analysis_bench.py` uses (the
same cached file under `benchmarks/out/`, git-ignored, made once per generator version).

Both are the installed console script, run as separate processes and timed from start to
exit. The machine may be shared, so they take turns: each of `--repeat` rounds runs
`summary` then `report`, and the ratio is the median over the rounds of report's time over
summary's in the same round, so a slow minute slows both alike. It prints the table and
exits 1 when a target is missed (a timing, so not a test: run it by hand).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# benchmarks/ is not a package: this script's folder is on sys.path when it runs.
from analysis_bench import recording, script

#: At most this many records: a synthetic record takes about 1 kB, so this is 10 GB on disk.
MAX_RECORDS = 10_000_000
MAX_RATIO = 2.0
MAX_PAGE_BYTES = 8_000_000


def timed(argv: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system, every thread) of one run of `argv`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{argv[1]} failed ({done.returncode}):\n{done.stderr.decode()}")
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, metavar="N")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    if not 1 <= args.records <= MAX_RECORDS:
        parser.error(f"--records: 1 to {MAX_RECORDS:,}")
    path = recording(args.records, args.seed)
    cli = script()
    summary: list[tuple[float, float]] = []
    report: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        for _ in range(args.repeat):
            summary.append(timed([cli, "summary", str(path), "--format", "json"]))
            report.append(timed([cli, "report", str(path), "-o", str(page)]))
        size = page.stat().st_size
        text = page.read_text(encoding="utf-8")
    ratio = statistics.median(r[0] / s[0] for r, s in zip(report, summary, strict=True))
    cpu_ratio = statistics.median(r[1] / s[1] for r, s in zip(report, summary, strict=True))
    notes = text.split("<main>")[0].count("class='note'")  # the header's: what is left out
    print(
        f"\n{path.name}: {args.records:,} records, {path.stat().st_size / 1e6:,.0f} MB; "
        f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; {args.repeat} rounds\n"
    )
    print("| command | median s | runs s | CPU s (median) |")
    print("|---|---:|:---|---:|")
    for name, times in (("mcp-layers summary", summary), ("mcp-layers report", report)):
        runs = " ".join(f"{w:.1f}" for w, _ in times)
        wall = statistics.median(w for w, _ in times)
        cpu = statistics.median(c for _, c in times)
        print(f"| {name} | {wall:.2f} | {runs} | {cpu:.2f} |")
    ok_time = ratio <= MAX_RATIO
    ok_size = size < MAX_PAGE_BYTES
    print(
        f"\nreport / summary: {ratio:.2f}x wall, {cpu_ratio:.2f}x CPU (target <= {MAX_RATIO}x "
        f"wall: "
        f"{'met' if ok_time else 'MISSED'}); page {size / 1e6:.2f} MB (target < "
        f"{MAX_PAGE_BYTES / 1e6:.0f} MB: {'met' if ok_size else 'MISSED'}); "
        f"{notes} note(s) on the page say what it leaves out"
    )
    if not (ok_time and ok_size):
        sys.exit(1)


if __name__ == "__main__":
    main()
