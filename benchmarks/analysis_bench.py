"""Time `mcp-layers summary` against DuckDB and jq asking the same question, in one run.

    .venv/bin/python benchmarks/analysis_bench.py                    # 1M records, 3 rounds
    .venv/bin/python benchmarks/analysis_bench.py --records 1000000 4000000 --spark

The recording is synthetic (`support/synthetic.py`: five clients, every outcome and
layer, retries, sessions, 2 % injected faults), seeded, and cached under
`benchmarks/out/` (git-ignored). The question: calls per client × origin × outcome, and
latency p50/p95/p99 per client × origin (origin: organic, or injected by a fault rule).

Each command of ours is paired with DuckDB asked the same question directly (a plain
`python -c` script: `import duckdb`, a `read_json` with the columns given, the query), so
the ratio is what the CLI itself costs (the target: ≥ 0.95×):

- `mcp-layers summary FILE --format json` (the installed console script), which answers
  the question and much more (layers, methods, tools, error codes, statuses, percentiles
  of each), against DuckDB running `summary`'s own SQL (`mcp-layers sql summary`) over a
  view told the record's columns;
- `mcp-layers query "<the question>" FILE --format json` against DuckDB asked it over
  `read_json` told the five columns it reads (GROUP BY GROUPING SETS, `quantile_disc`,
  nearest rank), and the same with the columns detected (`read_json(path)`);
- each DuckDB script once more on DuckDB's engine alone (`import _duckdb`, as the CLI
  imports it, skipping the `duckdb` package's Python layer and its 80 ms of imports): the
  gap to these is the CLI's own work (click, the record definition, the check that every
  line is a record);
- jq: the four fields of every request collected, then `group_by` for counts and sorted
  durations for percentiles (one run), against `summary`;
- with `--spark`, `summary --engine spark` (local mode, one run, at the first size).

Contenders are separate processes timed from start to exit. The machine may be shared, so
they take turns: `--repeat` rounds, each running every contender once; the table gives
medians, and "ours faster by" is the median over the rounds of the other's time over ours
in the same round (≥ 1: ours is faster), so a slow minute slows both sides alike.

The answers are checked: counts must be equal, DuckDB and jq percentiles equal (both
exact), ours within the documented 0.5 % (and the microsecond rounding). Peak RSS is the
most the whole process tree (main process and workers) held at once, sampled every 20 ms,
the largest over the rounds. No assertion on time: it prints the numbers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mcp_layers_analysis.histogram import RELATIVE_ERROR
from mcp_layers_analysis.queries import figure_queries
from mcp_layers_analysis.table import read_columns
from mcp_layers_support import synthetic
from mcp_layers_support.synthetic import generate, write

OUT = Path(__file__).resolve().parent / "out"
PCTS = (0.5, 0.95, 0.99)

DUCKDB_QUESTION = """
import duckdb, json, sys
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
src = ("read_json(?, format='newline_delimited', columns={kind: 'VARCHAR', "
       "client: 'VARCHAR', outcome: 'VARCHAR', durationMs: 'DOUBLE', injected: 'JSON'})")
rows = con.execute(f'''
  with r as (
    select coalesce(client, '(none)') as client,
           case when injected is null then 'organic' else 'injected' end as origin,
           coalesce(outcome, '(none)') as outcome, durationMs
    from {src} where kind = 'request')
  select client, origin, outcome, count(*) as calls,
         quantile_disc(durationMs, [0.5, 0.95, 0.99]) as p
  from r group by grouping sets ((client, origin), (client, origin, outcome))
''', [sys.argv[1]]).fetchall()
print(json.dumps(rows))
"""

# The same, the way `read_json` is usually called: columns detected from the data.
DUCKDB_DETECTED = DUCKDB_QUESTION.replace(
    """("read_json(?, format='newline_delimited', columns={kind: 'VARCHAR', "
       "client: 'VARCHAR', outcome: 'VARCHAR', durationMs: 'DOUBLE', injected: 'JSON'})")""",
    '"read_json(?)"',
)

# `summary`'s own query, as `mcp-layers sql summary` prints it, over a view told the
# record's columns: the same question, asked of DuckDB without the CLI.
DUCKDB_SUMMARY_SQL = """
import duckdb, sys
con = duckdb.connect()
con.execute("SET enable_progress_bar = false")
path = sys.argv[1].replace("'", "''")
con.execute(f"CREATE VIEW records AS SELECT * FROM read_json('{path}', "
            f"format='newline_delimited', columns={sys.argv[2]})")
