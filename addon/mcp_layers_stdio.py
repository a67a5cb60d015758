"""`mcp-layers wrap -- CMD ARGS...`: run an MCP stdio server and record what crosses its pipes.

A drop-in prefix for a server's `command` in a client's config (docs/stdio.md). The
wrapper starts CMD with the client's environment, in the client's process group (never
`setsid`: the Python SDK kills the group, and a child outside it would outlive the
client), and moves bytes: the client's stdin to CMD, CMD's stdout and stderr back, each
chunk written on as soon as it is read, before anything looks at it. Nothing is ever
held back, changed or answered on the server's behalf.

Why this module sits beside the HTTP adapter (addon/mcp_layers.py) and not in the core:
it does I/O (a process, pipes, signals, a file), and the core is sans-IO; what it sees
goes to the core's `StdioObserver` (mcp_layers_core/stdio.py), which turns lines into the
same records. Why it imports only the standard library at start: a client counts the
wrapper's start-up against the server's (Codex gives both 10 s), so the core (the
tracker, the classifiers, the JSON writer) is imported by the recorder thread while the
server is already starting.

Threads: three pumps (stdin, stdout, stderr), each a blocking `os.read`/`os.write` loop
on raw file descriptors; one recorder, fed through a bounded outbox (items and bytes), so
a pump never waits on the recorder: when the outbox is full the line is passed on and
counted as not observed (`observer_dropped`). The main thread waits for the child,
forwards SIGTERM, SIGINT and SIGHUP to it, and exits as it did: its exit code, or its
signal raised again on the wrapper (128+N where that is not possible).

Settings come only from argv: clients pass servers a filtered environment.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Final

USAGE: Final = (
    "usage: mcp-layers wrap [--record-dir DIR] [--name NAME] [--scenario LABEL] "
    "[--max-line-kb N] -- CMD [ARGS...]"
)

#: The longest line the recorder reads (the core's JSON body cap); longer ones are passed
#: on unread, noted `line_over_cap`.
DEFAULT_MAX_LINE_KB: Final = 16 * 1024

#: One read from a pipe; a pipe holds 64 KiB unless told otherwise.
READ_BYTES: Final = 1 << 16

#: What the outbox between the pumps and the recorder may hold before lines go unobserved.
OUTBOX_ITEMS: Final = 8192
OUTBOX_BYTES: Final = 64 * 1024 * 1024

#: After the child exits and its stdout ends: how long its stderr may still take (a
#: grandchild holding it open must not keep the wrapper alive), and the recorder.
STDERR_GRACE_S: Final = 1.0
RECORDER_GRACE_S: Final = 5.0

FORWARDED: Final = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)

#: What the recorder is told, in order (a tag and its values).
Item = tuple[Any, ...]


class Refusal(Exception):
    """A setting that cannot work: one line on stderr, before the server starts."""


class Help(Exception):
    """`--help`: the usage on stdout, exit 0."""


class Options:
    __slots__ = ("command", "max_line", "name", "record_dir", "scenario")

    def __init__(self) -> None:
        self.record_dir: str | None = None
        self.name: str | None = None
        self.scenario: str | None = None
        self.max_line = DEFAULT_MAX_LINE_KB * 1024
        self.command: list[str] = []


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
        name, eq, value = arg.partition("=")
        if name not in ("--record-dir", "--name", "--scenario", "--max-line-kb"):
            raise Refusal(f"unknown option {name}; {USAGE}")
        if not eq:
            i += 1
            if i >= len(argv):
                raise Refusal(f"{name} needs a value; {USAGE}")
            value = argv[i]
        if name == "--record-dir":
            o.record_dir = value
        elif name == "--name":
            o.name = value
        elif name == "--scenario":
            o.scenario = value
        else:
            try:
                kb = int(value)
            except ValueError:
                kb = 0
            if kb <= 0:
                raise Refusal(f"--max-line-kb must be a positive number of KiB, not {value!r}")
            o.max_line = kb * 1024
        i += 1
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


class Outbox:
    """Pumps put, the recorder takes; bounded in items and bytes, and `put` never waits."""

    def __init__(self, max_items: int = OUTBOX_ITEMS, max_bytes: int = OUTBOX_BYTES) -> None:
        self._items: deque[Item] = deque()
        self._bytes = 0
        self._max_items = max_items
        self._max_bytes = max_bytes
        self._cv = threading.Condition()

    def put(self, item: Item, size: int = 0) -> bool:
        with self._cv:
            if len(self._items) >= self._max_items or self._bytes + size > self._max_bytes:
                return False
            self._items.append(item)
            self._bytes += size
            self._cv.notify()
        return True

    def must_put(self, item: Item) -> None:
        """For the few control items (ends, exits): always kept, whatever the bounds."""
        with self._cv:
            self._items.append(item)
            self._cv.notify()

    def take(self) -> list[Item]:
        with self._cv:
            while not self._items:
                self._cv.wait()
            items = list(self._items)
            self._items.clear()
            self._bytes = 0
        return items


class Lines:
    """Cuts one direction's bytes into lines for the recorder, off the copy that was
    already written on. Keeps at most `cap` bytes of the line in progress (past that, its
    start only: enough for an answer's id)."""

    def __init__(self, tag: str, outbox: Outbox, cap: int, head: int) -> None:
        self.tag = tag
        self.outbox = outbox
        self.cap = cap
        self.head = head
        self.buf = bytearray()
        self.size = 0  # of the line in progress, all of it
        self.lost = 0

    def feed(self, data: bytes, ts: float) -> None:
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            if self.size == 0:
                line = data[start:end]
                size = len(line)
                if size > self.cap:
                    line = line[: self.head]
            else:
                size = self.size + end - start
                if size <= self.cap:
                    self.buf += data[start:end]
                line = bytes(self.buf)
                self.buf.clear()
                self.size = 0
            if not self.outbox.put((self.tag, line, size, ts), len(line)):
                self.lost += 1
            start = end + 1
        if start < len(data):
            rest = len(data) - start
            if self.size + rest <= self.cap:
                self.buf += data[start:]
            elif self.size <= self.cap:
                # Over the cap from here on: keep the start only.
                self.buf += data[start:]
                del self.buf[self.head :]
            self.size += rest


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def pump(
    src: int,
    dst: int,
    lines: Lines | None,
    on_end: Callable[[bool], None],
    count_lines: Callable[[bytes], None] | None = None,
) -> None:
    """Copy `src` to `dst` until EOF (or `dst` is gone), then `on_end(broke)`: bytes are
    written on first, looked at after."""
    broke = False
    clock = time.time
    try:
        while True:
            try:
                data = os.read(src, READ_BYTES)
            except OSError:
                break
            if not data:
                break
            try:
                write_all(dst, data)
            except OSError:
                broke = True
                break
            if lines is not None:
                lines.feed(data, clock())
            elif count_lines is not None:
                count_lines(data)
    finally:
        on_end(broke)


class Wrapper:
    def __init__(self, options: Options) -> None:
        self.o = options
        self.outbox = Outbox()
        self.proc: subprocess.Popen[bytes] | None = None
        self.pending_signals: list[int] = []

    # -- signals ---------------------------------------------------------------------

    def forward(self, signum: int, _frame: object) -> None:
        proc = self.proc
        if proc is None:
            self.pending_signals.append(signum)  # arrived before the child existed
            return
        with contextlib.suppress(OSError):  # already gone
            proc.send_signal(signum)

    # -- the run ---------------------------------------------------------------------

    def run(self) -> int:
        o = self.o
        started = time.time()
        fd, _path = open_recording(o.record_dir or default_record_dir(), started)
        server = f"stdio:{o.name or os.path.basename(o.command[0]) or o.command[0]}"
        run_id = f"{os.getpid()}-{int(started * 1000)}"
        for forwarded in FORWARDED:
            signal.signal(forwarded, self.forward)
        try:
            proc = subprocess.Popen(
                o.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                bufsize=0,
            )
        except OSError as e:
            return self.spawn_failed(e, fd, server, run_id, started)
        self.proc = proc
        for signum in self.pending_signals:
            self.forward(signum, None)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        child_in, child_out, child_err = (
            proc.stdin.fileno(),
            proc.stdout.fileno(),
            proc.stderr.fileno(),
        )

        recorder = threading.Thread(
            target=record,
            args=(self.outbox, fd, server, run_id, started, o.scenario),
            name="mcp-layers-recorder",
            daemon=True,
        )
        recorder.start()
        head = min(4096, o.max_line)
        client_lines = Lines("c", self.outbox, o.max_line, head)
        server_lines = Lines("s", self.outbox, o.max_line, head)

        def stdin_ended(broke: bool) -> None:
            if broke:
                self.outbox.must_put(("epipe", "server"))
            else:
                self.outbox.must_put(("c_eof", time.time()))
            # The client's EOF is the server's: close its stdin, never kill it.
            with contextlib.suppress(OSError):
                proc.stdin.close()  # type: ignore[union-attr]

        def stdout_ended(broke: bool) -> None:
            if broke:
                self.outbox.must_put(("epipe", "client"))
                # The client stopped reading: so does the wrapper, and the server's next
                # write fails as it would have without the wrapper.
                with contextlib.suppress(OSError):
                    proc.stdout.close()  # type: ignore[union-attr]
            self.outbox.must_put(("s_eof", server_lines.size, server_lines.lost))

        stderr_count = [0]

        def count(data: bytes) -> None:
            stderr_count[0] += data.count(b"\n")

        def stderr_ended(_broke: bool) -> None:
            pass

        threads = [
            threading.Thread(
                target=pump,
                args=(0, child_in, client_lines, stdin_ended),
                name="mcp-layers-stdin",
                daemon=True,
            ),
            threading.Thread(
                target=pump,
                args=(child_out, 1, server_lines, stdout_ended),
                name="mcp-layers-stdout",
                daemon=True,
            ),
            threading.Thread(
                target=pump,
                args=(child_err, 2, None, stderr_ended, count),
                name="mcp-layers-stderr",
                daemon=True,
            ),
        ]
        for t in threads:
            t.start()
        code = proc.wait()
        threads[1].join()  # every byte of stdout reaches the client before the wrapper exits
        threads[2].join(STDERR_GRACE_S)
        self.outbox.must_put(("c_lost", client_lines.lost))
        self.outbox.must_put(("stderr", stderr_count[0]))
        self.outbox.must_put(("exit", time.time(), code))
        self.outbox.must_put(("stop",))
        recorder.join(RECORDER_GRACE_S)
        return code

    def spawn_failed(self, e: OSError, fd: int, server: str, run_id: str, started: float) -> int:
        """No server: one record, one line on stderr, nothing on stdout; 127 when the
        command is not there, 126 when it cannot be run (as a shell says)."""
        ended = time.time()
        name = errno.errorcode.get(e.errno or 0, "ERROR")
        message = f"mcp-layers wrap: cannot start {self.o.command[0]!r}: {e.strerror or e}\n"
        os.write(2, message.encode("utf-8", "replace"))
        from mcp_layers_core.jsonl import RecordWriter
        from mcp_layers_core.settings import Settings
        from mcp_layers_core.stdio import StdioObserver

        observer = StdioObserver(
            server=server,
            run_id=run_id,
            started=started,
            settings=Settings(scenario=self.o.scenario),
        )
        with os.fdopen(fd, "ab", buffering=0) as f:
            RecordWriter(started=started, outfile=f).write([observer.spawn_failed(ended, name)])
        return 127 if e.errno == errno.ENOENT else 126


def record(
    outbox: Outbox, fd: int, server: str, run_id: str, started: float, scenario: str | None
) -> None:
    """The recorder thread: the core, imported here (off the start-up path), turns what
    the pumps saw into records, written one line each."""
    from mcp_layers_core.jsonl import RecordWriter
    from mcp_layers_core.settings import Settings
    from mcp_layers_core.stdio import StdioObserver

    observer = StdioObserver(
        server=server, run_id=run_id, started=started, settings=Settings(scenario=scenario)
    )
    problems: list[str] = []
    f = os.fdopen(fd, "ab", buffering=0)
    writer = RecordWriter(started=started, outfile=f, on_error=problems.append)
    while True:
        for item in outbox.take():
            tag = item[0]
            if tag == "c":
                out = observer.from_client(item[1], item[2], item[3])
            elif tag == "s":
                out = observer.from_server(item[1], item[2], item[3])
            elif tag == "c_eof":
                observer.client_closed(item[1])
                continue
            elif tag == "s_eof":
                observer.server_closed(item[1])
                observer.lost(item[2])
                continue
            elif tag == "c_lost":
                observer.lost(item[1])
                continue
            elif tag == "stderr":
                observer.stderr += item[1]
                continue
            elif tag == "epipe":
                if item[1] == "client":
                    observer.epipe_to_client = True
                else:
                    observer.epipe_to_server = True
                continue
            elif tag == "exit":
                code: int = item[2]
                sig = signal.Signals(-code).name if code < 0 else None
                out = observer.exited(item[1], None if sig else code, sig)
            else:  # "stop"
                f.close()
                return
            if out:
                writer.write(out)
        if problems:
            os.write(2, f"mcp-layers wrap: {problems[-1]}\n".encode())
            problems.clear()


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
