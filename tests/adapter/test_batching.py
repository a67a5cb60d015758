"""The recorder on a running loop: hooks queue the core's steps, batches run after the
answers have gone out. The records must be the very ones written at once, in the same
order; nothing is written on an answer's path; `done` (SIGTERM) writes every pending
record; the queue is bounded."""

from __future__ import annotations

import asyncio
import io
import json
from typing import Any

import mcp_layers
import mcp_layers_batch
from mitmproxy import http
from mitmproxy.test import taddons, tflow, tutils


def _call(rid: int) -> bytes:
    params = {"name": "echo", "arguments": {"n": rid}}
    return json.dumps(
        {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
    ).encode()


def _answer(rid: int) -> bytes:
    result = {"content": [{"type": "text", "text": "ok"}], "isError": rid % 3 == 0}
    return json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}).encode()


def _post(rid: int, session: str) -> http.HTTPFlow:
    req = tutils.treq(method=b"POST", path=b"/mcp", content=_call(rid))
    req.headers["mcp-session-id"] = session
    req.headers["content-type"] = "application/json"
    f = tflow.tflow(req=req)
    f.response = None
    return f


def _respond(f: http.HTTPFlow, ctype: str, content: bytes | None) -> None:
    f.response = tutils.tresp(status_code=200, content=content)
    f.response.headers["content-type"] = ctype


def drive(addon: Any, exchanges: int) -> list[http.HTTPFlow]:
    """JSON exchanges on two sessions, and every fourth an SSE answer fed chunk by chunk."""
    flows = []
    for rid in range(1, exchanges + 1):
        f = _post(rid, f"s-{rid % 2}")
        addon.request(f)
        if rid % 4:
            _respond(f, "application/json", _answer(rid))
            addon.responseheaders(f)
            addon.response(f)
        else:
            _respond(f, "text/event-stream", None)
            addon.responseheaders(f)
            event = b"event: message\ndata: " + _answer(rid) + b"\n\n"
            for piece in (event[:10], event[10:]):
                assert f.response.stream(piece) is piece  # passed on unchanged, at once
            f.response.stream(b"")
            addon.response(f)
        flows.append(f)
    return flows


def _lines(out: io.BytesIO) -> list[dict[str, Any]]:
    """The records; what the clock stamps differs between two runs, so it is left out: a
    session ended by the proxy stopping carries the stop time, and an SSE answer's
    `lastEventMs` the time its chunk was read (the wall clock, against the test flow's
    fixed start)."""
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    for r in records:
        if r["kind"] == "session_end":
            del r["ts"], r["durationMs"]
        r.pop("lastEventMs", None)
    return records


def at_once(exchanges: int) -> list[dict[str, Any]]:
    """The reference: no loop, so every step runs inside its hook."""
    out = io.BytesIO()
    addon = mcp_layers.Recorder(outfile=out)
    with taddons.context(addon) as tctx:
        tctx.configure(addon, mcp_scenario="batch")
        drive(addon, exchanges)
        addon.done()
    return _lines(out)


def test_batches_write_the_same_records_in_the_same_order_after_the_answers() -> None:
    async def scenario() -> tuple[bytes, list[dict[str, Any]], list[str]]:
        out = io.BytesIO()
        addon = mcp_layers.Recorder(outfile=out)
        with taddons.context(addon) as tctx:
            tctx.configure(addon, mcp_scenario="batch")
            addon.running()
            flows = drive(addon, 12)  # 36 steps: fewer than a batch, so the delay runs it
            during = out.getvalue()
            await asyncio.sleep(mcp_layers_batch.BATCH_DELAY_S * 5)
            after_delay = _lines(out)
            comments = [f.comment for f in flows]
            addon.done()
        assert during == b""  # nothing was written on the answers' path
        return during, after_delay, comments

    _during, after_delay, comments = asyncio.run(scenario())
    reference = at_once(12)
    assert sum(r["kind"] == "request" for r in after_delay) == 12
    # Within the delay, the same records as at once (sessions ended on the way too),
    # byte for byte, in the same order.
    assert after_delay == reference[: len(after_delay)]
    # Each flow got its verdict once its batch ran (mitmweb is told through `update`).
    assert all(comments) and "pending" not in " ".join(comments)


def test_done_writes_every_queued_record_at_once() -> None:
    async def scenario() -> list[dict[str, Any]]:
        out = io.BytesIO()
        addon = mcp_layers.Recorder(outfile=out)
        with taddons.context(addon) as tctx:
            tctx.configure(addon, mcp_scenario="batch")
            addon.running()
            drive(addon, 10)
            assert out.getvalue() == b""
            addon.done()  # SIGTERM: no wait, nothing lost
            return _lines(out)

    assert asyncio.run(scenario()) == at_once(10)


