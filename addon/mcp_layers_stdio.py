"""`mcp-layers wrap -- CMD ARGS...`: run an MCP stdio server and record what crosses its pipes.

A drop-in prefix for a server's `command` in a client's config (docs/stdio.md). The
wrapper starts CMD with the client's environment, in the client's process group (never
`setsid`: the Python SDK kills the group, and a child outside it would outlive the
client), and moves bytes: the client's stdin to CMD, CMD's stdout and stderr back, each
chunk written on as soon as it is read, before anything looks at it. Nothing is ever
held back, changed or answered on the server's behalf.

Why this module sits beside the HTTP adapter (addon/mcp_layers.py) and not in the core:
it does I/O (processes, pipes, signals, a file), and the core is sans-IO; what it sees
goes to the core's `StdioObserver` (mcp_layers_core/stdio.py), which turns lines into the
same records. Why it imports only the standard library: a client counts the wrapper's
start-up against the server's (Codex gives both 10 s), so the core (the tracker, the
classifiers, the JSON writer) is imported by the recorder while the server starts.

Two processes. The wrapper runs three pumps (stdin, stdout, stderr), threads that move
bytes and put a copy of each chunk in the recorder's spool before writing it on. Without
fault rules the bytes never enter this process (Linux): each direction is spliced into a
pipe of the wrapper's, `tee(2)`d (libc's, through ctypes: Python's `os` has no `tee`) into
a second and spliced from there into the spool, then spliced on (`SplicePump`); where an
end cannot be spliced, or with fault rules (which read the lines), it is `read` and
`write` (`pump`, `FaultLines`). The recorder is a fork of the wrapper (made before any
thread starts) that reads the copies, cuts them into lines, feeds them to the core and
writes the records. A process, not a thread: the recorder's Python would hold the GIL the
pumps need, and a pump waiting for it waits up to the interpreter's switch interval
(5 ms) per chunk. Both directions share the one spool, a frame at a time (`Feed`), so the
recorder reads them in the order they were copied: what one side sends in reaction to
the other is always recorded after it.

The spool is a file, not a pipe, so that the bytes never wait for the recorder: a pipe
fills when the recorder is behind, and a flood would go at the recorder's pace (about
12,500 lines a second on two cores), while a file takes the copies at the speed of the
page cache. The recorder reads behind the pumps (in batches while traffic flows, woken
through a pipe only from sleep: `Idle`), pauses while the traffic outpaces it or its
parsing takes a core's share the traffic needs (`Pause`, `Busy`), returns the space it
has read to the file system (`FALLOC_FL_PUNCH_HOLE`), and runs at a low priority; only
`SPOOL_MAX_BYTES` behind do the pumps wait for it. The file is unlinked at once
(`O_TMPFILE` where the file system has it), in the record directory (a disk the user
chose, not /tmp's memory): nothing is left behind.

The main thread waits for the server, forwards SIGTERM, SIGINT and SIGHUP to it, and exits
as it did: its exit code, or its signal raised again on the wrapper (128+N where that is
not possible). It waits for the recorder to finish the records first (a few milliseconds
unless a flood left it behind), unless the client signals it to go: the recorder runs in
a session of its own (`setsid`), so the client's kill of its process group at shutdown
cannot cut the records short, and it lets go of the client's stderr when the wrapper
exits (Linux: `PR_SET_PDEATHSIG`). It ends when it has read the last copy.

Settings come only from argv: clients pass servers a filtered environment.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import signal
import struct
import sys
import threading
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # `typing` costs milliseconds at start-up; only the checker needs it
    import mmap
    from collections.abc import Callable, Iterator
    from typing import Any, BinaryIO, Final

    from mcp_layers_core.jsonl import RecordWriter
    from mcp_layers_core.stdio import StdioObserver
    from mcp_layers_core.stdio_faults import StdioFaults

    #: `tee(src, dst, n)`: bytes copied (libc's, `load_tee`).
    Tee = Callable[[int, int, int], int]

USAGE: Final = (
    "usage: mcp-layers wrap [--record-dir DIR] [--name NAME] [--scenario LABEL] "
    "[--max-line-kb N] [--fault RULE]... [--faults PRESET|FILE] [--seed N] -- CMD [ARGS...]\n"
    "       mcp-layers wrap --install|--uninstall CLIENT SERVER [--config FILE] [options]"
)

#: The longest line the recorder reads (the core's JSON body cap); longer ones are passed
#: on unread, noted `line_over_cap`.
DEFAULT_MAX_LINE_KB: Final = 16 * 1024

#: One read from a pipe. The pipes to the server are widened to this where the system
#: allows (Linux `F_SETPIPE_SZ`): fewer, larger reads and writes for a large message.
READ_BYTES: Final = 1 << 20

#: What the recorder reads of the spool at a time.
SPOOL_READ_BYTES: Final = 1 << 20

#: The recorder returns the spool's space it has read each time it has read this much
#: more: the disk holds about as much as the recorder is behind.
SPOOL_TRIM_BYTES: Final = 8 << 20

#: When the recorder is `LAG_S` behind the bytes (the traffic outpaces it), it reads no
#: more while copies keep coming (the spool grew within `QUIET_S`), until it is
#: `SPOOL_DEFER_BYTES` behind: its CPU would be taken from the client and the server
#: (measured on two cores: a TypeScript SDK server answered 30 % fewer pipelined calls a
#: second with the recorder parsing meanwhile, even at the lowest priority, and as many
#: without; its answers come in bursts with gaps of more than 10 ms). A recorder that
#: keeps up pauses only when busy (`BUSY_SHARE`); otherwise its records follow the
#: messages at once.
LAG_S: Final = 0.05
QUIET_S: Final = 0.1
SPOOL_DEFER_BYTES: Final = 64 << 20

#: A recorder that keeps up can still take the CPU the traffic needs: on a sustained
#: ping-pong (each message answered at once, never `LAG_S` behind) its parsing took a
#: core's share from the client and the server, +50 to +122 µs a message on two cores.
#: So it also yields (`Pause`) once it has used more than `BUSY_SHARE` of a core over a
#: window of `BUSY_WINDOW_S` (`Busy`): its records then wait for a pause in the traffic.
#: A burst too short to fill the window is recorded at once.
BUSY_WINDOW_S: Final = 0.05
BUSY_SHARE: Final = 0.25

#: The most the recorder may be behind: past it the pumps wait for it (the disk is
#: bounded, and no copy is ever dropped).
SPOOL_MAX_BYTES: Final = 1 << 30

#: The recorder's niceness: what the relay, the client and the server leave of the CPU is
#: enough for it (it is only ever behind in a flood), and a busy machine's other work
#: comes first.
RECORDER_NICE: Final = 10

#: The wrapper's own pipes of the splice relay (two a direction), and so the most one
#: splice moves: a few system calls per 256 KiB cost next to nothing, and a pipe's size
#: counts against the user's pipe budget (`pipe-user-pages-soft`, 64 MiB by default;
#: past it the user's new pipes are made small), which a client running many wrapped
#: servers shares.
SPLICE_BYTES: Final = 256 * 1024

#: A frame's header in the spool: what follows (b"c" client->server, b"s"
#: server->client, b"x" a control message), its offset in that direction, when it was
#: read, and its length.
HEADER: Final = struct.Struct("<cQdI")

#: The recorder's position in the spool, in memory both processes share; after it, one
#: byte the recorder sets while it sleeps (`Idle`): only then do the pumps wake it.
POSITION: Final = struct.Struct("<Q")
ASLEEP: Final = POSITION.size

#: Having read some copies, the recorder looks for more this much later (unless woken):
#: while traffic flows it reads it in batches, and no message costs the pumps a wake-up
#: (a system call, and the recorder scheduled once a message). Records follow their
#: messages by at most this much. Measured on a ping-pong (benchmarks/README.md): a short
#: burst gained most (+6 µs a message, 2 x 500 round trips); a sustained one, where the
#: recorder's parsing takes most of the second core either way, little (+50 to +60 µs
#: against +61, 3 x 3,000).
DOZE_S: Final = 0.01

#: The longest the recorder sleeps without a wake-up before it looks at the spool anyway:
#: a bound, should a wake-up ever be missed, not a pace.
SLEEP_S: Final = 1.0

#: After the server exits and its stdout ends: how long its stderr may still take (a
#: grandchild holding it open must not keep the wrapper alive).
STDERR_GRACE_S: Final = 1.0

FORWARDED: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

#: What a child must not inherit from Python: it ignores SIGPIPE (as `subprocess` resets).
RESET_IN_CHILD: Final = tuple(
    s for s in (getattr(signal, n, None) for n in ("SIGPIPE", "SIGXFZ", "SIGXFSZ")) if s
)


class Refusal(Exception):
    """A setting that cannot work: one line on stderr, before the server starts."""


class Help(Exception):
    """`--help`: the usage on stdout, exit 0."""


class Options:
    __slots__ = (
        "command",
        "config",
        "fault_rules",
        "faults_source",
        "install",
        "max_line",
        "name",
        "passed",
        "record_dir",
        "scenario",
        "seed",
    )

    def __init__(self) -> None:
        self.record_dir: str | None = None
        self.name: str | None = None
        self.scenario: str | None = None
        self.max_line = DEFAULT_MAX_LINE_KB * 1024
        self.command: list[str] = []
        self.fault_rules: list[str] = []  # --fault, each one rule in the inline form
        self.faults_source: str | None = None  # --faults, a preset's name or a rules file
        self.seed = 0
        #: --install/--uninstall CLIENT SERVER, and the file (--config) when not the usual.
        self.install: tuple[str, str, str] | None = None
        self.config: str | None = None
        self.passed: list[str] = []  # the wrapper's own options, as given


def parse(argv: list[str]) -> Options:
    """`argv` after `wrap`. The command starts after `--`, or at the first word that is not
    an option (so `mcp-layers wrap npx -y server` works too)."""
    o = Options()
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg in ("-h", "--help"):
            raise Help(USAGE)
        if arg == "--":
            o.command = argv[i + 1 :]
            break
        if not arg.startswith("--"):
            o.command = argv[i:]
            break
        if arg in ("--install", "--uninstall"):
            # CLIENT SERVER: an entry of a client's config to rewrite, not a server to run.
            if i + 2 >= len(argv):
                raise Refusal(f"{arg} needs a client and a server name; {USAGE}")
            o.install = (arg, argv[i + 1], argv[i + 2])
            i += 3
            continue
        name, eq, value = arg.partition("=")
        if name not in (
            "--config",
            "--record-dir",
            "--name",
            "--scenario",
            "--max-line-kb",
            "--fault",
            "--faults",
            "--seed",
        ):
            raise Refusal(f"unknown option {name}; {USAGE}")
        if not eq:
            i += 1
            if i >= len(argv):
                raise Refusal(f"{name} needs a value; {USAGE}")
            value = argv[i]
        if name == "--config":
            o.config = value
            i += 1
            continue
        o.passed += [name, value]  # what `--install` puts before the command
        if name == "--record-dir":
            o.record_dir = value
        elif name == "--name":
            o.name = value
        elif name == "--scenario":
            o.scenario = value
        elif name == "--fault":
            o.fault_rules.append(value)
        elif name == "--faults":
            o.faults_source = value
        elif name == "--seed":
            try:
                o.seed = int(value)
            except ValueError:
                raise Refusal(f"--seed must be an integer, not {value!r}") from None
        else:
            try:
                kb = int(value)
            except ValueError:
                kb = 0
            if kb <= 0:
                raise Refusal(f"--max-line-kb must be a positive number of KiB, not {value!r}")
            o.max_line = kb * 1024
        i += 1
    if o.install is not None:
        if o.command:
            raise Refusal(f"{o.install[0]} takes no command (it is in the client's config)")
        return o
    if not o.command:
        raise Refusal(f"no command to run; {USAGE}")
    return o


def default_record_dir() -> str:
    """An absolute place: a stdio server's working directory is the client's, or `/`."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "state"
    )
    return os.path.join(state, "mcp-layers", "recordings")


