"""A scripted HTTP/1.1 upstream for the end-to-end tests (stdlib only, 127.0.0.1 only).

Each request is answered from a script: a queue of canned `Reply` objects consumed in
order (a reply with a `when` predicate is skipped until a request matches it), then an
optional `responder` callable, else a 500 that is also recorded as a script error. A
reply sets the status, the headers, a body or timed pieces (SSE chunks), the framing
(Content-Length, chunked, or none and close, i.e. read-until-EOF) and an abort action:

- ``cut``: send the pieces, then close without the chunked terminator (with length
  framing, the declared Content-Length is one byte more than what is sent);
- ``never``: read the request and never answer (until the peer or the server closes);
- ``reset``: reset the connection (RST) before any header is sent.

Everything is recorded: what arrived (`Received`: method, target, headers, body) and
what was written for each reply (`Sent`: the head, the payload as a client should see it
once de-framed, the raw wire bytes and the time each piece was handed to the socket), so
a test can compare byte for byte with what its client got through the proxy. A `Sent`
entry is filled *before* each write, so by the time a client has read some bytes, the
entry already holds them.

The server runs its own event loop in a daemon thread; `ScriptedUpstream` is a context
manager, and every wait and buffer is bounded (see the constants below).
"""

from __future__ import annotations

import asyncio
import contextlib
import http
import itertools
import json
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Self

HOST = "127.0.0.1"

Framing = Literal["auto", "length", "chunked", "close"]
Abort = Literal["cut", "never", "reset"]
#: A piece of a reply body: bytes, or a callable evaluated just before it is written (so a
#: benchmark can stamp the send time into an event).
Piece = bytes | Callable[[], bytes]

MAX_HEAD_BYTES = 64 * 1024
MAX_REQUEST_BODY_BYTES = 64 * 1024 * 1024
#: An idle keep-alive connection is closed after this long.
IDLE_TIMEOUT_S = 30.0
#: A ``never`` reply holds its connection at most this long.
NEVER_TIMEOUT_S = 60.0
MAX_CONNECTIONS = 512
START_TIMEOUT_S = 5.0
STOP_TIMEOUT_S = 5.0
_POLL_S = 0.01