def test_a_full_queue_runs_soon_and_stays_bounded() -> None:
    async def scenario() -> tuple[int, int, int]:
        out = io.BytesIO()
        addon = mcp_layers.Recorder(outfile=out)
        with taddons.context(addon) as tctx:
            tctx.configure(addon, mcp_scenario="batch")
            addon.running()
            drive(addon, 30)  # 90 steps: past a batch
            await asyncio.sleep(mcp_layers_batch.BATCH_SOON_S * 5)
            soon = len(_lines(out))
            # A loop that never gets round to it: the hooks run the batch themselves.
            drive(addon, mcp_layers_batch.MAX_QUEUED_OPS)
            queued = len(addon.queue.steps)
            addon.done()
            return soon, queued, len(_lines(out))

    soon, queued, total = asyncio.run(scenario())
    assert soon >= 20  # well before the 20 ms delay
    assert queued <= mcp_layers_batch.MAX_QUEUED_OPS
    assert total == 30 + mcp_layers_batch.MAX_QUEUED_OPS + 2  # + the two sessions' end records


def test_stream_chunks_waiting_are_bounded_in_bytes() -> None:
    async def scenario() -> tuple[int, int]:
        out = io.BytesIO()
        addon = mcp_layers.Recorder(outfile=out)
        with taddons.context(addon) as tctx:
            tctx.configure(addon, mcp_scenario="batch")
            addon.running()
            f = _post(1, "s-big")
            addon.request(f)
            _respond(f, "text/event-stream", None)
            addon.responseheaders(f)
            piece = b": " + b"x" * 65_000 + b"\n\n"  # SSE comments: read, never recorded
            most = 0
            for _ in range(200):  # 13 MB through the tap, no loop turn in between
                assert f.response.stream(piece) is piece
                most = max(most, addon.queue.queued_bytes)
            queued = len(addon.queue.steps)
            addon.done()
            return most, queued

    most, queued = asyncio.run(scenario())
    assert most <= mcp_layers_batch.MAX_QUEUED_BYTES + 65_004
    assert queued < 200


class _Updates:
    """mitmproxy's `update` event: each call, the flows it names."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def update(self, flows: list[Any]) -> None:
        self.calls.append(len(flows))


def test_a_batch_is_written_once_and_mitmproxy_told_once_of_its_flows() -> None:
    async def scenario() -> tuple[list[int], int, list[int], list[str]]:
        out = io.BytesIO()
        addon = mcp_layers.Recorder(outfile=out)
        updates = _Updates()
        with taddons.context(addon, updates) as tctx:
            tctx.configure(addon, mcp_scenario="batch")
            addon.running()
            writes: list[int] = []
            writer = addon.recording.writer
            write = writer.write

            def counted(records: list[dict[str, Any]]) -> None:
                writes.append(len(records))
                write(records)

            writer.write = counted  # type: ignore[method-assign]
            flows = drive(addon, 12)  # 36 steps: one batch
            assert writes == [] and updates.calls == []
            await asyncio.sleep(mcp_layers_batch.BATCH_DELAY_S * 5)
            written, calls = list(writes), list(updates.calls)
            comments = [f.comment for f in flows]
            addon.done()
        return written, len(_lines(out)), calls, comments

    writes, lines, calls, comments = asyncio.run(scenario())
    assert len(writes) == 1 and writes[0] >= 12  # the batch's records, in one write
    assert lines > writes[0]  # and the sessions `done` ended, in another
    assert calls == [12]  # one `update` for the twelve flows the batch commented
    assert all(comments)


def test_the_otlp_export_is_a_subscriber_and_a_failing_one_stops_no_other() -> None:
    out = io.BytesIO()
    addon = mcp_layers.Recorder(outfile=out)
    exporter = mcp_layers.LiveExporter("http://127.0.0.1:4318", {}, "run", warn=print)
    with taddons.context(addon) as tctx:
        tctx.configure(addon, mcp_scenario="batch")
        addon.exporter = exporter  # as `mcp_otlp_endpoint` does, without its worker
        addon._subscribe()
        flows = drive(addon, 3)
        assert exporter._queue.qsize() == 3  # each record, as it was finished
        exporter.submit = None  # type: ignore[assignment, method-assign]  # now it breaks
        flows += drive(addon, 3)
        assert addon.errors == 3 and exporter._queue.qsize() == 3
        addon.exporter = None
        addon.done()
    assert sum(json.loads(line)["kind"] == "request" for line in out.getvalue().splitlines()) == 6
    assert all(f.comment for f in flows)