def open_recording(directory: str, started: float) -> tuple[int, str]:
    """The run's file, created now (0600 in a 0700 directory), so that a directory that
    cannot be written refuses the run before the server starts."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started))
    path = os.path.join(directory, f"mcp-stdio-{stamp}-{os.getpid()}.jsonl")
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    except OSError as e:
        raise Refusal(
            f"cannot write recordings to {directory!r} ({e.strerror}); "
            "name a writable directory with --record-dir"
        ) from None
    return fd, path


def widen(fd: int, size: int = READ_BYTES) -> int:
    """Let a pipe hold `size` bytes (Linux), never less than it held; elsewhere, for what
    is not a pipe, or when refused, as it is. Returns what it holds (`size` if unknown)."""
    getsize = getattr(fcntl, "F_GETPIPE_SZ", None)
    setsize = getattr(fcntl, "F_SETPIPE_SZ", None)
    if getsize is None or setsize is None:
        return size
    try:
        held = int(fcntl.fcntl(fd, getsize))
        if held < size:
            held = int(fcntl.fcntl(fd, setsize, size))
    except OSError:
        return size
    return held


def write_all(fd: int, data: bytes | memoryview) -> None:
    view = memoryview(data)
    while view:
        try:
            n = os.write(fd, view)
        except BlockingIOError:
            wait_for(fd, write=True)
            continue
        view = view[n:]


def wait_for(fd: int, write: bool = False) -> None:
    """Until `fd` can be read (written). Only for an end the client made non-blocking:
    EAGAIN there is neither an end of input nor a broken pipe."""
    import select  # rare: not on the start-up path

    select.select([] if write else [fd], [fd] if write else [], [])


def open_spool(directory: str) -> int:
    """A file for the recorder's copies in `directory`, with no name (it goes with the last
    process that holds it): `O_TMPFILE` where the file system has it, else made and
    unlinked at once. Raises OSError."""
    tmpfile = getattr(os, "O_TMPFILE", 0)
    if tmpfile:
        try:
            return os.open(directory, tmpfile | os.O_RDWR, 0o600)
        except OSError as e:
            if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
                raise
    import tempfile  # rare: not on the start-up path where O_TMPFILE works

    fd, path = tempfile.mkstemp(prefix=".mcp-stdio-spool-", dir=directory)
    os.unlink(path)
    return fd


class Spool:
    """The recorder's copies: frames appended to a file (`fd`) by the pumps, read behind
    them by the recorder, and a pipe through which a frame written wakes the recorder when
    it sleeps (`wake_r`, `wake_w`). Made before the recorder is forked: both hold all
    three."""

    def __init__(self, directory: str) -> None:
        import mmap

        self.fd = open_spool(directory)
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)  # a wake-up already waiting is enough
        #: Closed by the wrapper after the last frame: ends the recorder's pauses.
        self.done_r, self.done_w = os.pipe()
        #: How far the recorder has read, shared across the fork (`SPOOL_MAX_BYTES`).
        self.read = mmap.mmap(-1, POSITION.size + 1)

    def writer(self) -> Feed:
        """The wrapper's side (after the fork): the pumps' `Feed`."""
        os.close(self.wake_r)
        os.close(self.done_r)
        return Feed(self.fd, self.wake_w, self.read, self.done_w)

    def reader(self) -> Iterator[tuple[bytes, int, float, bytes]]:
        """The recorder's side (after the fork): the frames, in order."""
        os.close(self.wake_w)
        os.close(self.done_w)
        return frames(self.fd, self.wake_r, self.read, self.done_r)


