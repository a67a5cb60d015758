"""The DuckDB engine's reading: the fast path, and bad lines located only when there are some."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from analysis_helpers import BASELINE, FIXTURES, SYNTHETIC, invoke
from mcp_layers_analysis import duck as duck_mod
from mcp_layers_analysis import inputs
from mcp_layers_analysis.compare import table
from mcp_layers_analysis.duck import GZIP_RATIO, DuckEngine, limit_bytes, spooled
from mcp_layers_analysis.errors import NewerRecordVersion
from mcp_layers_analysis.filters import Filters
from mcp_layers_analysis.limits import MAX_REPORTED_BAD_LINES
from mcp_layers_analysis.load import Input, Report
from mcp_layers_core.record import is_issued_session

#: What the synthetic recording holds, read from it: its records' count, the ids of its
#: first two lines, and a session the server issued.
RECORDS = [orjson.loads(line) for line in SYNTHETIC.read_bytes().splitlines()]
FIRST_IDS = [(0, r["id"]) for r in RECORDS[:2]]
ISSUED = next(r["session"] for r in RECORDS if is_issued_session(r["session"]))


@pytest.fixture
def duck() -> Iterator[DuckEngine]:
    engine = DuckEngine(threads=2)
    yield engine
    engine.close()


def load(engine: DuckEngine, paths: list[str]) -> tuple[Report, list[str]]:
    warnings: list[str] = []
    report = engine.load(inputs.expand(paths), None, warnings.append)
    return report, warnings


def bad_file(tmp_path: Path, n: int, every: int = 100) -> Path:
    lines = SYNTHETIC.read_bytes().splitlines(keepends=True)
    out = []
    for i, line in enumerate(lines):
        if i and i % every == 0 and n:
            out.append(b"garbage\n")
            n -= 1
        out.append(line)
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"".join(out))
    return path


def test_clean_inputs_take_the_fast_path(duck: DuckEngine) -> None:
    report, warnings = load(duck, [str(SYNTHETIC), str(BASELINE)])
    lines = len(SYNTHETIC.read_bytes().splitlines())
    assert report.bad_lines == 0 and not warnings and not report.messages
    assert report.records > lines
    # `_seq` is the input order: the first input's lines first, in their order.
    first = duck.rows("SELECT _src, id FROM records ORDER BY _seq LIMIT 2")
    assert first == FIRST_IDS
    assert duck.rows("SELECT count(*) FROM records WHERE _src = 0") == [(lines,)]


def test_bad_lines_are_reported_in_order_with_their_line_numbers(
    duck: DuckEngine, tmp_path: Path
) -> None:
    path = bad_file(tmp_path, 5)
    numbers = [i for i, line in enumerate(path.read_bytes().splitlines(), 1) if line == b"garbage"]
    report, warnings = load(duck, [str(path)])
    assert report.bad_lines == 5
    assert report.records == len(SYNTHETIC.read_bytes().splitlines())
    assert warnings == [
        f"{path}:{n}: not JSON (unexpected character, expected a JSON value at column 1), skipped"
        for n in numbers
    ]


def test_only_the_first_bad_lines_are_shown(duck: DuckEngine, tmp_path: Path) -> None:
    path = bad_file(tmp_path, 30, every=10)
    report, warnings = load(duck, [str(path)])
    assert report.bad_lines == 30
    assert len(warnings) == MAX_REPORTED_BAD_LINES
    assert report.messages == [f"{path}: 10 more bad lines not shown"]


def test_a_newer_record_stops_the_run_with_its_location(duck: DuckEngine, tmp_path: Path) -> None:
    lines = SYNTHETIC.read_bytes().splitlines(keepends=True)
    path = tmp_path / "new.jsonl"
    path.write_bytes(b"".join(lines[:500]) + b'{"v":3}\n' + b"".join(lines[500:]))
    with pytest.raises(NewerRecordVersion) as info:
        load(duck, [str(path)])
    assert str(info.value) == (
        f"{path}:501: record version 3 is newer than this mcp-layers reads (1); upgrade mcp-layers"
    )


def test_gzip_and_stdin_read_alike(duck: DuckEngine, monkeypatch: pytest.MonkeyPatch) -> None:
    load(duck, [str(SYNTHETIC)])
    expected = table(duck, ("client", "scenario"), Filters(), top=5)
    stdin = io.TextIOWrapper(io.BufferedReader(io.BytesIO(SYNTHETIC.read_bytes())))  # type: ignore[arg-type]
    monkeypatch.setattr(sys, "stdin", stdin)
    other = DuckEngine()
    try:
        load(other, ["-"])
        assert table(other, ("client", "scenario"), Filters(), top=5) == expected
    finally:
        other.close()


def test_truncated_gzip_is_a_warning(duck: DuckEngine) -> None:
    report, warnings = load(duck, [str(FIXTURES / "cut.jsonl.gz")])
    assert report.records > 5
    assert report.messages[0] == (
        f"{FIXTURES / 'cut.jsonl.gz'}: compressed stream ends early "
        "(a copy cut short?); read what was there"
    )
    assert warnings and warnings[0].endswith("truncated line (proxy killed mid-write?), skipped")


def test_older_records_lack_later_fields_and_read_them_as_null(
    duck: DuckEngine, tmp_path: Path
) -> None:
    path = tmp_path / "old.jsonl"
    path.write_text('{"v":1,"id":1,"kind":"request","outcome":"SUCCESS"}\n')
    report, _ = load(duck, [str(path)])
    assert report.records == 1 and report.bad_lines == 0
    assert duck.rows("SELECT retryOf, injected, previousSession FROM records") == [
        (None, None, None)
    ]


# --------------------------------------------------------------------- inputs read in place


def with_lines(tmp_path: Path, extra: dict[int, bytes]) -> Path:
    """The synthetic recording with lines put in before the given (1-based) line numbers."""
    lines = SYNTHETIC.read_bytes().splitlines(keepends=True)
    out: list[bytes] = []
    for i, line in enumerate(lines, 1):
        if i in extra:
            out.append(extra[i] + b"\n")
        out.append(line)
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"".join(out))
    return path


def session_end(**fields: object) -> bytes:
    return orjson.dumps({"v": 1, "kind": "session_end", "session": "s-x", **fields})


@pytest.mark.parametrize(
    "command",
    [
        ["summary", "--method", "tools/call"],
        ["show", ISSUED],
        ["query", "SELECT count(*) FROM records WHERE kind = 'request'"],
    ],
    ids=["summary", "show", "query"],
)
def test_a_query_over_the_inputs_in_place_finds_bad_lines_its_filters_leave_out(
    command: list[str], tmp_path: Path
) -> None:
    # Lines no row of the answer comes from: the check runs on every line all the same.
    path = with_lines(tmp_path, {10: session_end(v="1"), 20: b'{"kind":"request"}'})
    result = invoke(*command, path)
    assert result.exit_code == 0, result.stderr
    assert result.stderr == (
        f'{path}:10: not a record of a known schema version ("v": "1"), skipped\n'
        f'{path}:21: not a record (no "v" field), skipped\n'
        f"mcp-layers: 2 bad lines skipped ({len(RECORDS)} records read)\n"
    )
    clean = invoke(*command, SYNTHETIC)
    assert result.stdout == clean.stdout


def test_a_field_that_does_not_convert_is_found_where_the_query_reads_it(tmp_path: Path) -> None:
    path = with_lines(tmp_path, {30: session_end(durationMs="slow")})
    result = invoke("summary", path, "--method", "tools/call")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.startswith(
        f"{path}:30: not a valid v1 record: durationMs should be a number or null, not a "
        "string, skipped\n"
    )
    assert result.stdout == invoke("summary", SYNTHETIC, "--method", "tools/call").stdout


def test_clean_inputs_read_in_place_are_read_once(duck: DuckEngine) -> None:
    report = duck.load(inputs.expand([str(SYNTHETIC)]), None, print, shared=False)
    assert duck.rows("SELECT count(*) FROM records WHERE kind = 'session_end'")[0][0] > 0
    # Nobody asked how many records there were: no second pass counted them.
    assert report.counted is None and report.bad_lines == 0
    assert report.records == len(RECORDS)
    assert duck.rows("SELECT _src, id FROM records ORDER BY _seq LIMIT 2") == FIRST_IDS


def test_the_view_and_the_table_give_the_same_records(tmp_path: Path) -> None:
    paths = [str(SYNTHETIC), str(BASELINE)]
    query = "SELECT * FROM records ORDER BY _seq"
    answers = []
    for shared in (True, False):
        engine = DuckEngine(threads=2)
        try:
            engine.load(inputs.expand(paths), None, print, shared=shared)
            answers.append(engine.table(query))
        finally:
            engine.close()
    assert answers[0] == answers[1]
    assert len(answers[0][1]) > len(RECORDS)


@pytest.fixture
def spool_always(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every records table in the spool database, however small."""
    monkeypatch.setattr(duck_mod, "SPOOL_ABOVE", 0)


