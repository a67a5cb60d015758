"""Shared tools of the hardening proofs: a raw HTTP/1.1 client, process gauges, file checks.

The client speaks HTTP/1.1 on a plain socket (no SDK, no library that retries, reframes
or decodes behind our back), so what it reports is exactly what came off the wire from
the proxy: status, every header line in order, the de-framed body, and when each piece
of the body arrived. It can hang up after a given number of body bytes (a client that
aborts mid-stream). Every read has a deadline and every loop a bound.

Figures: each proof prints one `HARDENING <proof>: k=v ...` line (shown with `-s`) and
puts the same line in its assertion messages, so a failure says what was measured.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
RECV_TIMEOUT_S = 10.0
RESPONSE_DEADLINE_S = 30.0
MAX_HEADER_LINES = 200
MAX_LINE = 64 * 1024
RECV_SIZE = 1 << 20

#: Hop-by-hop and framing headers: a proxy may legitimately rewrite these (RFC 9110 §7.6.1).
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "content-length",
    }
)


def figures(proof: str, **values: Any) -> str:
    """Print one summary line of a proof's figures and return it (for assertion messages)."""
    parts = " ".join(f"{k}={v}" for k, v in values.items())
    line = f"HARDENING {proof}: {parts}"
    print(line, flush=True)
    return line


# -- the raw client -------------------------------------------------------------------------


@dataclass
class Got:
    """What the client got from the proxy."""

    status: int | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    framing: str | None = None  # length | chunked | eof | none
    complete: bool = False  # the body ended as its framing says
    error: str | None = None
    aborted: bool = False  # we hung up on purpose
    #: (time.monotonic(), body bytes so far) after each piece of body arrived.
    arrivals: list[tuple[float, int]] = field(default_factory=list)

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)

    def end_to_end_headers(self) -> list[tuple[str, str]]:
        return [(k.lower(), v) for k, v in self.headers if k.lower() not in HOP_BY_HOP]

    def arrived(self, length: int) -> float | None:
        """When the body had reached `length` bytes."""
        return next((t for t, n in self.arrivals if n >= length), None)


class _Abort(Exception):
    """The client hangs up on purpose."""


class _Reader:
    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock, self.deadline = sock, deadline
        self.buf = bytearray()
        self.eof = False
        self.last = time.monotonic()

    def fill(self) -> bool:
        if self.eof:
            return False
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("response deadline passed")
        self.sock.settimeout(min(remaining, RECV_TIMEOUT_S))
        data = self.sock.recv(RECV_SIZE)
        self.last = time.monotonic()
        if not data:
            self.eof = True
            return False
        self.buf += data
        return True

    def line(self) -> bytes:
        for _ in range(1_000_000):
            at = self.buf.find(b"\r\n")
            if at >= 0:
                out = bytes(self.buf[:at])
                del self.buf[: at + 2]
                return out
            if len(self.buf) > MAX_LINE:
                raise ValueError("line too long")
            if not self.fill():
                raise EOFError("connection closed inside a line")
        raise ValueError("no line")

    def take(self, size: int) -> bytes:
        for _ in range(10_000_000):
            if len(self.buf) >= size:
                out = bytes(self.buf[:size])
                del self.buf[:size]
                return out
            if not self.fill():
                raise EOFError(f"connection closed with {len(self.buf)} of {size} bytes")
        raise ValueError("body never came")


