"""Build the JSONL records from finished exchanges.

The fields, their order and types are defined once, in `record.py`; this module fills them.
Every field is present; what does not apply is null.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from .classify import Verdict
from .record import new_record
from .redact import error_message


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
    return new_record(
        id=record_id,
        kind=kind,
        ts=iso_ms(ts),
        durationMs=duration_ms(ts, end_ts),
        server=server,
        session=session,
        client=client,
        userAgent=user_agent,
        protocolVersion=protocol_version,
        method=method,
        tool=tool,
        postCount=post_count,
        httpStatuses=http_statuses,
        contentType=content_type,
        scenario=scenario,
    )


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
