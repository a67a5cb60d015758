"""One budget over every stream's buffers: many streams each sending a huge unfinished
event hold at most the budget (plus one chunk), the dropped events are named in the
record, and the bytes come back when streams end."""

from __future__ import annotations

import json
import tracemalloc

from mcp_layers_core.budget import BufferBudget
from mcp_layers_core.decode import StreamDecoder
from mcp_layers_core.events import ProxyStopping, ResponseStarted, StreamChunk, StreamEnded
from mcp_layers_core.retries import ToolSafetyBook
from mcp_layers_core.sse import EVENT_OVER_BUDGET, SseAnomaly, SseEvent
from mcp_layers_core.tracker import records_of
from wire import SSE, Run, call, event, result

KIB = 1024
MIB = 1024 * KIB
CHUNK = 64 * KIB


def test_eight_streams_with_unfinished_huge_events_stay_within_the_budget() -> None:
    budget, streams, event_mib = 8 * MIB, 8, 6
    r = Run(max_event_bytes=16 * MIB, max_buffered_bytes=budget)
    flows = [r.post(call(n)) for n in range(streams)]
    for f in flows:
        r.t.handle(ResponseStarted(f, r.tick(), 200, SSE))
    piece = b"x" * CHUNK
    tracemalloc.start()
    try:
        for f in flows:
            assert (
                r.t.handle(StreamChunk(f, r.tick(), b'data: {"jsonrpc":"2.0","id":0,"r":"')) == []
            )
        for _ in range(event_mib * MIB // CHUNK):
            for f in flows:
                r.t.handle(StreamChunk(f, r.tick(), piece))
                assert r.t.buffers.held <= budget + CHUNK + 64
        held_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert r.t.buffers.peak <= budget + CHUNK + 64
    assert r.t.buffers.dropped >= streams - 2  # what passed the budget was dropped
    # Without the budget these eight would hold 48 MiB (and copies while lines join).
    assert held_peak < budget + 4 * MIB, held_peak
    records = records_of(r.t.handle(ProxyStopping(r.tick())))
    noted = [x for x in records if any(n.startswith("sse_event_over_budget") for n in x["notes"])]
    assert len(noted) == r.t.buffers.dropped
    assert all(x["outcome"] == "UNINSPECTED" for x in noted)
    assert r.t.buffers.held == 0  # every stream gave its bytes back


def test_a_stream_that_fits_is_read_once_the_budget_has_room_again() -> None:
    r = Run(max_buffered_bytes=1 * MIB)
    hog, other = r.post(call(1)), r.post(call(2))
    for f in (hog, other):
        r.t.handle(ResponseStarted(f, r.tick(), 200, SSE))
    r.t.handle(StreamChunk(hog, r.tick(), b"data: " + b"x" * (MIB - 100)))
    records_of(r.t.handle(StreamChunk(other, r.tick(), b"data: " + b"y" * 200)))  # over: dropped
    r.t.handle(StreamChunk(other, r.tick(), b"\n\n"))
    (hogged,) = records_of(r.t.handle(StreamEnded(hog, r.tick())))
    assert hogged["notes"] == [f"sse_unterminated_event:{MIB - 100 + 6}"]
    assert r.t.buffers.held == 0
    answer = event(result(2, content=[]))
    (rec,) = records_of(r.t.handle(StreamChunk(other, r.tick(), answer))) or records_of(
        r.t.handle(StreamEnded(other, r.tick()))
    )
    assert rec["outcome"] == "TOOL_SUCCESS"
    assert rec["notes"] == ["sse_event_over_budget:207"]  # its line end counts


def test_the_decoder_accounts_and_releases() -> None:
    budget = BufferBudget(100)
    a, b = StreamDecoder(None, 1000, budget), StreamDecoder(None, 1000, budget)
    assert a.feed(b"data: " + b"a" * 60) == [] and budget.held == 66
    assert b.feed(b"data: " + b"b" * 60) == [] and budget.held == 66  # b dropped its event
    assert budget.dropped == 1
    assert b.feed(b"\n\n") == [SseAnomaly(EVENT_OVER_BUDGET, 67)]
    assert b.feed(b'data: {"ok":1}\n\n') == [SseEvent("message", '{"ok":1}', None, None, True)]
    a.release()
    assert budget.held == 0
    a.release()  # idempotent
    assert budget.held == 0


def test_the_tool_safety_book_is_bounded_as_a_total() -> None:
    book = ToolSafetyBook(max_servers=100, max_tools=1000)
    for server in range(50):
        tools = [{"name": f"t{n}", "annotations": {"readOnlyHint": True}} for n in range(300)]
        book.learn(f"s{server}", {"tools": tools})
        assert len(book) <= 1000
    assert book.safety("s49", "t1") == "read_only"  # the latest server is kept
    assert book.safety("s0", "t1") == "unknown"  # the oldest were forgotten
    book.learn("long", {"tools": [{"name": "n" * 300}]})
    assert book.safety("long", "n" * 300) == "unknown"  # a name past 256 characters


def test_the_budget_record_note_is_in_the_schema_vocabulary() -> None:
    from mcp_layers_core.record import NOTE_MEANING, NoteCode

    assert NoteCode("sse_event_over_budget") in NOTE_MEANING
    assert json.dumps(NOTE_MEANING[NoteCode.SSE_EVENT_OVER_BUDGET])