class RawClient:
    """One client connection to the proxy; requests on it reuse it (keep-alive)."""

    def __init__(self, port: int, host: str = HOST) -> None:
        self.port = port
        self.host = host
        self.sock = socket.create_connection((host, port), timeout=RECV_TIMEOUT_S)
        self.reader = _Reader(self.sock, 0.0)

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def request(
        self,
        method: str,
        body: bytes = b"",
        headers: Sequence[tuple[str, str]] = (),
        path: str = "/mcp",
        *,
        abort_after: int | None = None,
        deadline_s: float = RESPONSE_DEADLINE_S,
        keep_body: bool = True,
        sink: Callable[[bytes], object] | None = None,
    ) -> Got:
        """Send one request and read its response. `abort_after`: hang up (close the
        socket) once that many body bytes have arrived. `keep_body=False` counts the
        body without keeping it (long streams); `sink` gets every piece of it."""
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers)
        if method in ("POST", "PUT") or body:
            head += f"Content-Length: {len(body)}\r\n"
        head += "\r\n"
        got = Got()
        try:
            self.sock.sendall(head.encode("latin-1") + body)
            self.reader.deadline = time.monotonic() + deadline_s
            self._read_response(got, abort_after, keep_body, sink)
        except _Abort:
            got.aborted = True
            self.close()
        except (OSError, EOFError, ValueError) as e:  # TimeoutError is an OSError
            got.error = repr(e)
        return got

    def post(self, body: bytes, headers: Sequence[tuple[str, str]] = (), **kw: Any) -> Got:
        return self.request("POST", body, headers, **kw)

    def _read_response(
        self,
        got: Got,
        abort_after: int | None,
        keep_body: bool,
        sink: Callable[[bytes], object] | None = None,
    ) -> None:
        r = self.reader
        status_line = r.line().decode("latin-1")
        got.status = int(status_line.split(" ", 2)[1])
        for _ in range(MAX_HEADER_LINES):
            line = r.line().decode("latin-1")
            if not line:
                break
            name, _, value = line.partition(":")
            got.headers.append((name.strip(), value.strip()))
        body = bytearray()
        size_so_far = 0

        def add(data: bytes) -> None:
            nonlocal size_so_far
            size_so_far += len(data)
            if keep_body:
                body.extend(data)
                got.arrivals.append((r.last, size_so_far))
            if sink is not None:
                sink(data)
            if abort_after is not None and size_so_far >= abort_after:
                got.body = bytes(body)
                raise _Abort

        te = (got.header("transfer-encoding") or "").lower()
        try:
            if got.status in (204, 304) or 100 <= got.status < 200:
                got.framing, got.complete = "none", True
            elif "chunked" in te:
                got.framing = "chunked"
                for _ in range(100_000_000):
                    size = int(r.line().split(b";", 1)[0].strip(), 16)
                    if size == 0:
                        for _ in range(100):  # trailers end with an empty line
                            if not r.line():
                                break
                        got.complete = True
                        break
                    add(r.take(size))
                    if r.take(2) != b"\r\n":
                        raise ValueError("bad chunk end")
            elif got.header("content-length") is not None:
                got.framing = "length"
                size = int(got.header("content-length") or 0)
                for _ in range(100_000_000):
                    if size_so_far >= size:
                        break
                    if not r.buf and not r.fill():
                        raise EOFError(f"connection closed with {size_so_far} of {size} bytes")
                    part = bytes(r.buf[: size - size_so_far])
                    del r.buf[: len(part)]
                    add(part)
                got.complete = True
            else:
                got.framing = "eof"
                for _ in range(100_000_000):
                    if r.buf:
                        part = bytes(r.buf)
                        r.buf.clear()
                        add(part)
                    if not r.fill():
                        break
                got.complete = True
        finally:
            got.body = bytes(body)


def post_once(port: int, body: bytes, headers: Sequence[tuple[str, str]] = (), **kw: Any) -> Got:
    """A POST on a fresh connection."""
    try:
        client = RawClient(port)
    except OSError as e:
        return Got(error=f"connect: {e!r}")
    with client:
        return client.post(body, headers, **kw)


def mcp_headers(
    session: str | None = None, user_agent: str = "hardening/1.0", protocol: str = "2025-11-25"
) -> list[tuple[str, str]]:
    headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("User-Agent", user_agent),
        ("MCP-Protocol-Version", protocol),
    ]
    if session:
        headers.append(("Mcp-Session-Id", session))
    return headers


def jbytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def tool_call(rid: Any, tool: str = "echo", **arguments: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }


def tool_result(rid: Any, text: str = "ok", is_error: bool = False) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "result": {"content": [{"type": "text", "text": text}], "isError": is_error},
    }


def sse_block(message: Any, event_id: str | None = None) -> bytes:
    out = b"event: message\n"
    if event_id is not None:
        out += b"id: " + event_id.encode() + b"\n"
    return out + b"data: " + jbytes(message) + b"\n\n"


# -- recordings -------------------------------------------------------------------------------


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


