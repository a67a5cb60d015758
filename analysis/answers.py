"""The answer cache: a question asked again of unchanged inputs is answered from the bytes
it printed the first time, before click, DuckDB or any query module is imported.

The records cache (cache.py) makes a question cheap to compute; this makes a repeated one
cost no more than Python's start-up. It sits in front of the CLI (launch.py): the command
line is looked up, and when its answer is there and still true it is printed as it was
(stdout, stderr, exit status; for `report`, the page it wrote, written again, so the page
says the minute it was first made) and nothing else runs. `export`'s Parquet files are
not kept: its answer holds only while each file it wrote is still there as it was left
(`fingerprint`), when writing them again would change nothing. Otherwise the command runs as always
with its output copied on the way out, and afterwards kept as an answer when it read its
inputs from disk with DuckDB and the cache on, and exited 0, 1 or 3.

An answer is found by what could change the output without changing the inputs: the
command line, the working directory, Python's version, the environment that output
depends on (`MCP_LAYERS_*`, colour, locale, time zone) and which of stdout and stderr are
terminals. It is still true while the inputs the command line names are the same files
(a directory's or a glob's files found again, in the same order) holding the same bytes
(`fingerprint`: size, mtime_ns, the first and last 64 KiB), and every module the command
ran (outside the standard library: this package, DuckDB's extension, click…) is the file
it was (size, mtime_ns). An answer file ends with a checksum of what precedes it: one cut
short or damaged is removed and the command runs. Only the standard library is imported
here, and only what Python's start-up already has, but for `hashlib`.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any, BinaryIO, Final

#: The commands whose answer is their output; for `report` also the page it wrote, and
#: for `export` the files it wrote, found again as they were left (no server started).
ANSWERED: Final = frozenset(
    {
        "summary",
        "retries",
        "compare",
        "sessions",
        "show",
        "verdicts",
        "hangs",
        "query",
        "report",
        "export",
    }
)

#: An answer's file name ends so.
SUFFIX: Final = ".answer"

#: Raise it when an answer file's layout changes.
FORMAT: Final = b"mcp-layers answer 2\n"

#: The blocks of an input that go into its fingerprint, from its start and its end.
EDGE_BYTES: Final = 64 * 1024

#: Output past this is not kept (a `query` of every record): printed, never stored. A
#: bound on what a run holds while it prints, and on one answer's share of the cache (a
#: 32nd of its default bound); large enough for `show` of a session of 200,000 records
#: (30 MB in JSON), whose first answer takes tens of seconds.
MAX_KEPT_BYTES: Final = 64 * 1024 * 1024

#: The environment output depends on, besides `MCP_LAYERS_*` and `LC_*`.
ENVIRONMENT: Final = ("NO_COLOR", "TZ", "LANG", "PYTHONIOENCODING", "PYTHONUTF8")

#: Exit statuses that are answers (ok, nothing matched, a verdict failed); 2 never is.
KEPT_STATUSES: Final = frozenset({0, 1, 3})

_DIGEST_HEX: Final = 64


def cache_dir() -> str:
    """The cache's directory (cache.directory, without pathlib: this runs before the CLI)."""
    explicit = os.environ.get("MCP_LAYERS_CACHE_DIR")
    if explicit:
        return explicit
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mcp-layers", "records")