class Feed:
    """The spool's writing end, shared by the pumps and the main thread. One frame at a
    time (a lock), so the recorder reads both directions in the order they were copied:
    a copy is in the spool before its bytes are written on, so what the other side sends
    in reaction always comes after it. The spool is a file: a write never waits for the
    recorder. If the recorder is gone (its wake-up pipe broken) or the spool cannot be
    written (a full disk), the bytes flow on, uncopied."""

    def __init__(
        self, fd: int, wake: int, read: mmap.mmap | None = None, done: int | None = None
    ) -> None:
        self.fd = fd
        self.wake = wake
        self.done = done
        # The recorder's position and sleep (None: unbounded, a wake-up every frame).
        self.read = read
        self.end = 0  # where the next frame goes
        self.bound = SPOOL_MAX_BYTES  # no need to look at `read` before this
        self.rung = 0  # where the spool ended at the last wake-up sent
        self.lock = threading.Lock()
        self.open = True

    def send(self, kind: bytes, offset: int, ts: float, data: bytes) -> None:
        header = HEADER.pack(kind, offset, ts, len(data))
        small = len(data) < 4096  # one write; a large copy is not joined to its header
        with self.lock:
            if self.end >= self.bound:
                self._wait_for_recorder()
            if self.open:
                try:
                    self._put(header + data if small else header)
                    if not small:
                        self._put(data)
                    self._wake()
                except OSError:
                    self._stop()

    def splice_from(self, kind: bytes, offset: int, ts: float, stage: int, n: int) -> None:
        """`n` bytes waiting in the pipe `stage` (a `tee` of them) become a frame, moved in
        the kernel (`splice`). `stage` is left empty whatever happens (the next `tee`
        must find it so)."""
        left = n
        with self.lock:
            if self.end >= self.bound:
                self._wait_for_recorder()
            try:
                if self.open:
                    self._put(HEADER.pack(kind, offset, ts, n))
                    while left:
                        moved = os.splice(stage, self.fd, left, offset_dst=self.end)
                        self.end += moved
                        left -= moved
                    self._wake()
            except OSError:
                self._stop()
            if left:
                discard(stage, left)

    def _put(self, data: bytes | memoryview) -> None:
        view = memoryview(data)
        while view:
            n = os.pwrite(self.fd, view, self.end)
            self.end += n
            view = view[n:]

    def _wait_for_recorder(self) -> None:
        """The recorder is `SPOOL_MAX_BYTES` behind (an endless flood faster than it):
        the bytes wait until it has read more (back-pressure, as a full pipe), or it is
        gone."""
        while self.open and self.read is not None:
            done = POSITION.unpack_from(self.read)[0]
            if self.end - done < SPOOL_MAX_BYTES:
                self.bound = done + SPOOL_MAX_BYTES
                return
            self._ring()  # EPIPE if it is gone
            time.sleep(0.001)
        self.bound = 1 << 62

    def _wake(self) -> None:
        """After a frame: the recorder is woken only if it sleeps (`Idle`). Awake, it reads
        the spool again before it sleeps, and sees this frame. Every `SPOOL_TRIM_BYTES`
        it is rung anyway: a recorder that died awake (killed, or an error) is found by
        the broken pipe, and the copies stop, before they fill the disk."""
        if self.read is None or self.read[ASLEEP] or self.end - self.rung >= SPOOL_TRIM_BYTES:
            self._ring()

    def _ring(self) -> None:
        self.rung = self.end
        try:
            os.write(self.wake, b"\0")
        except BlockingIOError:
            pass  # the recorder has wake-ups waiting: it will read this frame too
        except OSError:
            self._stop()  # the recorder is gone (EPIPE)

    def _stop(self) -> None:
        """No more copies (the recorder is gone, or the spool cannot be written). The
        recorder, if alive, reads what is complete and notes the rest as lost."""
        self.open = False
        for end in (self.wake, self.done):
            if end is not None:
                with contextlib.suppress(OSError):
                    os.close(end)

    def close(self) -> None:
        """The last frame is written: the recorder reads to the end and stops."""
        with self.lock:
            if self.open:
                self._stop()
            with contextlib.suppress(OSError):
                os.close(self.fd)


