"""The caches (issue 32): each command cold, warm and without the cache, against DuckDB
asked the same question directly over the JSONL, and jq, in one run.

    .venv/bin/python benchmarks/analysis_cache_bench.py                  # 1M records, 3 rounds
    .venv/bin/python benchmarks/analysis_cache_bench.py --records 4000000 --repeat 1
    .venv/bin/python benchmarks/analysis_cache_bench.py --commands query retries compare \
        hangs show report export --repeat 1 --skip-jq                    # the other commands

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

DuckDB direct is plain `duckdb` asked the same question over the JSONL, as a user would:
for `summary` and `sessions`, a `python -c` script (`import duckdb`, a view over
`read_json` told the record's columns, the command's own SQL as `mcp-layers sql` prints
it); for `query`, the query itself (`analysis_bench.py`'s question); for the commands of
many statements (`verdicts`, `retries`, `compare`, `hangs`, `show`), every
statement the command sent DuckDB, in order (traced once from the command itself,
untimed: `sql_trace.py`), over a table (or view) of the columns it read
(`duckdb_replay.py`); for `export`, one `COPY … PARTITION_BY (day)` of every record with
its `_src` and `_seq`; for `report`, every statement it sent its connection, its reading
of the inputs and the sample tables it builds included (`duckdb_replay.py --verbatim`:
DuckDB without our Python). jq answers `analysis_bench.py`'s question once.
`export`'s answer is its message, held while the Parquet files it wrote are still as it
left them (its repeat finds them so); `warm-other` drops the answer and reads the entry.
`report`'s page is compared without its time of writing (a repeat writes the kept page,
made the minute of the first); `export`'s Parquet by its row count and a hash of its rows.

Ratios are DuckDB direct's time over ours, per round, then the median (≥ 1: ours is
faster). Targets (printed, not asserted): cold ≥ 0.95, a repeated question ≥ 10. Every
command's output must be the same bytes in all four ways (checked: the run stops
otherwise; `verdicts` included, evidence and all). Peak RSS is the most the process tree
held at once; the builder, detached, is not in it: its own peak is on its row (sampled
from /proc every 50 ms).
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from analysis_bench import (
    DUCKDB_SUMMARY_SQL,
    JQ_QUESTION,
    OUT,
    QUERY_QUESTION,
    Contender,
    Timing,
    recording,
    run_once,
    script,
    tree_rss_kb,
)
from mcp_layers_analysis import cache
from mcp_layers_analysis.queries import figure_queries
from mcp_layers_analysis.table import read_columns

COMMANDS = ("summary", "sessions", "verdicts")
#: `query`'s question, its rows in an order of their own: grouping sets come out in any
#: order (DuckDB's threads), and the answers are compared byte for byte.
QUERY_SQL = QUERY_QUESTION.rstrip() + "\n  ORDER BY ALL\n"
OTHERS = ("query", "retries", "compare", "hangs", "show", "report", "export")
#: Exit statuses that are answers: `hangs` exits 1 when there is no stall, `verdicts` 3
#: when a client FAILs a MUST.
ANSWER_STATUSES = {"verdicts": 3, "hangs": 1}
# The question's SQL over a view of the JSONL told the record's columns, with the reader's
# two columns (`_src`, `_seq`: the input, and the line's place in it) that `sessions` reads.
DUCKDB_DIRECT = DUCKDB_SUMMARY_SQL.replace(
    "f\"format='newline_delimited', columns={sys.argv[2]})\")",
    "f\"format='newline_delimited', columns={sys.argv[2]})\")\n"
    "con.execute('CREATE VIEW records2 AS SELECT 0 AS _src, *, "
    "row_number() OVER () - 1 AS _seq FROM records')",
).replace("con.execute(sys.argv[3])", "con.execute(sys.argv[3].replace('records', 'records2'))")
assert DUCKDB_DIRECT.count("records2") == 2
#: The commands of many statements, against DuckDB asked the same statements
#: (`sql_trace.py`, `duckdb_replay.py`).
REPLAYED = ("verdicts", "retries", "compare", "hangs", "show")
#: `export --parquet` asked of DuckDB directly: every record with its input and line
#: number, partitioned by day, as a DuckDB user would write it.
DUCKDB_EXPORT = """
import duckdb, shutil, sys
path, columns, out = sys.argv[1].replace("'", "''"), sys.argv[2], sys.argv[3]
shutil.rmtree(out, ignore_errors=True)
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
con.execute(f"COPY (SELECT 0 AS _src, *, row_number() OVER () - 1 AS _seq, "
            f"coalesce(substr(ts, 1, 10), 'unknown') AS day FROM read_json('{path}', "
            f"format='newline_delimited', columns={columns})) TO '{out}' "
            f"(FORMAT parquet, PARTITION_BY (day))")