def test_the_spool_and_memory_give_the_same_records(spool_always: None) -> None:
    paths = [str(SYNTHETIC), str(BASELINE)]
    query = "SELECT * FROM records ORDER BY _seq"
    engine = DuckEngine(threads=2)
    try:
        engine.load(inputs.expand(paths), None, print)
        assert engine.attached_spool and (engine.spool / "records.duckdb").is_file()
        spooled = engine.table(query)
    finally:
        engine.close()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(duck_mod, "SPOOL_ABOVE", 10**6)
        engine = DuckEngine(threads=2)
        try:
            engine.load(inputs.expand(paths), None, print)
            assert not engine.attached_spool
            assert spooled == engine.table(query)
        finally:
            engine.close()
    assert len(spooled[1]) > len(RECORDS)


def test_bad_lines_in_the_spool_are_reported_as_in_memory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    path = bad_file(tmp_path, 3)
    found = []
    for above in (10**6, 0):
        monkeypatch.setattr(duck_mod, "SPOOL_ABOVE", above)
        engine = DuckEngine(threads=2)
        try:
            report, warnings = load(engine, [str(path)])
            assert engine.attached_spool == (above == 0)
            count = engine.rows("SELECT count(*) FROM records")[0][0]
        finally:
            engine.close()
        found.append((report.bad_lines, report.records, count, warnings))
    assert found[0] == found[1]
    assert found[1][:3] == (3, len(RECORDS), len(RECORDS)) and len(found[1][3]) == 3