def discard(fd: int, n: int) -> None:
    """Read `n` bytes from `fd` and forget them (a stage whose copy has nowhere to go)."""
    while n > 0 and (data := os.read(fd, n)):
        n -= len(data)


class Copier:
    """One direction's copies to the recorder (its offset), or, for stderr (`b"e"`), its
    line count: stderr is passed on and counted, never recorded."""

    __slots__ = ("feed", "lines", "offset", "tag")

    def __init__(self, feed: Feed, tag: bytes) -> None:
        self.feed = feed
        self.tag = tag
        self.offset = 0
        self.lines = 0

    def copy(self, data: bytes, ts: float) -> None:
        if self.tag == b"e":
            self.lines += data.count(b"\n")
            return
        self.feed.send(self.tag, self.offset, ts, data)
        self.offset += len(data)

    def copy_staged(self, stage: int, n: int, ts: float) -> None:
        self.feed.splice_from(self.tag, self.offset, ts, stage, n)
        self.offset += n


def pump(src: int, dst: int, copier: Copier | None, on_end: Callable[[bool], None]) -> None:
    """Copy `src` to `dst` with `read` and `write` until EOF (or `dst` is gone), then
    `on_end(broke)`. Each chunk is copied to the recorder before it is written on (`Feed`).
    The path where an end cannot be spliced, and stderr's."""
    broke = False
    clock = time.time
    try:
        while True:
            try:
                data = os.read(src, READ_BYTES)
            except BlockingIOError:
                wait_for(src)
                continue
            except OSError:
                break
            if not data:
                break
            if copier is not None:
                # Stamped and copied when read, before it is written on: a request's time
                # and copy then always come before its answer's.
                copier.copy(data, clock())
            try:
                write_all(dst, data)
            except OSError:
                broke = True
                break
    finally:
        on_end(broke)  # the other side sees the end at once


def load_tee() -> Tee | None:
    """libc's `tee(2)` (Python's `os` has `splice` but not `tee`), or None where either is
    missing (not Linux, no libc). `ctypes` is imported here, after the server started."""
    if not hasattr(os, "splice") or not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        fn = ctypes.CDLL(None, use_errno=True).tee
    except (ImportError, OSError, AttributeError):
        return None
    fn.restype = ctypes.c_ssize_t
    fn.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_size_t, ctypes.c_uint)
    get_errno = ctypes.get_errno

    def tee(src: int, dst: int, n: int) -> int:
        while True:
            got = int(fn(src, dst, n, 0))  # ctypes lets go of the GIL meanwhile
            if got >= 0:
                return got
            err = get_errno()
            if err != errno.EINTR:
                raise OSError(err, os.strerror(err))

    return tee


#: splice(2) refuses these ends (a terminal, a file opened for appending, no splice at
#: all): the direction is moved by `read` and `write` instead.
UNSPLICEABLE: Final = (errno.EINVAL, errno.ENOSYS, errno.EBADF, errno.EOPNOTSUPP)


class SplicePump:
    """One direction moved in the kernel (Linux): `src` is spliced into a pipe of the
    wrapper's (`held`, so a socket or a pipe alike), its bytes `tee`d into a second
    (`stage`) and spliced from there to the recorder (`Feed`), then spliced on to `dst`.
    No byte crosses into this process, and the copy is in the recorder's pipe before its
    bytes move on (as `pump`). Where an end cannot be spliced, it falls back to `read` and
    `write` (the bytes already taken are passed on first)."""

    def __init__(self, src: int, dst: int, copier: Copier, tee: Tee) -> None:
        self.src = src
        self.dst = dst
        self.copier = copier
        self.tee = tee
        self.held_r, self.held_w = os.pipe()
        self.stage_r, self.stage_w = os.pipe()
        # What one splice takes: what both internal pipes hold (a tee then copies it all).
        self.chunk = min(widen(self.held_w, SPLICE_BYTES), widen(self.stage_w, SPLICE_BYTES))
        self.dst_splices = True

    def run(self, on_end: Callable[[bool], None]) -> None:
        broke = False
        try:
            broke = self._relay()
        finally:
            on_end(broke)
            for fd in (self.held_r, self.held_w, self.stage_r, self.stage_w):
                os.close(fd)

    def _relay(self) -> bool:
        """Until EOF; True when `dst` is gone (EPIPE)."""
        clock = time.time
        while True:
            try:
                n = os.splice(self.src, self.held_w, self.chunk)
            except BlockingIOError:
                wait_for(self.src)
                continue
            except OSError as e:
                if e.errno in UNSPLICEABLE:
                    broke = [False]
                    pump(self.src, self.dst, self.copier, broke.append)
                    return broke[-1]
                return False
            if not n:
                return False
            ts = clock()
            while n:
                # The stage is empty and as big as `held`: the tee takes what `held` has,
                # but a smaller stage (a refused F_SETPIPE_SZ) may take less: then round
                # by round, each part copied before it moves on.
                part = n
                if self.copier.feed.open:
                    try:
                        part = self.tee(self.held_r, self.stage_w, n)
                    except OSError:
                        part = 0
                    if part <= 0:  # never with an empty stage; were it so, by hand
                        return not self._copy_by_read(n, ts)
                    self.copier.copy_staged(self.stage_r, part, ts)
                else:
                    self.copier.offset += part
                if not self._forward(part):
                    return True
                n -= part

    def _copy_by_read(self, n: int, ts: float) -> bool:
        """Take `n` bytes out of `held`, copy and write them (as `pump`); then go on that
        way. False when `dst` is gone."""
        while n:
            data = os.read(self.held_r, n)
            n -= len(data)
            self.copier.copy(data, ts)
            try:
                write_all(self.dst, data)
            except OSError:
                return False
        broke = [False]
        pump(self.src, self.dst, self.copier, broke.append)
        return not broke[-1]

    def _forward(self, n: int) -> bool:
        """Move `n` bytes from `held` to `dst`; False when `dst` is gone."""
        try:
            while n and self.dst_splices:
                try:
                    n -= os.splice(self.held_r, self.dst, n)
                except BlockingIOError:
                    wait_for(self.dst, write=True)
                except OSError as e:
                    if e.errno not in UNSPLICEABLE:
                        raise
                    self.dst_splices = False
            while n:
                data = os.read(self.held_r, n)
                write_all(self.dst, data)
                n -= len(data)
        except OSError:
            return False
        return True


def relay(
    src: int, dst: int, copier: Copier, tee: Tee | None, on_end: Callable[[bool], None]
) -> None:
    """One direction, in the kernel where the system can (`SplicePump`), else `pump`."""
    if tee is None:
        pump(src, dst, copier, on_end)
    else:
        SplicePump(src, dst, copier, tee).run(on_end)


