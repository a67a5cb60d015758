"""A raw-socket HTTP/1.1 client for the end-to-end and hardening tests and the benchmarks.

It speaks HTTP/1.1 on a plain socket (no SDK, no library that retries, reframes or
decodes behind our back), so what it reports is exactly what came off the wire from the
proxy: the status, every header line in order, the de-framed body (de-chunked for
chunked streams; still gzip when gzip) and when each piece of the body arrived. It can
hang up after a given number of body bytes (a client that aborts mid-stream), count a
long body without keeping it, and hand every piece to a sink. Every read has a deadline
and every loop a bound.

- `RawClient(port)`: one connection; `request()` / `post()` on it reuse it (keep-alive).
- `post_once(port, body, headers)`: a POST on a fresh connection.
- `Got`: what one request got back. Failures (refused connection, reset, EOF inside the
  response, a deadline) are in `Got.error`, never raised.

Only the standard library: the upstream subprocesses import it too.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Where the proxy listens (the same as `procs.HOST`).
HOST = "127.0.0.1"
#: The longest one `recv` may wait (within the response's deadline).
RECV_TIMEOUT_S = 10.0
#: How long a whole response may take, unless a request says otherwise.
RESPONSE_DEADLINE_S = 30.0
MAX_HEADER_LINES = 200
MAX_TRAILER_LINES = 100
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


@dataclass
class Got:
    """What the client got: status, headers and the de-framed body, with arrival times."""

    status: int | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""
    framing: str | None = None  # length | chunked | eof | none
    complete: bool = False  # the body ended as its framing says (EOF counts for `eof`)
    error: str | None = None
    aborted: bool = False  # we hung up on purpose (`abort_after`)
    #: (time.monotonic(), body bytes so far) after each piece of body arrived.
    arrivals: list[tuple[float, int]] = field(default_factory=list)

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)

    def end_to_end_headers(self) -> list[tuple[str, str]]:
        """The headers, names lower-cased, without the hop-by-hop and framing ones."""
        return [(k.lower(), v) for k, v in self.headers if k.lower() not in HOP_BY_HOP]

    def arrived(self, length: int) -> float | None:
        """When the body had reached `length` bytes."""
        return next((t for t, n in self.arrivals if n >= length), None)


class _Abort(Exception):
    """The client hangs up on purpose."""


class _Reader:
    """Buffered reads from a socket under one deadline."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self.sock, self.deadline = sock, deadline
        self.buf = bytearray()
        self.eof = False
        self.last = time.monotonic()  # when the last read returned

    def fill(self) -> bool:
        """Read more; False at EOF. Raises TimeoutError past the deadline."""
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

    def post(
        self, body: bytes, headers: Sequence[tuple[str, str]] = (), path: str = "/mcp", **kw: Any
    ) -> Got:
        """A POST on this connection; `kw` as for `request`."""
        return self.request("POST", body, headers, path, **kw)

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
                        for _ in range(MAX_TRAILER_LINES):  # trailers end with an empty line
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
    """A POST on a fresh connection; a refused connection is a `Got` with only `error`."""
    try:
        client = RawClient(port)
    except OSError as e:
        return Got(error=f"connect: {e!r}")
    with client:
        return client.post(body, headers, **kw)
