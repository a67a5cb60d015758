"""Append records to a JSONL file: one whole line per record, flushed, never fatal.

The proxy must keep serving when the disk refuses, so a failed write is counted and
reported once through `on_error`, and the writer keeps trying on later records (a disk
that was full may have room again). Files are created 0600 in a 0700 directory: a
recording names clients, tools and servers, which is nobody else's business.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

try:
    import orjson

    def dumps_line(record: dict[str, Any]) -> bytes:
        return orjson.dumps(record) + b"\n"

except ImportError:  # pragma: no cover - the addon also loads into a bare mitmproxy

    def dumps_line(record: dict[str, Any]) -> bytes:
        text = json.dumps(record, separators=(",", ":"), ensure_ascii=False, default=repr)
        return text.encode("utf-8") + b"\n"


def run_file_name(started: float) -> str:
    """`mcp-20261130T154121Z.jsonl`: one file per proxy run, named by its UTC start."""
    return "mcp-" + datetime.fromtimestamp(started, UTC).strftime("%Y%m%dT%H%M%SZ") + ".jsonl"


class RecordWriter:
    """Writes records to `outfile` (tests) or to a file opened lazily in `directory`."""

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        started: float,
        outfile: IO[bytes] | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.directory = Path(directory) if directory is not None else None
        self.started = started
        self._file: IO[bytes] | None = outfile
        self._on_error = on_error
        self._reported = False
        self.written = 0
        self.lost = 0
        self.path: Path | None = None

    def write(self, records: list[dict[str, Any]]) -> None:
        for record in records:
            self._write_one(dumps_line(record))

    def _write_one(self, line: bytes) -> None:
        try:
            f = self._file or self._open()
            # One write call per line, then flush: a reader (or a crash) sees whole lines.
            f.write(line)
            f.flush()
            self.written += 1
        except (OSError, ValueError) as e:  # ValueError: write to a closed file
            self.lost += 1
            if not self._reported:
                self._reported = True
                if self._on_error:
                    self._on_error(f"cannot write the recording ({e}); records are being lost")

    def _open(self) -> IO[bytes]:
        if self.directory is None:
            raise OSError("no recording directory configured")
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self.directory / run_file_name(self.started)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._file = os.fdopen(fd, "ab", buffering=0)
        self.path = path
        return self._file

    def close(self) -> None:
        """Flush and close; a later write reopens the same file (error hooks after `done`)."""
        f, self._file = self._file, None
        if f is not None and self.directory is not None:
            with contextlib.suppress(OSError):
                f.close()