print(len(con.execute(sys.argv[3]).fetchall()))
"""

# The same scripts on DuckDB's engine alone (`_duckdb`, as the CLI imports it), without the
# `duckdb` package's Python layer: what is left between them and ours is the CLI's own work.
BARE_SUMMARY_SQL = DUCKDB_SUMMARY_SQL.replace("import duckdb, sys", "import _duckdb as duckdb, sys")
BARE_QUESTION = DUCKDB_QUESTION.replace("import duckdb, json", "import _duckdb as duckdb, json")
assert BARE_SUMMARY_SQL != DUCKDB_SUMMARY_SQL and BARE_QUESTION != DUCKDB_QUESTION

# The question over our `records` table, for `mcp-layers query`.
QUERY_QUESTION = """
  with r as (
    select coalesce(client, '(none)') as client,
           case when injected is null then 'organic' else 'injected' end as origin,
           coalesce(outcome, '(none)') as outcome, durationMs
    from records where kind = 'request')
  select client, origin, outcome, count(*) as calls,
         quantile_disc(durationMs, [0.5, 0.95, 0.99]) as p
  from r group by grouping sets ((client, origin), (client, origin, outcome))
"""


# One pass to collect the four fields, then group_by (a sort) per grouping. (Appending to
# arrays inside `reduce` is quadratic in jq 1.6: 170 s for 200,000 records.)
JQ_QUESTION = r"""
[inputs | select(.kind == "request")
 | [(.client // "(none)"), (if .injected then "injected" else "organic" end),
    (.outcome // "(none)"), .durationMs]]
| {counts: (group_by(.[0:3]) | map({key: .[0][0:3], n: length})),
   pct: (group_by(.[0:2]) | map({key: .[0][0:2],
     p: (map(.[3] | select(. != null)) | sort as $s | ($s | length) as $n
         | [0.5, 0.95, 0.99] | map($s[((. * $n) | ceil) - 1]))}))}
"""


@dataclass
class Timing:
    name: str
    walls: list[float] = field(default_factory=list)
    cpus: list[float] = field(default_factory=list)  # user + sys of the whole tree
    tree_rss_mb: float = 0.0  # most the process tree held at once, over the runs
    answer: Any = None  # the first run's
    answers: list[Any] = field(default_factory=list)  # every run's

    @property
    def median(self) -> float:
        return statistics.median(self.walls)


def tree_rss_kb(pid: int) -> int:
    """Resident memory of a process and all its descendants, from /proc."""
    total = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return total


@dataclass
class Contender:
    name: str
    argv: list[str]
    parse: Callable[[bytes], Any] | None = None
    once: bool = False  # slow: one run, not every round
    vs: str = ""  # the contender of ours this one asks the same question as


def run_once(c: Contender, t: Timing) -> None:
    """One run of `c`, added to `t`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(c.argv, stdout=out, stderr=subprocess.PIPE)
        peak = [0]
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                peak[0] = max(peak[0], tree_rss_kb(proc.pid))
                done.wait(0.02)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        _, err = proc.communicate()
        t.walls.append(time.perf_counter() - start)
        done.set()
        sampler.join()
        if proc.returncode != 0:
            raise SystemExit(f"{c.name} failed ({proc.returncode}):\n{err.decode()}")
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        t.cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        t.tree_rss_mb = max(t.tree_rss_mb, peak[0] / 1024)
        out.seek(0)
        if c.parse is not None:
            t.answers.append(c.parse(out.read()))
            if t.answer is None:
                t.answer = t.answers[0]


# --------------------------------------------------------------------- the answers


Answer = tuple[dict[tuple[str, str, str], int], dict[tuple[str, str], list[float]]]


def ours_answer(stdout: bytes) -> Answer:
    counts: dict[tuple[str, str, str], int] = {}
    pct: dict[tuple[str, str], list[float]] = {}
    probed = set()
    for row in json.loads(stdout):
        # The question knows organic and injected; summary tells negotiation probes apart
        # (origin "probe"): their counts are organic ones to the question, and the organic
        # percentiles of a client with probes are not the question's, so not compared.
        origin = "organic" if row["origin"] == "probe" else row["origin"]
        if row["origin"] == "probe":
            probed.add(row["client"])
        if row["breakdown"] == "outcome":
            key = (row["client"], origin, row["key"])
            counts[key] = counts.get(key, 0) + row["calls"]
        elif row["breakdown"] == "all" and row["origin"] != "probe":
            pct[(row["client"], origin)] = [row["p50_ms"], row["p95_ms"], row["p99_ms"]]
    for client in probed:
        pct.pop((client, "organic"), None)
    return counts, pct


def duckdb_answer(stdout: bytes) -> Answer:
    counts: dict[tuple[str, str, str], int] = {}
    pct: dict[tuple[str, str], list[float]] = {}
    for client, origin, outcome, calls, p in json.loads(stdout):
        if outcome is None:
            pct[(client, origin)] = p
        else:
            counts[(client, origin, outcome)] = calls
    return counts, pct


def query_answer(stdout: bytes) -> Answer:
    keys = ("client", "origin", "outcome", "calls", "p")
    rows = [[r[k] for k in keys] for r in json.loads(stdout)]
    return duckdb_answer(json.dumps(rows).encode())


def jq_answer(stdout: bytes) -> Answer:
    data = json.loads(stdout)
    counts = {tuple(x["key"]): x["n"] for x in data["counts"]}
    pct = {tuple(x["key"]): x["p"] for x in data["pct"]}
    return counts, pct  # type: ignore[return-value]


def check(mine: Answer, exact: Answer, name: str) -> float:
    """Counts equal and percentiles within the bound; returns the largest relative gap."""
    if mine[0] != exact[0]:
        diff = set(mine[0].items()) ^ set(exact[0].items())
        raise SystemExit(f"counts differ from {name}: {sorted(diff)[:6]}")
    if not mine[1].keys() <= exact[1].keys() or not mine[1]:
        raise SystemExit(f"groups differ from {name}")
    worst = 0.0
    for key, values in exact[1].items():
        if key not in mine[1]:
            continue  # a client with negotiation probes (see `ours`)
        for got, want in zip(mine[1][key], values, strict=True):
            gap = abs(got - want)
            if gap > want * RELATIVE_ERROR + 0.0005 + 1e-9:
                raise SystemExit(f"{key}: percentile {got} vs {name}'s {want}: outside the bound")
            if want:
                worst = max(worst, gap / want)
    return worst


# --------------------------------------------------------------------- running


def recording(n: int, seed: int) -> Path:
    """The cached recording, made again when the generator changes (its hash is in the name)."""
    OUT.mkdir(exist_ok=True)
    source = Path(synthetic.__file__).read_bytes()
    path = OUT / f"bench-{n}-seed{seed}-{hashlib.sha256(source).hexdigest()[:8]}.jsonl"
    if not path.exists():
        print(f"generating {path.name} …", file=sys.stderr)
        tmp = path.with_suffix(".tmp")
        write(tmp, generate(n, seed=seed, scenario="bench", inject_rate=0.02))
        tmp.rename(path)
    return path


def script() -> str:
    found = shutil.which("mcp-layers", path=os.path.dirname(sys.executable))
    if not found:
        raise SystemExit("mcp-layers is not installed next to this Python (pip install -e .)")
    return found


def compare(
    n: int, seed: int, repeat: int, skip_jq: bool, spark: bool = False
) -> dict[str, Timing]:
    path = recording(n, seed)
    size_mb = path.stat().st_size / 1e6
    print(
        f"\n{path.name}: {n:,} records, {size_mb:,.0f} MB, {os.cpu_count()} cores; "
        f"{repeat} rounds; load average {os.getloadavg()[0]:.1f}",
        file=sys.stderr,
    )
    py = sys.executable
    summ = "mcp-layers summary"
    query = "mcp-layers query (the question)"
    columns = "{" + ", ".join(f"{n}: '{t}'" for n, t in read_columns().items()) + "}"
    ((_, summary_sql),) = figure_queries()["summary"]
    contenders = [
        Contender(summ, [script(), "summary", str(path), "--format", "json"], ours_answer),
        Contender(
            "duckdb (summary's own SQL)",
            [py, "-c", DUCKDB_SUMMARY_SQL, str(path), columns, summary_sql],
            vs=summ,
        ),
        Contender(
            "duckdb engine alone (summary's own SQL)",
            [py, "-c", BARE_SUMMARY_SQL, str(path), columns, summary_sql],
            vs=summ,
        ),
        Contender(
            query,
            [script(), "query", QUERY_QUESTION, str(path), "--format", "json"],
            query_answer,
        ),
        Contender(
            "duckdb (the question)",
            [py, "-c", DUCKDB_QUESTION, str(path)],
            duckdb_answer,
            vs=query,
        ),
        Contender(
            "duckdb engine alone (the question)",
            [py, "-c", BARE_QUESTION, str(path)],
            duckdb_answer,
            vs=query,
        ),
        Contender(
            "duckdb (the question, columns detected)",
            [py, "-c", DUCKDB_DETECTED, str(path)],
            duckdb_answer,
            vs=query,
        ),
    ]
    prog = None
    if not skip_jq and shutil.which("jq"):
        with tempfile.NamedTemporaryFile("w", suffix=".jq", delete=False) as f:
            f.write(JQ_QUESTION)
        prog = f.name
        contenders.append(
            Contender(
                "jq", ["jq", "-n", "-c", "-f", prog, str(path)], jq_answer, once=True, vs=summ
            )
        )
    if spark:
        contenders.append(
            Contender(
                "mcp-layers summary --engine spark",
                [script(), "summary", str(path), "--format", "json", "--engine", "spark"],
                ours_answer,
                once=True,
                vs=summ,
            )
        )
    runs = {c.name: Timing(c.name) for c in contenders}
    for r in range(repeat):
        for c in contenders:
            if c.once and r != repeat // 2:  # the slow ones once, mid-way
                continue
            run_once(c, runs[c.name])
    if prog is not None:
        os.unlink(prog)
    exact = runs["duckdb (the question)"].answer
    mine = runs[summ]
    gaps = [check(mine.answer, exact, "duckdb")]
    check(runs[query].answer, exact, "mcp-layers query")  # DuckDB both: exact, equal
    check(runs["duckdb (the question, columns detected)"].answer, exact, "duckdb (detected)")
    check(runs["duckdb engine alone (the question)"].answer, exact, "duckdb engine alone")
    if "mcp-layers summary --engine spark" in runs:
        gaps.append(check(runs["mcp-layers summary --engine spark"].answer, exact, "spark"))
    if "jq" in runs:
        check(runs["jq"].answer, exact, "jq")  # both exact: equal but for float rounding
        gaps.append(check(mine.answer, runs["jq"].answer, "jq"))
    print(
        f"answers agree: counts equal; percentiles within {max(gaps):.3%} of the exact "
        f"ones (bound {RELATIVE_ERROR:.3%})",
        file=sys.stderr,
    )
    print(
        f"\n{n:,} records, {size_mb:,.0f} MB ({repeat} rounds; load average now "
        f"{os.getloadavg()[0]:.1f})\n"
    )
    print(f"| {'tool':40} | median s | runs s | CPU s | peak RSS (tree) | ours faster by |")
    print(f"|{'-' * 42}|---------:|:-------|------:|----------------:|---------------:|")
    # "ours faster by": its time over that of the command of ours asking the same question
    # (the row above it; jq and Spark against `summary`).
    for c in contenders:
        t = runs[c.name]
        ours = runs.get(c.vs)
        if ours is None:
            ratio = "—"
        elif len(t.walls) == len(ours.walls):  # paired: the median of per-round ratios
            ratio = (
                f"{statistics.median(o / m for o, m in zip(t.walls, ours.walls, strict=True)):.2f}x"
            )
        else:  # one run: against our median
            ratio = f"{t.median / ours.median:.2f}x"
        walls = " ".join(f"{w:.1f}" for w in t.walls)
        print(
            f"| {t.name:40} | {t.median:8.2f} | {walls:6} | {statistics.median(t.cpus):5.2f} | "
            f"{t.tree_rss_mb:11.0f} MB | {ratio:>14} |"
        )
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--records", type=int, nargs="+", default=[1_000_000], metavar="N", help="sizes"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-jq", action="store_true")
    parser.add_argument(
        "--spark", action="store_true", help="also --engine spark (local[*]), at the first size"
    )
    args = parser.parse_args()
    for i, n in enumerate(args.records):
        compare(n, args.seed, args.repeat, args.skip_jq, args.spark and i == 0)


if __name__ == "__main__":
    main()