@pytest.mark.parametrize("command", ["verdicts", "retries", "sessions"])
def test_a_spooled_command_answers_as_in_memory(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = (command, SYNTHETIC, BASELINE, "--format", "json", "--no-cache")
    in_memory = invoke(*args)
    monkeypatch.setattr(duck_mod, "SPOOL_ABOVE", 0)
    spooled = invoke(*args)
    assert spooled.exit_code == in_memory.exit_code and spooled.exit_code in (0, 3)
    assert spooled.stdout == in_memory.stdout and len(spooled.stdout) > 100


def test_a_table_goes_to_the_spool_past_twice_the_memory_limit(tmp_path: Path) -> None:
    plain, packed = tmp_path / "a.jsonl", tmp_path / "b.jsonl.gz"
    plain.write_bytes(b"x" * 1000)
    packed.write_bytes(b"x" * 100)
    a = Input(0, "a", str(plain), gzip=False)
    b = Input(1, "b", str(packed), gzip=True)
    gone = Input(2, "c", str(tmp_path / "gone.jsonl"), gzip=False)
    # every column read: the bytes themselves; half of them: half the bytes
    assert not spooled([a], 10, 10, limit=500) and spooled([a], 10, 10, limit=499)
    assert not spooled([a], 5, 10, limit=250) and spooled([a], 5, 10, limit=249)
    # a gzip input counts GZIP_RATIO times its size; one that is not there, nothing
    assert spooled([b], 1, 1, limit=100 * GZIP_RATIO // 2 - 1)
    assert not spooled([a, gone], 1, 1, limit=500)


def test_duckdbs_memory_limit_is_read_in_bytes() -> None:
    assert limit_bytes("953.6 MiB") == int(953.6 * 1024**2)
    assert limit_bytes("1.8 GiB") == int(1.8 * 1024**3)
    assert limit_bytes("512 bytes") == 512


def test_a_line_longer_than_duckdbs_default_reads(tmp_path: Path) -> None:
    big = orjson.dumps(
        {"v": 1, "kind": "request", "outcome": "SUCCESS", "bodies": {"request": "x" * (17 << 20)}}
    )
    path = with_lines(tmp_path, {5: big})
    result = invoke("query", "SELECT count(*) AS n FROM records", path, "--format", "json")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    assert orjson.loads(result.stdout) == [{"n": len(RECORDS) + 1}]


def test_the_cli_starts_without_duckdbs_python_layer() -> None:
    # The `duckdb` package's Python layer costs 80 ms of imports per run (README, "Where
    # the time goes"); the CLI runs its SQL on the `_duckdb` engine alone. Asked of a
    # fresh interpreter, after a command has run: no clock, only what it imported.
    script = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from mcp_layers_analysis.cli import cli\n"
        f"result = CliRunner().invoke(cli, ['summary', {str(SYNTHETIC)!r}, '--format', 'json'])\n"
        "assert result.exit_code == 0, result.output\n"
        "print(sorted({m.split('.')[0] for m in sys.modules if 'duckdb' in m}))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['_duckdb']"


def test_without_a_separate_engine_module_the_duckdb_package_serves() -> None:
    # DuckDB releases before the split into `_duckdb` and `duckdb` have no `_duckdb`:
    # the engine then comes from the package, with the same answers.
    script = (
        "import sys\n"
        "import duckdb\n"  # the package, loaded with its engine as an older release has it
        "for name in [m for m in sys.modules if m.split('.')[0] == '_duckdb']:\n"
        "    del sys.modules[name]\n"
        "class Refuse:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == '_duckdb':\n"
        "            raise ImportError('no _duckdb here')\n"
        "sys.meta_path.insert(0, Refuse())\n"
        "from click.testing import CliRunner\n"
        "from mcp_layers_analysis import duck\n"
        "from mcp_layers_analysis.cli import cli\n"
        f"result = CliRunner().invoke(cli, ['summary', {str(SYNTHETIC)!r}, '--format', 'json'])\n"
        "assert result.exit_code == 0, result.output\n"
        "print(duck.duckdb.__name__)\n"
        "sys.stdout.write(result.stdout)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    engine, _, answer = out.stdout.partition("\n")
    assert engine == "duckdb"
    assert answer == invoke("summary", SYNTHETIC, "--format", "json").stdout
