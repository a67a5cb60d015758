"""The SQL only the report needs: distributions to draw, and the records of a timeline.

Everything else the report shows is what the commands print (`summary`, `retries`,
`sessions`, `compare`), from their own queries. These are written the same way, from the
same building blocks, in DuckDB's dialect.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from mcp_layers_analysis.filters import Filters
from mcp_layers_analysis.hangs import HANG_COLUMNS
from mcp_layers_analysis.queries import (
    LAST_STATUS,
    RETRY_COLUMNS,
    SESSION_COLUMNS,
    SUMMARY_COLUMNS,
    in_list,
    is_probe,
    matched,
)
from mcp_layers_analysis.sessions import SHOW_COLUMNS
from mcp_layers_analysis.table import SEQUENCE, SOURCE, TABLE
from mcp_layers_analysis.terms import STARTED_MS, sql
from mcp_layers_core.record import FIELD, Kind, Obj

#: The columns the report reads: the commands' own, and what a timeline draws. Only these
#: are read from the inputs (headers, bodies and prompts never are): a column declared to
#: the JSON reader costs it time on every line, and a big input's read is most of the
#: report's time.
COLUMNS: Final = tuple(
    dict.fromkeys(
        (
            *SUMMARY_COLUMNS,
            *RETRY_COLUMNS,
            *SESSION_COLUMNS,
            "serverMethod",
            "sse",
            "sessionStats",
            "postCount",
            # The model's lane: its turns, the turn each `tools/call` was asked for by,
            # and what `hangs` reads to find the stalls.
            "modelCall",
            *HANG_COLUMNS,
        )
    )
)

#: The columns the overview reads over every record (`summary`'s; the latency bins read
#: no other): what a big input is read with first (see `data.gather`).
OVERVIEW_COLUMNS: Final = SUMMARY_COLUMNS

#: Upper edges (ms) of the bins a latency or delay histogram is drawn with: 1-2-5 steps,
#: so that the labels read as round numbers; the last bin holds everything above.
EDGES_MS: Final = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 60_000)


def bin_of(column: str) -> str:
    """SQL: the histogram bin (0 … len(EDGES_MS)) of a duration column."""
    whens = " ".join(f"WHEN {column} < {e} THEN {i}" for i, e in enumerate(EDGES_MS))
    return f"CASE {whens} ELSE {len(EDGES_MS)} END"


def latency_bins(filters: Filters) -> str:
    """Per client: organic calls per latency bin (probes and injected calls apart)."""
    return f"""SELECT client, {bin_of("durationMs")} AS bin, count(*) AS n
FROM {TABLE}
WHERE kind = {sql(Kind.REQUEST)} AND {matched(filters)} AND durationMs IS NOT NULL
  AND injected IS NULL AND NOT {is_probe()}
GROUP BY 1, 2
ORDER BY coalesce(client, '(none)'), bin"""


def delay_bins(filters: Filters) -> str:
    """Per client and retry origin: retries per delay bin."""
    return f"""SELECT client, coalesce(retryOrigin, '(none)') AS origin,
  {bin_of("retryDelayMs")} AS bin, count(*) AS n
FROM {TABLE}
WHERE kind = {sql(Kind.REQUEST)} AND {matched(filters)} AND retryOf IS NOT NULL
  AND retryDelayMs IS NOT NULL
