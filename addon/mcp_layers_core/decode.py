"""Every body the core reads, decoded in one place: POST bodies, JSON answers, streams.

Nothing here raises on what a peer sends: a body that does not decode is `NOT_JSON` (or
not MCP), a stream that does not decode stops being read and says why. Costs are kept
where they matter: a POST that is not JSON is refused before any parsing, and a stream
is inflated at most one event's cap per chunk.
"""

from __future__ import annotations

import zlib
from typing import Any

from .budget import BufferBudget
from .jsonrpc import NOT_JSON, try_loads
from .notes import Note
from .record import NoteCode
from .sse import SseAnomaly, SseEvent, SseParser

#: Content codings of a stream the core inflates (wbits=47 takes gzip and zlib framing).
INFLATABLE = frozenset({"gzip", "x-gzip", "deflate"})

#: A UTF-8 byte order mark. RFC 8259: a JSON parser MAY ignore one before the text.
BOM = b"\xef\xbb\xbf"

#: A content coding named in a note is cut to this many characters (it is the server's).
_MAX_CODING_CHARS = 40


def decoded_body(raw: bytes | None, content_encoding: str | None, cap: int) -> bytes | None:
    """A buffered body, decoded only when it is encoded, and never past `cap` bytes: a
    small gzip can hold gigabytes of zeros. None when it cannot be read within that (over
    the cap, corrupt, or an encoding with no bounded decoder at hand: br, zstd)."""
    encoding = (content_encoding or "identity").strip().lower()
    if raw is None or encoding in ("", "identity"):
        return raw
    if encoding not in ("gzip", "x-gzip", "deflate"):
        return None
    out = _inflate(raw, cap, 47)  # gzip or zlib framing
    if out is None and encoding == "deflate":
        # Raw deflate (no zlib header): HTTP clients (httpx among them) accept it too.
        out = _inflate(raw, cap, -15)
    return out


def _inflate(raw: bytes, cap: int, wbits: int) -> bytes | None:
    """At most `cap` inflated bytes of `raw`, or None (corrupt, or more than `cap`)."""
    inflater = zlib.decompressobj(wbits=wbits)
    try:
        out = inflater.decompress(raw, cap + 1)
    except zlib.error:
        return None
    return None if len(out) > cap or inflater.unconsumed_tail else out


def post_json(body: bytes | None, max_bytes: int) -> Any:
    """A POST body's JSON value, or `NOT_JSON`: not JSON (nor starting like an object or
    an array), or too large to look at. Parsed once for both readers of a POST: the
    MCP one (`messages_of`) and, when it is not MCP, the model API one (`model_api`).

    A leading BOM is read past: a server may read the JSON after it, or reject it, and
    either way the exchange is recorded (`has_bom` tells the tracker to say so).
    """
    if body is None or len(body) > max_bytes:
        return NOT_JSON  # too large to look at: not recognised as MCP (documented)
    if body.startswith(BOM):
        body = body[len(BOM) :]
    # Cheap refusal first: most non-MCP POSTs are not JSON at all.
    if body.lstrip()[:1] not in (b"{", b"["):
        return NOT_JSON
    return try_loads(body)


def has_bom(body: bytes | None) -> bool:
    return body is not None and body.startswith(BOM)


def content_coding(content_encoding: str | None) -> str:
    """`gzip` from ` GZip `; `identity` when there is none."""
    return (content_encoding or "identity").strip().lower()


def unread_body_note(size: int, coding: str, max_bytes: int) -> Note:
    """Why the adapter handed no body: streamed past unseen (size 0), over the cap, or an
    encoding it does not decode (br, zstd) or could not (corrupt, or inflating past the
    cap)."""
    if not size:
        return Note(NoteCode.BODY_UNSEEN)
    if size > max_bytes or coding in ("", "identity"):
        return Note(NoteCode.BODY_OVER_CAP, size)
    if coding in INFLATABLE:
        return Note(NoteCode.BODY_UNDECODABLE, coding)
    return Note(NoteCode.ENCODED_BODY, coding[:_MAX_CODING_CHARS])


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
    why, as a note, when it is the decoder's doing. With a `budget`, what the parser
    holds counts against it until `end()` or `release()`.
    """

    __slots__ = (
        "_budget",
        "_held",
        "_inflater",
        "_max_event_bytes",
        "failure",
        "parser",
        "readable",
    )

    def __init__(
        self,
        content_encoding: str | None,
        max_event_bytes: int,
        budget: BufferBudget | None = None,
    ) -> None:
        self.parser = SseParser(max_event_bytes)
        self._budget = budget
        self._held = 0  # bytes of this parser counted in the budget
        self._max_event_bytes = max_event_bytes
        self._inflater: Any = None
        self.readable = True
        self.failure: Note | None = None
        encoding = content_coding(content_encoding)
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
        items = self.parser.feed(data)
        if self._budget is not None:
            self._account()
        return items

    def _account(self) -> None:
        parser, budget = self.parser, self._budget
        assert budget is not None
        held = parser.buffered_bytes
        if held == self._held:
            return  # the usual case: whole events per chunk, nothing left over
        over = budget.change(held - self._held)
        self._held = held
        if over and parser.drop_event():
            budget.dropped += 1
            held = parser.buffered_bytes
            budget.change(held - self._held)
            self._held = held

    def end(self) -> list[SseEvent | SseAnomaly]:
        items = self.parser.end() if self.readable else []
        self.release()
        return items

    def release(self) -> None:
        """Give back this stream's share of the budget (it ended, or was written)."""
        if self._held and self._budget is not None:
            self._budget.change(-self._held)
        self._held = 0

    def _fail(self, why: Note) -> list[SseEvent | SseAnomaly]:
        self.readable = False
        self.failure = why
        return []
