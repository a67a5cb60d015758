"""Hang forensics count a request's aftermath from when the client lost its stream.

A request whose SSE stream closed before its answer waits, in the proxy, for a
resumption; when none comes its record is written only at shutdown. The client's next
move (here, 2.5 s after the close, a DELETE) must be measured from the close
(`ts + streamClosedMs`), not from the record's end.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
from mcp_layers_analysis import forensics, inputs, verdicts
from mcp_layers_analysis.duck import DuckEngine
from mcp_layers_analysis.filters import Filters

REQUEST_HEADERS = ["accept", "content-type", "mcp-protocol-version", "mcp-session-id"]


def record(id_: int, ts: str, **fields: Any) -> dict[str, Any]:
    return {"v": 1, "id": id_, "ts": f"2026-12-02T10:00:{ts}Z", "session": "s-1",
            "client": "c@1", **fields}  # fmt: skip


def test_the_gap_runs_from_the_stream_close(tmp_path: Path) -> None:
    rows = [
        record(1, "00.000", kind="request", method="tools/call", outcome="STREAM_INCOMPLETE",
               durationMs=10_000.0, streamClosedMs=100.0, httpStatuses=[200],
               notes=["proxy_shutdown"], requestHeaders=REQUEST_HEADERS),
        record(2, "02.600", kind="session_end", endReason="delete", durationMs=3.0,
               httpStatuses=[405], requestHeaders=REQUEST_HEADERS),
        record(3, "10.000", kind="session_end", endReason="shutdown", durationMs=0.0),
    ]  # fmt: skip
    path = tmp_path / "r.jsonl"
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    engine = DuckEngine(threads=1)
    try:
        engine.load(inputs.expand([str(path)]), verdicts.COLUMNS, print)
        [found] = forensics.aftermaths(engine, verdicts.base(Filters()), Filters())
    finally:
        engine.close()
    assert (found.id, found.next_id, found.gap_ms) == (1, 2, 2500)
    assert forensics.phrase(found) == "then DELETE #2 2.5 s later"