GROUP BY 1, 2, 3
ORDER BY coalesce(client, '(none)'), origin, bin"""


#: The columns `timeline` gives, in order: `show`'s, then the timeline's own.
TIMELINE_COLUMNS: Final = (
    *SHOW_COLUMNS,
    "session",
    "seq",
    "at_ms",
    "status",
    "retry_target",
    "continues_target",
    "get_streams",
    "server_requests",
    "rank",
    "records",
    "retryDelayMs",
    "src",
    "model_turn",
    "model_join",
    "model_target",
)


def timeline(sessions: Sequence[str], filters: Filters, per_session: int) -> str:
    """The records of `sessions` (at most `per_session` of each, the first ones), each with
    its time in epoch ms and the input position (`seq`) of the record its `retryOf` and
    `continues` name: the nearest earlier record with that id in the same proxy run; and
    of the `model_turn` record its `modelCall` names (in the same proxy run; it may be
    written after the call: a turn's record is written when its answer ends).
    Only `shown` has the record's columns: the unqualified ones below are its own."""
    # The proxy run (`seg`) is numbered over narrow rows: a window over every column of
    # every record is most of the time this query takes on a big input.
    return f"""WITH r AS (
  SELECT {SOURCE} AS src, {SEQUENCE} AS seq, id, kind = {sql(Kind.MODEL_TURN)} AS turn,
    sum(CASE WHEN id = 1 THEN 1 ELSE 0 END) OVER (
      PARTITION BY {SOURCE} ORDER BY {SEQUENCE} ROWS UNBOUNDED PRECEDING) AS seg
  FROM {TABLE}
), chosen AS (
  SELECT *, {SOURCE} AS src, {SEQUENCE} AS seq,
    row_number() OVER (PARTITION BY session
      ORDER BY coalesce(ts, ''), coalesce(postCount, 0), coalesce(id, 0), {SEQUENCE}) AS rank,
    count(*) OVER (PARTITION BY session) AS records
  FROM {TABLE}
  WHERE {in_list("session", sessions)} AND {matched(filters)}
), shown AS (
  SELECT * FROM chosen WHERE rank <= {per_session}
), links AS (
  SELECT seq, src, retryOf AS target_id, 0 AS how FROM shown WHERE retryOf IS NOT NULL
  UNION ALL
  SELECT seq, src, continues, 1 FROM shown WHERE continues IS NOT NULL
  UNION ALL
  SELECT seq, src, modelCall.turn, 2 FROM shown WHERE modelCall IS NOT NULL
), targets AS (
  SELECT l.seq, l.how, max(t.seq) AS target
  FROM links l
  JOIN r ls ON ls.seq = l.seq
  JOIN r t ON t.src = l.src AND t.seg = ls.seg AND t.id = l.target_id
    AND CASE WHEN l.how = 2 THEN t.turn ELSE t.seq < l.seq END
  GROUP BY 1, 2
)
SELECT s.ts, s.id, s.kind, s.method, s.tool, s.serverMethod, s.httpStatuses, s.outcome,
  s.durationMs, s.attempt, s.retryOf, s.retryOrigin, s.continues, s.previousSession,
  s.endReason, s.injected.rule, s.injected.action, s.injected IS NOT NULL, s.sse."end",
  s.sse.resumed, s.sse IS NOT NULL, {is_probe()},
  s.notes, s.session, s.seq,
  epoch_ms(TRY_CAST(s.ts AS TIMESTAMP)) AS at_ms,
  {LAST_STATUS} AS status,
  rt.target, ct.target, s.sessionStats.getStreams, s.sessionStats.serverRequests,
  s.rank, s.records, s.retryDelayMs,
  s.src, s.modelCall.turn, s.modelCall."join", mt.target
FROM shown s
LEFT JOIN targets rt ON rt.seq = s.seq AND rt.how = 0
LEFT JOIN targets ct ON ct.seq = s.seq AND ct.how = 1
LEFT JOIN targets mt ON mt.seq = s.seq AND mt.how = 2
ORDER BY s.session, s.rank"""


def matching(filters: Filters) -> str:
    """The number of records the filters let through."""
    return f"SELECT count(*) FROM {TABLE} WHERE {matched(filters)}"


def retry_sessions(filters: Filters) -> str:
    """Pairs of sessions a retry joins: the retry in one, the attempt it repeats in another
    (a failed `initialize` retried on the session it then got, a call resent on a new one)."""
    return f"""WITH r AS (
  SELECT session, id, kind, retryOf, {SOURCE} AS src, {SEQUENCE} AS seq,
    {matched(filters)} AS matched,
    sum(CASE WHEN id = 1 THEN 1 ELSE 0 END) OVER (
      PARTITION BY {SOURCE} ORDER BY {SEQUENCE} ROWS UNBOUNDED PRECEDING) AS seg
  FROM {TABLE}
)
SELECT DISTINCT t.session AS earlier, n.session AS later
FROM r n JOIN r t ON t.src = n.src AND t.seg = n.seg AND t.id = n.retryOf AND t.seq < n.seq
WHERE n.kind = {sql(Kind.REQUEST)} AND n.matched AND t.matched
  AND n.session IS NOT NULL AND t.session IS NOT NULL AND n.session <> t.session
ORDER BY 1, 2"""


def _turn_members() -> tuple[str, ...]:
    """The `modelTurn` members the report draws, named and ordered as the record defines
    them (all but `api` and `toolResults`)."""
    kind = FIELD["modelTurn"].type
    assert isinstance(kind, Obj)
    return tuple(m.name for m in kind.members if m.name not in {"api", "toolResults"})


_TURN_MEMBERS: Final = _turn_members()

#: The columns `model_turns` gives, in order.
MODEL_TURN_COLUMNS: Final = (
    "chain",
    "src",
    "seq",
    "id",
    "at_ms",
    "durationMs",
    *_TURN_MEMBERS,
    "rank",
    "turns",
)


def model_turns(spans: Sequence[tuple[int, int, float, float]], per_chain: int) -> str:
    """The `model_turn` records of each chain's input that overlap its time: `spans` are
    (chain, input, start, end), times in epoch ms. At most `per_chain` of each chain, the
    first ones, each with how many it has in all (`turns`). A turn has no session and no
    client: it belongs to a chain by input and time, whatever the filters (as `hangs`
    keeps it)."""
    values = ", ".join(f"({c}, {s}, {a!r}, {b!r})" for c, s, a, b in spans)
    turn_members = ", ".join(f"modelTurn.{name}" for name in _TURN_MEMBERS)
    return f"""WITH c(chain, src, a, b) AS (VALUES {values}
), t AS (
  SELECT {SOURCE} AS src, {SEQUENCE} AS seq, id, durationMs, modelTurn,
    {STARTED_MS} AS at_ms
  FROM {TABLE}
  WHERE kind = {sql(Kind.MODEL_TURN)} AND ts IS NOT NULL
), j AS (
  SELECT c.chain, t.*,
    row_number() OVER (PARTITION BY c.chain ORDER BY t.at_ms, t.seq) AS rank,
    count(*) OVER (PARTITION BY c.chain) AS turns
  FROM c JOIN t ON t.src = c.src AND t.at_ms <= c.b
    AND t.at_ms + coalesce(t.durationMs, 0) >= c.a
)
SELECT chain, src, seq, id, at_ms, durationMs, {turn_members}, rank, turns
FROM j WHERE rank <= {per_chain}
ORDER BY chain, rank"""
