"""The records cache: each input's records, once read, kept as a DuckDB database file.

Reviewing a recording means asking many questions of the same files; parsing JSON is most
of what each one costs. So each input read from disk gets an entry in the user's cache
directory: its records (typed, every column, bad lines already left out), and later reads
of the unchanged input read the entry instead, which holds the columns apart and reads
only those a query uses.

An entry is built in the background. The command that finds none answers from the input
itself, as `--no-cache` does, and when done starts a detached builder (`python -m
mcp_layers_analysis.cache_build`: its own session, stdio on /dev/null, niced) that writes
the entry; so the first question costs what it costs without a cache. One builder per
entry: the command takes the entry's lock (`flock` on `.<key>.lock`) before it starts
the builder, which inherits it and holds it until the entry is in place; a command that
finds the lock held starts none. A builder writes `.tmp-<uuid>.duckdb` in the directory
and renames it to `<key>.duckdb` when whole, so an entry is whole or absent; DuckDB
checksums its blocks, so a damaged one fails to read, is removed and built again.

An entry is keyed by what its input holds: the input's real path, size and mtime_ns and a
hash of its first and last 64 KiB (answers.fingerprint), plus the record format version,
the column set and its types, DuckDB's version and this cache's own format. Any change to
the input (an append included) gives another key: the old entry is never read again and
ages out. The answer cache (answers.py) keeps its files here too (`<key>.answer`).

DuckDB files rather than Parquet: measured on 1M records, writing one took as long as
Parquet (13 s against 13-16 s) and `summary` over it ran in half the time (0.64 s against
1.32 s); and DuckDB checks every block it reads, where Parquet as DuckDB writes it has no
checksums.

The directory is `MCP_LAYERS_CACHE_DIR`, else `$XDG_CACHE_HOME/mcp-layers/records`, else
`~/.cache/mcp-layers/records`. Its total size is bounded (`MCP_LAYERS_CACHE_MB`, else the
smaller of 2 GB and a tenth of the free disk): past it, the least recently used entries
and answers (reading one touches it) are removed. A directory that cannot be written
means no cache, said once on stderr, never a failure.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from . import answers

#: This cache's own layout: raise it when an entry's tables change (3: every column).
CACHE_FORMAT: Final = 3

#: The default bound, unless a tenth of the free disk is less.
DEFAULT_LIMIT_BYTES: Final = 2 * 1024**3

#: An entry's name ends so.
SUFFIX: Final = ".duckdb"

#: What the bound counts: entries and answers.
KEPT: Final = (SUFFIX, answers.SUFFIX)

#: The free space a build wants, as a share of its inputs' size (1/ROOM_SHARE).
ROOM_SHARE: Final = 4

#: A builder's leftovers (killed mid-build) older than this are removed by eviction.
STALE_SECONDS: Final = 24 * 3600

Warn = Callable[[str], None]

#: Whether this process has said that the cache is off (said once, whoever finds it).
_said_off = False


def directory() -> Path:
    """Where the entries are (not created here)."""
    return Path(answers.cache_dir())


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


def _free_bytes(where: Path) -> int:
    """Free space where the entries are (the directory, or its parent before it exists)."""
    return shutil.disk_usage(where if where.exists() else where.parent).free


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
    h.update(answers.fingerprint(path).encode())
    return h.hexdigest()


def say_off(warn: Warn, where: Path | str, why: str, *, answer: bool = False) -> None:
    """The one warning that the cache is off for this run (`answer`: found only when
    keeping the answer, the inputs or their entries read already)."""
    global _said_off
    if not _said_off:
        if answer:
            warn(f"mcp-layers: answer cache off for this run ({where}: {why}); answer not kept")
        else:
            warn(f"mcp-layers: records cache off for this run ({where}: {why}); reading the inputs")
    _said_off = True


@dataclass(frozen=True, slots=True)
class Usage:
    """What `mcp-layers cache info` prints."""

    directory: Path
    entries: int
    answers: int
    building: int
    total_bytes: int
    limit_bytes: int
    oldest_use: float | None  # seconds since the epoch
    newest_use: float | None


def _entries(where: Path, suffixes: tuple[str, ...] = KEPT) -> list[tuple[float, int, Path]]:
    """(last use, size, path) of every whole entry (and answer)."""
    found = []
    try:
        names = list(where.iterdir())
    except OSError:
        return []
    for p in names:
        if p.name.endswith(suffixes) and not p.name.startswith("."):
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
        sum(1 for _, _, p in found if p.name.endswith(SUFFIX)),
        sum(1 for _, _, p in found if p.name.endswith(answers.SUFFIX)),
        building(where),
        sum(n for _, n, _ in found),
        limit_bytes(where if where.exists() else where.parent),
        min(uses) if uses else None,
        max(uses) if uses else None,
    )


def clear() -> tuple[int, int]:
    """Remove every entry and answer (and leftovers of builds); returns (entries, bytes)
    removed."""
    where = directory()
    n = total = 0
    try:
        names = list(where.iterdir())
    except OSError:
        return 0, 0
    for p in names:
        ours = p.name.endswith(KEPT) or p.name.startswith(".tmp-") or p.name.endswith(".lock")
        if not ours or _held(p):
            continue  # not ours, or a build under way (its lock)
        try:
            size = p.stat().st_size
            p.unlink()
        except OSError:
            continue
        if p.name.endswith(SUFFIX) and not p.name.startswith("."):
            n += 1
        total += size
    return n, total


# --------------------------------------------------------------------- builds


def _lock_path(where: Path, k: str) -> Path:
    return where / f".{k}.lock"


def _held(path: Path) -> bool:
    """A lock file some builder holds."""
    if not path.name.endswith(".lock"):
        return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
    return False


def building(where: Path | None = None) -> int:
    """How many entries are being built now (their locks held)."""
    where = directory() if where is None else where
    try:
        return sum(1 for p in where.glob(".*.lock") if _held(p))
    except OSError:
        return 0


def wait_for_builds(timeout: float, where: Path | None = None) -> bool:
    """Wait until no entry is being built (at most `timeout` seconds); whether none is."""
    deadline = time.monotonic() + timeout
    while building(where):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)
    return True


def try_lock(where: Path, k: str) -> int | None:
    """A descriptor holding the lock of entry `k`; None when another holds it. Raises
    OSError when the directory cannot be written."""
    path = _lock_path(where, k)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # its holder removed it as we opened it: take the new one


def unlock(where: Path, k: str, fd: int) -> None:
    """The lock of entry `k` given up (its file removed first, while still held, so that
    a waiting command never takes a lock nobody else can see)."""
    with contextlib.suppress(OSError):
        _lock_path(where, k).unlink()
    os.close(fd)


# --------------------------------------------------------------------- the cache


class Cache:
    """The cache as one command uses it: look up, build in the background, evict;
    disabled, with one warning, the first time the directory cannot be written."""

    def __init__(self, warn: Warn, where: Path | None = None) -> None:
        global _said_off
        _said_off = False  # a command's own: its answer, kept afterwards, says no more
        self.where = directory() if where is None else where
        self.warn = warn
        self.disabled = False

    def _give_up(self, why: str) -> None:
        say_off(self.warn, self.where, why)
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

    def build_later(self, wanted: Sequence[tuple[str, str]]) -> int:
        """Start one detached builder for the entries `wanted` ((input path, key)) that no
        other builder has under way; how many it builds."""
        if self.disabled or not wanted:
            return 0
        locks: list[tuple[str, str, int]] = []
        try:
            self.where.mkdir(parents=True, exist_ok=True)
            # An entry takes a fraction of its input (1/5 to 1/30 measured): room for a
            # quarter, or the disk is as good as full.
            need = sum(os.path.getsize(path) for path, _ in wanted) // ROOM_SHARE
            free = _free_bytes(self.where)
            if free < need:
                self._give_up(f"no room for an entry: {free // 1024**2} MiB free")
                return 0
            for path, k in wanted:
                fd = try_lock(self.where, k)
                if fd is not None:
                    locks.append((path, k, fd))
        except OSError as exc:
            for _, _, fd in locks:
                os.close(fd)
            self._give_up(exc.strerror or str(exc))
            return 0
        if not locks:
            return 0
        argv = [sys.executable, "-m", "mcp_layers_analysis.cache_build", str(self.where)]
        for path, k, fd in locks:
            argv += [path, k, str(fd)]
        try:
            subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                pass_fds=[fd for _, _, fd in locks],
                start_new_session=True,  # not the terminal's: Ctrl-C after this never stops it
            )
        except OSError as exc:
            self._give_up(exc.strerror or str(exc))
            return 0
        finally:
            for _, _, fd in locks:
                os.close(fd)  # the builder holds the locks now (the same open files)
        return len(locks)

    def store(self, built: Path, k: str) -> Path | None:
        """Move a built entry in; None when the cache cannot take it."""
        if self.disabled:
            return None
        target = self.where / f"{k}{SUFFIX}"
        limit = limit_bytes(self.where if self.where.exists() else self.where.parent)
        size = built.stat().st_size
        if size > limit:
            built.unlink(missing_ok=True)
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
            with contextlib.suppress(OSError):
                partial.unlink()
            self._give_up(exc.strerror or str(exc))
            return None
        if not moved:
            built.unlink(missing_ok=True)
        evict(self.where, limit, keep=target)
        return target


def keep_answer(path: str, data: bytes) -> None:
    """An answer file written whole (a temporary file renamed), then the bound kept; a
    cache that cannot take it says so once (on stderr), and nothing else happens."""
    where = Path(path).parent
    partial = where / f".tmp-{uuid.uuid4().hex}{answers.SUFFIX}"
    try:
        where.mkdir(parents=True, exist_ok=True)
        partial.write_bytes(data)
        os.replace(partial, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            partial.unlink()
        say_off(lambda m: print(m, file=sys.stderr), where, exc.strerror or str(exc), answer=True)
        return
    evict(where, limit_bytes(where), keep=Path(path))


def evict(where: Path, limit: int, keep: Path) -> None:
    """The least recently used entries and answers removed until the rest fit in `limit`;
    a killed builder's leftovers removed once stale."""
    found = sorted(_entries(where))
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
    stale = time.time() - STALE_SECONDS
    with contextlib.suppress(OSError):
        for p in where.glob(".tmp-*"):
            with contextlib.suppress(OSError):
                if p.stat().st_mtime < stale:
                    p.unlink()
