"""Every body the core reads, decoded in one place: POST bodies, JSON answers, streams.

Nothing here raises on what a peer sends: a body that does not decode is `NOT_JSON` (or
not MCP), a stream that does not decode stops being read and says why. Costs are kept
where they matter: a POST that is not JSON is refused before any parsing, and a stream
is inflated at most one event's cap per chunk.
"""

from __future__ import annotations

import zlib
from typing import Any

from .jsonrpc import NOT_JSON, messages_of, try_loads
from .notes import Note
from .sse import SseAnomaly, SseEvent, SseParser

#: Content codings of a stream the core inflates (wbits=47 takes gzip and zlib framing).
INFLATABLE = frozenset({"gzip", "x-gzip", "deflate"})


def post_messages(body: bytes | None, max_bytes: int) -> list[dict[str, Any]] | None:
    """The JSON-RPC messages of a POST body, or None: not MCP (or too large to look at)."""
    if body is None or len(body) > max_bytes:
        return None  # too large to look at: not recognised as MCP (documented)
    # Cheap refusal first: most non-MCP POSTs are not JSON at all.
    if body.lstrip()[:1] not in (b"{", b"["):
        return None
    return messages_of(try_loads(body)) or None


def media_type(content_type: str | None) -> str | None:
    """`text/event-stream` from `Text/Event-Stream; charset=utf-8`."""
    return content_type.split(";", 1)[0].strip().lower() if content_type else None


def answer_value(body: bytes | None) -> Any:
    """A buffered answer body, decoded (`NOT_JSON` when empty or not JSON)."""
    return try_loads(body) if body else NOT_JSON


#: An SSE event's data, decoded (`NOT_JSON` when not JSON). An alias, not a wrapper:
#: it runs on every event of every stream.
event_value = try_loads


class StreamDecoder:
    """Raw stream bytes in, SSE events out: inflating (gzip/deflate) then parsing.

    `readable` turns False for good when the stream cannot be read (an unknown coding, a
    corrupt or oversized inflation, or the tracker gives up on it); `failure` then names
    why, as a note, when it is the decoder's doing.
    """

    __slots__ = ("_inflater", "_max_event_bytes", "failure", "parser", "readable")

    def __init__(self, content_encoding: str | None, max_event_bytes: int) -> None:
        self.parser = SseParser(max_event_bytes)
        self._max_event_bytes = max_event_bytes
        self._inflater: Any = None
        self.readable = True
        self.failure: Note | None = None
        encoding = (content_encoding or "identity").strip().lower()
        if encoding in INFLATABLE:
            # Chunks are raw wire bytes: the proxy does not decode a streamed body.
            self._inflater = zlib.decompressobj(wbits=47)
        elif encoding != "identity":
            self.readable = False  # br, zstd, ...: not decoded, the verdict says so
            self.failure = Note("encoded_stream", encoding)

    def feed(self, data: bytes) -> list[SseEvent | SseAnomaly]:
        if self._inflater is not None:
            try:
                data = self._inflater.decompress(data, self._max_event_bytes)
            except zlib.error:
                return self._fail(Note("stream_decode_error"))
            if self._inflater.unconsumed_tail:
                # More than a whole event's cap out of one chunk: a bomb or a giant
                # event. Stop reading rather than inflate without bound.
                return self._fail(Note("stream_inflate_over_cap"))
        return self.parser.feed(data)

    def end(self) -> list[SseEvent | SseAnomaly]:
        return self.parser.end() if self.readable else []

    def _fail(self, why: Note) -> list[SseEvent | SseAnomaly]:
        self.readable = False
        self.failure = why
        return []
