"""The DuckDB engine's reading: the fast path, and bad lines located only when there are some."""

from __future__ import annotations

import io
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from analysis_helpers import BASELINE, FIXTURES, SYNTHETIC
from mcp_layers_analysis import inputs
from mcp_layers_analysis.compare import table
from mcp_layers_analysis.duck import DuckEngine
from mcp_layers_analysis.errors import NewerRecordVersion
from mcp_layers_analysis.filters import Filters
from mcp_layers_analysis.limits import MAX_REPORTED_BAD_LINES
from mcp_layers_analysis.load import Report


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
    assert first == [(0, 1), (0, 13)]
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
