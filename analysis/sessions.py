"""`sessions` lists sessions; `show SESSION` prints one session's timeline.

Both are queries (`queries.sessions`, `queries.show`). `sessions` lists each input's
sessions in the order they first appear; `show` prints the records of the session asked
for (at most `limits.MAX_SHOWN_RECORDS`) in the order their POSTs arrived.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from types import SimpleNamespace
from typing import Any, Final

from mcp_layers_core.record import Kind, StreamEnd

from . import forensics, queries, verdicts
from .filters import Filters
from .limits import MAX_SHOWN_RECORDS
from .load import Engine
from .render import Cell, Millis, Seconds

SESSION_HEADERS: Final = (
    "session",
    "client",
    "protocol",
    "scenario",
    "started",
    "seconds",
    "posts",
    "requests",
    "failed",
    "retries",
    "ended",
    "next_session",
)

SHOW_HEADERS: Final = (
    "offset_s",
    "id",
    "kind",
    "call",
    "statuses",
    "outcome",
    "ms",
    "attempt",
    "retry",
    "detail",
)


def seconds_between(first: str | None, last: str | None) -> float | None:
    """Seconds from one record `ts` to another; None when either is missing or bad."""
    if not first or not last:
        return None
    try:
        return (datetime.fromisoformat(last) - datetime.fromisoformat(first)).total_seconds()
    except ValueError:
        return None


# --------------------------------------------------------------------- sessions


def session_rows(engine: Engine, filters: Filters) -> list[list[Cell]]:
    """`sessions`' rows, input by input."""
    out: list[list[Cell]] = []
    for row in engine.rows(queries.sessions(filters)):
        cells: list[Cell] = list(row)
        cells[5] = None if row[5] is None else Seconds(row[5])
        out.append(cells)
    return out


# --------------------------------------------------------------------- show

#: The columns `queries.show` gives, in order.
SHOW_COLUMNS: Final = (
    "ts",
    "id",
    "kind",
    "method",
    "tool",
    "serverMethod",
    "httpStatuses",
    "outcome",
    "durationMs",
    "attempt",
    "retryOf",
    "retryOrigin",
    "continues",
    "previousSession",
    "endReason",
    "injected_rule",
    "injected_action",
    "is_injected",
    "sse_end",
    "sse_resumed",
    "has_sse",
    "probe",
    "notes",
)


def show_rows(
    engine: Engine, session: str, filters: Filters, warn: Callable[[str], None]
) -> list[list[Cell]]:
    """The session's timeline: seconds since its first POST, then the record's cells."""
    found = engine.rows(queries.show(session, filters, MAX_SHOWN_RECORDS + 1))
    if len(found) > MAX_SHOWN_RECORDS:
        warn(f"session {session} has more than {MAX_SHOWN_RECORDS} records; showing the first")
        found = found[:MAX_SHOWN_RECORDS]
    records = [SimpleNamespace(**dict(zip(SHOW_COLUMNS, row, strict=True))) for row in found]
    start = (records[0].ts or "") if records else None
    out: list[list[Cell]] = []
    for r in records:
        offset = seconds_between(start, r.ts or "")
        out.append([None if offset is None else Seconds(offset), *timeline_cells(r)])
    return out


def add_aftermath(
    engine: Engine, session: str, filters: Filters, rows: list[list[Cell]]
) -> list[list[Cell]]:
    """Hang forensics in the `detail` cell: what the client did after each failure or cut
    stream of the session (DuckDB only; the rows are unchanged elsewhere)."""
    then = {
        a.id: forensics.phrase(a)
        for a in forensics.aftermaths(engine, verdicts.base(filters), filters, session)
    }
    for row in rows:
        phrase = then.get(row[1]) if isinstance(row[1], int) else None
        if phrase is not None:
            row[-1] = f"{row[-1]}; {phrase}" if row[-1] else phrase
    return rows


def timeline_cells(r: Any) -> list[Cell]:
    """A record as a timeline row (everything but the time offset)."""
    kind = r.kind
    call: str | None
    if kind == Kind.RESPONSE:
        call = f"answer to {r.serverMethod or r.method or '?'}"
    elif kind == Kind.SESSION_END:
        call = "end of session"
    elif kind == Kind.STREAM:
        call = "GET stream"
    else:
        call = " ".join(x for x in (r.method, r.tool) if x) or None
    statuses = " ".join(map(str, r.httpStatuses)) if r.httpStatuses else None
    retry = None
    if r.retryOf is not None:
        retry = f"{r.retryOrigin or 'retry'} of #{r.retryOf}"
    elif r.continues is not None:
        retry = f"continues #{r.continues}"
    detail = []
    if kind == Kind.REQUEST and r.probe:
        detail.append("negotiation probe (not a failure)")
    if r.previousSession is not None:
        detail.append(f"replaces {r.previousSession}")
    if r.endReason is not None:
        detail.append(f"ended: {r.endReason}")
    if r.is_injected:
        detail.append(f"injected: {r.injected_rule or '?'} {r.injected_action or ''}".rstrip())
    if r.has_sse and r.sse_end not in (None, StreamEnd.COMPLETE):
        detail.append(f"stream ended: {r.sse_end}")
    if r.has_sse and r.sse_resumed:
        detail.append("answer resumed on a GET stream")
    detail.extend(r.notes or ())
    return [
        r.id,
        kind,
        call,
        statuses,
        r.outcome,
        None if r.durationMs is None else Millis(r.durationMs),
        r.attempt,
        retry,
        "; ".join(detail) or None,
    ]