"""
HERE = Path(__file__).resolve().parent
TARGET_COLD = 0.95
TARGET_WARM = 10.0
HOWS = ("no-cache", "cold", "warm-same", "warm-other")

#: The longest a background build may take before the benchmark gives up on it.
BUILD_TIMEOUT = 1800


def digest(stdout: bytes) -> str:
    return hashlib.sha256(stdout).hexdigest()


def page_digest(page: Path, stdout: bytes) -> str:
    """`report`'s page, without the minute it was written at."""
    text = re.sub(rb"\d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC", b"", page.read_bytes())
    return digest(text)


def parquet_digest(where: Path, stdout: bytes) -> str:
    """`export --parquet`'s rows: their count and a hash of them (any order)."""
    import _duckdb

    glob = str(where / "**" / "*.parquet").replace("'", "''")
    row = (
        _duckdb.connect()
        .execute(
            f"SELECT count(*), sum(hash(_src, _seq, id, session, ts, outcome, durationMs)) "
            f"FROM read_parquet('{glob}')"
        )
        .fetchall()
    )
    return repr(row)


def busiest_session(path: Path) -> str:
    """The session with the most records (`show`'s question), asked without the caches."""
    import _duckdb

    columns = read_columns(("session",))
    struct = "{" + ", ".join(f"'{c}': '{t}'" for c, t in columns.items()) + "}"
    row = (
        _duckdb.connect()
        .execute(
            f"SELECT session FROM read_json(?, format='newline_delimited', columns={struct}) "
            f"WHERE session IS NOT NULL GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1",
            [str(path)],
        )
        .fetchone()
    )
    assert row is not None
    return str(row[0])


