from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path

from mcp_layers_core.jsonl import RecordWriter, run_file_name


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
