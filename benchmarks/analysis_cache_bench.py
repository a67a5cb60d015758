"""The caches (issue 32): each command cold, warm and without the cache, against DuckDB
asked the same question directly over the JSONL, and jq, in one run.

    .venv/bin/python benchmarks/analysis_cache_bench.py                  # 1M records, 3 rounds
    .venv/bin/python benchmarks/analysis_cache_bench.py --records 4000000 --repeat 1

The recording is `analysis_bench.py`'s (synthetic, seeded, cached under benchmarks/out/).
The cache directory is a fresh one under benchmarks/out/ (`MCP_LAYERS_CACHE_DIR`), emptied
before every cold run. Per round, for each command (`summary`, `sessions`, `verdicts`),
each a separate process timed from start to exit (Python's start-up and imports included):

- `no-cache`: `--no-cache`, the read as it is without any cache;
- `cold`: the cache empty. The command answers from the JSONL and, once done, starts the
  detached builder of the input's entry. Its time is the user's wait for the answer; the
  builder's is reported apart (`entry build`: from the command's exit until the entry is
  in place, waited for before the next command is timed, so no timed command shares the
  machine with a builder);
- `warm, same question`: the same command line again: answered from its kept answer
  (answers.py) without importing click or DuckDB;
- `warm, other question`: the answer files removed first, the entry there: what a question
  not asked before costs once the entry is built (read from the entry's columns).

DuckDB direct is a plain `python -c` script (`import duckdb`, a view over `read_json` told
the record's columns, the command's own SQL as `mcp-layers sql` prints it; `verdicts` has
no single query, so its row is against DuckDB answering `summary`'s). jq answers
`analysis_bench.py`'s question once.

Ratios are DuckDB direct's time over ours, per round, then the median (≥ 1: ours is
faster). Targets (printed, not asserted): cold ≥ 0.95, a repeated question ≥ 10. Every
command's output must be the same bytes in all four ways (checked: the run stops
otherwise; `verdicts` included, evidence and all). Peak RSS is the most the process tree
held at once (the builder, detached, is not in it: it runs within DuckDB's memory limit).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from analysis_bench import (
    DUCKDB_SUMMARY_SQL,
    JQ_QUESTION,
    OUT,
    Contender,
    Timing,
    recording,
    run_once,
    script,
)
from mcp_layers_analysis import cache
from mcp_layers_analysis.queries import figure_queries
from mcp_layers_analysis.table import read_columns

COMMANDS = ("summary", "sessions", "verdicts")
# The question's SQL over a view of the JSONL told the record's columns, with the reader's
# two columns (`_src`, `_seq`: the input, and the line's place in it) that `sessions` reads.
DUCKDB_DIRECT = DUCKDB_SUMMARY_SQL.replace(
    "f\"format='newline_delimited', columns={sys.argv[2]})\")",
    "f\"format='newline_delimited', columns={sys.argv[2]})\")\n"
    "con.execute('CREATE VIEW records2 AS SELECT 0 AS _src, *, "
    "row_number() OVER () - 1 AS _seq FROM records')",
).replace("con.execute(sys.argv[3])", "con.execute(sys.argv[3].replace('records', 'records2'))")
assert DUCKDB_DIRECT.count("records2") == 2
TARGET_COLD = 0.95
TARGET_WARM = 10.0
HOWS = ("no-cache", "cold", "warm-same", "warm-other")

#: The longest a background build may take before the benchmark gives up on it.
BUILD_TIMEOUT = 1800


def digest(stdout: bytes) -> str:
    return hashlib.sha256(stdout).hexdigest()


def wait_for_build(where: os.PathLike[str] | str) -> float:
    """Seconds until no entry is being built (the cold command's builder)."""
    start = time.perf_counter()
    if not cache.wait_for_builds(BUILD_TIMEOUT, Path(where)):
        raise SystemExit(f"the entry was not built within {BUILD_TIMEOUT} s")
    return time.perf_counter() - start


def drop_answers(where: Path) -> None:
    for p in where.glob("*.answer"):
        p.unlink()


def bench(n: int, seed: int, repeat: int, jq: bool, commands: tuple[str, ...] = COMMANDS) -> None:
    path = recording(n, seed)
    cache_dir = OUT / "bench-cache"
    os.environ["MCP_LAYERS_CACHE_DIR"] = str(cache_dir)
    os.environ.pop("MCP_LAYERS_CACHE_MB", None)
    size_mb = path.stat().st_size / 1e6
    print(
        f"\n{path.name}: {n:,} records, {size_mb:,.0f} MB, {os.cpu_count()} cores; "
        f"{repeat} rounds; load average {os.getloadavg()[0]:.1f}",
        file=sys.stderr,
    )
    py = sys.executable
    columns = "{" + ", ".join(f"{c}: '{t}'" for c, t in read_columns().items()) + "}"
    sql = {name: qs[0][1] for name, qs in figure_queries().items()}
    direct = {
        "summary": Contender(
            "duckdb direct (summary's SQL)",
            [py, "-c", DUCKDB_SUMMARY_SQL, str(path), columns, sql["summary"]],
        ),
        "sessions": Contender(
            "duckdb direct (sessions' SQL)",
            [py, "-c", DUCKDB_DIRECT, str(path), columns, sql["sessions"]],
        ),
    }
    direct_of = {"summary": "summary", "sessions": "sessions", "verdicts": "summary"}

    def ours(command: str, how: str) -> Contender:
        argv = [script(), command, str(path), "--format", "json"]
        if how == "no-cache":
            argv.append("--no-cache")
        if command == "verdicts":  # exit 3 (a client FAILed a MUST) is an answer
            argv = ["sh", "-c", '"$@"; s=$?; [ $s -eq 3 ] && exit 0; exit $s', "sh", *argv]
        return Contender(f"mcp-layers {command} {how}", argv, parse=digest)

    runs: dict[str, Timing] = {}
    builds: dict[str, list[float]] = {command: [] for command in commands}
    order: list[Contender] = []
    for command in commands:
        if direct[direct_of[command]] not in order:
            order.append(direct[direct_of[command]])
        order += [ours(command, h) for h in HOWS]
    for c in order:
        runs[c.name] = Timing(c.name)
    for _ in range(repeat):
        for c in order:
            how = c.name.split()[-1]
            if how == "cold":
                wait_for_build(cache_dir)  # a build of the round before: never cut short
                shutil.rmtree(cache_dir, ignore_errors=True)
            elif how == "warm-other":
                drop_answers(cache_dir)
            run_once(c, runs[c.name])
            if how == "cold":
                builds[c.name.split()[1]].append(wait_for_build(cache_dir))
    jq_time = None
    if jq and shutil.which("jq"):
        with tempfile.NamedTemporaryFile("w", suffix=".jq", delete=False) as f:
            f.write(JQ_QUESTION)
        jq_t = Timing("jq")
        run_once(Contender("jq", ["jq", "-n", "-c", "-f", f.name, str(path)]), jq_t)
        os.unlink(f.name)
        jq_time = jq_t
    # The same bytes in every way and every round (checked once the table is out).
    differ = [
        command
        for command in commands
        if len({a for h in HOWS for a in runs[f"mcp-layers {command} {h}"].answers}) != 1
    ]
    entries = sorted(cache_dir.glob("*.duckdb"))
    entry_mb = sum(p.stat().st_size for p in entries) / 1e6
    print(
        f"\n{n:,} records, {size_mb:,.0f} MB JSONL, cache entry {entry_mb:,.0f} MB "
        f"({repeat} rounds; load average now {os.getloadavg()[0]:.1f})\n"
    )
    print(f"| {'tool':36} | median s | runs s | CPU s | peak RSS | vs DuckDB direct | target |")
    print(f"|{'-' * 38}|---------:|:-------|------:|---------:|-----------------:|-------:|")
    for c in order:
        t = runs[c.name]
        walls = t.walls
        ratio = target = ""
        if c.name.startswith("mcp-layers"):
            command, how = c.name.split()[1:3]
            d = runs[direct[direct_of[command]].name].walls
            r = statistics.median(x / y for x, y in zip(d, walls, strict=True))
            ratio = f"{r:.2f}x"
            if how == "cold":
                target = f"{'met' if r >= TARGET_COLD else 'MISSED'} (≥{TARGET_COLD})"
            elif how == "warm-same":
                target = f"{'met' if r >= TARGET_WARM else 'MISSED'} (≥{TARGET_WARM:g})"
        print(
            f"| {c.name:36} | {statistics.median(walls):8.2f} | "
            f"{' '.join(f'{w:.1f}' for w in walls):6} | {statistics.median(t.cpus):5.2f} | "
            f"{t.tree_rss_mb:5.0f} MB | {ratio:>16} | {target} |"
        )
    for command, times in builds.items():
        label = f"entry build after {command} cold"
        print(
            f"| {label:36} | {statistics.median(times):8.2f} | "
            f"{' '.join(f'{w:.1f}' for w in times):6} | (background, not the user's wait) |"
        )
    if jq_time is not None:
        print(
            f"| {'jq (the analysis_bench question)':36} | {jq_time.median:8.2f} | "
            f"{jq_time.walls[0]:.1f}    | {statistics.median(jq_time.cpus):5.2f} | "
            f"{jq_time.tree_rss_mb:5.0f} MB |                  |        |"
        )
    if differ:
        raise SystemExit(f"the answers differ cold / warm / uncached: {', '.join(differ)}")
    print(f"\nanswers: the same bytes in all four ways, every round ({', '.join(commands)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, nargs="+", default=[1_000_000], metavar="N")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-jq", action="store_true")
    parser.add_argument(
        "--commands", nargs="+", choices=COMMANDS, default=list(COMMANDS), help="a part of them"
    )
    args = parser.parse_args()
    for n in args.records:
        bench(n, args.seed, args.repeat, not args.skip_jq, tuple(args.commands))
    shutil.rmtree(OUT / "bench-cache", ignore_errors=True)


if __name__ == "__main__":
    main()