def wait_for(predicate: Any, timeout: float, interval: float = 0.02) -> bool:
    """Poll `predicate()` until it is true or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)


# -- process gauges (Linux /proc) -----------------------------------------------------------


def rss_kib(pid: int) -> int:
    """Resident set size of a process, KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def hwm_kib(pid: int) -> int:
    """Peak resident set size of a process so far, KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmHWM for {pid}")


_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def proxy_pid(proxy: Any) -> int:
    """The pid of a harness `Proxy`'s mitmdump (the harness keeps the handle private)."""
    proc = proxy._proc
    assert proc is not None, "the proxy is not running"
    return int(proc.pid)


# -- mitmdump with options the harness does not offer ----------------------------------------


def custom_proxy(
    strategy: str = "lazy", fsize_limit: int | None = None, precreate: bool = True
) -> type:
    """A harness `Proxy` class whose mitmdump uses `connection_strategy=<strategy>` and,
    with `fsize_limit`, runs under `RLIMIT_FSIZE` (no file it writes may grow past that
    many bytes: a disk that is full for it). `precreate=False` leaves the recording
    directory for the addon to create (the harness makes it first).

    The harness always passes `connection_strategy=lazy` (what the README tells users),
    and mitmdump refuses a second value for one option, so the command line is the
    harness's with that pair replaced.
    """
    import resource
    import subprocess

    from harness import Proxy
    from mcp_layers_demo import procs

    def limit() -> None:  # in the child, before exec; Python then ignores SIGXFSZ
        assert fsize_limit is not None
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_limit, fsize_limit))

    class CustomProxy(Proxy):
        def __enter__(self) -> CustomProxy:
            if precreate:
                self.record_dir.mkdir(parents=True, exist_ok=True)
            self.port = procs.free_port()
            cmd = procs.mitmdump_cmd(
                self.upstream_port,
                self.port,
                self.addon,
                self.record_dir,
                self.scenario,
                self.extra_sets,
            )
            cmd[cmd.index("connection_strategy=lazy")] = f"connection_strategy={strategy}"
            self.log.parent.mkdir(parents=True, exist_ok=True)
            with self.log.open("ab") as out:
                self._proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    preexec_fn=limit if fsize_limit is not None else None,
                )
            try:
                procs.wait_for_port(self.port, self._proc, what="mitmdump", log=self.log)
            except BaseException:
                self.stop()
                raise
            return self

    return CustomProxy


# -- file systems that refuse ------------------------------------------------------------------


def can_mount() -> bool:
    """Can this process mount a tmpfs (root with CAP_SYS_ADMIN, as in this container)?"""
    import shutil
    import subprocess
    import tempfile

    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    probe = Path(tempfile.mkdtemp(prefix="mount-probe-"))
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)],
            capture_output=True,
            timeout=10,
        )
        if done.returncode != 0:
            return False
        subprocess.run(["umount", str(probe)], capture_output=True, timeout=10)
        return True
    finally:
        probe.rmdir()


def mount_tmpfs(path: Path, size: str, read_only: bool = False) -> None:
    import subprocess

    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size},mode=0700" + (",ro" if read_only else "")
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=True, timeout=10
    )


def remount(path: Path, read_only: bool) -> None:
    import subprocess

    option = "remount,ro" if read_only else "remount,rw"
    subprocess.run(["mount", "-o", option, str(path)], check=True, timeout=10)


def unmount(path: Path) -> None:
    """Unmount (lazily if something still holds it); never raises."""
    import subprocess

    for cmd in (["umount", str(path)], ["umount", "-l", str(path)]):
        try:
            if subprocess.run(cmd, capture_output=True, timeout=10).returncode == 0:
                return
        except (OSError, subprocess.SubprocessError):
            pass


def addon_failures(log_text: str) -> list[str]:
    """Lines where the addon's guard caught an exception of its own (traffic unaffected,
    but a defect): `mcp-layers: <hook> failed (...)`."""
    return [line for line in log_text.splitlines() if "mcp-layers:" in line and "failed (" in line]


def wait_serving(port: int) -> None:
    """Until the proxy answers an HTTP request (a GET that is not MCP: nothing recorded).

    mitmdump's port accepts connections (the kernel's backlog) before its addons have
    finished `configure`; a test that changes the recording directory under it must
    wait for this, not just for the port.
    """
    with RawClient(port) as client:
        got = client.request("GET", path="/ready", deadline_s=20)
    assert got.status is not None, got
