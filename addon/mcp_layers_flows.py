"""What the recorder reads of mitmproxy's flows, and how: the few values of a request
or an answer the core needs (read in the hook, as they are then), and the tap through
which an event stream's chunks pass on to the client and, queued, to the core.

Secrets never reach the core: only allow-listed headers are picked (`REQUEST_NAMES`,
`RESPONSE_NAMES`), never Authorization, cookies or proxy headers.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Iterable
from typing import Any, Final

from mcp_layers_batch import MAX_QUEUED_BYTES, StepQueue
from mcp_layers_core.decode import decoded_body
from mcp_layers_core.events import WANTED_REQUEST_HEADERS, WANTED_RESPONSE_HEADERS
from mitmproxy import http

#: Requests the core reads; any other method is not MCP.
OBSERVED_METHODS: Final = ("POST", "GET", "DELETE")

#: A stream past this many bytes is read as it passes, as before batching: MCP's event
#: streams are small messages, and a bulk one must not wait in memory, nor let the proxy
#: outrun the core's buffer budget (the long-run proof measured 10 MiB more peak RSS).
BULK_STREAM_BYTES: Final = 1024 * 1024

#: mitmproxy's raw header fields: (lower- or mixed-case name, value) byte pairs.
Fields = tuple[tuple[bytes, bytes], ...]
#: What a request hook notes for the core: (method, start, header fields, raw body,
#: upstream "host:port", peer "ip:port", path).
Seen = tuple[str, float, Fields, bytes | None, str, str, str]

#: Raw (lower-case bytes) header names the adapter reads -> the names the core knows.
REQUEST_NAMES: Final = {n.encode(): n for n in (*WANTED_REQUEST_HEADERS, "content-encoding")}
RESPONSE_NAMES: Final = {
    n.encode(): n for n in (*WANTED_RESPONSE_HEADERS, "content-length", "transfer-encoding")
}


def request_seen(flow: http.HTTPFlow) -> Seen | None:
    """What the core will need of this request, read now (None: not a method it reads)."""
    req = flow.request
    method = req.method
    if method not in OBSERVED_METHODS:
        return None
    peer = flow.client_conn.peername
    return (
        method,
        req.timestamp_start,
        req.headers.fields,
        req.raw_content,
        f"{req.host}:{req.port}",
        f"{peer[0]}:{peer[1]}" if peer else "unknown",
        req.path,
    )


def query_session(path: str) -> str | None:
    """2024-11-05 servers name the session in the POST URL the `endpoint` event gave."""
    if "?" not in path:
        return None
    # As mitmproxy's `Request.query` reads it: the first value of a name wins.
    query = urllib.parse.urlparse(path).query
    found = dict(
        reversed(urllib.parse.parse_qsl(query, keep_blank_values=True, errors="surrogateescape"))
    )
    return found.get("session_id") or found.get("sessionId")


def pick(fields: Fields, names: dict[bytes, str]) -> dict[str, str]:
    """The wanted headers in one pass over the raw fields (each `Headers.get` is a
    case-insensitive scan of them all: a third of the addon's time before this)."""
    picked: dict[str, str] = {}
    for key, value in fields:
        name = names.get(key.lower())
        if name is not None and name not in picked:
            picked[name] = value.decode("utf-8", "replace")
    return picked


def content(raw: bytes | None, picked: dict[str, str], cap: int) -> bytes | None:
    """The body as the core reads it (decoded there, never past `cap` bytes)."""
    return decoded_body(raw, picked.get("content-encoding"), cap)


def is_event_stream(fields: Fields) -> bool:
    """Is the (first) Content-Type an event stream? Read as the core reads it."""
    for key, value in fields:
        if key.lower() == b"content-type":
            ctype = value.decode("utf-8", "replace")
            return ctype.split(";", 1)[0].strip().lower() == "text/event-stream"
    return False


# -- the stream tap ---------------------------------------------------------------------


class StreamTap:
    """The `flow.response.stream` callable: queues each chunk for the core, returns it
    as it came.

    It runs on the proxy's only event loop for every chunk, outside mitmproxy's own
    exception guard: a raise here drops the chunk, and a raise on the final `b""` hangs
    the client. So it never raises, and it returns the very object it was given.
    """

    __slots__ = ("_queue", "_read", "_report", "feeding", "flow", "passed", "seen")

    def __init__(
        self,
        queue: StepQueue,
        read: Callable[[StreamTap, float, bytes], None],
        report: Callable[[str, Exception], None],
        flow_id: str,
    ) -> None:
        self._queue, self._read, self._report = queue, read, report
        self.flow = flow_id
        self.feeding = True  # False once the core has nothing more to learn here
        self.seen = False  # did any chunk pass? (an addon-made reply never streams)
        self.passed = 0  # bytes passed so far

    def __call__(self, data: bytes) -> bytes:
        if data and self.feeding:  # b"" ends the message; the `response` hook records it
            self.seen = True
            try:
                queue = self._queue
                self.passed += len(data)
                if self.passed > BULK_STREAM_BYTES:
                    queue.flush()  # a bulk stream: read now, in order
                    self._read(self, time.time(), data)
                    return data
                # Read with the rest of the batch, after the chunk has gone on.
                queue.later(self._read, self, time.time(), data)
                queue.queued_bytes += len(data)
                if queue.queued_bytes > MAX_QUEUED_BYTES:
                    queue.flush()
            except Exception as e:
                self._report("stream tap", e)
        return data


class Chained:
    """A stream callable another addon set before us (a fault's cutter, say) first, then
    our tap on what it passes on: the tap sees what the client gets, and only looks."""

    __slots__ = ("_before", "tap")

    def __init__(self, before: Callable[[bytes], Any], tap: StreamTap) -> None:
        self._before, self.tap = before, tap

    def __call__(self, data: bytes) -> bytes | Iterable[bytes]:
        out = self._before(data)
        if isinstance(out, bytes):
            return self.tap(out)
        if isinstance(out, bytearray | memoryview):
            return self.tap(bytes(out))
        pieces = list(out)  # mitmproxy sends each piece; the tap looks at each
        for piece in pieces:
            self.tap(piece)
        return pieces


def set_tap(flow: http.HTTPFlow, tap: StreamTap) -> None:
    """Tap the answer's stream, after a stream callable another addon set before us."""
    assert flow.response is not None
    previous = flow.response.stream
    flow.response.stream = Chained(previous, tap) if callable(previous) else tap


def tap_of(stream: object) -> StreamTap | None:
    """Our tap, if it is (or ends) this stream callable."""
    if isinstance(stream, Chained):
        stream = stream.tap
    return stream if isinstance(stream, StreamTap) else None
