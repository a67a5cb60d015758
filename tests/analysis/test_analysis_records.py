"""Bad lines say why; any bytes are read without a crash, every line a record or reported."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp_layers_analysis import inputs
from mcp_layers_analysis.duck import DuckEngine
from mcp_layers_analysis.errors import NewerRecordVersion
from mcp_layers_analysis.records import CHECKER, TRUNCATED, check_line


def reason(line: bytes, *, torn: bool = False) -> str | None:
    result = check_line(line, CHECKER, torn=torn)
    return result if isinstance(result, str) else None


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (b'["x"]', "not a JSON object (an array), skipped"),
        (b'{"kind":"request"}', 'not a record (no "v" field), skipped'),
        (b'{"v":"1"}', 'not a record of a known schema version ("v": "1"), skipped'),
        (b'{"v":0}', 'not a record of a known schema version ("v": 0), skipped'),
        (b'{"v":1.0}', 'not a record of a known schema version ("v": 1.0), skipped'),
        (
            b'{"v":1,"durationMs":"fast"}',
            "not a valid v1 record: durationMs should be a number or null, not a string, skipped",
        ),
        (
            b'{"v":1,"jsonrpc":{"errorCode":"x"}}',
            "not a valid v1 record: jsonrpc.errorCode should be an integer or null, not a string, "
            "skipped",
        ),
        (
            b'{"v":1,"httpStatuses":[200,"x"]}',
            "not a valid v1 record: httpStatuses[1] should be an integer, not a string, skipped",
        ),
        (b"{oops", "not JSON (unexpected character, expected a string key at column 2), skipped"),
    ],
)
def test_bad_lines_say_why(line: bytes, reason: str, tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_bytes(b'{"v":1}\n' + line + b'\n{"v":1}\n')
    warnings: list[str] = []
    engine = DuckEngine(threads=1)
    try:
        report = engine.load(inputs.expand([str(path)]), None, warnings.append)
    finally:
        engine.close()
    assert report.records == 2 and report.bad_lines == 1
    assert warnings == [f"{path}:2: {reason}"]


def test_a_torn_last_line_is_a_truncation() -> None:
    assert reason(b'{"v":1,"ki', torn=True) == TRUNCATED
    assert reason(b'{"v":1,"ki').startswith("not JSON")  # type: ignore[union-attr]
    assert reason(b'{"v":1}') is None


def test_a_newer_version_raises() -> None:
    with pytest.raises(NewerRecordVersion):
        check_line(b'{"v":7,"kind":"request"}', CHECKER, torn=False)


@pytest.fixture(scope="module")
def engine() -> Iterator[DuckEngine]:
    e = DuckEngine(threads=1)
    yield e
    e.close()


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=6,
)
objects = st.fixed_dictionaries(
    {"v": st.just(1) | json_values},
    optional={
        name: json_values
        for name in ("id", "kind", "durationMs", "client", "httpStatuses", "jsonrpc", "injected")
    },
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(objects.map(orjson.dumps) | st.binary(max_size=30), min_size=1, max_size=5))
def test_any_lines_are_records_or_reported(
    engine: DuckEngine, tmp_path_factory: pytest.TempPathFactory, lines: list[bytes]
) -> None:
    lines = [line.replace(b"\n", b"").replace(b"\r", b"") for line in lines]
    path = tmp_path_factory.mktemp("any") / "r.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    warnings: list[str] = []
    try:
        report = engine.load(inputs.expand([str(path)]), None, warnings.append)
    except NewerRecordVersion:
        return
    if lines[0].startswith(b"\x1f\x8b"):  # gzip's magic: read as a compressed file
        assert any("compressed stream" in m for m in report.messages), report.messages
        return
    # A line holding only a byte-order mark is blank to DuckDB, as whitespace is.
    assert report.records + report.bad_lines == sum(
        1 for x in lines if x.replace(b"\xef\xbb\xbf", b"").strip()
    )
    assert len(warnings) == report.bad_lines


def test_the_record_format_examples_read(engine: DuckEngine, tmp_path: Path) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "record-format.md").read_text()
    block = doc.split("```jsonl\n", 1)[1].split("```", 1)[0].encode()
    path = tmp_path / "doc.jsonl"
    path.write_bytes(block)
    # The examples are generated (scripts/gen_docs.py): what they hold is read from them.
    examples = [json.loads(line) for line in block.splitlines() if line.strip()]
    report = engine.load(inputs.expand([str(path)]), None, print)
    assert report.bad_lines == 0 and report.records == len(examples) >= 3
    got = engine.rows("SELECT outcome FROM records ORDER BY _seq")
    assert got == [(r["outcome"],) for r in examples]
    assert any(outcome is not None for (outcome,) in got)
