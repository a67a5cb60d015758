from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path

import pytest
from mcp_layers_core.jsonl import RecordWriter, run_file_name

# The writer is record-agnostic: these payloads are not records.
pytestmark = pytest.mark.opaque_records


def test_file_is_named_by_run_start_and_private(tmp_path: Path) -> None:
    directory = tmp_path / "rec"
    w = RecordWriter(directory, started=1_764_517_281.5)
    assert not directory.exists()  # opened lazily: no record, no file
    w.write([{"v": 1, "id": 1}, {"v": 1, "id": 2, "text": "é"}])
    assert (
        w.path
        == directory / run_file_name(1_764_517_281.5)
        == directory / "mcp-20251130T154121Z.jsonl"
    )
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(w.path).st_mode) == 0o600
    lines = w.path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and [json.loads(x)["id"] for x in lines[:-1]] == [1, 2]
    w.close()
    w.write([{"v": 1, "id": 3}])  # usable after close: error hooks come after `done`
    assert len(w.path.read_bytes().splitlines()) == 3 and w.written == 3


def test_write_failure_is_counted_and_reported_once(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    errors: list[str] = []
    w = RecordWriter(blocker / "sub", started=0.0, on_error=errors.append)
    w.write([{"id": i} for i in range(5)])
    assert (w.written, w.lost, len(errors)) == (0, 5, 1)
    assert "records are being lost" in errors[0]


def test_injected_outfile() -> None:
    out = io.BytesIO()
    RecordWriter(None, started=0.0, outfile=out).write([{"a": 1}])
    assert out.getvalue() == b'{"a":1}\n'


def test_rotation_never_splits_a_record(tmp_path: Path) -> None:
    w = RecordWriter(tmp_path, started=0.0, max_bytes=200)
    w.write([{"id": i, "pad": "x" * 50} for i in range(20)])
    w.close()

    def part(p: Path) -> int:
        tail = p.stem.rsplit("-", 1)[-1]
        return int(tail) if tail.isdigit() else 1

    files = sorted(tmp_path.glob("mcp-*.jsonl"), key=part)
    assert len(files) > 3 and files[0].name == "mcp-19700101T000000Z.jsonl"
    assert files[1].name == "mcp-19700101T000000Z-002.jsonl"
    ids = []
    for f in files:
        data = f.read_bytes()
        assert data.endswith(b"\n") and len(data) <= 200
        ids += [json.loads(line)["id"] for line in data.splitlines()]
    assert ids == list(range(20))


def test_a_failed_write_is_cut_back_to_whole_lines(tmp_path: Path, monkeypatch) -> None:
    said: list[str] = []
    w = RecordWriter(tmp_path, started=0.0, on_error=said.append)
    w.write([{"id": 1}])
    real_write = os.write

    def half(fd: int, data: bytes) -> int:
        real_write(fd, data[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", half)
    w.write([{"id": 2, "pad": "y" * 100}])
    monkeypatch.setattr(os, "write", real_write)
    w.write([{"id": 3}])
    assert [json.loads(x)["id"] for x in w.path.read_bytes().splitlines()] == [1, 3]
    assert (w.written, w.lost) == (2, 1)
    assert len(said) == 2 and "being lost" in said[0] and "1 records lost so far" in said[1]


def test_a_batch_is_one_write_of_whole_lines(tmp_path: Path, monkeypatch) -> None:
    w = RecordWriter(tmp_path, started=1_764_517_281.5)
    w.write([{"id": 0}])  # opens the file
    calls: list[int] = []
    real_write = os.write

    def counting(fd: int, data: bytes) -> int:
        calls.append(data.count(b"\n"))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", counting)
    w.write([{"id": n} for n in range(1, 6)])
    assert calls == [5] and w.written == 6
    assert w.path is not None
    assert [json.loads(line)["id"] for line in w.path.read_bytes().splitlines()] == list(range(6))


def test_a_short_batch_write_is_cut_back_and_written_line_by_line(
    tmp_path: Path, monkeypatch
) -> None:
    w = RecordWriter(tmp_path, started=1_764_517_281.5)
    w.write([{"id": 0}])
    real_write = os.write
    short = [True]

    def once_short(fd: int, data: bytes) -> int:
        if short[0] and data.count(b"\n") > 1:
            short[0] = False
            return real_write(fd, data[:7])  # half a line reaches the disk
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", once_short)
    w.write([{"id": n} for n in range(1, 4)])
    assert w.path is not None
    lines = w.path.read_bytes().splitlines()
    assert [json.loads(line)["id"] for line in lines] == [0, 1, 2, 3]
    assert w.written == 4 and w.lost == 0
