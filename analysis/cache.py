"""The records cache: each input's records, once read, kept as a DuckDB database file.

Reviewing a recording means asking many questions of the same files; parsing JSON is most
of what each one costs. So the first read of an input writes its records (typed, bad
lines already left out) to an entry in the user's cache directory, and later reads of the
unchanged input read the entry instead, which holds the columns apart and reads only those
a query uses. The first entry holds the columns its first command read; a later command
that reads one more has it built again with every column (DuckEngine._from_cache).

An entry is keyed by what its input holds: the input's real path, size and mtime_ns and a
hash of its first and last 64 KiB, plus the record format version, the column set and its
types, DuckDB's version and this cache's own format. Any change to the input (an append
included) gives another key: the old entry is never read again and ages out. An entry is
built in the command's temporary directory and moved in by rename, so one is whole or
absent; DuckDB checksums its blocks, so a damaged one fails to read and is rebuilt.

DuckDB files rather than Parquet: measured on 1M records, writing one took as long as
Parquet (13 s against 13-16 s) and `summary` over it ran in half the time (0.64 s against
1.32 s); and DuckDB checks every block it reads, where Parquet as DuckDB writes it has no
checksums.

The directory is `MCP_LAYERS_CACHE_DIR`, else `$XDG_CACHE_HOME/mcp-layers/records`, else
`~/.cache/mcp-layers/records`. Its total size is bounded (`MCP_LAYERS_CACHE_MB`, else the
smaller of 2 GB and a tenth of the free disk): past it, the least recently used entries
(reading one touches it) are removed. A directory that cannot be written means no cache,
said once on stderr, never a failure.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

#: This cache's own layout: raise it when an entry's tables change.
CACHE_FORMAT: Final = 2

#: The blocks of an input that go into its key, from its start and its end.
EDGE_BYTES: Final = 64 * 1024

#: The default bound, unless a tenth of the free disk is less.
DEFAULT_LIMIT_BYTES: Final = 2 * 1024**3

#: An entry's name ends so.
SUFFIX: Final = ".duckdb"

Warn = Callable[[str], None]


def directory() -> Path:
    """Where the entries are (not created here)."""
    explicit = os.environ.get("MCP_LAYERS_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "mcp-layers" / "records"


def limit_bytes(where: Path) -> int:
    """The most the entries may take together."""
    explicit = os.environ.get("MCP_LAYERS_CACHE_MB")
    if explicit:
        try:
            return max(0, int(float(explicit) * 1024 * 1024))
        except ValueError:
            pass  # a typo should not stop a command: the default applies
    try:
        free = shutil.disk_usage(where).free
    except OSError:
        return DEFAULT_LIMIT_BYTES
    return min(DEFAULT_LIMIT_BYTES, free // 10)


def _definition(engine: str) -> bytes:
    """What an entry's contents depend on besides its input: the format and columns, and
    the version of the DuckDB that writes and reads it (`engine`)."""
    from mcp_layers_core.record import FORMAT_VERSION

    from .table import COLUMNS

    parts = [
        f"cache {CACHE_FORMAT}",
        f"record v{FORMAT_VERSION}",
        f"duckdb {engine}",
        *(f"{n} {t}" for n, t in COLUMNS.items()),
    ]
    return "\n".join(parts).encode()


def key(path: str, *, engine: str) -> str:
    """The key of what the file at `path` holds now, for DuckDB version `engine`. Raises
    OSError."""
    h = hashlib.blake2b(digest_size=20)
    h.update(_definition(engine))
    real = os.path.realpath(path)
    with open(real, "rb") as f:
        st = os.fstat(f.fileno())
        h.update(f"\0{real}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
        h.update(f.read(EDGE_BYTES))
        if st.st_size > EDGE_BYTES:
            f.seek(max(EDGE_BYTES, st.st_size - EDGE_BYTES))
            h.update(f.read(EDGE_BYTES))
    return h.hexdigest()


@dataclass(frozen=True, slots=True)
class Usage:
    """What `mcp-layers cache info` prints."""

    directory: Path
    entries: int
    total_bytes: int
    limit_bytes: int
    oldest_use: float | None  # seconds since the epoch
    newest_use: float | None


def _entries(where: Path) -> list[tuple[float, int, Path]]:
    """(last use, size, path) of every whole entry."""
    found = []
    try:
        names = list(where.iterdir())
    except OSError:
        return []
    for p in names:
        if p.name.endswith(SUFFIX) and not p.name.startswith("."):
            try:
                st = p.stat()
            except OSError:
                continue  # removed meanwhile by another command's eviction
            found.append((st.st_mtime, st.st_size, p))
    return found


def usage() -> Usage:
    where = directory()
    found = _entries(where)
    uses = [t for t, _, _ in found]
    return Usage(
        where,
        len(found),
        sum(n for _, n, _ in found),
        limit_bytes(where if where.exists() else where.parent),
        min(uses) if uses else None,
        max(uses) if uses else None,
    )


def clear() -> tuple[int, int]:
    """Remove every entry (and leftovers of builds); returns (entries, bytes) removed."""
    where = directory()
    n = total = 0
    try:
        names = list(where.iterdir())
    except OSError:
        return 0, 0
    for p in names:
        if not (p.name.endswith(SUFFIX) or p.name.startswith(".tmp-")):
            continue  # not ours
        try:
            size = p.stat().st_size
            p.unlink()
        except OSError:
            continue
        if p.name.endswith(SUFFIX) and not p.name.startswith("."):
            n += 1
        total += size
    return n, total


class Cache:
    """The cache as one command uses it: look up, store, evict; disabled, with one
    warning, the first time the directory cannot be written."""

    def __init__(self, warn: Warn) -> None:
        self.where = directory()
        self.warn = warn
        self.disabled = False

    def _give_up(self, why: str) -> None:
        if not self.disabled:
            self.warn(f"mcp-layers: records cache off for this run ({why}); reading the inputs")
        self.disabled = True

    def lookup(self, k: str) -> Path | None:
        """The entry for key `k` if there is one (touched: it was just used)."""
        if self.disabled:
            return None
        path = self.where / f"{k}{SUFFIX}"
        try:
            os.utime(path)
        except FileNotFoundError:
            return None
        except OSError:
            # There but not ours to touch (a read-only directory): still readable.
            return path if path.is_file() else None
        return path

    def discard(self, path: Path) -> None:
        """An entry that failed to read: removed, so that it is built again."""
        with contextlib.suppress(OSError):
            path.unlink()

    def store(self, built: Path, k: str) -> Path | None:
        """Move a built entry in; None when the cache cannot take it (then the caller
        reads `built` where it is)."""
        if self.disabled:
            return None
        target = self.where / f"{k}{SUFFIX}"
        limit = limit_bytes(self.where if self.where.exists() else self.where.parent)
        size = built.stat().st_size
        if size > limit:
            return None  # it alone is over the bound: not kept, not worth a warning
        partial = self.where / f".tmp-{uuid.uuid4().hex}{SUFFIX}"
        moved = False
        try:
            self.where.mkdir(parents=True, exist_ok=True)
            try:
                os.replace(built, partial)  # same file system: a rename
                moved = True
            except OSError:
                shutil.copyfile(built, partial)  # another one: a copy, renamed when whole
            os.replace(partial, target)
        except OSError as exc:
            try:
                if moved:
                    os.replace(partial, built)  # the caller reads it there
                else:
                    partial.unlink()
            except OSError:
                pass
            self._give_up(f"{self.where}: {exc.strerror or exc}")
            return None
        if not moved:
            built.unlink(missing_ok=True)
        self._evict(limit, keep=target)
        return target

    def _evict(self, limit: int, keep: Path) -> None:
        """The least recently used entries removed until the rest fit in `limit`."""
        found = sorted(_entries(self.where))
        total = sum(n for _, n, _ in found)
        for _, size, path in found:
            if total <= limit:
                break
            if path == keep:
                continue
            try:
                path.unlink()
            except OSError:
                continue
            total -= size
