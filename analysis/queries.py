"""Every figure the commands print, defined once as SQL over the `records` table.

The queries are written in DuckDB's dialect (the default engine runs them as they are);
`translate` hands them to sqlglot for Spark and the warehouses. Vocabularies (kinds,
outcomes, layers, end reasons, notes) come from the record definition, spelt in SQL by
`terms`, and the latency buckets from `histogram`: never spelt twice. The Python around
them only formats: a percentile comes back as its histogram bucket, and
`histogram.value_of` turns it into milliseconds.

Filters choose the records that are counted (`matched`); the figures that follow links
between records (a retry and the attempt it repeats) follow them through every record.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Any, Final

from mcp_layers_core.record import NOT_FAILED, SUCCESSFUL, EndReason, Kind, NoteCode, Outcome

from .filters import Filters
from .histogram import SCALE, ZERO
from .schema import HTTP_NOT_FOUND, INITIALIZE, INVALID_PARAMS, LAYERS, OUTCOMES
from .table import SEQUENCE, SOURCE, TABLE
from .terms import has_note_starting, sql, sql_in

#: What `--by` can group on, and the column each reads.
DIMENSIONS: Final = {"client": "client", "version": "protocolVersion", "scenario": "scenario"}

#: Summary breakdowns, in the order rows list them.
BREAKDOWNS: Final = (
    "all",
    "layer",
    "outcome",
    "method",
    "tool",
    "jsonrpc_error",
    "http_status",
    "rule",
)

#: Origins of a call, in the order rows list them.
ORIGINS: Final = ("organic", "probe", "injected")

#: A version-negotiation probe's method (the other probes say `negotiation: true`).
DISCOVER: Final = "server/discover"

#: Columns the filters and `--by` may read: every command loads them.
COMMON_COLUMNS: Final = ("kind", "ts", "session", "client", "protocolVersion", "scenario")
COMMON_COLUMNS_ALL: Final = (*COMMON_COLUMNS, "method", "tool")

#: Columns `summary` reads: a narrower read is a faster one (the rest read as null).
SUMMARY_COLUMNS: Final = (
    *COMMON_COLUMNS_ALL,
    "durationMs",
    "httpStatuses",
    "jsonrpc",
    "outcome",
    "layer",
    "injected",
    "negotiation",
)

#: Columns `retries` reads.
RETRY_COLUMNS: Final = (
    *COMMON_COLUMNS_ALL,
    "httpStatuses",
    "jsonrpc",
    "outcome",
    "negotiation",
    "attempt",
    "retryOf",
    "retryOrigin",
    "retryDelayMs",
    "retryAfterMs",
    "retryAfterHonored",
    "unsafeRetry",
    "continues",
    "previousSession",
    "endReason",
)

#: Columns `sessions` reads.
SESSION_COLUMNS: Final = (
    *COMMON_COLUMNS_ALL,
    "postCount",
    "outcome",
    "negotiation",
    "httpStatuses",
    "retryOf",
    "previousSession",
    "endReason",
    "notes",
)

#: Latency percentiles summary reports, and retry-delay percentiles retries reports.
PERCENTILES: Final = (0.50, 0.95, 0.99)
DELAY_PERCENTILES: Final = (0.50, 0.95)


#: SQL: the day a record is filed under by `export --parquet` (a folder's name): the date
#: its `ts` starts with, else `unknown`; a `ts` of any other shape never names a path.
DAY: Final = (
    "CASE WHEN regexp_matches(substr(ts, 1, 10), '^[0-9]{4}-[0-9]{2}-[0-9]{2}$') "
    "THEN substr(ts, 1, 10) ELSE 'unknown' END"
)


def translate(sql: str, dialect: str) -> str:
    """`sql` (DuckDB's dialect) in another one, by sqlglot.

    What sqlglot cannot say in the target dialect (BigQuery has no `NULLS LAST` in a
    window's order, say) it logs as a warning; that belongs with the query it is about,
    not on stderr: each becomes a `-- sqlglot:` comment at the query's head.
    """
    if dialect == "duckdb":
        return sql
    import sqlglot  # only here: DuckDB, the default, runs the queries as written

    log = logging.getLogger("sqlglot")
    caught = _Caught()
    log.addHandler(caught)
    propagate, log.propagate = log.propagate, False
    try:
        trees = [_epoch_ms_of_timestamps(t) for t in sqlglot.parse(sql, read="duckdb") if t]
        text = ";\n".join(t.sql(dialect=dialect, pretty=True) for t in trees)
    finally:
        log.removeHandler(caught)
        log.propagate = propagate
    notes = "".join(f"-- sqlglot: {m}\n" for m in dict.fromkeys(caught.messages))
    return notes + text


def _epoch_ms_of_timestamps(tree: Any) -> Any:
    """DuckDB's `epoch_ms` is two functions: of a timestamp, its milliseconds since the
    epoch; of a number, the timestamp. sqlglot reads every `epoch_ms` as the second, so
    `epoch_ms(TRY_CAST(ts AS TIMESTAMP))` (how the queries measure time) became Spark's
    `timestamp_millis(timestamp)`, a type error. Of a cast to a timestamp it is the first:
    milliseconds, as `unix_millis` says it in Spark, Databricks and BigQuery."""
    from sqlglot import exp

    def fix(node: Any) -> Any:
        if (
            isinstance(node, exp.UnixToTime)
            and isinstance(node.this, exp.Cast)  # TryCast is a Cast
            and node.this.to.is_type(*exp.DataType.TEMPORAL_TYPES)
        ):
            return exp.Anonymous(this="unix_millis", expressions=[node.this])
        return node

    return tree.transform(fix)


class _Caught(logging.Handler):
    """Keeps what sqlglot logs while it translates."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


# --------------------------------------------------------------------- building blocks


def literal(value: str | int | None) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(value)
    return "'" + value.replace("'", "''") + "'"


def in_list(column: str, values: Iterable[str]) -> str:
    return f"{column} IN ({', '.join(literal(v) for v in sorted(values))})"


def not_failed(column: str = "outcome") -> str:
    """SQL: the outcome is one of those that are no failure (a null outcome failed)."""
    return f"coalesce({column} IN {sql_in(*sorted(NOT_FAILED))}, FALSE)"


def matched(filters: Filters) -> str:
    """SQL: the record passes the filters (TRUE when there are none)."""
    tests: list[str] = []
    if filters.clients:
        exact = {c for c in filters.clients if "@" in c}
        names = {c for c in filters.clients if "@" not in c}
        either = []
        if exact:
            either.append(in_list("client", exact))
        if names:
            either.append(in_list("client", names))
            either.append(in_list("regexp_extract(client, '^(.*)@[^@]*$', 1)", names))
        tests.append("(" + " OR ".join(either) + ")")
    if filters.methods:
        tests.append(in_list("method", filters.methods))
    if filters.tools:
        tests.append(in_list("tool", filters.tools))
    if filters.scenarios:
        tests.append(in_list("scenario", filters.scenarios))
    if filters.since is not None:
        tests.append(f"ts >= {literal(filters.since)}")
    if filters.until is not None:
        tests.append(f"ts < {literal(filters.until)}")
    if not tests:
        return "TRUE"
    return "coalesce(" + " AND ".join(tests) + ", FALSE)"


def by_n(by: Sequence[str], more: int) -> str:
    """GROUP BY ordinals: the groups and `more` columns after them."""
    return ", ".join(str(i + 1) for i in range(len(by) + more))


def group_columns(by: Sequence[str]) -> list[str]:
    """`g0, g1, …`: the `--by` values."""
    return [f"g{i}" for i in range(len(by))]


def group_select(by: Sequence[str]) -> str:
    return ", ".join(f"{DIMENSIONS[d]} AS g{i}" for i, d in enumerate(by))


def group_order(by: Sequence[str], prefix: str = "") -> str:
    """ORDER BY terms: groups as their labels read, `(none)` for null."""
    return ", ".join(f"coalesce({prefix}{g}, '(none)')" for g in group_columns(by))


def rank_of(column: str, order: Sequence[str]) -> str:
    """SQL: a value's place in `order`; unknown values after every known one."""
    whens = " ".join(f"WHEN {literal(v)} THEN {i}" for i, v in enumerate(order))
    return f"CASE {column} {whens} ELSE {len(order)} END"


LAST_STATUS: Final = (
    "CASE WHEN array_length(httpStatuses) > 0 THEN httpStatuses[array_length(httpStatuses)] END"
)

BUCKET: Final = (
    f"CASE WHEN durationMs IS NULL THEN NULL WHEN durationMs > 0 "
    f"THEN CAST(floor(ln(durationMs) * {SCALE!r}) AS BIGINT) ELSE {ZERO} END"
)


def nearest_rank(q: float, n: str) -> str:
    """SQL: the 1-based rank of percentile `q` among `n` values (as histogram.quantiles)."""
    return f"greatest(1, CAST(ceil({q!r} * {n} - 1e-9) AS BIGINT))"


def is_probe() -> str:
    return f"(negotiation IS TRUE OR coalesce(method = {literal(DISCOVER)}, FALSE))"


# --------------------------------------------------------------------- summary


def summary(by: Sequence[str], filters: Filters, top: int | None) -> str:
    """Rows: group…, origin, breakdown, key, calls, share, failed, failure_rate, and the
    p50/p95/p99 latency buckets; in the order `summary` prints them. `top` keeps that many
    JSON-RPC error codes and HTTP statuses per group (None: all)."""
    gs = group_columns(by)
    g = ", ".join(gs)
    part = ", ".join([*gs, "origin", "breakdown", "key"])
    names = ", ".join(f"({literal(b)}, {i})" for i, b in enumerate(BREAKDOWNS))
    pcts = ",\n    ".join(
        f"min(CASE WHEN bucket IS NOT NULL AND upto >= {nearest_rank(q, 'timed')} "
        f"THEN bucket END) AS p{round(q * 100)}"
        for q in PERCENTILES
    )
    top_test = "TRUE" if top is None else f"top_rank <= {top}"
    return f"""WITH cells AS (
  SELECT {group_select(by)},
    CASE WHEN injected IS NOT NULL THEN 'injected' WHEN {is_probe()} THEN 'probe'
      ELSE 'organic' END AS origin,
    CASE WHEN injected IS NOT NULL THEN coalesce(injected.rule, '') END AS rule,
    outcome, layer, method, tool, jsonrpc.errorCode AS code, {LAST_STATUS} AS status,
    {BUCKET} AS bucket,
    count(*) AS n
  FROM {TABLE}
  WHERE kind = {sql(Kind.REQUEST)} AND {matched(filters)}
  GROUP BY {by_n(by, 9)}
), parts AS (
  SELECT {g}, origin, b.breakdown, b.ord,
    CASE b.breakdown WHEN 'all' THEN NULL WHEN 'layer' THEN layer WHEN 'outcome' THEN outcome
      WHEN 'method' THEN method WHEN 'tool' THEN tool
      WHEN 'jsonrpc_error' THEN CAST(code AS VARCHAR)
      WHEN 'http_status' THEN CAST(status AS VARCHAR)
      WHEN 'rule' THEN rule END AS key,
    bucket, n,
    CASE WHEN origin <> 'probe' AND NOT {not_failed()} THEN n ELSE 0 END AS nf
  FROM cells CROSS JOIN (VALUES {names}) AS b(breakdown, ord)
), hist AS (
  SELECT {part}, ord, bucket, sum(n) AS n, sum(nf) AS nf
  FROM parts
  WHERE breakdown IN ('all', 'layer', 'outcome') OR key IS NOT NULL
  GROUP BY {by_n(by, 5)}
), cum AS (
  SELECT *,
    sum(CASE WHEN bucket IS NULL THEN 0 ELSE n END) OVER (
      PARTITION BY {part} ORDER BY bucket NULLS LAST ROWS UNBOUNDED PRECEDING) AS upto,
    sum(CASE WHEN bucket IS NULL THEN 0 ELSE n END) OVER (PARTITION BY {part}) AS timed
  FROM hist
), tallies AS (
  SELECT {part}, ord, sum(n) AS calls, sum(nf) AS failed,
    {pcts}
  FROM cum
  GROUP BY {by_n(by, 4)}
), ranked AS (
  SELECT *,
    max(CASE WHEN breakdown = 'all' THEN calls END) OVER (PARTITION BY {g}, origin) AS total,
    row_number() OVER (PARTITION BY {g}, origin, breakdown ORDER BY calls DESC, key) AS top_rank
  FROM tallies
)
SELECT {g}, origin, breakdown, key, calls,
  CAST(calls AS DOUBLE) / total AS share, failed,
  CAST(failed AS DOUBLE) / calls AS failure_rate, p50, p95, p99
FROM ranked
WHERE breakdown NOT IN ('jsonrpc_error', 'http_status') OR {top_test}
ORDER BY {group_order(by)}, {rank_of("origin", ORIGINS)}, ord,
  CASE breakdown WHEN 'layer' THEN {rank_of("key", LAYERS)}
    WHEN 'outcome' THEN {rank_of("key", OUTCOMES)} ELSE 0 END,
  CASE WHEN breakdown IN ('layer', 'outcome') THEN 0 ELSE -calls END,
  coalesce(key, '')"""


# --------------------------------------------------------------------- retries


def _retry_base(by: Sequence[str], filters: Filters) -> str:
    """CTE `r`: every record with what the retries figures read, its group, whether it
    matches the filters, and its segment (a proxy run: ids start at 1 again in each)."""
    return f"""r AS (
  SELECT {SEQUENCE} AS seq, id, kind, session, {group_select(by)},
    {matched(filters)} AS matched,
    outcome, jsonrpc.errorCode AS code, retryOf, continues, method, previousSession,
    endReason, attempt, retryOrigin, retryDelayMs, retryAfterMs, retryAfterHonored,
    unsafeRetry, {LAST_STATUS} AS status, {is_probe()} AS probe,
    greatest(sum(CASE WHEN id = 1 THEN 1 ELSE 0 END) OVER (
      ORDER BY {SEQUENCE} ROWS UNBOUNDED PRECEDING) - 1, 0) AS seg
  FROM {TABLE}
)"""


def retry_counts(by: Sequence[str], filters: Filters) -> str:
    """Per group: the sums of its matched request records."""
    gs = group_columns(by)
    g = ", ".join(gs)
    return f"""WITH {_retry_base(by, filters)}
SELECT {g},
  count(*) AS requests,
  count(*) FILTER (WHERE outcome = {sql(Outcome.INPUT_REQUIRED)}) AS input_required,
  count(*) FILTER (WHERE retryOf IS NULL) AS logical,
  count(*) FILTER (WHERE retryOf IS NOT NULL) AS retries,
  count(*) FILTER (WHERE attempt = 2) AS second_attempts,
  coalesce(max(attempt), 0) AS max_attempt,
  count(*) FILTER (WHERE retryAfterMs IS NOT NULL) AS retry_after,
  count(*) FILTER (WHERE retryAfterHonored IS TRUE) AS honoured,
  count(*) FILTER (WHERE retryAfterHonored IS FALSE) AS not_honoured,
  count(*) FILTER (WHERE retryOf IS NOT NULL AND unsafeRetry IS TRUE) AS unsafe
FROM r
WHERE kind = {sql(Kind.REQUEST)} AND matched
GROUP BY {by_n(by, 0)}
ORDER BY {group_order(by)}"""


def retry_failed(by: Sequence[str], filters: Filters) -> str:
    """Per group and failed outcome: failed calls."""
    g = ", ".join(group_columns(by))
    return f"""WITH {_retry_base(by, filters)}
SELECT {g}, outcome, count(*) AS n
FROM r
WHERE kind = {sql(Kind.REQUEST)} AND matched AND NOT {not_failed()} AND NOT probe
GROUP BY {by_n(by, 1)}
ORDER BY {group_order(by)}, outcome"""


def retry_origins(by: Sequence[str], filters: Filters) -> str:
    """Per group and `retryOrigin`: retries."""
    g = ", ".join(group_columns(by))
    return f"""WITH {_retry_base(by, filters)}
SELECT {g}, coalesce(retryOrigin, '(none)') AS origin, count(*) AS n
FROM r
WHERE kind = {sql(Kind.REQUEST)} AND matched AND retryOf IS NOT NULL
GROUP BY {by_n(by, 1)}
ORDER BY {group_order(by)}, origin"""


def retry_delays(by: Sequence[str], filters: Filters) -> str:
    """Per group: the p50 and p95 buckets of the retry delays."""
    gs = group_columns(by)
    g = ", ".join(gs)
    bucket = BUCKET.replace("durationMs", "retryDelayMs")
    pcts = ",\n  ".join(
        f"min(CASE WHEN upto >= {nearest_rank(q, 'timed')} THEN bucket END) AS p{round(q * 100)}"
        for q in DELAY_PERCENTILES
    )
    return f"""WITH {_retry_base(by, filters)}, hist AS (
  SELECT {g}, {bucket} AS bucket, count(*) AS n
  FROM r
  WHERE kind = {sql(Kind.REQUEST)} AND matched AND retryOf IS NOT NULL
    AND retryDelayMs IS NOT NULL
  GROUP BY {by_n(by, 1)}
), cum AS (
  SELECT *,
    sum(n) OVER (PARTITION BY {g} ORDER BY bucket ROWS UNBOUNDED PRECEDING) AS upto,
    sum(n) OVER (PARTITION BY {g}) AS timed
  FROM hist
)
SELECT {g},
  {pcts}
FROM cum
GROUP BY {by_n(by, 0)}
ORDER BY {group_order(by)}"""


def _links(by: Sequence[str], filters: Filters) -> str:
    """CTEs up to `links`: each record named by a later retry or continuation, paired with
    the first record that names it (in input order, within its segment)."""
    gs = group_columns(by)
    cg = ", ".join(f"c.{x} AS c{x}" for x in gs)
    ng = ", ".join(f"n.{x} AS n{x}" for x in gs)
    return f"""{_retry_base(by, filters)}, candidates AS (
  SELECT * FROM r
  WHERE kind = {sql(Kind.REQUEST)} AND outcome IS NOT NULL
    AND outcome NOT IN {sql_in(*sorted(SUCCESSFUL))} AND id IS NOT NULL
    -- a negotiation probe's refusal is no failure: nothing can retry it, unless the
    -- probe is linked some other way (an input-required turn, a 404, a link of its own)
    AND (NOT probe OR outcome = {sql(Outcome.INPUT_REQUIRED)}
      OR coalesce(status = {HTTP_NOT_FOUND}, FALSE) OR retryOf IS NOT NULL
      OR continues IS NOT NULL
      OR (method = {literal(INITIALIZE)} AND previousSession IS NOT NULL))
), namers AS (
  SELECT *, retryOf AS target, 0 AS how FROM r
  WHERE kind = {sql(Kind.REQUEST)} AND retryOf IS NOT NULL
  UNION ALL
  SELECT *, continues AS target, 1 AS how FROM r
  WHERE kind = {sql(Kind.REQUEST)} AND continues IS NOT NULL
), latest AS (
  SELECT n.seq AS nseq, n.how, n.matched AS nmatched, n.outcome AS noutcome, {ng},
    c.seq AS cseq, c.matched AS cmatched, c.outcome AS coutcome, c.code AS ccode, {cg},
    row_number() OVER (PARTITION BY n.seq, n.how ORDER BY c.seq DESC) AS nearest
  FROM namers n JOIN candidates c
    ON c.seg = n.seg AND c.id = n.target AND c.seq < n.seq
), links AS (
  SELECT * FROM (
    SELECT *, row_number() OVER (PARTITION BY cseq ORDER BY nseq, how) AS first
    FROM latest WHERE nearest = 1
  ) WHERE first = 1
)"""


def retry_retried(by: Sequence[str], filters: Filters) -> str:
    """Per group and failed outcome: failed calls a later record retried."""
    cg = ", ".join(f"c{x}" for x in group_columns(by))
    return f"""WITH {_links(by, filters)}
SELECT {cg}, coutcome AS outcome, count(*) AS n
FROM links
WHERE how = 0 AND cmatched AND NOT {not_failed("coutcome")}
GROUP BY {by_n(by, 1)}
ORDER BY {group_order(by, "c")}, outcome"""


def retry_links(by: Sequence[str], filters: Filters) -> str:
    """Per group: futile retries, sessions ended by 404 and re-initialised, input-required
    results continued and continued results whose chain completed."""
    gs = group_columns(by)
    g = ", ".join(gs)
    cg = ", ".join(f"c{x} AS {x}" for x in gs)
    ng = ", ".join(f"n{x} AS {x}" for x in gs)
    rg = ", ".join(f"root.{x}" for x in gs)
    eg = ", ".join(f"e.{x}" for x in gs)
    return f"""WITH RECURSIVE {_links(by, filters)}, carry AS (
  -- the link that hands a record its continuation chain: a continuation of an
  -- input-required result if it has one, else the retry
  SELECT nseq AS rec, cseq AS prev, how = 1 AS cont FROM (
    SELECT *, row_number() OVER (PARTITION BY nseq ORDER BY how DESC) AS pick
    FROM links WHERE how = 0 OR coutcome = {sql(Outcome.INPUT_REQUIRED)}
  ) WHERE pick = 1
), walk AS (
  SELECT rec, prev AS at, CASE WHEN cont THEN prev END AS root FROM carry
  UNION ALL
  SELECT w.rec, c.prev, CASE WHEN c.cont THEN c.prev ELSE w.root END
  FROM walk w JOIN carry c ON c.rec = w.at
), chains AS (
  -- each record's chain: the input-required result whose continuation started it
  SELECT w.rec, w.root FROM walk w LEFT JOIN carry c ON c.rec = w.at
  WHERE c.rec IS NULL AND w.root IS NOT NULL
), continued AS (
  SELECT l.nseq, l.cmatched, ch.root FROM links l JOIN chains ch ON ch.rec = l.nseq
  WHERE l.how = 1 AND l.coutcome = {sql(Outcome.INPUT_REQUIRED)}
), completed AS (
  SELECT {rg}, count(*) AS n FROM continued k
  JOIN r root ON root.seq = k.root
  WHERE k.cmatched AND EXISTS (
    SELECT 1 FROM chains s JOIN r x ON x.seq = s.rec
    WHERE s.root = k.root AND s.rec >= k.nseq AND x.outcome IN {sql_in(*sorted(SUCCESSFUL))})
  GROUP BY {by_n(by, 0)}
), ends AS (
  SELECT * FROM (
    SELECT *, row_number() OVER (PARTITION BY session ORDER BY seq) AS first FROM r
    WHERE session IS NOT NULL AND (
      (kind = {sql(Kind.REQUEST)} AND coalesce(status = {HTTP_NOT_FOUND}, FALSE))
      OR (kind = {sql(Kind.SESSION_END)}
        AND coalesce(endReason = {sql(EndReason.NOT_FOUND)}, FALSE)))
  ) WHERE first = 1
), figures AS (
  SELECT {ng}, 1 AS futile, 0 AS ended, 0 AS reinit, 0 AS continued, 0 AS completed
  FROM links
  WHERE how = 0 AND nmatched AND coutcome = {sql(Outcome.JSONRPC_ERROR)}
    AND coalesce(ccode = {INVALID_PARAMS}, FALSE)
  UNION ALL
  SELECT {cg}, 0, 0, 0, 1, 0 FROM links
  WHERE how = 1 AND cmatched AND coutcome = {sql(Outcome.INPUT_REQUIRED)}
  UNION ALL
  SELECT {eg}, 0, 1,
    CASE WHEN EXISTS (
      SELECT 1 FROM r x WHERE x.kind = {sql(Kind.REQUEST)} AND x.method = {literal(INITIALIZE)}
        AND x.previousSession = e.session AND x.seq >= e.seq) THEN 1 ELSE 0 END,
    0, 0
  FROM ends e WHERE e.matched
  UNION ALL
  SELECT {g}, 0, 0, 0, 0, n FROM completed
)
SELECT {g}, sum(futile) AS futile, sum(ended) AS ended_404, sum(reinit) AS reinitialised,
  sum(continued) AS continued, sum(completed) AS completed
FROM figures
GROUP BY {by_n(by, 0)}
ORDER BY {group_order(by)}"""


# --------------------------------------------------------------------- sessions


def sessions(filters: Filters) -> str:
    """One row per input and session, in the order sessions first appear in each input."""
    # A DELETE the server refused (`not_ended:<status>`) ended nothing.
    refused = has_note_starting(NoteCode.NOT_ENDED)
    return f"""WITH m AS (
  SELECT * FROM {TABLE} WHERE session IS NOT NULL AND {matched(filters)}
), stats AS (
  SELECT {SOURCE} AS src, session,
    min({SEQUENCE}) AS first_seq,
    min(ts) AS started,
    -- Its last exchange: not the end the proxy wrote for it (shutdown, idle, evicted),
    -- which would measure the proxy's uptime, not the session.
    max(ts) FILTER (WHERE kind <> {sql(Kind.SESSION_END)} OR endReason IS NULL
      OR endReason = {sql(EndReason.DELETE)}) AS last,
    arg_min(client, {SEQUENCE}) FILTER (WHERE client IS NOT NULL AND client <> '') AS client,
    arg_min(protocolVersion, {SEQUENCE})
      FILTER (WHERE protocolVersion IS NOT NULL AND protocolVersion <> '') AS protocol,
    arg_min(scenario, {SEQUENCE}) FILTER (WHERE scenario IS NOT NULL AND scenario <> '')
      AS scenario,
    greatest(coalesce(max(postCount), 0), 0) AS posts,
    count(*) FILTER (WHERE kind = {sql(Kind.REQUEST)}) AS requests,
    count(*) FILTER (WHERE kind = {sql(Kind.REQUEST)} AND NOT {not_failed()}
      AND NOT {is_probe()}) AS failed,
    count(*) FILTER (WHERE kind = {sql(Kind.REQUEST)} AND retryOf IS NOT NULL) AS retries,
    arg_min(endReason, {SEQUENCE}) FILTER (WHERE kind = {sql(Kind.SESSION_END)}
      AND endReason IS NOT NULL AND NOT coalesce({refused}, FALSE)) AS ended,
    count(*) FILTER (WHERE kind = {sql(Kind.REQUEST)}
      AND coalesce({LAST_STATUS} = {HTTP_NOT_FOUND}, FALSE)) > 0 AS got_404
  FROM m
  GROUP BY 1, 2
), successors AS (
  SELECT src, previous, next_session FROM (
    SELECT {SOURCE} AS src, previousSession AS previous, session AS next_session,
      row_number() OVER (PARTITION BY {SOURCE}, previousSession ORDER BY {SEQUENCE} DESC) AS last
    FROM {TABLE}
    WHERE previousSession IS NOT NULL AND session IS NOT NULL
      AND method = {literal(INITIALIZE)}
  ) WHERE last = 1
)
SELECT s.session, s.client, s.protocol, s.scenario, s.started,
  CAST(date_diff('millisecond', TRY_CAST(s.started AS TIMESTAMP), TRY_CAST(s.last AS TIMESTAMP))
    AS DOUBLE) / 1000 AS seconds,
  s.posts, s.requests, s.failed, s.retries,
  coalesce(s.ended, CASE WHEN s.got_404 THEN '404' END) AS ended,
  n.next_session
FROM stats s LEFT JOIN successors n ON n.src = s.src AND n.previous = s.session
ORDER BY s.src, s.first_seq"""


def show(session: str, filters: Filters, limit: int) -> str:
    """The records of one session, in the order their POSTs arrived (at most `limit`)."""
    return f"""SELECT ts, id, kind, method, tool, serverMethod, httpStatuses, outcome, durationMs,
  attempt, retryOf, retryOrigin, continues, previousSession, endReason,
  injected.rule AS injected_rule, injected.action AS injected_action, injected IS NOT NULL AS
  is_injected, sse."end" AS sse_end, sse.resumed AS sse_resumed, sse IS NOT NULL AS has_sse,
  {is_probe()} AS probe, notes
FROM {TABLE}
WHERE session = {literal(session)} AND {matched(filters)}
ORDER BY coalesce(ts, ''), coalesce(postCount, 0), coalesce(id, 0), {SEQUENCE}
LIMIT {limit}"""


# --------------------------------------------------------------------- bundle


def session_records(session: str) -> str:
    """The (input, record id, ts) of every record of one session: what `bundle --session`
    keeps of the verdicts' instances (`verdicts.Instance.about`)."""
    return f"SELECT DISTINCT {SOURCE}, id, ts FROM {TABLE} WHERE session = {literal(session)}"


def clients() -> str:
    """Every client named in the records, with how many records name it."""
    return f"""SELECT client, count(*) AS n FROM {TABLE}
WHERE client IS NOT NULL AND client <> ''
GROUP BY client ORDER BY client"""


def facts() -> str:
    """What a bug report names first: the clients, servers, protocol versions and sessions
    of the records (each sorted), how many records, the first and last `ts`."""

    def distinct(column: str) -> str:
        return (
            f"coalesce(list(DISTINCT {column} ORDER BY {column}) "
            f"FILTER (WHERE {column} IS NOT NULL AND {column} <> ''), [])"
        )

    return f"""SELECT {distinct("client")}, {distinct("server")}, {distinct("protocolVersion")},
  {distinct("session")}, count(*), min(ts), max(ts)
FROM {TABLE}"""


def failing(limit: int) -> str:
    """The failed requests (as `sessions` counts them: outcome not a success, negotiation
    probes aside), in time order, at most `limit`, each with how many there are in all."""
    return f"""SELECT ts, id, method, tool, httpStatuses, outcome, layer, jsonrpc.errorCode,
  count(*) OVER () AS total
FROM {TABLE}
WHERE kind = {sql(Kind.REQUEST)} AND NOT {not_failed()} AND NOT {is_probe()}
ORDER BY coalesce(ts, ''), {SOURCE}, {SEQUENCE}
LIMIT {limit}"""


#: Every figure `mcp-layers sql` prints, with the queries that define it (default options).
def figure_queries() -> dict[str, list[tuple[str, str]]]:
    by = ("client",)
    f = Filters()
    retries = [
        ("retries: sums per group", retry_counts(by, f)),
        ("retries: failed calls per outcome", retry_failed(by, f)),
        ("retries: failed calls retried per outcome", retry_retried(by, f)),
        ("retries: retries per origin", retry_origins(by, f)),
        ("retries: retry delay percentiles (histogram buckets)", retry_delays(by, f)),
        ("retries: figures that follow links", retry_links(by, f)),
    ]
    summary_q = [("summary", summary(by, f, 5))]
    return {
        "summary": summary_q,
        "retries": retries,
        "compare": [("compare: summary part", summary(by, f, None)), *retries],
        "sessions": [("sessions", sessions(f))],
        "show": [("show", show("SESSION-ID", f, 1_000_000))],
    }
