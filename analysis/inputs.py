"""Where records come from: PATH arguments to sources, and a source's blocks of whole lines.

A PATH is a file, a directory (its `*.jsonl` and `*.jsonl.gz`, recursively, in name order),
a glob (for shells that did not expand it), or `-` for stdin. Compression is recognised by
its magic bytes, not the name.

Engines read files themselves; the blocks here are for the bad-line report, which reads
an input line by line only when an engine's counts say it holds lines that are not records.
"""

from __future__ import annotations

import glob
import gzip
import io
import os
import re
import sys
import zlib
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, cast

from .errors import InputError
from .limits import BLOCK_BYTES

GZIP_MAGIC = b"\x1f\x8b"
STDIN = "-"


@dataclass(frozen=True, slots=True)
class Source:
    """One input: `name` is what messages call it (`<stdin>` for `-`)."""

    name: str
    path: str | None  # None for stdin
    compressed: bool
    size: int | None  # bytes on disk; None for stdin

    @property
    def splittable(self) -> bool:
        return self.path is not None and not self.compressed


def expand(paths: Sequence[str]) -> list[Source]:
    """The sources the PATH arguments name, in order; raises InputError for a bad one."""
    sources: list[Source] = []
    seen: set[str] = set()
    for arg in paths:
        for path in _expand_one(arg):
            if path == STDIN:
                if STDIN in seen:
                    raise InputError("'-' (stdin) given more than once")
                seen.add(STDIN)
                sources.append(Source("<stdin>", None, False, None))
                continue
            real = os.path.realpath(path)
            if real in seen:
                continue  # named twice (a directory and a file in it): read once
            seen.add(real)
            sources.append(_source(path))
    return sources


def _expand_one(arg: str) -> list[str]:
    if arg == STDIN:
        return [STDIN]
    p = Path(arg)
    if p.is_dir():
        found = sorted(
            (
                str(f)
                for f in p.rglob("*")
                if f.is_file() and (f.name.endswith(".jsonl") or f.name.endswith(".jsonl.gz"))
            ),
            key=recording_order,
        )
        if not found:
            raise InputError(f"no *.jsonl or *.jsonl.gz files under {arg}")
        return found
    if p.exists():
        return [arg]
    if glob.has_magic(arg):
        matches = sorted(
            (m for m in glob.glob(arg, recursive=True) if not os.path.isdir(m)), key=recording_order
        )
        if not matches:
            raise InputError(f"no file matches {arg}")
        return matches
    raise InputError(f"{arg}: no such file or directory")


_PART = re.compile(r"^(?P<stem>.*?)(?:-(?P<part>\d{3}))?(?P<ext>\.jsonl(?:\.gz)?)$")


def recording_order(path: str) -> tuple[str, str, int, str]:
    """Name order, except that a run's rotated parts follow its first file.

    The addon names parts `mcp-<start>.jsonl`, `mcp-<start>-002.jsonl`, …; plain name
    order would put `-002` first (`-` sorts before `.`), and part 2 can name records of
    part 1 (ids run on across parts).
    """
    head, name = os.path.split(path)
    m = _PART.match(name)
    if m is None:
        return (head, name, 0, "")
    return (head, m["stem"], int(m["part"] or 1), m["ext"])


def _source(path: str) -> Source:
    try:
        with open(path, "rb") as f:
            magic = f.read(2)
            size = os.fstat(f.fileno()).st_size
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    return Source(path, path, magic == GZIP_MAGIC, size)


def total_size(sources: Sequence[Source]) -> int | None:
    """Bytes on disk of all sources; None when one is stdin."""
    sizes = [s.size for s in sources]
    if any(n is None for n in sizes):
        return None
    return sum(n for n in sizes if n is not None)


class TruncatedStream(Exception):
    """A gzip stream ends before its end marker; what came before was read."""


class ByteStream(AbstractContextManager["ByteStream", None], Protocol):
    """What the readers (and GzipFile, which seeks) use of a byte stream: a file, stdin's
    buffer, a GzipFile."""

    def read(self, size: int = -1, /) -> bytes: ...

    def seek(self, offset: int, whence: int = 0, /) -> int: ...

    def tell(self) -> int: ...

    def close(self) -> None: ...


class _Peekable(ByteStream, Protocol):
    def peek(self, size: int = 0, /) -> bytes: ...


def open_stream(source: Source) -> tuple[ByteStream, ByteStream]:
    """The source as read (to know how far along it is) and its uncompressed bytes."""
    if source.path is None:
        stdin = sys.stdin.buffer
        # A test's BytesIO does not peek; BufferedReader reads it through readinto, which
        # BinaryIO does not declare.
        raw: _Peekable = (
            stdin if hasattr(stdin, "peek") else io.BufferedReader(cast(io.RawIOBase, stdin))
        )
        head = raw.peek(2)[:2]
        # stdin is not ours to close: both ends are wrappers that leave it open.
        outer = _Unclosable(raw)
        if head == GZIP_MAGIC:
            return outer, gzip.GzipFile(fileobj=raw, mode="rb")
        return outer, _Unclosable(raw)
    file = open(source.path, "rb")  # noqa: SIM115 - the caller closes it
    if source.compressed:
        return file, gzip.GzipFile(fileobj=file, mode="rb")
    return file, _Unclosable(file)


class _Unclosable(io.RawIOBase):
    """The same stream again, so closing both ends of `open_stream` closes it once."""

    def __init__(self, inner: ByteStream) -> None:
        self.inner = inner

    def read(self, n: int = -1) -> bytes:
        return self.inner.read(n)

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.inner.tell()


def stream_blocks(
    stream: ByteStream, block_bytes: int = BLOCK_BYTES
) -> Iterator[tuple[int, bytes, bool]]:
    """Blocks of whole lines from a stream: (offset, data, final); the last is final.

    An empty stream gives one empty final block. Raises TruncatedStream after the last
    block when a gzip stream was cut short; everything before the cut is delivered.
    """
    offset = 0
    carry = b""
    pending: bytes | None = None  # held back one step, to know whether it is the last
    chunks = _chunks(stream)
    truncated = False
    while True:
        got: list[bytes] = [carry] if carry else []
        size = len(carry)
        fresh = 0
        try:
            while fresh == 0 or size < block_bytes:
                chunk = next(chunks, b"")
                if not chunk:
                    break
                got.append(chunk)
                size += len(chunk)
                fresh += len(chunk)
        except TruncatedStream:
            truncated = True
        if not fresh:  # nothing new: the end
            break
        data = b"".join(got)
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            carry = data  # no line ends yet: keep reading
            if truncated:
                break
            continue
        carry = data[cut:]
        if pending is not None:
            yield offset, pending, False
            offset += len(pending)
        pending = data[:cut]
        if truncated:
            break
    if pending is not None and carry:
        yield offset, pending, False
        offset += len(pending)
        pending = None
    last = carry if pending is None else pending
    yield offset, last, True
    if truncated:
        raise TruncatedStream


def _chunks(stream: ByteStream, size: int = 64 * 1024) -> Iterator[bytes]:
    """The stream in small reads: a gzip stream cut short loses nothing before the cut."""
    read = getattr(stream, "read1", stream.read)
    while True:
        try:
            chunk = read(size)
        except (EOFError, zlib.error, gzip.BadGzipFile):
            raise TruncatedStream from None
        if not chunk:
            return
        yield chunk


def stdin_is_terminal() -> bool:
    """Nothing is piped in: `-` would wait for typing, which is never what was meant."""
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError, io.UnsupportedOperation):
        return False
