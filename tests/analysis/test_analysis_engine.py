"""The engine: any split of the input, in one process or several, gives the same answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from analysis_helpers import BASELINE, FIXTURES, SYNTHETIC
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_layers_analysis import engine, inputs
from mcp_layers_analysis.compare import CompareJob, table
from mcp_layers_analysis.errors import NewerRecordVersion
from mcp_layers_analysis.filters import Filters
from mcp_layers_analysis.limits import MAX_REPORTED_BAD_LINES
from mcp_layers_analysis.sessions import SessionsJob
from mcp_layers_analysis.summary import SummaryJob


def run(job: Any, paths: list[Path], **kw: Any) -> tuple[engine.Report, list[str]]:
    warnings: list[str] = []
    report = engine.run(
        job, inputs.expand([str(p) for p in paths]), warn=warnings.append, **{"jobs": 1, **kw}
    )
    return report, warnings


def compare_table(paths: list[Path], **kw: Any) -> Any:
    job = CompareJob(("client", "scenario"), Filters())
    run(job, paths, **kw)
    return table(job, top=5)


@pytest.fixture(scope="module")
def whole() -> Any:
    return compare_table([SYNTHETIC, BASELINE])


@settings(max_examples=25, deadline=None)
@given(range_bytes=st.integers(500, 200_000), block_bytes=st.integers(300, 70_000))
def test_any_split_in_one_process_gives_the_same_answer(
    whole: Any, range_bytes: int, block_bytes: int
) -> None:
    assert (
        compare_table([SYNTHETIC, BASELINE], range_bytes=range_bytes, block_bytes=block_bytes)
        == whole
    )


@pytest.mark.parametrize("jobs", [2, 3])
def test_worker_processes_give_the_same_answer(whole: Any, jobs: int) -> None:
    assert (
        compare_table(
            [SYNTHETIC, BASELINE],
            jobs=jobs,
            parallel_min_bytes=0,
            range_bytes=50_000,
            block_bytes=20_000,
        )
        == whole
    )


def test_sessions_are_listed_per_input_whatever_the_split() -> None:
    def listing(**kw: Any) -> list[list[Any]]:
        rows: list[list[Any]] = []
        run(SessionsJob(Filters(), rows.append), [SYNTHETIC, BASELINE], **kw)
        return rows

    base = listing()
    assert listing(range_bytes=3000, block_bytes=1000) == base
    assert listing(jobs=2, parallel_min_bytes=0, range_bytes=40_000) == base


def test_memory_is_one_partial_per_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    merges: list[int] = []
    job = SummaryJob(("client",), Filters())
    original = job.merge
    monkeypatch.setattr(job, "merge", lambda r: (merges.append(1), original(r)))
    run(job, [SYNTHETIC], jobs=2, parallel_min_bytes=0, range_bytes=20_000)
    assert len(merges) == 2  # not one per task: workers keep their partial until the end


def bad_file(tmp_path: Path, n_bad: int, every: int = 50) -> Path:
    lines = SYNTHETIC.read_bytes().splitlines(keepends=True)
    out = []
    for i, line in enumerate(lines, 1):
        out.append(line)
        if i % every == 0 and len([x for x in out if x == b"garbage\n"]) < n_bad:
            out.append(b"garbage\n")
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"".join(out))
    return path


@pytest.mark.parametrize(
    "kw",
    [
        {},
        {"range_bytes": 30_000, "block_bytes": 7_000},
        {"jobs": 2, "parallel_min_bytes": 0, "range_bytes": 30_000},
    ],
)
def test_bad_lines_are_reported_in_order_with_their_line_numbers(
    tmp_path: Path, kw: dict[str, Any]
) -> None:
    path = bad_file(tmp_path, 5)
    numbers = [i for i, line in enumerate(path.read_bytes().splitlines(), 1) if line == b"garbage"]
    report, warnings = run(SummaryJob(("client",), Filters()), [path], **kw)
    assert report.bad_lines == 5
    assert warnings == [
        f"{path}:{n}: not JSON (unexpected character, expected a JSON value at column 1), skipped"
        for n in numbers
    ]


def test_only_the_first_bad_lines_are_shown(tmp_path: Path) -> None:
    path = bad_file(tmp_path, 30, every=10)
    report, warnings = run(SummaryJob(("client",), Filters()), [path], range_bytes=40_000)
    assert report.bad_lines == 30
    assert len(warnings) == MAX_REPORTED_BAD_LINES
    assert report.messages == [f"{path}: 10 more bad lines not shown"]


@pytest.mark.parametrize("kw", [{}, {"jobs": 2, "parallel_min_bytes": 0, "range_bytes": 9000}])
def test_a_newer_record_stops_the_run_with_its_location(tmp_path: Path, kw: dict[str, Any]) -> None:
    lines = SYNTHETIC.read_bytes().splitlines(keepends=True)
    path = tmp_path / "new.jsonl"
    path.write_bytes(b"".join(lines[:500]) + b'{"v":3}\n' + b"".join(lines[500:]))
    with pytest.raises(NewerRecordVersion) as info:
        run(SummaryJob(("client",), Filters()), [path], **kw)
    assert str(info.value) == (
        f"{path}:501: record version 3 is newer than this mcp-layers reads (1); upgrade mcp-layers"
    )


def test_gzip_and_stdin_streams(monkeypatch: pytest.MonkeyPatch) -> None:
    import io
    import sys

    plain = SYNTHETIC.read_bytes()
    expected = compare_table([SYNTHETIC])
    stdin = io.TextIOWrapper(io.BufferedReader(io.BytesIO(plain)))  # type: ignore[arg-type]
    monkeypatch.setattr(sys, "stdin", stdin)
    job = CompareJob(("client", "scenario"), Filters())
    engine.run(
        job, inputs.expand(["-"]), jobs=2, warn=print, parallel_min_bytes=0, block_bytes=50_000
    )
    assert table(job, top=5) == expected


def test_truncated_gzip_is_a_warning(tmp_path: Path) -> None:
    report, warnings = run(SummaryJob(("client",), Filters()), [FIXTURES / "cut.jsonl.gz"])
    assert report.records > 5
    assert report.messages[0] == (
        f"{FIXTURES / 'cut.jsonl.gz'}: compressed stream ends early "
        "(a copy cut short?); read what was there"
    )
    assert warnings and warnings[0].endswith("truncated line (proxy killed mid-write?), skipped")