def load_faults(o: Options) -> StdioFaults | None:
    """The rules of `--fault`/`--faults`, checked for stdio, or None without any (the
    fault modules are imported only then)."""
    if not o.fault_rules and o.faults_source is None:
        return None
    from mcp_layers_core import faults
    from mcp_layers_core.stdio_faults import StdioFaults, crash_rule, parse_rules_file

    try:
        rules = []
        crashes: set[str] = set()
        if o.faults_source is not None:
            if o.faults_source in faults.preset_names():
                rules += faults.preset(o.faults_source)
            else:
                try:
                    with open(o.faults_source, encoding="utf-8") as f:
                        text = f.read()
                except OSError as e:
                    raise Refusal(
                        f"--faults {o.faults_source!r}: not a preset ("
                        f"{', '.join(faults.preset_names())}) and not a readable file "
                        f"({e.strerror})"
                    ) from None
                from_file, crashed = parse_rules_file(text, o.faults_source)
                rules += from_file
                crashes |= crashed
        for text in o.fault_rules:
            crash = crash_rule(text)
            if crash is not None:
                text, name = crash
                crashes.add(name)
            rules.append(faults.parse_inline(text, "--fault"))
        return StdioFaults(rules, o.seed, frozenset(crashes))
    except faults.FaultRuleError as e:
        raise Refusal(str(e)) from None


class Splitter:
    """Complete lines out of chunks, in time linear in their size (a line of several MiB
    arrives in many chunks: no buffer is copied per chunk)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def lines(self, data: bytes) -> list[bytes]:
        self.parts.append(data)
        if b"\n" not in data:
            return []
        *lines, rest = b"".join(self.parts).split(b"\n")
        self.parts = [rest] if rest else []
        return lines

    def rest(self) -> bytes:
        """What follows the last newline."""
        return b"".join(self.parts)


class FaultLines:
    """The two pumps of a run with fault rules. They are line by line, which the plain
    pumps are not: a request is decided before it is forwarded (so a partial line waits
    for its end), and while an answer is to be dropped or delayed, the server's lines are
    judged whole. What each side was given is what the recorder gets: the client's lines
    as it wrote them, and on the other side what the client received (an injected reply
    included, a dropped answer not)."""

    def __init__(
        self,
        faults: StdioFaults,
        answers: Copier,
        tell: Callable[..., None],
        crash: Callable[[], None],
    ) -> None:
        self.faults = faults
        self.crash = crash
        self.answers = answers
        self.tell = tell
        self.out = threading.Lock()  # fd 1 and its copies: the stdout pump, replies, timers
        self.timers: list[threading.Timer] = []

    def to_client(self, data: bytes) -> None:
        with self.out:
            self.answers.copy(data, time.time())  # before the client can react (`pump`)
            write_all(1, data)

    def upward(self, dst: int, copier: Copier, on_end: Callable[[bool], None]) -> None:
        import json

        buf = Splitter()
        broke = False
        try:
            while True:
                try:
                    data = os.read(0, READ_BYTES)
                except OSError:
                    break
                if not data:
                    break
                ts = time.time()
                verdicts = [(line, self.faults.client_line(line)) for line in buf.lines(data)]
                # The recorder learns what the rules did, then gets the lines, then the
                # server can answer (`pump`: a copy always precedes what reacts to it).
                for _, v in verdicts:
                    if v.injected is not None:
                        mark = [v.rpc_id, v.injected["rule"], v.injected["action"]]
                        self.tell("inject", json.dumps(mark))
                copier.copy(data, ts)
                for line, v in verdicts:
                    if v.forward:
                        try:
                            write_all(dst, line + b"\n")
                        except OSError:
                            broke = True
                    if v.crash:
                        self.crash()
                    if v.reply is not None:
                        with contextlib.suppress(OSError):
                            self.to_client(v.reply + b"\n")
                if broke:
                    break
            if buf.parts and not broke:
                with contextlib.suppress(OSError):
                    write_all(dst, buf.rest())  # a last line without its newline, as it came
        finally:
            on_end(broke)

    def downward(self, src: int, on_end: Callable[[bool], None]) -> None:
        buf = Splitter()
        mid_line = False  # the line in progress was already passed on, in part
        broke = False
        try:
            while True:
                try:
                    data = os.read(src, READ_BYTES)
                except OSError:
                    break
                if not data:
                    break
                if not self.faults.held and not buf.parts:
                    self.to_client(data)  # nothing to hold: as the plain pump does
                    mid_line = not data.endswith(b"\n")
                    continue
                if mid_line:
                    end = data.find(b"\n")
                    head, data = (data, b"") if end < 0 else (data[: end + 1], data[end + 1 :])
                    self.to_client(head)
                    mid_line = end < 0
                passed = []
                for line in buf.lines(data) if data else ():
                    what = self.faults.server_line(line) if self.faults.held else None
                    if what is None:
                        passed.append(line + b"\n")
                    elif what[0] == "delay":
                        timer = threading.Timer(what[1] / 1000, self.to_client, (line + b"\n",))
                        timer.daemon = True
                        timer.start()
                        self.timers.append(timer)
                    # "drop": the client never gets it
                if passed:
                    self.to_client(b"".join(passed))
        except OSError:
            broke = True
        finally:
            if buf.parts and not broke:
                with contextlib.suppress(OSError):
                    self.to_client(buf.rest())
            for timer in self.timers:
                timer.join()  # delayed answers go out before the client sees the end
            on_end(broke)


def spawn(command: list[str]) -> tuple[int, int, int, int]:
    """Start `command` on three new pipes, in this process group: (pid, its stdin, its
    stdout, its stderr), the wrapper's ends. Raises OSError when it cannot be started."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    for fd in (in_w, out_r, err_r):
        widen(fd)
    try:
        pid = os.posix_spawnp(
            command[0],
            command,
            os.environ,
            file_actions=[
                (os.POSIX_SPAWN_DUP2, in_r, 0),
                (os.POSIX_SPAWN_DUP2, out_w, 1),
                (os.POSIX_SPAWN_DUP2, err_w, 2),
            ],
            setsigdef=RESET_IN_CHILD,
        )
    except BaseException:
        for fd in (in_r, in_w, out_r, out_w, err_r, err_w):
            os.close(fd)
        raise
    for fd in (in_r, out_w, err_w):
        os.close(fd)
    return pid, in_w, out_r, err_r