@dataclass(frozen=True)
class Received:
    """One request exactly as it arrived (the body de-chunked if it was chunked)."""

    method: str
    target: str
    version: str
    headers: list[tuple[str, str]]
    body: bytes
    at: float  # time.monotonic() when the whole request had been read
    connection: int  # 1-based number of the TCP connection it came on

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)

    def json(self) -> Any:
        """The body as JSON, or None when it is not JSON."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    @property
    def rpc_method(self) -> str | None:
        msg = self.json()
        return msg.get("method") if isinstance(msg, dict) else None

    @property
    def rpc_id(self) -> Any:
        msg = self.json()
        return msg.get("id") if isinstance(msg, dict) else None


@dataclass(frozen=True)
class Reply:
    """One canned answer. `body` is used when `chunks` is None."""

    status: int = 200
    headers: Sequence[tuple[str, str]] = ()
    body: bytes = b""
    #: (delay before sending, piece) pairs, sent one write each.
    chunks: Sequence[tuple[float, Piece]] | None = None
    #: auto: Content-Length for a body, chunked for chunks.
    framing: Framing = "auto"
    abort: Abort | None = None
    #: Only a request this accepts may consume the reply (see `method_is`, `id_is`).
    when: Callable[[Received], bool] | None = None
    label: str = ""

    def pieces(self) -> list[tuple[float, Piece]]:
        if self.chunks is not None:
            return list(self.chunks)
        return [(0.0, self.body)] if self.body else []

    def resolved_framing(self) -> Literal["length", "chunked", "close"]:
        if self.framing != "auto":
            return self.framing
        return "length" if self.chunks is None else "chunked"


@dataclass
class Sent:
    """What the upstream wrote for one reply. Filled before each write, so never behind."""

    request: int  # index into `ScriptedUpstream.received`
    label: str
    status: int | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    head: bytes = b""
    payload: bytearray = field(default_factory=bytearray)  # the body, de-framed
    wire: bytearray = field(default_factory=bytearray)  # every byte written, head included
    pieces: list[bytes] = field(default_factory=list)
    times: list[float] = field(default_factory=list)  # monotonic, one per piece
    abort: str | None = None
    done: bool = False

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k.lower() == name), None)


def method_is(name: str) -> Callable[[Received], bool]:
    """A `Reply.when` that accepts a JSON-RPC request of that method."""
    return lambda r: r.rpc_method == name


def id_is(value: Any) -> Callable[[Received], bool]:
    """A `Reply.when` that accepts a JSON-RPC request with that id (type included)."""
    return lambda r: type(r.rpc_id) is type(value) and r.rpc_id == value


class _Closed(Exception):
    """The peer went away between requests (the normal end of a keep-alive connection)."""


class ScriptedUpstream:
    """The server. `with ScriptedUpstream([...]) as up:` then point a proxy at `up.port`."""

    def __init__(
        self,
        replies: Iterable[Reply] = (),
        *,
        responder: Callable[[Received], Reply] | None = None,
        keep_log: bool = True,
        port: int = 0,
    ) -> None:
        self.port = port
        # keep_log=False (benchmarks) keeps no per-request history, so memory stays flat.
        self.keep_log = keep_log
        self._lock = threading.Condition()
        self._queue: deque[Reply] = deque(replies)
        self._responder = responder
        self.received: list[Received] = []
        self.sent: list[Sent] = []
        self.errors: list[str] = []
        self.answered = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._start_error: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self._conn_numbers = itertools.count(1)
        self._open = 0

    # -- lifecycle --------------------------------------------------------------------

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="scripted-upstream", daemon=True)
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S):
            raise RuntimeError(f"scripted upstream did not start within {START_TIMEOUT_S} s")
        if self._start_error is not None:
            raise RuntimeError(f"scripted upstream failed to start: {self._start_error!r}")

    def stop(self) -> None:
        """Close every connection (a `never` reply included) and end the thread; idempotent."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(STOP_TIMEOUT_S)
            self._thread = None

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}/mcp"

    # -- the script -------------------------------------------------------------------

    def script(
        self, replies: Iterable[Reply], responder: Callable[[Received], Reply] | None = None
    ) -> None:
        """Replace the script and forget what was received and sent (between test cases)."""
        with self._lock:
            self._queue = deque(replies)
            self._responder = responder
            self.received, self.sent, self.errors = [], [], []
            self.answered = 0

    @property
    def unused(self) -> list[Reply]:
        """Replies of the script that no request consumed."""
        with self._lock:
            return list(self._queue)

    def wait_received(self, count: int, timeout: float = 10.0) -> list[Received]:
        """Block until `count` requests have arrived (raises TimeoutError otherwise)."""
        with self._lock:
            if not self._lock.wait_for(lambda: len(self.received) >= count, timeout):
                raise TimeoutError(f"upstream received {len(self.received)} of {count} requests")
            return list(self.received)

    def wait_sent(self, count: int, timeout: float = 10.0) -> list[Sent]:
        """Block until `count` replies are finished (written, cut, reset or given up)."""
        with self._lock:
            ok = self._lock.wait_for(lambda: sum(s.done for s in self.sent) >= count, timeout)
            if not ok:
                raise TimeoutError(f"upstream finished {sum(s.done for s in self.sent)} of {count}")
            return list(self.sent)

    def _take(self, request: Received) -> tuple[int, Reply]:
        with self._lock:
            index = len(self.received)
            if self.keep_log:
                self.received.append(request)
            self._lock.notify_all()
            for reply in self._queue:
                if reply.when is None or reply.when(request):
                    self._queue.remove(reply)
                    return index, reply
            responder = self._responder
        if responder is not None:
            return index, responder(request)
        message = (
            f"script exhausted: no reply for {request.method} {request.target}"
            f" {request.body[:200]!r}"
        )
        with self._lock:
            self.errors.append(message)
        return index, Reply(500, [("content-type", "text/plain")], message.encode(), label="error")

    def _error(self, message: str) -> None:
        with self._lock:
            self.errors.append(message)
            self._lock.notify_all()

    # -- the server ---------------------------------------------------------------------

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main())
        except BaseException as e:  # reported to start() if it happened there
            self._start_error = e
            self._ready.set()
        finally:
            loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        tasks: set[asyncio.Task[None]] = set()

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            tasks.add(task)
            try:
                await self._connection(reader, writer)
            finally:
                tasks.discard(task)

        server = await asyncio.start_server(
            on_connect, HOST, self.port, limit=MAX_HEAD_BYTES, backlog=MAX_CONNECTIONS
        )
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            server.close()
            for task in list(tasks):
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=STOP_TIMEOUT_S)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), STOP_TIMEOUT_S)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        number = next(self._conn_numbers)
        self._open += 1
        try:
            if self._open > MAX_CONNECTIONS:
                self._error(f"connection {number} refused: over {MAX_CONNECTIONS} open")
                return
            # Bounded: a connection serves at most this many requests.
            for _ in range(1_000_000):
                try:
                    request = await self._read_request(reader, number)
                except _Closed:
                    return
                index, reply = self._take(request)
                keep = await self._answer(index, request, reply, reader, writer)
                if not keep:
                    return
        except (ConnectionError, asyncio.IncompleteReadError) as e:
            self._error(f"connection {number}: {e!r}")
        except (asyncio.LimitOverrunError, ValueError) as e:
            self._error(f"connection {number}: bad request: {e!r}")
        except TimeoutError:
            pass  # an idle keep-alive connection: closing it is the normal end
        finally:
            self._open -= 1
            writer.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(writer.wait_closed(), 1.0)

    async def _read_request(self, reader: asyncio.StreamReader, number: int) -> Received:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE_TIMEOUT_S)
        except asyncio.IncompleteReadError as e:
            if not e.partial:
                raise _Closed from None
            raise
        lines = head[:-4].decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ", 2)
        headers = []
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers.append((name.strip(), value.strip()))
        lower = {k.lower(): v for k, v in headers}
        body = b""
        if "chunked" in lower.get("transfer-encoding", "").lower():
            body = await self._read_chunked(reader)
        elif "content-length" in lower:
            size = int(lower["content-length"])
            if not 0 <= size <= MAX_REQUEST_BODY_BYTES:
                raise ValueError(f"request body of {size} bytes")
            body = await asyncio.wait_for(reader.readexactly(size), IDLE_TIMEOUT_S)
        return Received(method, target, version, headers, body, time.monotonic(), number)

    async def _read_chunked(self, reader: asyncio.StreamReader) -> bytes:
        body = bytearray()
        for _ in range(MAX_REQUEST_BODY_BYTES):  # bounded: each round reads >= 1 byte
            line = await asyncio.wait_for(reader.readuntil(b"\r\n"), IDLE_TIMEOUT_S)
            size = int(line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                # Trailers, if any, end with an empty line.
                for _ in range(100):
                    if await reader.readuntil(b"\r\n") == b"\r\n":
                        return bytes(body)
                raise ValueError("too many trailer lines")
            if len(body) + size > MAX_REQUEST_BODY_BYTES:
                raise ValueError("chunked request body over the cap")
            body += await asyncio.wait_for(reader.readexactly(size + 2), IDLE_TIMEOUT_S)
            del body[-2:]
        raise ValueError("chunked request body never ended")

    async def _answer(
        self,
        index: int,
        request: Received,
        reply: Reply,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        """Send one reply; True when the connection may serve another request."""
        sent = Sent(request=index, label=reply.label)
        with self._lock:
            if self.keep_log:
                self.sent.append(sent)
        try:
            return await self._send(sent, request, reply, reader, writer)
        finally:
            with self._lock:
                sent.done = True
                self.answered += 1
                self._lock.notify_all()

    async def _send(
        self,
        sent: Sent,
        request: Received,
        reply: Reply,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> bool:
        if reply.abort == "reset":
            sent.abort = "reset"
            sock = writer.get_extra_info("socket")
            # SO_LINGER with a zero timeout makes close() send an RST instead of a FIN.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
            return False
        if reply.abort == "never":
            sent.abort = "never"
            await self._hold(reader)
            return False

        framing = reply.resolved_framing()
        pieces = reply.pieces()
        length = 0
        if framing == "length":
            # The length must be known up front, so callable pieces are evaluated now.
            evaluated = [(delay, p() if callable(p) else p) for delay, p in pieces]
            length = sum(len(p) for _, p in evaluated)
            pieces = [*evaluated]
        headers = list(reply.headers)
        names = {k.lower() for k, _ in headers}
        if framing == "length" and "content-length" not in names:
            headers.append(("Content-Length", str(length + (reply.abort == "cut"))))
        elif framing == "chunked" and "transfer-encoding" not in names:
            headers.append(("Transfer-Encoding", "chunked"))
        elif framing == "close" and "connection" not in names:
            headers.append(("Connection", "close"))
        try:
            phrase = http.HTTPStatus(reply.status).phrase
        except ValueError:
            phrase = "Scripted"
        head = f"HTTP/1.1 {reply.status} {phrase}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
        sent.status, sent.headers, sent.head = reply.status, headers, head.encode("latin-1")
        sent.wire += sent.head
        writer.write(sent.head)
        await writer.drain()

        for delay, piece in pieces:
            if delay > 0:
                await asyncio.sleep(delay)
            data = piece() if callable(piece) else piece
            if not data:
                continue  # an empty chunk would be the chunked terminator
            frame = f"{len(data):x}\r\n".encode() + data + b"\r\n" if framing == "chunked" else data
            sent.payload += data
            sent.pieces.append(data)
            sent.wire += frame
            sent.times.append(time.monotonic())
            writer.write(frame)
            await writer.drain()

        if reply.abort == "cut":
            sent.abort = "cut"
            # A FIN in the middle of the body: no terminator, or fewer bytes than declared.
            writer.close()
            return False
        if framing == "chunked":
            sent.wire += b"0\r\n\r\n"
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        if framing == "close":
            return False
        return (request.header("connection") or "").lower() != "close"

    async def _hold(self, reader: asyncio.StreamReader) -> None:
        """Never answer: wait until the peer closes, the server stops, or the cap runs out."""
        assert self._stop is not None
        peer_gone = asyncio.ensure_future(reader.read(1))
        stopping = asyncio.ensure_future(self._stop.wait())
        try:
            await asyncio.wait(
                {peer_gone, stopping}, timeout=NEVER_TIMEOUT_S, return_when="FIRST_COMPLETED"
            )
        finally:
            for task in (peer_gone, stopping):
                task.cancel()


# -- reply builders ---------------------------------------------------------------------


def json_bytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def json_reply(
    value: Any, status: int = 200, headers: Sequence[tuple[str, str]] = (), **kw: Any
) -> Reply:
    """A JSON body (`value` may already be bytes, to send something that is not JSON)."""
    body = value if isinstance(value, bytes) else json_bytes(value)
    return Reply(status, [("Content-Type", "application/json"), *headers], body, **kw)


def sse_event(
    data: bytes | str | Any, event: str | None = "message", event_id: str | None = None
) -> bytes:
    """One SSE event block; `data` that is not bytes or str is sent as JSON."""
    if not isinstance(data, bytes | str):
        data = json_bytes(data)
    if isinstance(data, str):
        data = data.encode()
    out = b""
    if event is not None:
        out += b"event: " + event.encode() + b"\n"
    if event_id is not None:
        out += b"id: " + event_id.encode() + b"\n"
    return out + b"".join(b"data: " + line + b"\n" for line in data.split(b"\n")) + b"\n"


#: The priming event MCP servers send first to make a stream resumable (an id, empty data).
PRIMING_EVENT = b"id: 1\ndata: \n\n"


def sse_reply(
    events: Sequence[bytes],
    status: int = 200,
    headers: Sequence[tuple[str, str]] = (),
    gap_s: float = 0.0,
    **kw: Any,
) -> Reply:
    """An SSE stream: one piece per event, `gap_s` apart (chunked unless `framing` says)."""
    return Reply(
        status,
        [("Content-Type", "text/event-stream"), ("Cache-Control", "no-cache"), *headers],
        chunks=[(gap_s if i else 0.0, e) for i, e in enumerate(events)],
        **kw,
    )
