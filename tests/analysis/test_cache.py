"""The records cache (analysis/cache.py): the same answers from an entry as from the input,
and an entry is never trusted when it should not be (a changed input, a damaged entry).

Each test has its own empty cache directory (conftest.py's `records_cache`). Entries are
built by a detached builder once a command is done: `settle` waits for it (bounded).
"""

from __future__ import annotations

import gzip
import io
import os
import re
import shutil
import zipfile
from pathlib import Path

import _duckdb
import pytest
from analysis_helpers import BASELINE, FIXTURES, SYNTHETIC, invoke
from click.testing import Result
from mcp_layers_analysis import cache
from mcp_layers_analysis.exitcodes import ExitStatus

TRUNCATED = FIXTURES / "truncated.jsonl"


def entries(where: Path) -> list[Path]:
    return sorted(p for p in where.glob(f"*{cache.SUFFIX}") if not p.name.startswith("."))


def settle(where: Path | None = None) -> None:
    """Wait for the builds under way (the builder is a process of its own)."""
    assert cache.wait_for_builds(60, where), "a build took over 60 s"


def no_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """From here on, reading an input instead of its entry fails the test."""

    def refuse(self: cache.Cache, wanted: object) -> int:
        raise AssertionError(f"an entry wanted again: {wanted}")

    monkeypatch.setattr(cache.Cache, "build_later", refuse)


def outcome(result: Result) -> tuple[int, str, str]:
    return result.exit_code, result.stdout, result.stderr


def first_session(path: Path) -> str:
    result = invoke("sessions", path, "--format", "csv")
    return result.stdout.splitlines()[1].split(",")[0]