class Wrapper:
    def __init__(self, options: Options) -> None:
        self.o = options
        self.pid: int | None = None
        self.pending_signals: list[int] = []
        #: The server has exited (and been reaped: its pid may be anyone's now).
        self.server_gone = False
        #: A signal came after that: stop waiting for its stdout to end.
        self.stop = False

    def forward(self, signum: int, _frame: object) -> None:
        if self.pid is None:
            self.pending_signals.append(signum)  # arrived before the server existed
            return
        if self.server_gone:
            # Something the server started still holds its stdout open, and the client
            # wants the wrapper gone: it finishes the records and exits.
            self.stop = True
            return
        with contextlib.suppress(OSError):  # already gone
            os.kill(self.pid, signum)

    def run(self) -> int:
        o = self.o
        started = time.time()
        directory = o.record_dir or default_record_dir()
        fd, _path = open_recording(directory, started)
        server = f"stdio:{o.name or os.path.basename(o.command[0]) or o.command[0]}"
        run_id = f"{os.getpid()}-{int(started * 1000)}"
        faults = load_faults(o)  # before the server starts: a bad rule refuses the run
        try:
            spool = Spool(directory)
        except OSError as e:
            raise Refusal(
                f"cannot keep the recorder's copies in {directory!r} ({e.strerror}); "
                "name another directory with --record-dir"
            ) from None
        for forwarded in FORWARDED:
            signal.signal(forwarded, self.forward)
        try:
            pid, child_in, child_out, child_err = spawn(o.command)
        except OSError as e:
            for end in (spool.fd, spool.wake_r, spool.wake_w):
                os.close(end)
            return self.spawn_failed(e, fd, server, run_id, started)
        self.pid = pid
        for signum in self.pending_signals:
            self.forward(signum, None)

        recorder = os.fork()  # no thread runs yet: a plain fork is safe
        if recorder == 0:
            for end in (child_in, child_out, child_err):
                os.close(end)
            copies = spool.reader()
            recorder_process(lambda: record(copies, fd, server, run_id, started, o))
        os.close(fd)
        feed = spool.writer()

        def tell(*item: object) -> None:
            """A control message (words, the last may hold spaces): small, rare, never
            dropped, in order with the copies."""
            feed.send(b"x", 0, 0.0, " ".join(map(str, item)).encode())

        client = Copier(feed, b"c")
        answers = Copier(feed, b"s")

        def stdin_ended(broke: bool) -> None:
            tell("epipe", "server") if broke else tell("c_eof", time.time())
            # The client's EOF is the server's: close its stdin, never kill it.
            with contextlib.suppress(OSError):
                os.close(child_in)

        def stdout_ended(broke: bool) -> None:
            # The client sees the end of the server's stdout now, not when the recorder
            # is done (its copy of fd 1 is /dev/null).
            with contextlib.suppress(OSError):
                os.close(1)
            if broke:
                tell("epipe", "client")
                # The client stopped reading: so does the wrapper, and the server's next
                # write fails as it would have without the wrapper.
                with contextlib.suppress(OSError):
                    os.close(child_out)

        stderr = Copier(feed, b"e")

        def stderr_ended(_broke: bool) -> None:
            pass

        if faults is None:
            # Without rules nothing needs the bytes in this process: moved in the kernel
            # where both ends allow (`relay`); `ctypes` is imported now, the server started.
            tee = load_tee()
            upward = threading.Thread(
                target=relay, args=(0, child_in, client, tee, stdin_ended), daemon=True
            )
            downward = threading.Thread(
                target=relay, args=(child_out, 1, answers, tee, stdout_ended), daemon=True
            )
        else:

            def crash() -> None:
                with contextlib.suppress(OSError):  # already gone
                    os.kill(pid, signal.SIGKILL)

            lines = FaultLines(faults, answers, tell, crash)
            upward = threading.Thread(
                target=lines.upward, args=(child_in, client, stdin_ended), daemon=True
            )
            downward = threading.Thread(
                target=lines.downward, args=(child_out, stdout_ended), daemon=True
            )
        threads = [
            upward,
            downward,
            threading.Thread(
                target=pump,
                args=(child_err, 2, stderr, stderr_ended),
                daemon=True,
            ),
        ]
        for t in threads:
            t.start()
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        self.server_gone = True
        ended = time.time()
        # Every byte of stdout reaches the client before the wrapper exits, unless the
        # client signals it to go (what the server started may hold stdout for ever).
        while threads[1].is_alive() and not self.stop:
            threads[1].join(0.05)
        threads[2].join(STDERR_GRACE_S)
        tell("stderr", stderr.lines)
        tell("exit", ended, code)
        feed.close()
        # The records are finished before the wrapper exits, unless the client signals it
        # to go: the recorder, in a session of its own, then finishes them alone.
        while not self.stop and not os.waitpid(recorder, os.WNOHANG)[0]:
            time.sleep(0.002)
        return code

    def spawn_failed(self, e: OSError, fd: int, server: str, run_id: str, started: float) -> int:
        """No server: one record, one line on stderr, nothing on stdout; 127 when the
        command is not there, 126 when it cannot be run (as a shell says)."""
        ended = time.time()
        name = errno.errorcode.get(e.errno or 0, "ERROR")
        message = f"mcp-layers wrap: cannot start {self.o.command[0]!r}: {e.strerror or e}\n"
        os.write(2, message.encode("utf-8", "replace"))
        observer, writer, f = recorder_parts(fd, server, run_id, started, self.o)
        writer.write([observer.spawn_failed(ended, name)])
        f.close()
        return 127 if e.errno == errno.ENOENT else 126


def recorder_parts(
    fd: int, server: str, run_id: str, started: float, o: Options
) -> tuple[StdioObserver, RecordWriter, BinaryIO]:
    """The core, imported here, off the start-up path: the observer and the writer."""

    from mcp_layers_core.jsonl import RecordWriter
    from mcp_layers_core.settings import Settings
    from mcp_layers_core.stdio import StdioObserver

    observer = StdioObserver(
        server=server, run_id=run_id, started=started, settings=Settings(scenario=o.scenario)
    )
    f = os.fdopen(fd, "ab", buffering=0)

    def report(problem: str) -> None:
        os.write(2, f"mcp-layers wrap: {problem}\n".encode("utf-8", "replace"))

    return observer, RecordWriter(started=started, outfile=f, on_error=report), f


#: What is kept of a line over the cap: its start, where an answer's id is.
HEAD_BYTES: Final = 4096


