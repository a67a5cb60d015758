"""Append records to a JSONL file: one whole line per record, flushed, never fatal.

The proxy must keep serving when the disk refuses, so a failed write is counted and
reported once through `on_error`, and the writer keeps trying on later records (a disk
that was full may have room again). A write that fails half-way is cut back off the
file, so a file only ever holds whole lines. Files are created 0600 in a 0700
directory: a recording names clients, tools and servers, which is nobody else's
business. With `max_bytes`, a run's recording rotates to numbered parts
(`mcp-<start>-002.jsonl`, …) between records, never inside one.

Retention (off by default) keeps the directory within `retain_bytes` and/or
`retain_days`, deleting the oldest files first. It only ever deletes this addon's own
files: regular files named `mcp-<UTC stamp>[-NNN].jsonl`, owned by this user, never the
file being written, and of another run only when untouched for `OTHER_RUN_QUIET_S` (it
may be another proxy's live file). It runs when a part is opened and then at most every
`RETAIN_CHECK_S` while records are written (and on `maintain()`). With retention and no
`max_bytes`, parts rotate at a tenth of `retain_bytes` (100 MiB with days alone), since
the file being written can never be deleted.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any


def _stdlib_line(record: dict[str, Any]) -> bytes:
    try:
        text = _stdlib_text(record)
    except ValueError:
        # A number past double range (an id of `1e400`, read as infinity) has no JSON
        # spelling: written null, as orjson writes it.
        record = _finite(record)  # type: ignore[assignment]
        text = _stdlib_text(record)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        # A lone surrogate (`"\ud83d"`, half an emoji cut by the peer's encoder) is valid
        # JSON but no UTF-8: written as the `\ud83d` escape it came as.
        return _stdlib_text(record, ascii_only=True).encode("ascii") + b"\n"


def _stdlib_text(record: object, ascii_only: bool = False) -> str:
    return json.dumps(
        record, separators=(",", ":"), ensure_ascii=ascii_only, default=repr, allow_nan=False
    )


def _finite(value: object) -> object:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


try:
    import orjson

    def dumps_line(record: dict[str, Any]) -> bytes:
        try:
            return orjson.dumps(record) + b"\n"
        except TypeError:
            # orjson refuses what a peer can still send: values nested deeper than 255
            # levels (a JSON-RPC id is echoed as it came), integers past 64 bits. The
            # stdlib writes those; found by the hardening proofs (tests/hardening).
            return _stdlib_line(record)

except ImportError:  # pragma: no cover - the addon also loads into a bare mitmproxy
    dumps_line = _stdlib_line


#: This addon's recording files (what retention may delete): stamp, then the part.
OWN_FILE = re.compile(r"^mcp-(\d{8}T\d{6}Z)(?:-(\d{3}))?\.jsonl$")

#: Retention looks at the directory at most this often while records are written.
RETAIN_CHECK_S = 60.0

#: Another run's file is deleted only when it has not changed for this long.
OTHER_RUN_QUIET_S = 300.0

#: Part size with retention by age alone (no `max_bytes`, no `retain_bytes`).
RETAIN_PART_BYTES = 100 * 1024 * 1024


def run_file_name(started: float, part: int = 1) -> str:
    """`mcp-20261130T154121Z.jsonl`: one file per proxy run, named by its UTC start;
    rotated parts add `-002`, `-003`, …"""
    stamp = datetime.fromtimestamp(started, UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"mcp-{stamp}.jsonl" if part == 1 else f"mcp-{stamp}-{part:03d}.jsonl"


class RecordWriter:
    """Writes records to `outfile` (tests) or to files opened lazily in `directory`."""

    def __init__(
        self,
        directory: str | os.PathLike[str] | None = None,
        *,
        started: float,
        outfile: IO[bytes] | None = None,
        on_error: Callable[[str], None] | None = None,
        max_bytes: int | None = None,
        retain_bytes: int | None = None,
        retain_days: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.directory = Path(directory) if directory is not None else None
        self.started = started
        self.retain_bytes = retain_bytes or None
        self.retain_days = retain_days or None
        if not max_bytes and (self.retain_bytes or self.retain_days):
            max_bytes = self.retain_bytes // 10 if self.retain_bytes else RETAIN_PART_BYTES
        self.max_bytes = max_bytes
        self._clock = clock
        self._next_retain = 0.0
        self.deleted = 0  # files retention deleted
        self._outfile = outfile
        self._fd: int | None = None
        self._size = 0
        self._part = 1
        self._on_error = on_error
        self._failing = False  # reported once per stretch of failures
        self._reported: set[str] = set()
        self.written = 0
        self.lost = 0
        self.path: Path | None = None

    def target(self) -> str:
        """Where the next record goes (its file is opened with the first record)."""
        if self._outfile is not None:
            return "the given output stream"
        if self.path is not None:
            return str(self.path)
        name = run_file_name(self.started, self._part)
        return str(self.directory / name) if self.directory is not None else name

    def write(self, records: list[dict[str, Any]]) -> None:
        lines: list[bytes] = []
        for record in records:
            try:
                lines.append(dumps_line(record))
            except (TypeError, ValueError, RecursionError) as e:
                # Past what any JSON writer takes (nesting beyond the interpreter's
                # recursion limit): this record is lost, counted and reported like a
                # refused write, and the others of the batch are still written.
                self._lose(e)
        if len(lines) > 1 and self._write_all(lines):
            return
        for line in lines:
            self._write_one(line)

    def _write_all(self, lines: list[bytes]) -> bool:
        """Several lines in one `write` (one system call for a batch of records), when
        the file is open, no rotation falls inside them and all goes well; False: the
        caller writes them one by one (which counts and reports any failure)."""
        fd = self._fd
        if fd is None or self._outfile is not None or self._failing:
            return False
        data = b"".join(lines)
        if self.max_bytes and self._size + len(data) > self.max_bytes:
            return False
        before = self._size
        try:
            written = os.write(fd, data)
        except OSError:
            return False
        if written != len(data):
            with contextlib.suppress(OSError):
                os.ftruncate(fd, before)  # never leave part of a batch behind
            return False
        self._size += written
        self.written += len(lines)
        if (self.retain_bytes or self.retain_days) and self._clock() >= self._next_retain:
            self.maintain()
        return True

    def _write_one(self, line: bytes) -> None:
        try:
            if self._outfile is not None:
                self._outfile.write(line)
                self._outfile.flush()
            else:
                self._append(line)
            self.written += 1
        except (OSError, ValueError) as e:  # ValueError: write to a closed file
            self._lose(e)
            return
        if self._failing:
            # Say so once when writing works again, so that a log reader knows the gap
            # is closed and how large it was.
            self._failing = False
            if self._on_error:
                self._on_error(f"the recording is written again; {self.lost} records lost so far")

    def _lose(self, e: BaseException) -> None:
        self.lost += 1
        if not self._failing:
            self._failing = True
            if self._on_error:
                self._on_error(f"cannot write the recording ({e}); records are being lost")

    def _append(self, line: bytes) -> None:
        fd = self._fd if self._fd is not None else self._open()
        if self.max_bytes and self._size and self._size + len(line) > self.max_bytes:
            self.close()
            self._part += 1
            fd = self._open()
        before = self._size
        try:
            # One unbuffered write per line: a reader, or a crash, sees whole lines.
            written = os.write(fd, line)
            if written != len(line):
                raise OSError(errno.ENOSPC, "short write")
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, before)  # never leave half a record behind
            raise
        self._size += written
        if (self.retain_bytes or self.retain_days) and self._clock() >= self._next_retain:
            self.maintain()

    def maintain(self) -> None:
        """Apply retention now: delete this addon's oldest files past the limits."""
        if self.directory is None or not (self.retain_bytes or self.retain_days):
            return
        now = self._clock()
        self._next_retain = now + RETAIN_CHECK_S
        try:
            files = self._own_files(now)
        except OSError as e:
            self._report_retention(e)
            return
        # The part being written counts at its full size: it will grow to it before
        # retention next looks at a new part, and the directory stays under the limit.
        writing = max(self._size, self.max_bytes or 0) if self._fd is not None else 0
        total = sum(size for _key, _path, size, _mtime in files) + writing
        too_old = now - self.retain_days * 86400 if self.retain_days else None
        for _key, path, size, mtime in files:  # oldest first
            over = self.retain_bytes is not None and total > self.retain_bytes
            if not over and (too_old is None or mtime >= too_old):
                continue
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError as e:
                self._report_retention(e)
                continue
            self.deleted += 1
            total -= size

    def _own_files(self, now: float) -> list[tuple[tuple[str, int], Path, int, float]]:
        """This addon's files that retention may delete, oldest first."""
        assert self.directory is not None
        mine = run_file_name(self.started)[4:20]  # this run's stamp
        uid = os.getuid()
        found = []
        with os.scandir(self.directory) as entries:
            for entry in entries:
                m = OWN_FILE.match(entry.name)
                if m is None or (self.path is not None and entry.path == str(self.path)):
                    continue
                if not entry.is_file(follow_symlinks=False):
                    continue
                st = entry.stat(follow_symlinks=False)
                if st.st_uid != uid:
                    continue
                if m.group(1) != mine and now - st.st_mtime < OTHER_RUN_QUIET_S:
                    continue  # perhaps another proxy's live file
                key = (m.group(1), int(m.group(2) or 1))
                found.append((key, Path(entry.path), st.st_size, st.st_mtime))
        found.sort(key=lambda f: f[0])
        return found

    def _report_retention(self, e: OSError) -> None:
        if self._on_error and "retention" not in self._reported:
            self._reported.add("retention")
            self._on_error(f"retention could not delete an old recording ({e}); will retry")

    def _open(self) -> int:
        if self.directory is None:
            raise OSError("no recording directory configured")
        self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self.directory / run_file_name(self.started, self._part)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._fd, self._size, self.path = fd, os.fstat(fd).st_size, path
        if self.retain_bytes or self.retain_days:
            self.maintain()  # a new part: an older one may have to go
        return fd

    def close(self) -> None:
        """Close the file; a later write reopens it (error hooks come after `done`)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)