def fingerprint(path: str) -> str:
    """What the file at `path` holds now: its real path, size and mtime_ns and a hash of its
    first and last EDGE_BYTES. Raises OSError."""
    h = hashlib.blake2b(digest_size=20)
    real = os.path.realpath(path)
    with open(real, "rb") as f:
        st = os.fstat(f.fileno())
        h.update(f"\0{real}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
        h.update(f.read(EDGE_BYTES))
        if st.st_size > EDGE_BYTES:
            f.seek(max(EDGE_BYTES, st.st_size - EDGE_BYTES))
            h.update(f.read(EDGE_BYTES))
    return h.hexdigest()


def answerable(argv: Sequence[str]) -> bool:
    """Whether this command line may be answered from, and kept in, the answer cache."""
    if not argv or argv[0] not in ANSWERED:
        return False
    if os.environ.get("MCP_LAYERS_NO_ANSWERS"):
        return False
    for arg in argv[1:]:
        if arg in ("--no-cache", "-", "-h", "--help", "spark", "--engine=spark"):
            return False  # `spark`: conservatively, any argument that may select Spark
    return True


def _key(argv: Sequence[str]) -> str:
    env = sorted(
        (k, v)
        for k, v in os.environ.items()
        if k in ENVIRONMENT
        or k.startswith("LC_")
        or (k.startswith("MCP_LAYERS_") and k not in ("MCP_LAYERS_CACHE_MB",))
    )
    ttys = [_isatty(s) for s in (sys.stdout, sys.stderr)]
    what = [FORMAT.decode(), sys.version, sys.executable, os.getcwd(), list(argv), env, ttys]
    return hashlib.blake2b(json.dumps(what).encode(), digest_size=20).hexdigest()


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _path(argv: Sequence[str]) -> str:
    return os.path.join(cache_dir(), _key(argv) + SUFFIX)


# --------------------------------------------------------------------- the lookup


def replay(argv: Sequence[str]) -> int | None:
    """Print the kept answer to `argv` and return its exit status; None when there is none
    that is still true (a damaged one is removed)."""
    path = _path(argv)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    parsed = _parse(data)
    if parsed is None:
        _remove(path)
        return None
    meta, out, err, files = parsed
    if not _still_true(meta) or not _still_there(meta):
        return None  # an older answer: the new one will replace it
    try:
        for name, data in files:
            _write_file(name, data)
    except OSError:
        return None  # the command runs, and says what is wrong with its output
    with contextlib.suppress(OSError):  # a read-only cache is still read
        os.utime(path)  # used: the last to be evicted
    try:
        _write(sys.stdout, out)
    except BrokenPipeError:  # the reader went away (`| head`): as the CLI does, exit 0
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    _write(sys.stderr, err)
    return int(meta["exit"])


def _write_file(name: str, data: bytes) -> None:
    """`data` as the file `name`, whole or not at all (a temporary file renamed)."""
    partial = f"{name}.{os.getpid()}.partial"
    try:
        with open(partial, "wb") as f:
            f.write(data)
        os.replace(partial, name)
    except OSError:
        _remove(partial)
        raise


def _write(stream: Any, data: bytes) -> None:
    stream.flush()
    stream.buffer.write(data)
    stream.buffer.flush()


#: What an answer file holds: its meta, stdout, stderr, and the files the command wrote as
#: (absolute path, bytes).
Parsed = tuple[dict[str, Any], bytes, bytes, list[tuple[str, bytes]]]


def _parse(data: bytes) -> Parsed | None:
    """(meta, stdout, stderr, files) of an answer file; None when it is not whole."""
    body, digest = data[: -_DIGEST_HEX - 1], data[-_DIGEST_HEX - 1 : -1]
    if not data.startswith(FORMAT) or not data.endswith(b"\n"):
        return None
    if hashlib.blake2b(body, digest_size=32).hexdigest().encode() != digest:
        return None
    head_end = body.index(b"\n", len(FORMAT))
    try:
        meta = json.loads(body[len(FORMAT) : head_end])
        n_out, n_err = int(meta["stdout"]), int(meta["stderr"])
        written = [(str(name), int(size)) for name, size in meta["files"]]
    except (ValueError, KeyError, TypeError):
        return None
    rest = body[head_end + 1 :]
    if len(rest) != n_out + n_err + sum(size for _, size in written):
        return None
    files: list[tuple[str, bytes]] = []
    at = n_out + n_err
    for name, size in written:
        files.append((name, rest[at : at + size]))
        at += size
    return meta, rest[:n_out], rest[n_out : n_out + n_err], files


def _still_true(meta: dict[str, Any]) -> bool:
    """The modules the answer came from, and its inputs, are as they were."""
    for name, mtime_ns, size in meta["modules"]:
        try:
            st = os.stat(name)
        except OSError:
            return False
        if (st.st_mtime_ns, st.st_size) != (mtime_ns, size):
            return False
    sources = _sources(meta["paths"])
    if sources is None or [s[0] for s in sources] != [s[0] for s in meta["sources"]]:
        return False
    try:
        return all(fingerprint(real) == fp for real, fp in meta["sources"])
    except OSError:
        return False


def _still_there(meta: dict[str, Any]) -> bool:
    """The files the command left (`export`'s) are as it left them."""
    try:
        return all(fingerprint(name) == fp for name, fp in meta["left"])
    except (OSError, KeyError, TypeError, ValueError):
        return False


def _sources(paths: Sequence[str]) -> list[tuple[str, str]] | None:
    """The inputs `paths` name now, as (real path, name): the files named, or when one is a
    directory or a glob, what inputs.expand finds; None when one cannot be read."""
    if all(os.path.isfile(p) for p in paths):
        seen: dict[str, str] = {}
        for p in paths:
            seen.setdefault(os.path.realpath(p), p)  # named twice: read once
        return [(real, name) for real, name in seen.items()]
    from .errors import InputError  # a directory or a glob: the CLI's own expansion
    from .inputs import expand

    try:
        found = expand(paths)
    except InputError:
        return None
    return [(os.path.realpath(s.path), s.name) for s in found if s.path is not None]


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


# --------------------------------------------------------------------- keeping one


class _Tee(io.RawIOBase):
    """A stream's bytes written on to its file descriptor, and copied (up to a bound)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.kept = bytearray()
        self.overflow = False
        self.broken = False  # a write failed (the reader went away): the copy is not whole

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return os.isatty(self.fd)

    def fileno(self) -> int:
        return self.fd

    def write(self, b: Any) -> int:
        data = bytes(b)
        try:
            n = os.write(self.fd, data)
        except OSError:
            self.broken = True
            raise
        if not self.overflow:
            if len(self.kept) + n > MAX_KEPT_BYTES:
                self.overflow = True
                self.kept.clear()
            else:
                self.kept += data[:n]
        return n


class _Recording:
    """One command's run being kept: its output copied, and what it read."""

    def __init__(self, argv: Sequence[str]) -> None:
        self.argv = list(argv)
        self.paths: list[str] | None = None
        self.sources: list[tuple[str, str]] = []
        self.written: list[str] = []  # files the command wrote, kept, absolute
        self.left: list[str] = []  # files it wrote, found again on replay, absolute
        self.tees: list[_Tee] = []
        self.originals: list[Any] = []
        self.interrupted = False
        for name in ("stdout", "stderr"):
            self._divert(name)
        signal.signal(signal.SIGINT, self._interrupt)

    def _interrupt(self, signum: int, frame: object) -> None:
        # Click turns Ctrl-C into "Aborted!" and exit 1, which is also "nothing matched".
        self.interrupted = True
        raise KeyboardInterrupt

    def _divert(self, name: str) -> None:
        stream = getattr(sys, name)
        stream.flush()
        tee = _Tee(stream.fileno())
        buffered: BinaryIO = io.BufferedWriter(tee)
        text = io.TextIOWrapper(
            buffered,
            encoding=stream.encoding,
            errors=stream.errors,
            line_buffering=stream.line_buffering,
            write_through=name == "stderr",
        )
        self.tees.append(tee)
        self.originals.append(stream)
        setattr(sys, name, text)

    def restore(self) -> None:
        for name, original in zip(("stdout", "stderr"), self.originals, strict=True):
            stream = getattr(sys, name)
            with contextlib.suppress(OSError, ValueError):  # a reader gone away
                stream.flush()
            setattr(sys, name, original)


_current: _Recording | None = None


def start(argv: Sequence[str]) -> None:
    """Copy this run's output from here on, to keep it as the answer to `argv`."""
    global _current
    try:
        _current = _Recording(argv)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        _current = None  # streams without file descriptors (a test's): nothing kept


def note_read(paths: Sequence[str], sources: Sequence[tuple[str, str]], cached: bool) -> None:
    """The CLI read `sources` ((real path, name)), named by `paths`; `cached`: from disk,
    with DuckDB and the records cache on (else its answer is not kept)."""
    if _current is None:
        return
    if not cached or (_current.paths is not None and _current.paths != list(paths)):
        _current.paths = []  # a command that read differently: never kept
        return
    _current.paths = list(paths)
    _current.sources = list(sources)


def note_written(path: str) -> None:
    """The command wrote the file at `path` (`report`'s page): part of its answer."""
    if _current is not None:
        _current.written.append(os.path.abspath(path))


def note_left(path: str) -> None:
    """The command wrote the file at `path` (one of `export`'s), too large to keep: its
    answer holds while the file is still as it was left."""
    if _current is not None:
        _current.left.append(os.path.abspath(path))


def finish(status: object) -> None:
    """The run ended with exit `status`: its output restored to the real streams, and kept
    as the answer when it is one."""
    global _current
    rec, _current = _current, None
    if rec is None:
        return
    rec.restore()
    code = 0 if status is None else status
    if not rec.paths or not isinstance(code, int) or code not in KEPT_STATUSES:
        return
    if rec.interrupted or any(t.overflow or t.broken for t in rec.tees):
        return
    try:
        files = [(name, _read_small(name)) for name in rec.written]
        meta = {
            "paths": rec.paths,
            "sources": [[real, fingerprint(real)] for real, _ in rec.sources],
            "modules": _modules(),
            "exit": code,
            "stdout": len(rec.tees[0].kept),
            "stderr": len(rec.tees[1].kept),
            "files": [[name, len(data)] for name, data in files],
            "left": [[name, fingerprint(name)] for name in rec.left],
        }
    except OSError:
        return  # an input gone meanwhile, or a page too large to keep
    body = (
        FORMAT
        + json.dumps(meta, separators=(",", ":")).encode()
        + b"\n"
        + bytes(rec.tees[0].kept)
        + bytes(rec.tees[1].kept)
        + b"".join(data for _, data in files)
    )
    data = body + hashlib.blake2b(body, digest_size=32).hexdigest().encode() + b"\n"
    from . import cache  # only now: the answer is out

    cache.keep_answer(_path(rec.argv), data)


def _read_small(name: str) -> bytes:
    """The file `name`'s bytes; OSError when it holds more than an answer keeps."""
    with open(name, "rb") as f:
        data = f.read(MAX_KEPT_BYTES + 1)
    if len(data) > MAX_KEPT_BYTES:
        raise OSError(f"{name}: more than an answer keeps")
    return data


def _modules() -> list[tuple[str, int, int]]:
    """Every module file this run imported outside the standard library, with its mtime_ns
    and size: the code the answer came from."""
    stdlib = (os.path.realpath(sys.base_prefix) + os.sep, sys.base_prefix + os.sep)
    out: dict[str, tuple[int, int]] = {}
    for module in list(sys.modules.values()):
        name = getattr(module, "__file__", None)
        if not isinstance(name, str) or name in out:
            continue
        if name.startswith(stdlib) and "site-packages" not in name:
            continue
        try:
            st = os.stat(name)
        except OSError:
            continue  # a module without a file of its own (frozen, zipped)
        out[name] = (st.st_mtime_ns, st.st_size)
    return sorted((n, m, s) for n, (m, s) in out.items())