class Lines:
    """One direction's copies cut into lines (the recorder's side). Keeps at most `cap`
    bytes of the line in progress (past that, its start only: enough for an answer's id);
    after a dropped copy, skips to the next newline."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.head = min(HEAD_BYTES, cap)
        self.buf = bytearray()
        self.size = 0  # of the line in progress, all of it
        self.expected = 0
        self.skipping = False

    def feed(self, offset: int, data: bytes) -> list[tuple[bytes, int]]:
        if offset != self.expected:  # copies were dropped: the line in progress is lost
            self.buf.clear()
            self.size = 0
            self.skipping = True
        self.expected = offset + len(data)
        out: list[tuple[bytes, int]] = []
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            if self.skipping:
                self.skipping = False
            elif self.size == 0:
                size = end - start
                out.append(
                    (data[start : start + self.head] if size > self.cap else data[start:end], size)
                )
            else:
                size = self.size + end - start
                if size <= self.cap:
                    self.buf += data[start:end]
                out.append((bytes(self.buf), size))
                self.buf.clear()
                self.size = 0
            start = end + 1
        if start < len(data) and not self.skipping:
            rest = len(data) - start
            if self.size + rest <= self.cap:
                self.buf += data[start:]
            elif self.size <= self.cap:
                self.buf += data[start:]
                del self.buf[self.head :]
            self.size += rest
        return out


def recorder_process(record_all: Callable[[], None]) -> None:
    """The forked recorder: `record_all` (copies in, records out, until it has read the
    last one), in a process set apart from the client's."""
    wrapper = os.getppid()
    for s in FORWARDED:
        signal.signal(s, signal.SIG_IGN)  # the group's signals are for the server
    with contextlib.suppress(OSError):
        # Out of the client's process group: a client that kills the group at shutdown
        # (the Python SDK does, 2 s after closing stdin) must not cut the records short.
        os.setsid()
    with contextlib.suppress(OSError):
        # Background work: on a busy machine the server's own start-up comes first.
        os.nice(RECORDER_NICE)
    with contextlib.suppress(OSError), open("/proc/self/autogroup", "w") as group:
        # A new session is a scheduling group of its own on Linux (autogroup), and a
        # niceness counts only within its group: the group is niced too.
        group.write(str(RECORDER_NICE))
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)  # the client's stdout must see EOF when the wrapper exits
    os.close(null)
    release_stderr_when_gone(wrapper)
    code = 0
    try:
        record_all()
    except BaseException as e:  # the recorder must never take the run down
        os.write(2, f"mcp-layers wrap: the recorder stopped ({e!r})\n".encode())
        code = 1
    os._exit(code)


def release_stderr_when_gone(wrapper: int) -> None:
    """When the wrapper exits, the recorder (still reading its backlog) lets go of the
    client's stderr, which the client may read to its end: the kernel signals it then
    (Linux `PR_SET_PDEATHSIG`; elsewhere it keeps stderr until it is done)."""

    def release(_signum: int, _frame: object) -> None:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 2)
        os.close(null)

    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        signal.signal(signal.SIGUSR1, release)
        if ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGUSR1), 0, 0, 0) != 0:
            return  # PR_SET_PDEATHSIG refused: stderr is kept until the end
    except (ImportError, OSError, AttributeError):
        return
    if os.getppid() != wrapper:  # it exited before the request
        release(0, None)


def frames(
    spool: int, wake: int, shared: mmap.mmap | None = None, done: int | None = None
) -> Iterator[tuple[bytes, int, float, bytes]]:
    """The frames in the spool (`Feed`), in order, read behind the pumps until the wrapper
    closes the wake-up pipe; then to the spool's end. While copies keep coming it waits for
    a pause (`Pause`); the space read is given back to the file system as the reading goes
    (`Trim`), and the position is published in `shared` for the pumps."""
    size, unpack = HEADER.size, HEADER.unpack
    buf = bytearray()
    start = 0  # where `buf` begins in the spool: at a frame's start
    trim = Trim(spool)
    pause = Pause(spool, done)
    idle = Idle(wake, shared)
    busy = Busy()
    clock = time.time
    while True:
        got = os.pread(spool, SPOOL_READ_BYTES, start + len(buf))
        if not got:
            if pause.ended:
                break
            pause.ended = not idle.wait()
            continue
        idle.awake()
        buf += got
        heavy = busy.heavy()
        i = 0
        while len(buf) - i >= size:
            kind, offset, ts, n = unpack(buf[i : i + size])
            if len(buf) - i - size < n:
                break  # the rest of this frame is still being written
            if ts and not pause.ended and (heavy or clock() - ts > LAG_S):  # (control: 0)
                if pause.wait(start + i, start + len(buf), heavy):  # let the traffic pass
                    busy.reset()  # the wait is not the recorder's use
                heavy = False
            yield kind, offset, ts, bytes(buf[i + size : i + size + n])
            i += size + n
        del buf[:i]
        start += i
        if shared is not None:
            POSITION.pack_into(shared, 0, start)
        trim.upto(start)
    for end in (wake, spool, done):
        if end is not None:
            os.close(end)


class Idle:
    """How the recorder waits for copies once it has read them all. First it dozes
    (`DOZE_S`): the pumps do not wake it, and it reads whatever came meanwhile in one go.
    Finding nothing after a doze, it goes to sleep: it sets `ASLEEP` in the shared page,
    looks at the spool once more (for a frame whose pump looked at the flag before it was
    set), then waits for a wake-up. `wait` is False once the wake-up pipe is closed: the
    wrapper has written its last frame."""

    def __init__(self, wake: int, shared: mmap.mmap | None) -> None:
        import select

        self.select = select.select
        self.wake = wake
        self.shared = shared
        self.looks = 0  # looks that found nothing since the last copy read

    def awake(self) -> None:
        """Copies were read."""
        if self.looks:
            self.looks = 0
            if self.shared is not None:
                self.shared[ASLEEP] = 0

    def wait(self) -> bool:
        self.looks += 1
        if self.looks == 1:
            return self._until(DOZE_S)
        if self.looks == 2 and self.shared is not None:
            self.shared[ASLEEP] = 1
            return True  # look once more, now that a frame written will wake it
        return self._until(SLEEP_S)

    def _until(self, timeout: float) -> bool:
        # Wake-ups waiting are all read before the spool is: one sent after that read
        # wakes the next wait (the pipe has room), a frame sent before is seen by it.
        if self.select([self.wake], [], [], timeout)[0]:
            return bool(os.read(self.wake, 1 << 16))
        return True


class Busy:
    """Whether the recorder has taken more than `BUSY_SHARE` of a core since the window
    began (`reset`), once it is at least `BUSY_WINDOW_S` long; each look past that length
    begins a new window. The clocks are parameters for the tests."""

    def __init__(
        self,
        wall: Callable[[], float] = time.monotonic,
        cpu: Callable[[], float] = time.process_time,
    ) -> None:
        self.wall = wall
        self.cpu = cpu
        self.reset()

    def reset(self) -> None:
        self.since = self.wall()
        self.used = self.cpu()

    def heavy(self) -> bool:
        elapsed = self.wall() - self.since
        if elapsed < BUSY_WINDOW_S:
            return False
        used = self.cpu() - self.used
        self.reset()
        return used > BUSY_SHARE * elapsed


