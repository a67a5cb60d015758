"""Incremental, sans-IO parser for Server-Sent Events (`text/event-stream`).

Feed it the body of an SSE response chunk by chunk as the proxy sees it; it returns
the events completed by each chunk. It does no I/O, keeps no clock and never raises on
any input, so the mitmproxy stream tap can call it on every chunk of every stream.

Contract. `SseParser.feed(chunk)` returns, in stream order, one `SseEvent` per event
block dispatched by a blank line and one `SseAnomaly` per event dropped for exceeding
`max_event_bytes`; `SseParser.end()` marks the end of the stream and reports a partly
received event as `SseAnomaly("unterminated_event")` instead of dispatching it. The
interpretation is WHATWG's ("event stream interpretation"): lines end with CRLF, LF or
CR; one leading BOM is stripped; `field: value` loses one space after the colon; comments
(`:`) and unknown fields are ignored; `data` lines are joined with LF; an `id` holding
NUL and a `retry` that is not all ASCII digits are ignored; the last event id persists
across events. Unlike a browser it also dispatches blocks that carry no data but set
`event`, `id` or `retry` (`has_data` tells them apart), because MCP servers send such
"priming" events to make a stream resumable. The result is the same however the stream
is cut into chunks (split invariance), and memory stays under `max_event_bytes`.

Block ends. `SseParser(track_ends=True)` also notes where each block ended: after each
`feed()`/`end()`, `take_ends()` returns one `SseBlockEnd` per blank line passed, with the
stream offset just past that line's line end and what was dispatched there (an event,
an over-cap anomaly, or None for a comment-only or empty block). A stream cutter slices
the exact upstream bytes at these offsets instead of splitting lines a second time. The
ends, too, do not depend on chunking: a blank line whose CR ends the bytes fed so far is
reported only once the next byte (a possible LF of a CRLF) or `end()` has come.

Why bytes first: the stream is split into lines on the raw bytes, and only complete
lines (in fact only the values the caller sees) are decoded, as UTF-8 with replacement.
CR and LF never occur inside a multi-byte UTF-8 sequence, so a character cut in two by
a chunk boundary is always whole again once its line is complete, and bad UTF-8 can
neither raise nor hide a line end. Decoding chunk by chunk would corrupt cut characters;
`str.splitlines` would split on characters SSE does not treat as line ends (U+2028,
U+0085, VT, FF...).

Size: just over 400 lines: the parser and its block-end bookkeeping share every hot
loop variable, so they stay one class.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from .limits import MAX_EVENT_BYTES

__all__ = ["SseAnomaly", "SseBlockEnd", "SseEvent", "SseParser"]

_BOM: Final = b"\xef\xbb\xbf"
_LINE_END: Final = re.compile(rb"(\r\n|\r|\n)")
#: Retry values longer than this (in significant digits) are ignored: no reconnection
#: delay of 10^18 ms is meaningful, and `int()` of a huge digit string raises on 3.11+.
_MAX_RETRY_DIGITS: Final = 18

#: `SseAnomaly.kind` values.
EVENT_OVER_CAP: Final = "event_over_cap"
UNTERMINATED_EVENT: Final = "unterminated_event"
#: Dropped by the caller (`drop_event`): all streams together held too much.
EVENT_OVER_BUDGET: Final = "event_over_budget"


@dataclass(frozen=True, slots=True)
class SseEvent:
    """One dispatched event."""

    event: str  # the `event:` field, "message" when absent or empty
    data: str  # data lines joined with "\n" (WHATWG), final LF stripped
    id: str | None  # the last-event-id buffer at dispatch time (persists); None if never set
    retry: int | None  # a valid `retry:` value seen in THIS event block, else None
    has_data: bool  # at least one `data` line in this block (`data:` alone counts)


@dataclass(frozen=True, slots=True)
class SseAnomaly:
    """An event that was not dispatched."""

    kind: str  # "event_over_cap" | "unterminated_event" | "event_over_budget"
    skipped_bytes: int  # bytes of the event that were dropped


@dataclass(frozen=True, slots=True)
class SseBlockEnd:
    """Where an event block ended (reported with `track_ends=True`)."""

    offset: int  # stream offset just past the blank line's line end (a BOM counts)
    item: SseEvent | SseAnomaly | None  # dispatched there; None: nothing (comments only)


class SseParser:
    """Incremental SSE parser for one stream. Not thread-safe; one instance per stream.

    `feed(chunk)` takes the next bytes of the stream (an empty chunk is a no-op, not the
    end) and returns the events and anomalies they complete. `end()` declares the end
    of the stream: an event still being received is not dispatched (WHATWG) and is
    reported as `SseAnomaly("unterminated_event", n)`, n counting its bytes; an event
    being dropped for its size is reported as `SseAnomaly("event_over_cap", n)` instead.
    After `end()` the parser is closed: `feed()` and `end()` return [] and raise nothing.

    Size cap: when the line being read plus the pending event's data and event name
    would exceed `max_event_bytes`, the event is dropped: its buffers are freed, input
    is skipped up to the blank line that ends it, and one
    `SseAnomaly("event_over_cap", n)` is returned there, n being all the bytes of that
    event (its lines with their line ends, not the closing blank line). Lines of the
    event read before the cap was crossed have taken effect on the last event id, as in
    a browser. The last event id itself is held outside the cap; it is at most one line,
    so at most `max_event_bytes` too.
    """

    __slots__ = (
        "_block_raw",
        "_block_start",
        "_bom",
        "_cap",
        "_closed",
        "_data",
        "_discarding",
        "_dispatch",
        "_drop_kind",
        "_ends",
        "_event",
        "_field_seen",
        "_id",
        "_partial",
        "_pending_end",
        "_plen",
        "_retry",
        "_skip_lf",
    )

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES, *, track_ends: bool = False) -> None:
        if max_event_bytes < 1:
            raise ValueError(f"max_event_bytes must be positive, not {max_event_bytes!r}")
        self._cap = max_event_bytes
        self._closed = False
        # Bytes held while deciding whether the stream starts with a BOM; None once decided.
        self._bom: bytes | None = b""
        # The previous chunk ended with CR: an LF opening the next chunk completes that CRLF.
        self._skip_lf = False
        # The line being read. bytearrays, not lists of fragments: memory stays equal to
        # the byte count even when a peer sends one byte per chunk or many tiny lines.
        self._partial = bytearray()
        self._plen = 0  # its length; also counted (without storing) while discarding
        self._discarding = False  # dropping an over-cap event until its blank line
        self._drop_kind = EVENT_OVER_CAP  # what the dropped event is reported as
        # The current block: raw bytes of its complete lines, whether it has a field line,
        # whether it will dispatch (data, event, or a valid id/retry seen).
        self._block_raw = 0
        self._field_seen = False
        self._dispatch = False
        # Event buffers. Data values are stored each followed by LF, so len() is exact.
        self._data = bytearray()
        self._event = b""
        self._retry: int | None = None
        self._id: str | None = None  # the last event id: persists across events
        # Block ends (only with track_ends; None keeps the per-block cost to one test).
        self._ends: list[SseBlockEnd] | None = [] if track_ends else None
        self._block_start = 0  # stream offset of the current block's first byte
        # A block end that waits for the next byte: its blank line ended in a CR that
        # closed the bytes fed so far, and an LF may still follow (a CRLF).
        self._pending_end: SseBlockEnd | None = None

    @property
    def buffered_bytes(self) -> int:
        """Bytes held right now: the partial line and the pending event's data and name.

        Never more than `max_event_bytes`, plus at most 2 bytes of a possible BOM.
        """
        held = len(self._partial) + len(self._data) + len(self._event)
        return held + len(self._bom) if self._bom else held

    @property
    def closed(self) -> bool:
        """`end()` was called."""
        return self._closed

    def feed(self, chunk: bytes) -> list[SseEvent | SseAnomaly]:
        """Parse the next bytes of the stream; return what they complete, in order."""
        if self._closed or not chunk:
            return []
        if type(chunk) is not bytes:  # bytearray, memoryview: same bytes, one copy
            chunk = bytes(chunk)
        if self._bom is not None:
            chunk = self._strip_bom(chunk)
            if not chunk:
                return []
        if self._skip_lf:
            self._skip_lf = False
            if chunk[0] == 0x0A:
                # The LF of a CRLF cut by the chunk boundary. It belongs to the line the
                # CR ended: count it if that line is in the current block, i.e. was not
                # the blank line that just closed one (which leaves _block_raw at 0).
                if self._block_raw:
                    self._block_raw += 1
                else:
                    self._block_start += 1
                chunk = chunk[1:]
            if self._pending_end is not None:
                self._flush_pending_end()
            if not chunk:
                return []

        out: list[SseEvent | SseAnomaly] = []
        # One C-level scan picks the path: streams with CR line ends are rare, so the
        # common LF-only chunk gets a plain split and skips the regex.
        if b"\r" in chunk:
            pieces = _LINE_END.split(chunk)  # [line, end, line, end, ..., rest]
            rest = pieces.pop()
            lines = pieces[0::2]
            ends: list[bytes] | None = pieces[1::2]
            # A CR at the very end may be the first half of a CRLF cut by the boundary.
            self._skip_lf = not rest and pieces[-1] == b"\r"
        else:
            lines = chunk.split(b"\n")
            rest = lines.pop()
            ends = None

        if lines:
            cap = self._cap
            first = 0
            if self._plen:
                # The first line continues the line left partial by earlier chunks.
                first = 1
                head = lines[0]
                plen = self._plen
                self._plen = 0
                size = plen + len(head)
                raw = size + (1 if ends is None else len(ends[0]))
                if self._discarding:
                    self._skip_line(size, raw, out)
                elif len(self._data) + len(self._event) + size > cap:
                    self._drop_event()
                    self._block_raw += raw
                else:
                    line = b"".join((self._partial, head))
                    self._partial = bytearray()
                    self._line(line, raw, out)
            for i in range(first, len(lines)):
                line = lines[i]
                raw = len(line) + (1 if ends is None else len(ends[i]))
                if self._discarding:
                    self._skip_line(len(line), raw, out)
                elif line and len(self._data) + len(self._event) + len(line) > cap:
                    self._drop_event()
                    self._block_raw += raw
                else:
                    self._line(line, raw, out)

        if self._skip_lf and not self._block_raw and self._ends:
            # The chunk ended with the CR of a blank line: its end waits for the next byte.
            self._pending_end = self._ends.pop()

        if rest:
            if self._discarding:
                self._plen += len(rest)
            else:
                size = self._plen + len(rest)
                if len(self._data) + len(self._event) + size > self._cap:
                    self._drop_event()
                else:
                    self._partial += rest
                self._plen = size
        return out

    def take_ends(self) -> list[SseBlockEnd]:
        """The block ends passed since the last call, in stream order (`track_ends`)."""
        ends = self._ends
        if not ends:
            return []
        self._ends = []
        return ends

    def end(self) -> list[SseEvent | SseAnomaly]:
        """Declare the end of the stream; report an event left incomplete. Idempotent."""
        if self._closed:
            return []
        self._closed = True
        if self._pending_end is not None:
            self._flush_pending_end()
        pending = self._block_raw + self._plen + (len(self._bom) if self._bom else 0)
        out: list[SseEvent | SseAnomaly] = []
        if self._discarding:
            out.append(SseAnomaly(self._drop_kind, pending))
        elif self._field_seen or self._plen or self._bom:
            out.append(SseAnomaly(UNTERMINATED_EVENT, pending))
        self._bom = None
        self._partial = bytearray()
        self._plen = 0
        self._discarding = False
        self._reset_block()
        return out

    # -- internals ---------------------------------------------------------------------

    def _strip_bom(self, chunk: bytes) -> bytes:
        """Drop one leading BOM, which may arrive split across the first chunks."""
        held = self._bom
        buf = held + chunk if held else chunk
        if len(buf) < 3 and _BOM.startswith(buf):
            self._bom = buf  # still could be a BOM: wait for more
            return b""
        self._bom = None
        if buf.startswith(_BOM):
            self._block_start = len(_BOM)
            return buf[3:]
        return buf

    def _line(self, line: bytes, raw: int, out: list[SseEvent | SseAnomaly]) -> None:
        """Interpret one complete line (the cap is already checked)."""
        if not line:  # blank line: dispatch
            item = None
            if self._dispatch:
                data = self._data
                event = self._event
                # Positional (event, data, id, retry, has_data): a third cheaper than
                # keywords for a frozen dataclass, and this runs once per event.
                item = SseEvent(
                    event.decode("utf-8", "replace") if event else "message",
                    # data[:-1]: drop the LF that follows the last data value.
                    data[:-1].decode("utf-8", "replace") if data else "",
                    self._id,
                    self._retry,
                    bool(data),
                )
                out.append(item)
            if self._ends is not None:
                self._end_block(raw, item)
            self._reset_block()
            return
        self._block_raw += raw
        if line[0] == 0x3A:  # ":" comment
            return
        self._field_seen = True
        colon = line.find(b":")
        if colon < 0:
            name = line
            value = b""
        else:
            name = line[:colon]
            start = colon + 2 if line[colon + 1 : colon + 2] == b" " else colon + 1
            value = line[start:]
        if name == b"data":
            self._data += value
            self._data.append(0x0A)
            self._dispatch = True
        elif name == b"event":
            self._event = value
            self._dispatch = True
        elif name == b"id":
            if b"\x00" not in value:
                self._id = value.decode("utf-8", "replace")
                self._dispatch = True
        # bytes.isdigit() is ASCII-only, as WHATWG wants ("1e3", "٣", "" are ignored).
        elif name == b"retry" and value.isdigit():
            digits = value.lstrip(b"0")
            if len(digits) <= _MAX_RETRY_DIGITS:
                self._retry = int(digits) if digits else 0
                self._dispatch = True
        # any other field name is ignored

    def _skip_line(self, size: int, raw: int, out: list[SseEvent | SseAnomaly]) -> None:
        """A complete line while dropping an over-cap event: only its size matters."""
        if size:
            self._block_raw += raw
            return
        item = SseAnomaly(self._drop_kind, self._block_raw)
        out.append(item)
        if self._ends is not None:
            self._end_block(raw, item)
        self._discarding = False
        self._reset_block()

    def _end_block(self, raw: int, item: SseEvent | SseAnomaly | None) -> None:
        """Note where the current block ends: past its lines and the blank line's `raw`."""
        assert self._ends is not None
        end = self._block_start + self._block_raw + raw
        self._ends.append(SseBlockEnd(end, item))
        self._block_start = end

    def _flush_pending_end(self) -> None:
        """The byte after a blank line's CR came (or the stream ended): report its end,
        one further when that byte was the LF of a CRLF (then already skipped)."""
        pending = self._pending_end
        assert pending is not None and self._ends is not None
        self._pending_end = None
        if self._block_start != pending.offset:
            pending = SseBlockEnd(self._block_start, pending.item)
        self._ends.append(pending)

    def drop_event(self) -> bool:
        """Drop the event being received, as if it had crossed the cap, but reported as
        `event_over_budget` (the caller's budget over all streams is spent). False when
        nothing is held. Lines already read have taken effect on the last event id."""
        if self._discarding or not (self._partial or self._data or self._event):
            return False
        self._drop_event(EVENT_OVER_BUDGET)
        return True

    def _drop_event(self, kind: str = EVENT_OVER_CAP) -> None:
        """The pending event crossed the cap: free it and skip to its blank line."""
        self._drop_kind = kind
        self._discarding = True
        self._partial = bytearray()  # _plen keeps counting the line's bytes
        self._data = bytearray()
        self._event = b""
        self._retry = None
        self._dispatch = False

    def _reset_block(self) -> None:
        self._block_raw = 0
        self._field_seen = False
        self._dispatch = False
        if self._data:
            self._data = bytearray()  # a new buffer, so a big event's memory is returned
        self._event = b""
        self._retry = None
