"""What a recording file holds, line by line: whole JSON objects, torn or bad lines, its mode."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO


@dataclass
class FileCheck:
    """What a recording file holds, line by line."""

    path: Path
    size: int
    records: list[dict[str, Any]]
    bad_lines: list[int]  # 1-based numbers of lines that are not one whole JSON object
    ends_whole: bool  # empty, or the last byte is the newline of a whole line
    mode: int


def check_file(path: Path) -> FileCheck:
    data = path.read_bytes()
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    records: list[dict[str, Any]] = []
    bad: list[int] = []
    for number, line in enumerate(lines, start=1):
        try:
            value = json.loads(line)
        except ValueError:
            bad.append(number)
            continue
        if isinstance(value, dict):
            records.append(value)
        else:
            bad.append(number)
    if tail:
        bad.append(len(lines) + 1)
    return FileCheck(
        path, len(data), records, bad, ends_whole=not tail, mode=path.stat().st_mode & 0o777
    )


def check_dir(directory: Path) -> list[FileCheck]:
    return [check_file(p) for p in sorted(directory.glob("mcp-*.jsonl"))]


# What the addon leaves behind: one JSONL file per proxy run.


def recording_files(record_dir: Path) -> list[Path]:
    """The recordings in ``record_dir``, oldest first (names sort by their UTC start time)."""
    return sorted(record_dir.glob("mcp-*.jsonl"), key=lambda p: (p.stat().st_mtime, p.name))


def read_jsonl(path: Path, out: TextIO | None = None) -> list[dict[str, Any]]:
    """Records of one JSONL file. A torn last line (a killed writer) is skipped and reported."""
    records: list[dict[str, Any]] = []
    lines = path.read_bytes().split(b"\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except ValueError:
            if number == len(lines) and out is not None:
                print(f"{path}: torn last line {number} skipped", file=out)
            elif number != len(lines):
                raise
    return records