class Pause:
    """The recorder's wait for a pause in the copies, when it is behind (`LAG_S`) or busy
    (`Busy`): while they keep coming (the spool grew within `QUIET_S`), it reads nothing,
    so that its CPU goes to the client and the server; unless it is `SPOOL_DEFER_BYTES`
    behind, or the copies have ended (`done`, closed by the wrapper after the last
    frame)."""

    def __init__(self, spool: int, done: int | None) -> None:
        import select

        self.select = select.select
        self.spool = spool
        self.done = done
        self.ended = False
        self.seen = 0  # the spool's size when it was last looked at here

    def wait(self, position: int, read: int, busy: bool = False) -> bool:
        """Read nothing from `position` on while copies come. `read`: where the reading of
        the spool has got to. If none came past it, or since the last look here (the
        frames read meanwhile are old ones), no traffic is waiting on the CPU; a recorder
        that is `busy` keeps up, so only copies since the last look here tell. True if it
        waited (or the copies ended), False if it went on at once."""
        size = os.fstat(self.spool).st_size
        try:
            quiet = size <= (self.seen if busy else max(read, self.seen))
            if quiet or size - position >= SPOOL_DEFER_BYTES:
                return False
            while size - position < SPOOL_DEFER_BYTES:
                if self.done is None:
                    time.sleep(QUIET_S)
                elif self.select([self.done], [], [], QUIET_S)[0]:
                    self.ended = True  # every frame is written
                    return True
                grown = os.fstat(self.spool).st_size
                if grown == size:
                    return True  # none came for `QUIET_S`: read now
                size = grown
            return True
        finally:
            self.seen = size


class Trim:
    """Gives the spool's space back behind the reader (`fallocate` with
    `FALLOC_FL_PUNCH_HOLE`, libc's through ctypes: Linux, and file systems that have it;
    elsewhere the spool just grows until the run ends and it goes)."""

    PUNCH_HOLE_KEEP_SIZE: Final = 0x02 | 0x01

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.done = 0
        self.fallocate: Any = None
        self.working = sys.platform.startswith("linux")

    def upto(self, offset: int) -> None:
        if not self.working or offset - self.done < SPOOL_TRIM_BYTES:
            return
        offset -= offset % 4096  # whole blocks: a partial one would only be zeroed
        try:
            if self.fallocate is None:
                import ctypes

                fn = ctypes.CDLL(None, use_errno=True).fallocate
                fn.restype = ctypes.c_int
                fn.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
                self.fallocate = fn
            if self.fallocate(self.fd, self.PUNCH_HOLE_KEEP_SIZE, 0, offset) != 0:
                self.working = False  # not on this file system
        except (ImportError, OSError, AttributeError):
            self.working = False
        self.done = offset


def record(
    copies: Iterator[tuple[bytes, int, float, bytes]],
    fd: int,
    server: str,
    run_id: str,
    started: float,
    o: Options,
) -> None:
    observer, writer, f = recorder_parts(fd, server, run_id, started, o)
    cut = {b"c": Lines(o.max_line), b"s": Lines(o.max_line)}
    take = {b"c": observer.from_client, b"s": observer.from_server}
    last = started
    for kind, offset, ts, data in copies:
        if kind == b"x":
            control(observer, writer, cut[b"s"], data)
            continue
        last = ts
        out: list[dict[str, Any]] = []
        for line, n in cut[kind].feed(offset, data):
            out += take[kind](line, n, ts)
        if out:
            writer.write(out)
    # The wrapper never said how the server ended (it was killed, or the spool could not
    # be written): what is still waiting fails, and the session ends, cause unknown. After
    # the wrapper's `exit` this writes nothing.
    writer.write(observer.exited(last, None, None))
    f.close()


def control(observer: StdioObserver, writer: RecordWriter, stdout: Lines, body: bytes) -> None:
    """A control message from the wrapper (`tell`)."""
    what, *args = body.decode().split(" ", 1 if body.startswith(b"inject") else -1)
    if what == "inject":
        import json

        rpc_id, rule, action = json.loads(args[0])
        observer.injected(rpc_id, {"rule": rule, "action": action})
    elif what == "c_eof":
        observer.client_closed(float(args[0]))
    elif what == "epipe":
        if args[0] == "client":
            observer.epipe_to_client = True
        else:
            observer.epipe_to_server = True
    elif what == "stderr":
        observer.stderr += int(args[0])
    elif what == "exit":
        observer.server_closed(stdout.size)
        code = int(args[1])
        sig = signal.Signals(-code).name if code < 0 else None
        writer.write(observer.exited(float(args[0]), None if sig else code, sig))


def install(o: Options) -> int:
    """--install/--uninstall: rewrite one entry of a client's config; one line."""
    import shutil

    from mcp_layers_analysis import stdio_install

    assert o.install is not None
    how, client, server = o.install
    me = os.path.abspath(sys.argv[0])
    if os.path.basename(me) != "mcp-layers":
        me = shutil.which("mcp-layers") or me
    try:
        path = stdio_install.config_path(client, o.config)
        if how == "--install":
            line = stdio_install.install(path, server, me, o.passed)
        else:
            line = stdio_install.uninstall(path, server)
    except stdio_install.InstallError as e:
        os.write(2, f"mcp-layers wrap: {e}\n".encode("utf-8", "replace"))
        return 2
    os.write(1, f"{line}\n".encode("utf-8", "replace"))
    return 0


def exit_like(code: int) -> None:
    """Leave as the child did: its code, or killed by its signal (raised again here, so the
    client sees the same status; 128+N if it cannot be)."""
    if code < 0:
        sig = -code
        try:
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
            time.sleep(1)
        except (OSError, ValueError):
            pass
        os._exit(128 + sig)
    os._exit(code)


def main(argv: list[str] | None = None) -> None:
    """`mcp-layers wrap ARGS` (argv without the program and `wrap`)."""
    args = sys.argv[2:] if argv is None else argv
    try:
        options = parse(args)
        if options.install is not None:
            os._exit(install(options))
        code = Wrapper(options).run()
    except Help as e:
        os.write(1, f"{e}\n".encode())
        os._exit(0)
    except Refusal as e:
        os.write(2, f"mcp-layers wrap: {e}\n".encode("utf-8", "replace"))
        os._exit(2)
    exit_like(code)


if __name__ == "__main__":
    main(sys.argv[1:])
