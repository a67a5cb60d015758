"""Long streams: memory stays flat and an event costs the same early and late (issue 6).

CI-sized: one GET stream of a session and one `subscriptions/listen` answer, 48 MiB of
1 KiB JSON-RPC notifications each, paced, through mitmdump with the addon
(`mcp_layers_support.long_stream_run`; the 1 GB run over minutes is `benchmarks/long_stream.py`).
Checked: every byte arrives (SHA-256 of both ends), mitmdump's resident memory after
the first tenth of the stream does not grow, its CPU time per event over the last three
tenths is at most twice that over tenths 2-4 (flat is 1; the first tenth warms up), and
the records count every event (`sessionStats.serverNotifications`, `sse.events`).

And the core alone, in this process, where nothing else adds noise: the tracker's time
per event over a long stream, tenth by tenth, and its memory (tracemalloc).
"""

from __future__ import annotations

import time
import tracemalloc
from pathlib import Path

import pytest
from hardening_kit import figures
from mcp_layers_core.events import OtherRequest, ResponseStarted, StreamChunk
from mcp_layers_core.tracker import Tracker
from mcp_layers_support.long_stream_run import run_long_stream

STREAM_MIB = 48
RATE = 16 * 2**20  # bytes per second, so that each tenth spans enough samples
MAX_RSS_GROWTH_MIB = 16
#: Late over early CPU per event. Flat is 1.0; the margin absorbs a shared CI machine.
MAX_LATE_OVER_EARLY = 2.0


@pytest.mark.e2e
@pytest.mark.parametrize("kind", ["get", "listen"])
def test_long_stream_memory_flat_cost_constant(tmp_path: Path, kind: str) -> None:
    result = run_long_stream(kind, STREAM_MIB * 2**20, tmp_path, rate_bytes_per_s=RATE,
                             sample_s=0.1)  # fmt: skip
    summary = result.summary()
    line = figures(f"long-stream-{kind}", **summary)
    figures(
        f"long-stream-{kind}-tenths",
        cpu_us_per_event=",".join(f"{d.cpu_us_per_event:.1f}" for d in result.deciles),
        rss_mib=",".join(f"{d.rss_mib:.1f}" for d in result.deciles),
        mib_per_s=",".join(f"{d.mb_per_s:.1f}" for d in result.deciles),
    )
    assert result.client_complete and result.client_error is None, line
    assert result.hashes_equal and result.received_bytes == result.total_bytes, line
    assert result.rss_peak_mib - result.rss_start_mib <= MAX_RSS_GROWTH_MIB, line
    assert result.ratio() <= MAX_LATE_OVER_EARLY, line
    ends = [r for r in result.records if r["kind"] == "session_end"]
    if kind == "listen":
        # 2026-07-28 has no sessions: the stale Mcp-Session-Id names none, so no session
        # ends; the listen request's own record counts the events.
        assert ends == [], ends
        [record] = [r for r in result.records if r["kind"] == "request"]
        assert record["outcome"] == "SUCCESS" and "subscription" in record["notes"], record
        assert record["sse"]["events"] == result.events + 1  # and the response
    else:
        assert len(ends) == 1 and ends[0]["sessionStats"]["serverNotifications"] == result.events
        # The GET stream's own record (written when it ends), then the session's end.
        assert [r["kind"] for r in result.records] == ["stream", "session_end"]
        assert result.records[0]["sse"]["events"] == result.events


def test_core_cost_per_event_does_not_grow_with_stream_age() -> None:
    """150,000 events through one GET stream of the tracker, timed per tenth; then the
    memory it holds after 10,000 and after 60,000 more events."""
    t = Tracker()
    t.handle(OtherRequest("g", 1.0, "GET", "127.0.0.1:1", "127.0.0.1:2", {"mcp-session-id": "s"}))
    t.handle(ResponseStarted("g", 1.0, 200, {"content-type": "text/event-stream"}))
    event = (
        b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/message",'
        b'"params":{"level":"info","data":"' + b"x" * 120 + b'"}}\n\n'
    )
    piece = event * 64  # one socket read's worth
    pieces_per_tenth = 15_000 // 64
    times = []
    for _ in range(10):
        started = time.perf_counter()
        for _ in range(pieces_per_tenth):
            t.handle(StreamChunk("g", 1.0, piece))
        times.append((time.perf_counter() - started) / (pieces_per_tenth * 64) * 1e6)
    early, late = min(times[1:3]), min(times[-2:])
    tracemalloc.start()
    try:
        for _ in range(10_000 // 64):
            t.handle(StreamChunk("g", 1.0, piece))
        held_early = tracemalloc.get_traced_memory()[0]
        for _ in range(60_000 // 64):
            t.handle(StreamChunk("g", 1.0, piece))
        held_late, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    events = t.sessions.find(t.sessions.key_of("s"))
    assert events is not None
    line = figures(
        "long-stream-core",
        events=events.server_notifications,
        us_per_event_by_tenth=",".join(f"{x:.2f}" for x in times),
        early_us=round(early, 2),
        late_us=round(late, 2),
        late_over_early=round(late / early, 2),
        held_bytes_after_10k=held_early,
        held_bytes_after_70k=held_late,
        peak_bytes=peak,
    )
    assert late / early <= 1.5, line
    assert held_late - held_early <= 64 * 1024, line
