"""One budget for the bytes every open stream holds: a proxy-wide bound, not one per stream.

Each stream's parser holds at most one event (`limits.MAX_EVENT_BYTES`); with many
streams that is no bound at all (eight streams each sending an unfinished 15.6 MiB event
held 141 MiB). Every `StreamDecoder` reports what its parser holds after each chunk;
when the total passes the budget, the stream that grew drops the event it is receiving
(`sse_event_over_budget` in its record) and its bytes are returned at once. The total
may pass the budget by at most the chunk that crossed it.
"""

from __future__ import annotations

from . import limits


class BufferBudget:
    """Bytes held by all stream parsers together, against `limit`."""

    __slots__ = ("dropped", "held", "limit", "peak")

    def __init__(self, limit: int = limits.MAX_BUFFERED_BYTES) -> None:
        self.limit = limit
        self.held = 0
        self.peak = 0  # the most held at once (a gauge for the soak benchmark and tests)
        self.dropped = 0  # events dropped for the budget so far

    def change(self, delta: int) -> bool:
        """Account `delta` bytes more (or fewer); True when the budget is now exceeded."""
        held = self.held = self.held + delta
        if held > self.peak:
            self.peak = held
        return held > self.limit
