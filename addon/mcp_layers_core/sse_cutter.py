"""The SSE stream cutter: `SseCutter` forwards an event stream's exact bytes in
event-aligned pieces (`Cut`) and closes it after N events or before the final response
to a given JSON-RPC id. It accepts any bytes and never raises on them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

from .jsonrpc import is_response, messages_of, same_id, try_loads
from .limits import MAX_EVENT_BYTES
from .sse import EVENT_OVER_CAP, SseAnomaly, SseEvent, SseParser

_LINE_END: Final = re.compile(rb"\r\n|\r|\n")
_BOM: Final = b"\xef\xbb\xbf"


class _NoId:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_ID"


NO_ID: Final = _NoId()


@dataclass(frozen=True, slots=True)
class Cut:
    """What to forward now, in event-aligned pieces, and whether to close the stream."""

    pieces: tuple[bytes, ...]
    close: bool

    @property
    def data(self) -> bytes:
        return b"".join(self.pieces)


class SseCutter:
    """Forward an event stream's exact bytes up to an event boundary, then stop.

    `SseCutter(after_events=N)` closes right after the N-th event (0: before any byte);
    `SseCutter(before_final_for_id=ID)` closes before the event that carries the
    JSON-RPC response to ID; `SseCutter()` never cuts and only aligns pieces on events
    (for a delay between events). An event counts when `SseParser` dispatches it (data,
    `event`, `id` or `retry` lines; comment-only blocks do not count).

    Bytes are held until the blank line that ends their event (a client acts on whole
    events only, so holding them changes nothing it can see), then forwarded unchanged.
    The forwarded bytes and the cut point are the same however the stream is chunked. An
    event larger than `max_event_bytes` is forwarded as it arrives instead of held: it
    still counts, but it cannot be recognised as the final response.
    """

    __slots__ = (
        "_after",
        "_cap",
        "_cut",
        "_done",
        "_ended",
        "_events",
        "_final_id",
        "_held",
        "_line_started",
        "_parser",
        "_passing",
        "_scan",
        "_started",
    )

    def __init__(
        self,
        *,
        after_events: int | None = None,
        before_final_for_id: object = NO_ID,
        max_event_bytes: int = MAX_EVENT_BYTES,
    ) -> None:
        if after_events is not None and before_final_for_id is not NO_ID:
            raise ValueError("give after_events or before_final_for_id, not both")
        if after_events is not None and after_events < 0:
            raise ValueError(f"after_events must be 0 or more, not {after_events}")
        self._after = after_events
        self._final_id = before_final_for_id
        self._cap = max_event_bytes
        self._parser = SseParser(max_event_bytes)
        self._held = bytearray()
        self._scan = 0  # start of the line being read, in _held
        self._line_started = False  # that line has bytes already forwarded (passing mode)
        self._passing = False  # the current event is over the cap: forward as it comes
        self._started = False  # past a possible leading BOM
        self._events = 0
        self._cut = False
        self._done = False
        self._ended = False

    @property
    def cut(self) -> bool:
        """Did the cutter cut the stream (the fault took effect)?"""
        return self._cut

    @property
    def events(self) -> int:
        """Events forwarded so far."""
        return self._events

    def feed(self, chunk: bytes) -> Cut:
        """The next upstream bytes; returns what to send on and whether to close now."""
        if self._after == 0 and not self._done:
            self._done = self._cut = True  # cut before the first byte
        if self._done or not chunk:
            return Cut((), self._done)
        self._held += chunk
        return Cut(tuple(self._drain()), self._done)

    def end(self) -> Cut:
        """The upstream stream ended: forward what is held (an unfinished event as is)."""
        if self._done:
            return Cut((), True)
        self._ended = True
        pieces = self._drain()
        if not self._done:
            if self._held:
                pieces.append(bytes(self._held))
                self._parser.feed(bytes(self._held))
                self._held = bytearray()
            self._done = True
        return Cut(tuple(pieces), True)

    def _drain(self) -> list[bytes]:
        pieces: list[bytes] = []
        if not self._started and not self._skip_bom():
            return pieces
        while not self._done:
            end = self._event_end()
            if end is None:
                break
            block = bytes(self._held[:end])
            del self._held[:end]
            self._scan = 0
            self._take(block, pieces)
        if not self._done and (self._passing or len(self._held) > self._cap):
            self._pass_on(pieces)
        return pieces

    def _skip_bom(self) -> bool:
        """Leave a leading BOM out of line scanning (its bytes are forwarded as they are)."""
        if len(self._held) < len(_BOM) and _BOM.startswith(self._held) and not self._ended:
            return False  # could still be a BOM
        self._started = True
        if self._held.startswith(_BOM):
            self._scan = len(_BOM)
        return True

    def _event_end(self) -> int | None:
        """The offset just past the blank line that ends the held event, if it is there."""
        held = self._held
        while (m := _LINE_END.search(held, self._scan)) is not None:
            if m.end() == len(held) and held[-1] == 0x0D and not self._ended:
                return None  # a CR at the end may be half of a CRLF: wait for the next byte
            blank = m.start() == self._scan and not self._line_started
            self._scan = m.end()
            self._line_started = False
            if blank:
                return m.end()
        return None

    def _take(self, block: bytes, pieces: list[bytes]) -> None:
        """A whole event block: forward it, or cut before it, or cut after it."""
        was_passing, self._passing = self._passing, False
        items = self._parser.feed(block)
        if not was_passing and self._is_final(items):
            self._done = self._cut = True
            return
        pieces.append(block)
        self._events += sum(1 for i in items if _counts(i))
        if self._after is not None and self._events >= self._after:
            self._done = self._cut = True

    def _is_final(self, items: list[SseEvent | SseAnomaly]) -> bool:
        if self._final_id is NO_ID:
            return False
        for item in items:
            if isinstance(item, SseEvent) and item.has_data:
                messages = messages_of(try_loads(item.data)) or []
                if any(is_response(m) and same_id(m.get("id"), self._final_id) for m in messages):
                    return True
        return False

    def _pass_on(self, pieces: list[bytes]) -> None:
        """Over the cap: forward the event's bytes now, keeping only a trailing CR."""
        self._passing = True
        held = self._held
        keep = 1 if held.endswith(b"\r") else 0
        n = len(held) - keep
        if n <= 0:
            return
        piece = bytes(held[:n])
        self._parser.feed(piece)
        pieces.append(piece)
        self._line_started = self._line_started or self._scan < n
        self._scan = max(self._scan - n, 0)
        del held[:n]


def _counts(item: SseEvent | SseAnomaly) -> bool:
    return isinstance(item, SseEvent) or item.kind == EVENT_OVER_CAP
