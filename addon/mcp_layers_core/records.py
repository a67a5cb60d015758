"""Build the JSONL records of docs/record-format.md from finished exchanges.

Key order is fixed (it is what people read first in a raw file): identity, timing,
who, what, how it went. Every field is present; what does not apply is null.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from .classify import Verdict
from .redact import error_message

FORMAT_VERSION = 1


def iso_ms(ts: float) -> str:
    """`2026-11-30T15:02:51.925Z`: ISO-8601 UTC with milliseconds."""
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def duration_ms(start: float, end: float | None) -> float | None:
    return None if end is None else round(max(0.0, end - start) * 1000, 1)


def base_record(
    *,
    record_id: int,
    kind: str,
    ts: float,
    end_ts: float | None,
    server: str,
    session: str | None,
    client: str | None,
    user_agent: str | None,
    protocol_version: str | None,
    method: str | None,
    tool: str | None,
    post_count: int | None,
    http_statuses: list[int],
    content_type: str | None,
    scenario: str | None,
) -> dict[str, Any]:
    """The fields every record kind shares, in the documented order."""
    return {
        "v": FORMAT_VERSION,
        "id": record_id,
        "kind": kind,
        "ts": iso_ms(ts),
        "durationMs": duration_ms(ts, end_ts),
        "server": server,
        "session": session,
        "client": client,
        "userAgent": user_agent,
        "protocolVersion": protocol_version,
        "method": method,
        "tool": tool,
        "postCount": post_count,
        "httpStatuses": http_statuses,
        "contentType": content_type,
        "jsonrpc": None,
        "resultType": None,
        "isError": None,
        "outcome": None,
        "layer": None,
        "sse": None,
        "retryOrigin": "none",
        "attempt": None,
        "retryOf": None,
        "retryDelayMs": None,
        "retryAfterMs": None,
        "retryAfterHonored": None,
        "toolSafety": None,
        "unsafeRetry": None,
        "continues": None,
        "previousSession": None,
        "negotiation": None,
        "ackNote": None,
        "serverMethod": None,
        "answerMs": None,
        "endReason": None,
        "sessionStats": None,
        "injected": None,
        "bodies": None,
        "scenario": scenario,
        "notes": [],
    }


def add_verdict(record: dict[str, Any], request_id: object, verdict: Verdict) -> None:
    """Fill the classification fields of a request record."""
    record["jsonrpc"] = {
        "id": request_id,
        "errorCode": verdict.error_code,
        "errorMessage": error_message(verdict.error_message),
    }
    record["resultType"] = verdict.result_type
    record["isError"] = verdict.is_error
    record["outcome"] = verdict.outcome.value
    record["layer"] = verdict.layer.value
    if verdict.note:
        record["notes"].append(verdict.note)


def sse_summary(events: int, final: bool, end: str, resumed: bool = False) -> dict[str, Any]:
    return {"events": events, "final": final, "end": end, "resumed": resumed}
