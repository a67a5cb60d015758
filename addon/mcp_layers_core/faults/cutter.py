"""The SSE stream cutter: `SseCutter` forwards an event stream's exact bytes in
event-aligned pieces (`Cut`) and closes it after N events or before the final response
to a given JSON-RPC id. It accepts any bytes and never raises on them.

The cutter does not read lines itself: its `SseParser` reports where each event block
ended (`SseBlockEnd`, a stream offset) and what it dispatched there, and the cutter
slices the bytes it holds at those offsets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from mcp_layers_core.jsonrpc import is_response, messages_of, same_id, try_loads
from mcp_layers_core.limits import MAX_EVENT_BYTES
from mcp_layers_core.sse import EVENT_OVER_CAP, SseAnomaly, SseEvent, SseParser


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
        "_base",
        "_cap",
        "_cut",
        "_done",
        "_events",
        "_final_id",
        "_held",
        "_parser",
        "_passing",
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
        self._parser = SseParser(max_event_bytes, track_ends=True)
        self._held = bytearray()  # bytes not forwarded yet, from stream offset _base on
        self._base = 0
        self._passing = False  # the current event is over the cap: forward as it comes
        self._events = 0
        self._cut = False
        self._done = False

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
        self._parser.feed(chunk)
        pieces = self._take_blocks()
        if not self._done and (self._passing or len(self._held) > self._cap):
            self._pass_on(pieces)
        return Cut(tuple(pieces), self._done)

    def end(self) -> Cut:
        """The upstream stream ended: forward what is held (an unfinished event as is)."""
        if self._done:
            return Cut((), True)
        self._parser.end()  # reports a last block whose CR waited for a possible LF
        pieces = self._take_blocks()
        if not self._done and self._held:
            pieces.append(bytes(self._held))
            self._held = bytearray()
        self._done = True
        return Cut(tuple(pieces), True)

    def _take_blocks(self) -> list[bytes]:
        """Each block the parser saw end: forward it, or cut before it, or cut after it."""
        pieces: list[bytes] = []
        for block in self._parser.take_ends():
            if self._done:
                break
            n = block.offset - self._base
            piece = bytes(self._held[:n])
            del self._held[:n]
            self._base = block.offset
            was_passing, self._passing = self._passing, False
            if not was_passing and self._is_final(block.item):
                self._done = self._cut = True
                break
            if piece:  # empty when passing on already forwarded all of it
                pieces.append(piece)
            if _counts(block.item):
                self._events += 1
            if self._after is not None and self._events >= self._after:
                self._done = self._cut = True
        return pieces

    def _is_final(self, item: SseEvent | SseAnomaly | None) -> bool:
        if self._final_id is NO_ID or not isinstance(item, SseEvent) or not item.has_data:
            return False
        messages = messages_of(try_loads(item.data)) or []
        return any(is_response(m) and same_id(m.get("id"), self._final_id) for m in messages)

    def _pass_on(self, pieces: list[bytes]) -> None:
        """Over the cap: forward the event's bytes now instead of holding them."""
        self._passing = True
        if self._held:
            pieces.append(bytes(self._held))
            self._base += len(self._held)
            self._held = bytearray()


def _counts(item: SseEvent | SseAnomaly | None) -> bool:
    if item is None:
        return False
    return isinstance(item, SseEvent) or item.kind == EVENT_OVER_CAP
