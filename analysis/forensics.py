"""Hang forensics: after a failure or a cut stream, what did the client do, and when?

An *incident* is a failed call (a request record whose outcome is a failure, not a
negotiation probe) or a cut stream (a GET stream that ended `error` or `eof`, not because
the proxy stopped). Its *aftermath* is the client's next move in the same input: its next
POST (a retry, `notifications/cancelled`, anything), a new GET stream, a DELETE; or, when
there is none, the session's end as the proxy saw it (idle, shutdown), or nothing at all.
The gap runs from the end of the incident (`ts` + `durationMs`; for a request whose stream
closed before its record was written, `ts` + `streamClosedMs`) to the start of that move.
A gap of `STALL_MS` or more is a *stall*, and is named as one. Requests of the session
still in flight when a stream was cut are named too.

One query (`aftermath_sql`, over the columns `verdicts.COLUMNS` loads) finds every
incident's aftermath; `retries`, `show` and `verdicts` phrase it (`phrase`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from mcp_layers_core.record import Kind, StreamEnd

from .filters import Filters
from .hangs import STALL_MS as STALL_MS
from .hangs import Silence, silences
from .load import Engine
from .queries import literal, not_failed
from .terms import POSTS_AND_GETS, sql, sql_in


def aftermath_sql(
    base_cte: str, session: str | None = None, about: Collection[tuple[int, int]] = ()
) -> str:
    """Every incident and the client's next move. `base_cte` is `verdicts.base`'s `r`.
    `about`: only these incidents, as (input, record id).

    Linear in the records (a sort), not in incidents × records: each incident's next move
    is found by a window over the client's moves with the incident placed among them, and
    the other findings join only the few rows that can match (session ends, cancellations,
    the session's requests)."""
    only = "" if session is None else f" AND a.session = {literal(session)}"
    if about:
        keys = ", ".join(f"({src}, {record_id})" for src, record_id in sorted(about))
        only += f" AND (a.src, a.id) IN (VALUES {keys})"
    return f"""WITH {base_cte},
incident AS (
  -- te: when the incident ended for the client. A request whose stream closed before
  -- its record did (it waited for a resumption until the proxy stopped) ended then.
  SELECT a.*, CASE WHEN a.closed_early THEN a.tcut ELSE a.t1 END AS te FROM r a
  WHERE a.m{only} AND (
    (a.kind = {sql(Kind.REQUEST)} AND NOT {not_failed("a.outcome")}
      AND NOT coalesce(a.negotiation, FALSE) AND coalesce(a.method, '') <> 'server/discover')
    OR (a.kind = {sql(Kind.STREAM)} AND NOT a.shutdown AND a.sse IS NOT NULL
      AND a.sse."end" IN {sql_in(StreamEnd.ERROR, StreamEnd.EOF)}))
), move AS (
  SELECT src, cl, seq, id, kind, method, requestHeaders, t0 FROM r
  WHERE kind IN {POSTS_AND_GETS}
    OR (kind = {sql(Kind.SESSION_END)} AND len(requestHeaders) > 0)
), placed AS (
  -- Each incident just before the first move at or after its end (less 5 ms of clock
  -- rounding), its client's moves in (start, input order): the next move follows it.
  SELECT src, cl, te - 5 AS k, 0 AS side, seq FROM incident
  UNION ALL
  SELECT src, cl, t0, 1, seq FROM move
), nexts AS (
  SELECT src, seq,
    first_value(CASE WHEN side = 1 THEN seq END IGNORE NULLS) OVER w AS n1,
    nth_value(CASE WHEN side = 1 THEN seq END, 2 IGNORE NULLS) OVER w AS n2
  FROM placed
  WINDOW w AS (PARTITION BY src, cl ORDER BY k, side, seq
    ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING)
  QUALIFY side = 0
), ends AS (
  SELECT a.src, a.seq, arg_min(e.endReason, e.seq) AS left_how,
    arg_min(e.t1, e.seq) - a.te AS left_ms
  FROM incident a JOIN r e ON e.src = a.src AND e.session = a.session
    AND e.kind = {sql(Kind.SESSION_END)} AND e.endReason IS NOT NULL AND e.t1 >= a.te
  GROUP BY a.src, a.seq, a.te
), flight AS (
  SELECT a.src, a.seq, list(f.id ORDER BY f.id) AS ids
  FROM incident a JOIN r f ON f.src = a.src AND f.session = a.session
    AND f.kind = {sql(Kind.REQUEST)} AND f.t0 <= a.t1 AND f.t1 > a.t1
  WHERE a.kind = {sql(Kind.STREAM)}
  GROUP BY a.src, a.seq
), cancels AS (
  SELECT a.src, a.seq, min(c.id) AS cancel_id, min(c.t0) - a.t0 AS cancel_ms
  FROM incident a JOIN r c ON c.src = a.src AND c.session = a.session
    AND c.kind = {sql(Kind.NOTIFICATION)} AND c.method = 'notifications/cancelled'
    AND c.t0 >= a.t0 AND c.t0 <= a.t1 + 5
  WHERE a.kind = {sql(Kind.REQUEST)}
  GROUP BY a.src, a.seq, a.t0
)
SELECT a.src, a.id, a.kind, a.outcome, a.sse."end" AS how,
  n.id AS next_id, n.kind AS next_kind, n.method AS next_method,
  coalesce(list_contains(n.requestHeaders, 'last-event-id'), FALSE) AS next_lei,
  n.t0 - a.te AS gap_ms,
  e.left_how, e.left_ms, f.ids AS in_flight,
  a.client, a.pv, a.scenario, c.cancel_id, c.cancel_ms, a.te AS te,
  -- the client's silence: until its next move, else until the session ended
  CASE WHEN n.id IS NOT NULL THEN n.t0 - a.te ELSE e.left_ms END AS silence_ms
FROM incident a
JOIN nexts x ON x.src = a.src AND x.seq = a.seq
LEFT JOIN move n ON n.src = a.src
  AND n.seq = CASE WHEN x.n1 = a.seq THEN x.n2 ELSE x.n1 END
LEFT JOIN ends e ON e.src = a.src AND e.seq = a.seq
LEFT JOIN flight f ON f.src = a.src AND f.seq = a.seq
LEFT JOIN cancels c ON c.src = a.src AND c.seq = a.seq
ORDER BY a.src, a.seq"""


@dataclass(frozen=True, slots=True)
class Aftermath:
    src: int
    id: int
    kind: str
    outcome: str | None
    how: str | None
    next_id: int | None
    next_kind: str | None
    next_method: str | None
    next_lei: bool
    gap_ms: int | None
    left_how: str | None
    left_ms: int | None
    in_flight: list[int] | None
    #: The incident's group values, as `--by` reads them.
    client: str | None
    version: str | None
    scenario: str | None
    #: A `notifications/cancelled` of the session sent while the request was open.
    cancel_id: int | None
    cancel_ms: int | None
    #: When the incident ended for the client, epoch ms.
    te: int | None = None
    #: How long the client said nothing after it: until its next move (`gap_ms`), else
    #: until the session ended (`left_ms`).
    silence_ms: int | None = None
    #: Who was waited on through a stall after it, and for how long: (party, ms) in the
    #: order first waited on (`with_waits`, from `hangs`' silences).
    waits: tuple[tuple[str, int], ...] = ()

    @property
    def stalled(self) -> bool:
        return self.silence_ms is not None and self.silence_ms >= STALL_MS

    def incident(self) -> str:
        if self.kind == Kind.STREAM:
            return "the stream was cut" if self.how == StreamEnd.ERROR else "the stream ended"
        return f"{self.outcome or 'the failure'}"


def seconds(ms: int | float) -> str:
    s = max(0.0, ms / 1000)
    return f"{s:.0f} s" if s >= 10 else f"{s:.2f} s" if s < 1 else f"{s:.1f} s"


def phrase(a: Aftermath) -> str:
    """`then: …`: what the client did after the incident, stalls named as such."""
    parts: list[str] = []
    if a.cancel_id is not None and a.cancel_ms is not None:
        parts.append(
            f"the client gave up: notifications/cancelled #{a.cancel_id} "
            f"{seconds(a.cancel_ms)} after it was sent"
        )
    if a.in_flight:
        ids = ", ".join(f"#{i}" for i in a.in_flight)
        parts.append(f"request {ids} still in flight when the stream was cut")
    after = f"after {a.incident()}"
    if a.next_id is not None and a.gap_ms is not None:
        if a.next_kind == Kind.NOTIFICATION and a.next_method == "notifications/cancelled":
            move = f"notifications/cancelled #{a.next_id}"
        elif a.next_kind == Kind.STREAM:
            lei = " with Last-Event-ID" if a.next_lei else ""
            move = f"a new GET stream #{a.next_id}{lei}"
        elif a.next_kind == Kind.SESSION_END:
            move = f"DELETE #{a.next_id}"
        else:
            move = f"{a.next_method or a.next_kind} #{a.next_id}"
        if a.stalled:
            parts.append(
                f"stall: no request for {seconds(a.gap_ms)} {after}{_waits(a)}, then {move}"
            )
        else:
            parts.append(f"then {move} {seconds(a.gap_ms)} later")
    elif a.left_how is not None and a.left_ms is not None:
        stall = "stall: " if a.stalled else ""
        parts.append(
            f"{stall}no request for {seconds(a.left_ms)} {after}{_waits(a)}, until the "
            f"session ended ({a.left_how})"
        )
    else:
        parts.append(f"no request {after} to the end of the recording")
    return "; ".join(parts)


def _waits(a: Aftermath) -> str:
    """` (waited on the model for 29 s)`: who the stall waited on, as `hangs` names it."""
    if not a.stalled or not a.waits:
        return ""
    said = ", ".join(f"{party} for {seconds(ms)}" for party, ms in a.waits)
    return f" (waited on {said})"


def with_waits(found: Sequence[Aftermath], silences: Sequence[Silence]) -> list[Aftermath]:
    """Each stalled aftermath with who was waited on through its silence: the `hangs`
    silences of its input inside it, summed per party. The two measure different things
    (the forensics: the client's next request; `hangs`: any traffic, the model's
    included), so a stall the model's traffic kept busy overlaps no silence, and says
    nothing more."""
    by_src: dict[int, list[Silence]] = {}
    for s in silences:
        by_src.setdefault(s.src, []).append(s)
    out: list[Aftermath] = []
    for a in found:
        silence = a.silence_ms
        if not a.stalled or a.te is None or silence is None:
            out.append(a)
            continue
        waits: dict[str, int] = {}
        for s in by_src.get(a.src, []):
            overlap = min(s.end_ms, a.te + silence) - max(s.start_ms, a.te)
            if overlap > 0:
                waits[s.waited_on] = waits.get(s.waited_on, 0) + overlap
        out.append(replace(a, waits=tuple(waits.items())))
    return out


#: `--by` dimension -> the column of `aftermath_sql` holding it (`Aftermath`'s field).
_BY_COLUMN: Final = {"client": "client", "version": "pv", "scenario": "scenario"}


def stall_groups(
    engine: Engine, base_cte: str, by: Sequence[str]
) -> dict[tuple[Any, ...], tuple[int, int, int | None]]:
    """Per `--by` group: (incidents, stalls, longest silence in ms), counted by DuckDB, so
    that a recording of millions of incidents is not held to count them (a stall as
    `Aftermath.stalled` has it). DuckDB only, as `aftermaths`."""
    if engine.dialect != "duckdb":
        return {}
    keys = ", ".join(_BY_COLUMN[d] for d in by)
    rows = engine.rows(
        f"SELECT {keys + ', ' if keys else ''}count(*), count(*) FILTER "
        f"(WHERE silence_ms >= {STALL_MS}), max(silence_ms)\n"
        f"FROM ({aftermath_sql(base_cte)})\n"
        f"GROUP BY ALL"
    )
    return {tuple(row[: len(by)]): (int(row[-3]), int(row[-2]), row[-1]) for row in rows}


def aftermaths(
    engine: Engine,
    base_cte: str,
    filters: Filters,
    session: str | None = None,
    about: Collection[tuple[int, int]] = (),
) -> list[Aftermath]:
    """Every incident's aftermath, each stall with who was waited on. DuckDB only: the
    query's lateral joins do not translate to Spark, where `show` and `retries` go without
    the forensics. The engine's view holds `COLUMNS`."""
    if engine.dialect != "duckdb":
        return []
    rows: list[Any] = engine.rows(aftermath_sql(base_cte, session, about))
    found = [Aftermath(*row) for row in rows]
    if not any(a.stalled for a in found):
        return found  # the silences' query reads every record: only when there is a stall
    return with_waits(found, silences(engine, filters, STALL_MS))
