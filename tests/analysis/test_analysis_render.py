"""The renderer: every format, parsed back."""

from __future__ import annotations

import csv
import io
import json

import pytest
from mcp_layers_analysis.render import (
    TABLE_SAMPLE_ROWS,
    Millis,
    OutputFormat,
    Ratio,
    Seconds,
    open_writer,
    render,
    use_color,
)

HEADERS = ("name", "calls", "share", "p50_ms", "ok", "offset")
ROWS = [
    ["a|b", 10, Ratio(0.25), Millis(12.3456), True, Seconds(1.5)],
    ["c", 2000, None, None, False, None],
]


def out(fmt: OutputFormat, rows: list[list[object]] = ROWS, color: bool = False) -> str:
    buf = io.StringIO()
    n = render(HEADERS, rows, fmt, buf, color=color)  # type: ignore[arg-type]
    assert n == len(rows)
    return buf.getvalue()


def test_json_is_one_array_of_objects() -> None:
    text = out(OutputFormat.JSON)
    assert json.loads(text) == [
        {"name": "a|b", "calls": 10, "share": 0.25, "p50_ms": 12.3456, "ok": True, "offset": 1.5},
        {"name": "c", "calls": 2000, "share": None, "p50_ms": None, "ok": False, "offset": None},
    ]
    assert text.count("\n") == 4  # one object per line inside the array
    assert out(OutputFormat.JSON, []) == "[]\n"


def test_jsonl_is_one_object_per_line() -> None:
    lines = out(OutputFormat.JSONL).splitlines()
    assert [json.loads(x)["name"] for x in lines] == ["a|b", "c"]
    assert out(OutputFormat.JSONL, []) == ""


def test_csv_has_a_header_and_plain_values() -> None:
    rows = list(csv.DictReader(io.StringIO(out(OutputFormat.CSV))))
    assert rows[0] == {
        "name": "a|b",
        "calls": "10",
        "share": "0.25",
        "p50_ms": "12.3456",
        "ok": "true",
        "offset": "1.5",
    }
    assert rows[1]["share"] == "" and rows[1]["ok"] == "false"
    assert out(OutputFormat.CSV, []) == ",".join(HEADERS) + "\n"


def test_table_aligns_and_formats_for_people() -> None:
    lines = out(OutputFormat.TABLE).splitlines()
    assert lines[0].split() == list(HEADERS)
    assert set(lines[1]) <= {"-", " "}
    assert lines[2].split() == ["a|b", "10", "25.0%", "12.3", "yes", "1.500"]
    assert lines[3].split() == ["c", "2000", "no"]
    # Numbers are right-aligned: their last characters line up under the header's.
    assert lines[2].index("10") + 2 == lines[3].index("2000") + 4
    assert "\x1b[" not in "".join(lines)
    assert out(OutputFormat.TABLE, []) == ""


def test_table_color_is_only_the_header() -> None:
    text = out(OutputFormat.TABLE, color=True)
    assert text.startswith("\x1b[1m") and text.count("\x1b[") == 4


def test_markdown_table() -> None:
    lines = out(OutputFormat.MARKDOWN).splitlines()
    assert lines[0].startswith("| name") and lines[0].endswith("|")
    cells = [c.strip() for c in lines[1].strip("|").split("|")]
    assert cells[0].endswith("-") and not cells[0].endswith(":")  # text: left
    assert cells[1].endswith(":")  # numbers: right
    assert "a\\|b" in lines[2]
    assert len(lines) == 4
    assert out(OutputFormat.MARKDOWN, []).startswith("| name")


def test_tables_stream_after_the_sample() -> None:
    buf = io.StringIO()
    writer = open_writer(("n",), OutputFormat.TABLE, buf)
    for i in range(TABLE_SAMPLE_ROWS - 1):
        writer.write([i])
    assert buf.getvalue() == ""  # still sizing the columns
    writer.write([1])
    assert buf.getvalue() != ""  # the sample is out; the rest streams
    writer.write([123456789012345])  # wider than the sample: its line is just longer
    writer.close()
    assert buf.getvalue().splitlines()[-1] == "123456789012345"


def test_wrong_row_length_is_a_bug() -> None:
    with pytest.raises(ValueError):
        render(("a",), [[1, 2]], OutputFormat.JSON, io.StringIO())


def test_no_color_is_respected(monkeypatch: pytest.MonkeyPatch) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_color(Tty())
    assert not use_color(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(Tty())