COMMANDS: list[list[str]] = [
    ["summary"],
    ["summary", "--by", "client", "--by", "scenario", "--format", "json"],
    ["retries", "--format", "json"],
    ["compare"],
    ["sessions", "--format", "csv"],
    ["show", "SESSION"],
    ["verdicts", "--format", "json"],
    ["query", "SELECT _src, _seq, id, kind, client, jsonrpc, httpStatuses FROM records"],
    ["summary", "--method", "tools/call", "--since", "2026-01-01"],
]


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c[:2]) for c in COMMANDS])
@pytest.mark.parametrize("inputs", [[SYNTHETIC], [SYNTHETIC, TRUNCATED, BASELINE]])
def test_every_command_gives_the_same_answer_cold_warm_and_uncached(
    command: list[str], inputs: list[Path], records_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if "SESSION" in command:
        command = [c.replace("SESSION", first_session(SYNTHETIC)) for c in command]
        settle()
        for p in entries(records_cache):
            p.unlink()  # the lookup above warmed it: start cold
    args = [*command, *inputs, "--lenient"]
    uncached = invoke(*args, "--no-cache")
    assert entries(records_cache) == []
    cold = invoke(*args)
    settle()
    assert len(entries(records_cache)) == len(inputs)
    no_build(monkeypatch)
    warm = invoke(*args)
    assert outcome(cold) == outcome(uncached)
    assert outcome(warm) == outcome(uncached)
    assert warm.exit_code in (ExitStatus.OK, ExitStatus.VERDICT_FAILED)
    if TRUNCATED in inputs:  # the bad-line report, replayed from the entry
        assert f"{TRUNCATED}:" in warm.stderr


def test_report_export_and_bundle_are_the_same_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = first_session(SYNTHETIC)
    got: dict[str, list[bytes]] = {"report": [], "bundle": [], "export": []}
    for run, extra in enumerate([["--no-cache"], [], []]):
        if run == 2:
            settle()
            no_build(monkeypatch)
        page = tmp_path / f"r{run}.html"
        assert invoke("report", SYNTHETIC, "-o", page, *extra).exit_code == 0
        # Without the minute it was made at: the three runs may straddle one.
        got["report"].append(
            re.sub(rb"made \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC", b"", page.read_bytes())
        )
        zipped = tmp_path / f"b{run}.zip"
        result = invoke("bundle", SYNTHETIC, "--session", session, "-o", zipped, *extra)
        assert result.exit_code == 0, result.stderr
        with zipfile.ZipFile(zipped) as z:
            got["bundle"].append(b"".join(z.read(n) for n in sorted(z.namelist())))
        out = tmp_path / f"e{run}"
        assert invoke("export", "--parquet", out, SYNTHETIC, *extra).exit_code == 0
        con = _duckdb.connect()
        rows = con.execute(
            f"SELECT * EXCLUDE (day) FROM read_parquet('{out}/**/*.parquet', "
            f"hive_partitioning = true) ORDER BY _seq"
        ).fetchall()
        got["export"].append(repr(rows).encode())
    for what, runs in got.items():
        assert runs[0] == runs[1] == runs[2], what


def test_an_append_is_counted(tmp_path: Path, records_cache: Path) -> None:
    rec = tmp_path / "rec.jsonl"
    shutil.copyfile(SYNTHETIC, rec)
    count = ["query", "SELECT count(*) AS n, max(id) AS last FROM records", rec, "-f", "csv"]
    before = invoke(*count).stdout
    settle()
    assert invoke(*count).stdout == before  # warm
    last = SYNTHETIC.read_bytes().splitlines()[-1]
    with open(rec, "ab") as f:
        f.write(last.replace(b'"id":', b'"id":9', 1) + b"\n")
    after = invoke(*count).stdout
    settle()
    n0, n1 = int(before.splitlines()[1].split(",")[0]), int(after.splitlines()[1].split(",")[0])
    assert n1 == n0 + 1
    assert len(entries(records_cache)) == 2  # the old one ages out; it is never read again


def test_a_change_that_keeps_size_and_mtime_is_seen(tmp_path: Path) -> None:
    rec = tmp_path / "rec.jsonl"
    shutil.copyfile(SYNTHETIC, rec)
    st = rec.stat()
    ask = ["query", "SELECT client, count(*) AS n FROM records GROUP BY 1 ORDER BY 1", rec]
    before = invoke(*ask).stdout
    settle()
    data = rec.read_bytes()
    i = data.rindex(b'"client":"') + len(b'"client":"')
    rec.write_bytes(data[:i] + b"Z" + data[i + 1 :])  # the last record's client, same size
    os.utime(rec, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert rec.stat().st_size == st.st_size
    assert invoke(*ask).stdout != before


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_a_damaged_entry_is_rebuilt_never_read(
    damage: str, records_cache: Path, tmp_path: Path
) -> None:
    args = ["summary", SYNTHETIC, "--format", "json"]
    want = outcome(invoke(*args))
    settle()
    (entry,) = entries(records_cache)
    size = entry.stat().st_size
    data = entry.read_bytes()
    if damage == "truncated":
        entry.write_bytes(data[: size // 2])
    else:  # same size, blocks overwritten
        entry.write_bytes(data[:8192] + b"\x5a" * (size - 16384) + data[-8192:])
    assert outcome(invoke(*args)) == want
    settle()
    assert outcome(invoke(*args)) == want
    (again,) = entries(records_cache)
    assert again.stat().st_size > size // 2


def _damage_data_blocks(entry: Path) -> None:
    """A byte changed in every 8 KiB past the first 256 KiB: the entry opens (its header and
    `meta` intact) and a block fails DuckDB's checksum only when a query reads it."""
    data = bytearray(entry.read_bytes())
    for i in range(256 * 1024 + 100, len(data), 8192):
        data[i] ^= 0x5A
    entry.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "command",
    [
        ["summary", "--format", "json"],  # one query over a view of the entry
        ["sessions", "--format", "csv"],  # a table read from it, then several queries
        ["verdicts", "--format", "json"],  # a table, then a column load() did not read
        ["query", "SELECT count(*), sum(hash(_seq, id, session, tool)) FROM records"],
    ],
    ids=lambda c: c[0],
)
def test_an_entry_damaged_past_its_header_is_read_from_the_input_and_rebuilt(
    command: list[str], records_cache: Path
) -> None:
    """Damage that only a query finds (a block's checksum): the input is read instead, the
    same answer and the same report (bad lines said once), and the entry built again."""
    args = [*command, SYNTHETIC, TRUNCATED, "--lenient"]
    want = outcome(invoke(*args, "--no-cache"))
    assert outcome(invoke(*args)) == want
    settle()
    found = entries(records_cache)
    assert len(found) == 2
    for entry in found:
        _damage_data_blocks(entry)
    damaged = {p.name: p.read_bytes() for p in found}
    assert outcome(invoke(*args)) == want
    settle()
    rebuilt = entries(records_cache)
    assert [p.name for p in rebuilt] == sorted(damaged)
    assert all(p.read_bytes() != damaged[p.name] for p in rebuilt if p.stat().st_size > 262144)
    assert outcome(invoke(*args)) == want


def test_a_cache_directory_that_cannot_be_written_means_no_cache_and_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("MCP_LAYERS_CACHE_DIR", str(blocker / "cache"))
    args = ["summary", SYNTHETIC, BASELINE, "--format", "json"]
    want = invoke(*args, "--no-cache")
    got = invoke(*args)
    assert (got.exit_code, got.stdout) == (want.exit_code, want.stdout)
    warnings = [line for line in got.stderr.splitlines() if "cache" in line]
    assert len(warnings) == 1, got.stderr
    assert str(blocker) in warnings[0]
    assert got.stderr.replace(warnings[0] + "\n", "") == want.stderr


def test_a_full_disk_means_no_cache_and_one_warning(
    records_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No room for the entries (a disk's free space is not ours to fill): none is built."""
    want = invoke("summary", SYNTHETIC, BASELINE, "--no-cache")
    monkeypatch.setattr(cache, "_free_bytes", lambda where: 1024)
    got = invoke("summary", SYNTHETIC, BASELINE)
    assert (got.exit_code, got.stdout) == (want.exit_code, want.stdout)
    assert got.stderr.count("records cache off") == 1
    assert "no room" in got.stderr
    settle(records_cache)
    assert entries(records_cache) == []


def test_eviction_keeps_the_bound_least_recently_used_first(
    tmp_path: Path, records_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = []
    for i in range(4):
        f = tmp_path / f"rec{i}.jsonl"
        shutil.copyfile(SYNTHETIC, f)
        files.append(f)
    invoke("summary", files[0])
    settle()
    (one,) = entries(records_cache)
    size = one.stat().st_size
    monkeypatch.setenv("MCP_LAYERS_CACHE_MB", str(2.5 * size / 1024 / 1024))
    invoke("summary", files[1])
    settle()
    os.utime(one, (1, 1))  # file 0's entry: used long ago
    newer = entries(records_cache)
    invoke("summary", files[2])
    settle()
    left = entries(records_cache)
    assert one not in left and len(left) == 2
    assert all(p in left for p in newer if p != one)
    invoke("summary", files[3])
    settle()
    assert sum(p.stat().st_size for p in entries(records_cache)) <= 2.5 * size


def test_no_cache_never_writes(records_cache: Path, tmp_path: Path) -> None:
    for command in (["summary"], ["sessions"], ["verdicts"], ["retries"], ["compare"]):
        invoke(*command, SYNTHETIC, "--no-cache")
    invoke("report", SYNTHETIC, "--no-cache", "-o", tmp_path / "r.html")
    invoke(
        "bundle", SYNTHETIC, "--client", "peer-py-client", "--no-cache", "-o", tmp_path / "b.zip"
    )
    assert list(records_cache.iterdir()) == []


def test_stdin_is_never_cached_gzip_is(records_cache: Path) -> None:
    data = SYNTHETIC.read_bytes()
    want = invoke("summary", SYNTHETIC, "--no-cache").stdout
    assert invoke("summary", "-", input=data).stdout == want
    assert invoke("summary", "-", input=gzip.compress(data)).stdout == want
    assert list(records_cache.iterdir()) == []
    first = invoke("summary", BASELINE)
    settle()
    assert len(entries(records_cache)) == 1
    assert invoke("summary", BASELINE).stdout == first.stdout


def test_a_newer_record_version_stops_cold_and_writes_no_entry(records_cache: Path) -> None:
    path = FIXTURES / "newer_version.jsonl"
    first = invoke("summary", path)
    second = invoke("summary", path)
    assert first.exit_code == ExitStatus.USAGE_ERROR
    assert outcome(first) == outcome(second)
    assert entries(records_cache) == []


def test_the_report_names_the_input_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry's bad-line report says the path the command was given, not the one the
    entry was built from (the same file, named another way)."""
    shutil.copyfile(TRUNCATED, tmp_path / "t.jsonl")
    monkeypatch.chdir(tmp_path)
    first = invoke("summary", "t.jsonl")
    settle()
    second = invoke("summary", "./t.jsonl")
    assert first.stderr.startswith("t.jsonl:")
    assert second.stderr == first.stderr.replace("t.jsonl:", "./t.jsonl:")


def test_cache_info_and_clear(records_cache: Path) -> None:
    invoke("summary", SYNTHETIC)
    invoke("summary", BASELINE)
    settle()
    info = invoke("cache", "info")
    assert info.exit_code == 0
    assert f"directory   {records_cache}" in info.stdout
    assert "entries     2" in info.stdout
    cleared = invoke("cache", "clear")
    assert cleared.exit_code == 0
    assert "2 entries removed" in cleared.stderr
    assert entries(records_cache) == []
    assert "entries     0" in invoke("cache", "info").stdout


def test_an_entry_reads_back_every_column_as_the_input() -> None:
    """The entry holds every field, typed as read from the JSON: a query of all of them is
    the same from either."""
    args = ["query", "SELECT * FROM records ORDER BY _seq", SYNTHETIC, BASELINE, "-f", "json"]
    want = invoke(*args, "--no-cache").stdout
    assert invoke(*args).stdout == want
    settle()
    assert invoke(*args).stdout == want
    assert io.StringIO(want).read(1) == "["


def test_spark_reads_the_inputs_and_leaves_the_cache_alone(records_cache: Path) -> None:
    """`--engine spark` bypasses the cache (it reads the inputs as before), including
    inputs that already have an entry."""
    pytest.importorskip("pyspark")
    if not shutil.which("java") and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java for Spark")
    duck = invoke("summary", SYNTHETIC, "--format", "json")
    settle()
    (entry,) = entries(records_cache)
    before = entry.stat().st_mtime_ns
    spark = invoke("summary", SYNTHETIC, "--format", "json", "--engine", "spark")
    assert spark.exit_code == 0, spark.stderr
    assert spark.stdout == duck.stdout
    assert entries(records_cache) == [entry] and entry.stat().st_mtime_ns == before