def builder_rss_kb(where: Path) -> int:
    """Resident memory of the builders of entries in `where` (found in /proc)."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"mcp_layers_analysis.cache_build" in argv and os.fsencode(where) in argv:
            total += tree_rss_kb(int(pid))
    return total


def wait_for_build(where: os.PathLike[str] | str) -> tuple[float, float]:
    """Seconds until no entry is being built (the cold command's builder), and the most
    the builders held meanwhile (MB, sampled)."""
    start = time.perf_counter()
    deadline = start + BUILD_TIMEOUT
    peak = 0
    while cache.building(Path(where)):
        peak = max(peak, builder_rss_kb(Path(where)))
        if time.perf_counter() >= deadline:
            raise SystemExit(f"the entry was not built within {BUILD_TIMEOUT} s")
        time.sleep(0.05)
    return time.perf_counter() - start, peak / 1024


def trace(command: str, path: Path, session: str, log: Path, *extra: str) -> None:
    """What `command` asks DuckDB of `path`, written to `log` (`sql_trace.py`)."""
    argv = [command, *([session] if command == "show" else []), str(path), *extra, "--no-cache"]
    subprocess.run(
        [sys.executable, str(HERE / "sql_trace.py"), str(log), *argv],
        stdout=subprocess.DEVNULL,
        check=True,
    )


def drop_answers(where: Path) -> None:
    for p in where.glob("*.answer"):
        p.unlink()


def bench(
    n: int,
    seed: int,
    repeat: int,
    jq: bool,
    commands: tuple[str, ...] = COMMANDS,
    given: Path | None = None,
) -> None:
    path = recording(n, seed) if given is None else given
    cache_dir = OUT / f"bench-cache-{n}"  # its own: runs of other sizes may be under way
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
    session = busiest_session(path) if "show" in commands else "SESSION-ID"
    direct = {
        "summary": Contender(
            "duckdb direct (summary's SQL)",
            [py, "-c", DUCKDB_SUMMARY_SQL, str(path), columns, sql["summary"]],
        ),
        "sessions": Contender(
            "duckdb direct (sessions' SQL)",
            [py, "-c", DUCKDB_DIRECT, str(path), columns, sql["sessions"]],
        ),
        "query": Contender(
            "duckdb direct (query's SQL)",
            [py, "-c", DUCKDB_DIRECT, str(path), columns, QUERY_SQL],
        ),
        "show": Contender(
            "duckdb direct (show's SQL)",
            [
                py,
                "-c",
                DUCKDB_DIRECT,
                str(path),
                columns,
                sql["show"].replace("SESSION-ID", session),
            ],
        ),
    }
    spool = Path(tempfile.mkdtemp(prefix="cache-bench-"))
    # The commands of many statements: DuckDB asked each of them, in order, over a table
    # of the columns the command read (traced once from the command itself, untimed).
    for command in REPLAYED:
        if command in commands:
            log = spool / f"{command}.sql.jsonl"
            trace(command, path, session, log)
            direct[command] = Contender(
                f"duckdb direct (statements of {command})",
                [py, str(HERE / "duckdb_replay.py"), str(path), str(log)],
            )
    if "report" in commands:  # its statements, its own reading and tables included
        log = spool / "report.sql.jsonl"
        trace("report", path, session, log, "-o", str(spool / "traced.html"))
        direct["report"] = Contender(
            "duckdb direct (report's statements)",
            [py, str(HERE / "duckdb_replay.py"), "--verbatim", str(log)],
        )
    direct["export"] = Contender(
        "duckdb direct (COPY … PARTITION_BY)",
        [py, "-c", DUCKDB_EXPORT, str(path), columns, str(spool / "direct-parquet")],
    )
    direct_of = {c: c if c in direct else "summary" for c in (*COMMANDS, *OTHERS)}

    def ours(command: str, how: str) -> Contender:
        argv = [script(), command]
        parse = digest
        if command == "query":
            argv += [QUERY_SQL, str(path), "--format", "json"]
        elif command == "show":
            argv += [session, str(path), "--format", "json"]
        elif command == "report":
            page = spool / "report.html"
            argv += [str(path), "-o", str(page)]
            parse = functools.partial(page_digest, page)
        elif command == "export":
            pq = spool / "parquet"
            argv += [str(path), "--parquet", str(pq)]
            if how == "no-cache":
                # Emptied first, in each round's first run (inside the timed run: a few
                # files). The others write the same files again, or find them as they
                # were left (the repeat's answer): the same directory, as a user's.
                argv = ["sh", "-c", 'rm -rf "$0" && exec "$@"', str(pq), *argv]
            parse = functools.partial(parquet_digest, pq)
        else:
            argv += [str(path), "--format", "json"]
        if how == "no-cache":
            argv.append("--no-cache")
        if command in ANSWER_STATUSES:  # an exit status that is an answer
            ok = ANSWER_STATUSES[command]
            argv = ["sh", "-c", f'"$@"; s=$?; [ $s -eq {ok} ] && exit 0; exit $s', "sh", *argv]
        return Contender(f"mcp-layers {command} {how}", argv, parse=parse)

    runs: dict[str, Timing] = {}
    builds: dict[str, list[tuple[float, float]]] = {command: [] for command in commands}
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
    w = max(36, *(len(c.name) for c in order))  # the name column's width
    print(f"| {'tool':{w}} | median s | runs s | CPU s | peak RSS | vs DuckDB direct | target |")
    print(f"|{'-' * (w + 2)}|---------:|:-------|------:|---------:|-----------------:|-------:|")
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
            f"| {c.name:{w}} | {statistics.median(walls):8.2f} | "
            f"{' '.join(f'{w:.1f}' for w in walls):6} | {statistics.median(t.cpus):5.2f} | "
            f"{t.tree_rss_mb:5.0f} MB | {ratio:>16} | {target} |"
        )
    for command, built in builds.items():
        label = f"entry build after {command} cold"
        times = [t for t, _ in built]
        peak = max(m for _, m in built)
        print(
            f"| {label:{w}} | {statistics.median(times):8.2f} | "
            f"{' '.join(f'{w:.1f}' for w in times):6} |       | {peak:5.0f} MB | "
            f"(background, niced) |  |"
        )
    if jq_time is not None:
        print(
            f"| {'jq (the analysis_bench question)':{w}} | {jq_time.median:8.2f} | "
            f"{jq_time.walls[0]:.1f}    | {statistics.median(jq_time.cpus):5.2f} | "
            f"{jq_time.tree_rss_mb:5.0f} MB |                  |        |"
        )
    shutil.rmtree(spool, ignore_errors=True)
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
        "--recording",
        type=Path,
        help="this JSONL instead of a generated one (e.g. four copies of the 1M one: "
        "generating 4M records takes about an hour on a loaded 2-core machine)",
    )
    parser.add_argument(
        "--commands",
        nargs="+",
        choices=(*COMMANDS, *OTHERS),
        default=list(COMMANDS),
        help="which commands (default: summary sessions verdicts)",
    )
    args = parser.parse_args()
    # Every command starts as an installed package does: from its cached bytecode. Where
    # PYTHONDONTWRITEBYTECODE is set, each run compiled the package's 32 modules again
    # (0.12 s a command), which no user's run does.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run(
        [sys.executable, "-m", "compileall", "-q", str(Path(cache.__file__).parent)], check=True
    )
    if args.recording is not None:  # a recording at hand: its records are counted
        with args.recording.open("rb") as f:
            args.records = [sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 24), b""))]
    for n in args.records:
        bench(n, args.seed, args.repeat, not args.skip_jq, tuple(args.commands), args.recording)
        shutil.rmtree(OUT / f"bench-cache-{n}", ignore_errors=True)


if __name__ == "__main__":
    main()
