"""The `mcp-layers` command: exit statuses, messages, formats, inputs.

Data is asserted on stdout and diagnostics on stderr, separately and exactly.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from analysis_helpers import BASELINE, FIXTURES, SYNTHETIC, invoke
from mcp_layers_analysis.exitcodes import ExitStatus


def session_of(path: Path) -> str:
    return json.loads(path.read_bytes().splitlines()[0])["session"]


COMMANDS: list[list[str]] = [
    ["summary"],
    ["retries"],
    ["compare"],
    ["sessions"],
    ["show", session_of(SYNTHETIC)],
]


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
@pytest.mark.parametrize("fmt", ["csv", "jsonl", "markdown", "table"])
def test_every_format_says_what_json_says(command: list[str], fmt: str) -> None:
    as_json = invoke(*command, SYNTHETIC, "--format", "json")
    assert as_json.exit_code == 0 and as_json.stderr == ""
    rows = json.loads(as_json.stdout)
    assert rows and all(list(r) == list(rows[0]) for r in rows)
    headers = list(rows[0])
    result = invoke(*command, SYNTHETIC, "--format", fmt)
    assert result.exit_code == 0 and result.stderr == ""
    text = result.stdout
    if fmt == "jsonl":
        assert [json.loads(line) for line in text.splitlines()] == rows
    elif fmt == "csv":
        parsed = list(csv.DictReader(io.StringIO(text)))
        assert len(parsed) == len(rows)
        for got, want in zip(parsed, rows, strict=True):
            assert list(got) == headers
            for k, v in want.items():
                assert got[k] == _csv_text(v), (k, got[k], v)
    elif fmt == "markdown":
        lines = text.splitlines()
        assert [c.strip() for c in lines[0].strip("|").split("|")] == headers
        assert len(lines) == len(rows) + 2
    else:
        lines = text.splitlines()
        assert lines[0].split() == headers
        assert len(lines) == len(rows) + 2


def _csv_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def test_inputs_merge_from_files_directories_globs_and_stdin(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    shutil.copy(SYNTHETIC, tmp_path / "d" / "a.jsonl")
    shutil.copy(BASELINE, tmp_path / "d" / "b.jsonl.gz")
    both = invoke("summary", SYNTHETIC, BASELINE, "-f", "json").stdout
    assert invoke("summary", tmp_path / "d", "-f", "json").stdout == both
    assert invoke("summary", str(tmp_path / "d" / "*.jsonl*"), "-f", "json").stdout == both
    piped = invoke("summary", SYNTHETIC, "-", "-f", "json", input=BASELINE.read_bytes())
    assert piped.stdout == both
    plain = invoke("summary", "-", "-f", "json", input=gzip.decompress(BASELINE.read_bytes()))
    assert plain.stdout == invoke("summary", BASELINE, "-f", "json").stdout


BAD_INPUTS = [
    (
        "truncated.jsonl",
        ExitStatus.OK,
        "{p}:21: truncated line (proxy killed mid-write?), skipped\n"
        "mcp-layers: 1 bad line skipped (20 records read)\n",
    ),
    ("empty.jsonl", ExitStatus.NOTHING_MATCHED, "mcp-layers: no records in the input\n"),
    (
        "wrong_schema.jsonl",
        ExitStatus.OK,
        "{p}:2: not a JSON object (an array), skipped\n"
        '{p}:3: not a record (no "v" field), skipped\n'
        '{p}:4: not a record of a known schema version ("v": "1"), skipped\n'
        '{p}:5: not a record of a known schema version ("v": 0), skipped\n'
        "{p}:6: not a valid v1 record: durationMs should be a number or null, not a string, "
        "skipped\n"
        "{p}:7: not JSON (invalid literal, expected 'true' at column 1), skipped\n"
        "mcp-layers: 6 bad lines skipped (2 records read)\n",
    ),
    (
        "newer_version.jsonl",
        ExitStatus.USAGE_ERROR,
        "{p}:3: record version 2 is newer than this mcp-layers reads (1); upgrade mcp-layers\n",
    ),
    (
        "cut.jsonl.gz",
        ExitStatus.OK,
        "{p}:{n}: truncated line (proxy killed mid-write?), skipped\n"
        "{p}: compressed stream ends early (a copy cut short?); read what was there\n"
        "mcp-layers: 1 bad line skipped ({r} records read)\n",
    ),
]


@pytest.mark.parametrize(("name", "status", "stderr"), BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
def test_bad_inputs(name: str, status: ExitStatus, stderr: str) -> None:
    path = FIXTURES / name
    result = invoke("summary", path, "--lenient")
    assert result.exit_code == status
    n = r = 0
    if name.endswith(".gz"):  # the lines before the cut, and the torn one after them
        got = b""
        with gzip.open(path) as f, contextlib.suppress(EOFError):
            while chunk := f.read1(1024):
                got += chunk
        r = got.count(b"\n")
        n = r + 1
    assert result.stderr == stderr.format(p=path, n=n, r=r)
    if status == ExitStatus.OK:
        assert result.stdout.startswith("client")


def test_strict_makes_bad_lines_an_error() -> None:
    result = invoke("summary", FIXTURES / "truncated.jsonl", "--strict")
    assert result.exit_code == ExitStatus.USAGE_ERROR
    assert result.stderr.endswith("Error: bad lines in the input (--strict)\n")


@pytest.mark.parametrize(
    ("args", "stderr"),
    [
        (["summary", "nope.jsonl"], "Error: nope.jsonl: no such file or directory\n"),
        (["summary", "nope*.jsonl"], "Error: no file matches nope*.jsonl\n"),
    ],
)
def test_missing_inputs(
    args: list[str], stderr: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke(*args)
    assert (result.exit_code, result.stdout, result.stderr) == (ExitStatus.USAGE_ERROR, "", stderr)


@pytest.mark.parametrize(
    "args",
    [
        ["summary", str(SYNTHETIC), "--format", "yaml"],
        ["summary", str(SYNTHETIC), "--since", "yesterday"],
        ["summary", str(SYNTHETIC), "--by", "tool"],
        ["summary"],
        ["show", str(SYNTHETIC)],
        ["frobnicate"],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    result = invoke(*args)
    assert result.exit_code == ExitStatus.USAGE_ERROR
    assert result.stdout == ""
    assert "Usage: mcp-layers" in result.stderr


def test_since_message_gives_an_example() -> None:
    result = invoke("summary", SYNTHETIC, "--since", "yesterday")
    assert result.stderr.endswith(
        "Error: Invalid value for '--since': 'yesterday' is not an ISO-8601 date or time; "
        "try 2026-11-30 or 2026-11-30T15:02:51Z\n"
    )


@pytest.mark.parametrize("command", ["summary", "retries", "compare", "sessions"])
def test_nothing_matched_exits_1(command: str) -> None:
    result = invoke(command, SYNTHETIC, "--client", "nobody", "--format", "json")
    assert result.exit_code == ExitStatus.NOTHING_MATCHED
    assert result.stdout == "[]\n"
    what = "session" if command == "sessions" else "request"
    assert result.stderr == f"mcp-layers: no {what} matched the filters\n"


def test_no_progress_bar_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    data = SYNTHETIC.read_bytes()
    big.write_bytes(data * (10_000_000 // len(data) + 1))
    result = invoke("summary", big, "--jobs", "1")
    assert result.exit_code == 0 and result.stderr == ""


def test_every_command_has_help() -> None:
    from mcp_layers_analysis.cli import cli

    for name, command in cli.commands.items():  # type: ignore[attr-defined]
        result = invoke(name, "--help")
        assert result.exit_code == 0
        assert "Example:" in result.stdout and command.help


# --------------------------------------------------------------------- the real script


def script() -> str:
    path = shutil.which("mcp-layers", path=os.path.dirname(sys.executable))
    assert path, "mcp-layers is installed next to this Python (pip install -e .)"
    return path


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_installed_console_script(command: list[str]) -> None:
    done = subprocess.run(
        [script(), *command, str(SYNTHETIC), "--format", "json"],
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == json.loads(
        invoke(*command, SYNTHETIC, "--format", "json").stdout
    )


def test_console_script_exit_statuses_and_stdin() -> None:
    newer = subprocess.run(
        [script(), "summary", str(FIXTURES / "newer_version.jsonl")],
        capture_output=True,
        check=False,
        timeout=60,
    )
    assert newer.returncode == ExitStatus.USAGE_ERROR
    assert newer.stderr.decode().endswith("upgrade mcp-layers\n")
    empty = subprocess.run(
        [script(), "summary", "-"], input=b"", capture_output=True, check=False, timeout=60
    )
    assert (empty.returncode, empty.stdout) == (ExitStatus.NOTHING_MATCHED, b"")


def test_console_script_stops_quietly_when_the_reader_goes_away() -> None:
    proc = subprocess.Popen(
        [script(), "summary", str(SYNTHETIC), "--format", "jsonl"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None
    proc.stdout.readline()
    proc.stdout.close()
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert err == b""


def test_console_script_uses_worker_processes_on_big_inputs(tmp_path: Path) -> None:
    big = tmp_path / "big.jsonl"
    data = SYNTHETIC.read_bytes()
    copies = 20_000_000 // len(data) + 1
    big.write_bytes(data * copies)
    args = [script(), "summary", "--format", "json"]
    parallel = subprocess.run(
        [*args, str(big), "--jobs", "2"], capture_output=True, check=True, timeout=120
    )
    single = subprocess.run(
        [*args, str(big), "--jobs", "1"], capture_output=True, check=True, timeout=120
    )
    assert parallel.stdout == single.stdout
    rows = json.loads(parallel.stdout)
    one = json.loads(invoke("summary", SYNTHETIC, "--format", "json").stdout)
    assert [r["calls"] for r in rows] == [r["calls"] * copies for r in one]


# --------------------------------------------------------------------- sql, query, export


@pytest.mark.parametrize("dialect", ["duckdb", "spark", "clickhouse", "bigquery", "trino"])
def test_sql_prints_every_figure_in_each_dialect(dialect: str) -> None:
    result = invoke("sql", "--dialect", dialect)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("-- the records table\nCREATE TABLE records (")
    for figure in ("summary", "retries:", "sessions", "show"):
        assert f"\n-- {figure}" in result.stdout
    assert "retryOf" in result.stdout and "_seq" in result.stdout


def test_the_printed_queries_run_on_duckdb(tmp_path: Path) -> None:
    import duckdb

    text = invoke("sql", "retries").stdout
    con = duckdb.connect()
    statements = [s for s in text.split(";\n") if s.strip()]
    con.execute(statements[0])  # the DDL
    for s in statements[1:]:
        con.execute(s).fetchall()


def test_query_runs_users_sql_in_every_format() -> None:
    sql = "SELECT client, count(*) AS n FROM records WHERE kind = 'request' GROUP BY 1 ORDER BY 1"
    got = json.loads(invoke("query", sql, SYNTHETIC, "--format", "json").stdout)
    records = [json.loads(line) for line in SYNTHETIC.read_text().splitlines()]
    want: dict[str, int] = {}
    for r in records:
        if r["kind"] == "request":
            want[r["client"]] = want.get(r["client"], 0) + 1
    assert got == [{"client": c, "n": n} for c, n in sorted(want.items())]
    assert invoke("query", sql, SYNTHETIC, "--format", "csv").stdout.startswith("client,n\n")
    bad = invoke("query", "SELECT nope FROM records", SYNTHETIC)
    assert bad.exit_code == ExitStatus.USAGE_ERROR


def test_query_gives_lists_and_structs_as_json() -> None:
    sql = (
        "SELECT httpStatuses, sse, [1.5, 2.0] AS p, DATE '2026-01-02' AS d, _seq FROM records "
        "WHERE sse IS NOT NULL ORDER BY _seq LIMIT 1"
    )
    records = [json.loads(line) for line in SYNTHETIC.read_text().splitlines()]
    seq, first = next((i, r) for i, r in enumerate(records) if r.get("sse") is not None)
    (got,) = json.loads(invoke("query", sql, SYNTHETIC, "--format", "json").stdout)
    assert got == {
        "httpStatuses": first["httpStatuses"],
        "sse": {k: first["sse"].get(k) for k in ("events", "final", "end", "resumed")},
        "p": [1.5, 2.0],
        "d": "2026-01-02",
        "_seq": seq,
    }
    csv_text = invoke("query", sql, SYNTHETIC, "--format", "csv").stdout
    assert '"[1.5,2.0]"' in csv_text and "Decimal" not in csv_text


def test_export_parquet_reads_back_every_record(tmp_path: Path) -> None:
    import duckdb

    out = tmp_path / "pq"
    result = invoke("export", "--parquet", out, SYNTHETIC, BASELINE)
    assert result.exit_code == 0, result.stderr
    days = sorted(p.name for p in out.iterdir())
    assert days and all(d.startswith("day=") for d in days)
    lines = len(SYNTHETIC.read_bytes().splitlines())
    lines += len(gzip.decompress(BASELINE.read_bytes()).splitlines())
    got = duckdb.sql(
        f"SELECT count(*), count(DISTINCT _src), typeof(any_value(httpStatuses)) "
        f"FROM read_parquet('{out}/**/*.parquet', hive_partitioning = true)"
    ).fetchall()
    assert got == [(lines, 2, "BIGINT[]")]


def test_export_files_a_record_whose_ts_is_not_a_date_under_unknown(tmp_path: Path) -> None:
    import duckdb

    lines = SYNTHETIC.read_text().splitlines()[:3]
    odd = json.loads(lines[2])
    odd["ts"] = "../../evil/x"  # a folder is named by the day: never by what a line says
    rec = tmp_path / "r.jsonl"
    rec.write_text("\n".join([*lines[:2], json.dumps(odd)]) + "\n")
    out = tmp_path / "pq"
    result = invoke("export", "--parquet", out, rec, "--no-cache")
    assert result.exit_code == 0, result.stderr
    day = json.loads(lines[0])["ts"][:10]
    assert sorted(p.name for p in out.iterdir()) == [f"day={day}", "day=unknown"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pq", "r.jsonl"]
    got = duckdb.sql(
        f"SELECT day, count(*) FROM read_parquet('{out}/**/*.parquet', hive_partitioning = true)"
        " GROUP BY day ORDER BY day"
    ).fetchall()
    assert got == [(day, 2), ("unknown", 1)]


@pytest.mark.parametrize("name", ["wrong_schema.jsonl", "README"])
def test_an_input_that_is_mostly_not_records_exits_2(name: str) -> None:
    path = FIXTURES / name if name != "README" else Path(__file__).parents[2] / "README.md"
    result = invoke("summary", path)
    assert result.exit_code == ExitStatus.USAGE_ERROR
    assert result.stdout == ""
    assert "most lines of the input are not records" in result.stderr
    assert "--lenient reads it anyway" in result.stderr.splitlines()[-1]


def test_one_record_is_one_record(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"v":1,"kind":"request"}\n{oops\n')
    result = invoke("summary", path, "--no-progress")
    assert "mcp-layers: 1 bad line skipped (1 record read)\n" in result.stderr


def test_what_sqlglot_cannot_translate_is_said_in_the_sql_not_on_stderr() -> None:
    """BigQuery has no `NULLS LAST` in a window's order: the caveat is a comment at the
    head of the query it concerns; stderr stays empty."""
    result = invoke("sql", "--dialect", "bigquery", "summary")
    assert result.exit_code == 0 and result.stderr == ""
    assert "-- sqlglot: 'NULLS LAST' translation not supported" in result.stdout
