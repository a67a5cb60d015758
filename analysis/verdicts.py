"""`verdicts`: did each client do what the spec asks, judged from the traffic it sent.

Every requirement is a `Rule` (its id, the spec version and section it comes from, the
sentence it grades, MUST or SHOULD) and one SQL query over the `records` table that lists
the requirement's *instances*: each time a client was in the situation the requirement is
about (a 404 on its session, a stream cut after it carried event ids, a POST after
initialisation), with `ok` TRUE when the client did the right thing, FALSE when it did
not, and NULL when the recording cannot tell (an older recording without
`requestHeaders`, say). Per client and rule (`Tally.verdict`): FAIL when an instance
broke a MUST, WARNING when one missed a SHOULD (never FAIL), PASS when one passed and none
failed, UNDECIDABLE when there were instances and none could be decided, NOT_EXERCISED
when there was none. Only a FAIL fails the exit status.

Ids: the conformance suite's where it has the check (`client-sse-last-event-id`,
`client-sse-retry-timing`, `client-sse-graceful-reconnect`: namespace `conformance`);
every other rule is this project's own, `mcp-layers/…`.

Each recording is its own world: a rule joins records only within one input file (`src`)
and, where it follows a client from one session to the next, by what the records say
links them (`previousSession`, a time window), never by a client's name across files.

Times in the evidence are the records' `ts`; a "gap" runs from the end of one record
(`ts` + `durationMs`) to the start of the next.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from mcp_layers_core.record import EndReason, Kind, NoteCode, Outcome, RetryOrigin, StreamEnd

from . import forensics, queries
from .filters import Filters
from .hangs import HANG_COLUMNS
from .load import Engine
from .table import SEQUENCE, SOURCE, TABLE
from .terms import (
    ENDED_MS,
    POSTS,
    POSTS_AND_GETS,
    STARTED_MS,
    has_note,
    issued_session,
    sql,
    sql_in,
)


class Verdict(StrEnum):
    """One client's grade on one rule (the conformance suite's words where it has them)."""

    PASS = "PASS"
    #: An instance broke a MUST.
    FAIL = "FAIL"
    #: An instance missed a SHOULD (or the softer part of a MUST rule, as the suite has it).
    WARNING = "WARNING"
    #: Instances exist, and the recording could decide none of them.
    UNDECIDABLE = "UNDECIDABLE"
    NOT_EXERCISED = "NOT_EXERCISED"


class Level(StrEnum):
    MUST = "MUST"
    SHOULD = "SHOULD"


#: The namespace of the conformance suite's own check ids
#: (https://github.com/modelcontextprotocol/conformance).
CONFORMANCE: Final = "conformance"
#: This project's namespace; its ids start `mcp-layers/`.
OWN: Final = "mcp-layers"


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    spec: str  # the spec version the rule cites (the first with the requirement)
    section: str
    level: Level
    requirement: str
    #: The query's instances: columns src, client, ok, id, ts, evidence, and `soft` where
    #: the rule says so (`soft`).
    sql: str
    #: The cited section in that spec version.
    url: str
    #: The sentence the rule grades, verbatim from that version (markdown links reduced
    #: to their text, line breaks to spaces).
    quote: str
    #: What counts as an instance and as its evidence (docs/cli.md).
    evidence: str
    #: SQL over the query's columns: TRUE when a failed instance misses only a softer part
    #: of the rule (a WARNING even under a MUST).
    soft: str = "FALSE"

    @property
    def namespace(self) -> str:
        return OWN if self.id.startswith(f"{OWN}/") else CONFORMANCE


def _spec(version: str, page: str, anchor: str) -> str:
    return f"https://modelcontextprotocol.io/specification/{version}/basic/{page}#{anchor}"


#: The conformance suite's definitions of the checks it shares with us.
CONFORMANCE_CHECKS: Final = "https://github.com/modelcontextprotocol/conformance/blob/main/src/scenarios/client/sse-retry.ts"

# The sentences graded, verbatim (see `Rule.quote`).
SESSION_404: Final = (
    "When a client receives HTTP 404 in response to a request containing an "
    "`Mcp-Session-Id`, it **MUST** start a new session by sending a new `InitializeRequest` "
    "without a session ID attached."
)
LAST_EVENT_ID: Final = (
    "If the client wishes to resume after a broken connection, it **SHOULD** issue an HTTP "
    "GET to the MCP endpoint, and include the `Last-Event-ID` header to indicate the last "
    "event ID it received."
)
RETRY_FIELD: Final = (
    "The client **MUST** respect the `retry` field, waiting the given number of "
    "milliseconds before attempting to reconnect."
)
POLL: Final = (
    "After the server has sent an SSE event with an event ID to the client, the server "
    "**MAY** close the _connection_ (without terminating the _SSE stream_) at any time in "
    'order to avoid holding a long-lived connection. The client **SHOULD** then "poll" the '
    "SSE stream by attempting to reconnect."
)
POLL_GET: Final = (
    "If the server closes the _connection_ without terminating the _stream_, it **SHOULD** "
    "follow the same polling behavior as described for POST requests: sending a `retry` "
    "field and allowing the client to reconnect."
)
RETRY_AFTER: Final = (
    'Servers send the "Retry-After" header field to indicate how long the user agent ought '
    "to wait before making a follow-up request."
)
VERSION_HEADER: Final = (
    "If using HTTP, the client **MUST** include the `MCP-Protocol-Version: "
    "<protocol-version>` HTTP header on all subsequent requests to the MCP server, allowing "
    "the MCP server to respond based on the MCP protocol version."
)
ACCEPT_POST: Final = (
    "The client **MUST** include an `Accept` header, listing both `application/json` and "
    "`text/event-stream` as supported content types."
)
ACCEPT_GET: Final = (
    "The client **MUST** include an `Accept` header, listing `text/event-stream` as a "
    "supported content type."
)
GET_405: Final = (
    "The server **MUST** either return `Content-Type: text/event-stream` in response to "
    "this HTTP GET, or else return HTTP 405 Method Not Allowed, indicating that the server "
    "does not offer an SSE stream at this endpoint."
)
INITIALIZED: Final = (
    "After successful initialization, the client **MUST** send an `initialized` "
    "notification to indicate it is ready to begin normal operations"
)
IDS_UNIQUE: Final = (
    "The request ID **MUST NOT** have been previously used by the requestor within the same "
    "session."
)
DELETE: Final = (
    "Clients that no longer need a particular session (e.g., because the user is leaving "
    "the client application) **SHOULD** send an HTTP DELETE to the MCP endpoint with the "
    "`Mcp-Session-Id` header, to explicitly terminate the session."
)

#: Columns verdicts read, and the forensics' silences (who a stall after an incident
#: waited on: `forensics.with_waits`).
COLUMNS: Final = tuple(
    dict.fromkeys(
        (
            "kind",
            "ts",
            "durationMs",
            "session",
            "client",
            "protocolVersion",
            "method",
            "scenario",
            "tool",
            "httpStatuses",
            "jsonrpc",
            "outcome",
            "sse",
            "retryOrigin",
            "retryOf",
            "retryDelayMs",
            "retryAfterMs",
            "retryAfterHonored",
            "previousSession",
            "endReason",
            "requestHeaders",
            "accept",
            "eventIds",
            "retryMs",
            "streamClosedMs",
            "notes",
            "negotiation",
            "injected",
            "server",
            "userAgent",
            "transport",  # the HTTP rules leave out stdio's records (`ANY_TRANSPORT`)
            *HANG_COLUMNS,
        )
    )
)

#: Tolerance on a measured wait: timestamps are per millisecond and the proxy sits between
#: (the conformance suite's `client-sse-retry-timing` allows the same 50 ms early).
WAIT_TOLERANCE_MS: Final = 50

#: A reconnection later than `retry:` and this is late: a WARNING (the suite's
#: LATE_TOLERANCE, "acceptable but may indicate network delays").
LATE_TOLERANCE_MS: Final = 200

#: A reconnection later than this many times the `retry:` delay ignores it (the suite's
#: "very late": the client uses a backoff of its own).
VERY_LATE_FACTOR: Final = 2

#: A session that ended this soon after its GET stream was cut (or within twice the
#: stream's `retry:`) had no need to reopen it: the client was leaving.
RECONNECT_GRACE_MS: Final = 2000

#: How many instances a verdict's evidence names.
MAX_EVIDENCE: Final = 3


#: A re-initialisation is linked to the 404 that lost a session only when it starts
#: within this many ms of it: a client restarted an hour later also begins with an
#: `initialize`, and the recording cannot tell the two apart. The same window bounds how
#: long a client is watched for its next move after a 404, a 405 or a re-initialisation.
SESSION_LINK_MS: Final = 30_000

#: Methods the model (or the user) chooses to call: a repeat of one under a new id may be
#: the model's decision, not the client's transport retrying.
MODEL_METHODS: Final = ("tools/call", "resources/read", "prompts/get")

#: Why such a repeat is not graded (model turns are not on the recording).
MODEL_REPEAT: Final = (
    "a re-call of a tool may be the model's decision; model turns are not on this recording"
)

#: SQL over `r`: the record's session is one the server issued, not the client's stand-in
#: (`record.is_issued_session`, the OTel export's test too; exact under
#: `mcp_raw_session_ids` as well).
ISSUED: Final = issued_session()


#: The rules that hold on any transport; every other one grades HTTP behaviour (sessions,
#: SSE, headers, Retry-After) and does not read the records of `mcp-layers wrap`.
ANY_TRANSPORT: Final = frozenset(
    {"mcp-layers/initialized-notification", "mcp-layers/request-ids-unique"}
)


def base(filters: Filters, http_only: bool = False) -> str:
    """The records with what every rule reads: the session's client, start and end in ms,
    the last HTTP status, whether the filters match, the input order, and when the
    recording (its input file) ends. `http_only`: without stdio's records.

    CTEs named `r_…` and last `r`, to follow `WITH`. The session's client and user agent,
    and the input's end, are grouped apart and joined back rather than computed by
    windows: a window sorts every record with every column the rule reads (at 4M records,
    gigabytes spilled under the memory limit), a grouping holds one row per session. `r`
    is NOT MATERIALIZED, so that each rule's use of it reads only the columns it needs."""
    where = " WHERE coalesce(transport, '') <> 'stdio'" if http_only else ""
    return f"""r_sessions AS (
  SELECT {SOURCE} AS r_src, session AS r_session,
    coalesce(max(client), '(unknown client)') AS cl,
    -- the session's user agent: with the name and the server, what tells one running
    -- client from another of the same name (many apps keep an SDK's default name)
    max(userAgent) AS ua
  FROM {TABLE}{where}
  GROUP BY ALL
), r_inputs AS (
  SELECT {SOURCE} AS r_src, max({ENDED_MS}) AS tend FROM {TABLE}{where} GROUP BY ALL
), r AS NOT MATERIALIZED (
  SELECT {SOURCE} AS src, {SEQUENCE} AS seq, id, kind, ts, session, method, outcome,
    protocolVersion AS pv, httpStatuses, sse, retryOrigin, retryOf, retryDelayMs,
    retryAfterMs, retryAfterHonored, previousSession, endReason, requestHeaders, accept,
    eventIds, retryMs, notes, jsonrpc, negotiation, client, scenario, injected, server,
    s.cl, s.ua, i.tend,
    {ISSUED} AS issued,
    {STARTED_MS} AS t0,
    {ENDED_MS} AS t1,
    {STARTED_MS} + CAST(coalesce(streamClosedMs, durationMs, 0) AS BIGINT) AS tcut,
    httpStatuses[len(httpStatuses)] AS status,
    {has_note(NoteCode.PROXY_SHUTDOWN)} AS shutdown,
    -- a POST's stream that ended before its record did (the request waited on for a
    -- resumption): not cut by the proxy stopping, even when the record says it stopped
    coalesce(streamClosedMs < durationMs, FALSE) AS closed_early,
    -- a message the client sent: a POST, a GET, a DELETE (a session end with the
    -- request's headers; the proxy's own ends have none)
    (kind IN {POSTS_AND_GETS}
      OR (kind = {sql(Kind.SESSION_END)}
        AND (endReason IS NULL OR endReason = {sql(EndReason.DELETE)}))) AS sent,
    {queries.matched(filters)} AS m
  FROM {TABLE}
  JOIN r_sessions s ON s.r_src = {SOURCE} AND s.r_session IS NOT DISTINCT FROM session
  JOIN r_inputs i ON i.r_src = {SOURCE}{where}
)"""


def _at(alias: str) -> str:
    """SQL: `#id at hh:mm:ss.mmm` of a record."""
    return f"'#' || {alias}.id || ' at ' || substr({alias}.ts, 12, 12)"


def _ms(expr: str) -> str:
    """SQL: a duration in ms as text."""
    return f"CAST(CAST(round({expr}) AS BIGINT) AS VARCHAR) || ' ms'"


# A stream the client lost before its answer: a POST's SSE answer without its final
# response, or a GET stream, that carried event ids; ended by the server or the network,
# not by the proxy stopping.
_CUT = f"""(c.eventIds AND (NOT c.shutdown OR c.closed_early) AND c.sse IS NOT NULL
   AND ((c.kind = {sql(Kind.REQUEST)} AND (NOT c.sse.final OR c.sse.resumed))
     OR c.kind = {sql(Kind.STREAM)}))"""

# The first GET stream of the same recording and session opened after the cut stream
# ended.
_NEXT_GET = f"""(SELECT g.id, g.ts, g.t0, g.requestHeaders FROM r g
   WHERE g.src = c.src AND g.session = c.session AND g.kind = {sql(Kind.STREAM)}
     AND g.t0 >= c.tcut - 5
     AND g.seq <> c.seq
   ORDER BY g.t0, g.seq LIMIT 1)"""

# The `initialize` that re-initialises after the 404 `l`: the one the addon linked to the
# lost session (`previousSession`: the same client address, user agent and name), or,
# where the recording has no link (older recordings), one by a client of the same name on
# the same server; either way within SESSION_LINK_MS of the 404, in the same recording.
_REINIT = f"""(SELECT i.id, i.ts, i.t0, i.requestHeaders, i.session, i.outcome FROM r i
   WHERE i.src = l.src AND i.kind = {sql(Kind.REQUEST)} AND i.method = 'initialize'
     AND i.t0 >= l.t0 - 5 AND i.t0 <= l.t0 + {SESSION_LINK_MS}
     AND (i.previousSession = l.session
          OR (i.previousSession IS NULL AND i.cl = l.cl AND i.server = l.server
              AND i.ua IS NOT DISTINCT FROM l.ua))
   ORDER BY i.previousSession = l.session DESC, i.t0, i.seq LIMIT 1)"""

# The client's first message to the same server within SESSION_LINK_MS after the 404 `l`,
# in the same recording: in the lost session, or with no session (a server-issued session
# of the same name and agent may be another running client's, and is no evidence).
_MOVE_AFTER_404 = f"""(SELECT n.id, n.ts, n.t0, n.kind, n.method, n.session FROM r n
   WHERE n.src = l.src AND n.cl = l.cl AND n.server = l.server AND n.sent
     AND n.ua IS NOT DISTINCT FROM l.ua AND (n.session = l.session OR NOT n.issued)
     AND n.t0 >= l.t0 AND n.t0 <= l.t0 + {SESSION_LINK_MS} AND n.seq <> l.seq
     -- not the request the 404 answered (it may start in the same millisecond)
     AND NOT (n.session = l.session AND {has_note(NoteCode.SESSION_LOST, "n.notes")})
   ORDER BY n.t0, n.seq LIMIT 1)"""

# What the 404 answered (the message noted `session_lost`), so the evidence says it: a
# resumption GET refused with 404 loses the session as any other request's 404 does.
_ANSWERED_404 = f"""(SELECT CASE WHEN a.kind = {sql(Kind.STREAM)} THEN
       CASE WHEN list_contains(a.requestHeaders, 'last-event-id')
         THEN 'a GET with Last-Event-ID #' ELSE 'a GET #' END
     ELSE coalesce(a.method, a.kind) || ' #' END || a.id AS what FROM r a
   WHERE a.src = l.src AND a.session = l.session
     AND {has_note(NoteCode.SESSION_LOST, "a.notes")}
   ORDER BY abs(a.t0 - l.t0), a.seq LIMIT 1)"""

# A later `initialize` the addon linked to the lost session, past the window.
_LATE_REINIT = f"""(SELECT i.id, i.t0 FROM r i
   WHERE i.src = l.src AND i.kind = {sql(Kind.REQUEST)} AND i.method = 'initialize'
     AND i.previousSession = l.session AND i.t0 > l.t0 + {SESSION_LINK_MS}
   ORDER BY i.t0, i.seq LIMIT 1)"""


def _renegotiate_sql() -> str:
    """A 404 on a session: did the client start a new one, without the old id?"""
    return f"""
SELECT l.src, l.cl AS client,
  CASE WHEN i.id IS NOT NULL THEN
         CASE WHEN i.requestHeaders IS NULL THEN NULL
              ELSE NOT list_contains(i.requestHeaders, 'mcp-session-id') END
       -- it carried on (or left) without a new session
       WHEN n.id IS NOT NULL THEN FALSE
       -- re-initialised later: a lazy re-initialisation and a restart look alike
       WHEN z.id IS NOT NULL THEN NULL
       -- silent: a failure only if the recording watched it for the whole window
       ELSE CASE WHEN l.tend >= l.t0 + {SESSION_LINK_MS} THEN FALSE END END AS ok,
  l.id, l.ts,
  'session lost ' || {_at("l")} || coalesce(' (404 to ' || w.what || ')', '') || ': ' || CASE
    WHEN i.id IS NOT NULL THEN 'initialize ' || {_at("i")} ||
      CASE WHEN i.requestHeaders IS NULL THEN ', its request headers were not recorded'
           WHEN list_contains(i.requestHeaders, 'mcp-session-id')
             THEN ' still carried a session id' ELSE ' without a session id' END
    WHEN n.id IS NOT NULL THEN 'no initialize; the client went on with '
      || coalesce(n.method, CASE n.kind WHEN {sql(Kind.STREAM)} THEN 'GET'
         WHEN {sql(Kind.SESSION_END)} THEN 'DELETE' ELSE n.kind END) || ' ' || {_at("n")}
      || ' (session ' || coalesce(n.session, '?') || ')'
    WHEN z.id IS NOT NULL THEN 'initialize #' || z.id || ' came ' || {_ms("z.t0 - l.t0")}
      || ' later, past the ' || {SESSION_LINK_MS // 1000} || ' s window: a lazy '
      || 're-initialisation and a restarted client look alike'
    WHEN l.tend >= l.t0 + {SESSION_LINK_MS} THEN 'no initialize, and nothing else from the '
      || 'client, in the ' || {SESSION_LINK_MS // 1000} || ' s after it'
    ELSE 'the recording ends ' || {_ms("l.tend - l.t0")} || ' after it, before the client '
      || 'was seen again' END AS evidence
FROM r l
LEFT JOIN LATERAL {_REINIT} i ON TRUE
LEFT JOIN LATERAL {_MOVE_AFTER_404} n ON TRUE
LEFT JOIN LATERAL {_LATE_REINIT} z ON TRUE
LEFT JOIN LATERAL {_ANSWERED_404} w ON TRUE
WHERE l.m AND l.kind = {sql(Kind.SESSION_END)} AND l.endReason = {sql(EndReason.NOT_FOUND)}"""


def _continues_sql() -> str:
    """A re-initialisation after a 404 (linked as `_renegotiate_sql` links it): did the
    client carry on in the new session?"""
    return f"""
SELECT l.src, l.cl AS client,
  CASE WHEN n.id IS NOT NULL THEN TRUE
       WHEN l.tend >= i.t0 + {SESSION_LINK_MS} THEN FALSE END AS ok,
  i.id, i.ts,
  'session lost ' || {_at("l")} || ', new session ' || i.session || ' ' || {_at("i")} ||
    CASE WHEN n.id IS NOT NULL THEN ': then ' || coalesce(n.method, '?') || ' ' || {_at("n")}
         WHEN l.tend >= i.t0 + {SESSION_LINK_MS}
           THEN ': no request followed in it within ' || {SESSION_LINK_MS // 1000} || ' s'
         ELSE ': the recording ends ' || {_ms("l.tend - i.t0")} || ' after it' END
    AS evidence
FROM r l
JOIN LATERAL {_REINIT} i ON TRUE
LEFT JOIN LATERAL (
  SELECT n.id, n.ts, n.method FROM r n
  WHERE n.src = l.src AND n.session = i.session AND n.t0 >= i.t0 AND n.id <> i.id
    AND n.kind = {sql(Kind.REQUEST)} AND n.method <> 'initialize'
  ORDER BY n.t0, n.seq LIMIT 1) n ON TRUE
WHERE l.m AND l.kind = {sql(Kind.SESSION_END)} AND l.endReason = {sql(EndReason.NOT_FOUND)}
  AND i.outcome = {sql(Outcome.SUCCESS)}"""


def _graceful_sql(cut_next: str) -> str:
    """A POST's stream the server closed cleanly before its answer: did a GET follow?"""
    wait = f"greatest({RECONNECT_GRACE_MS}, coalesce(retryMs, 0) * {VERY_LATE_FACTOR})"
    return f"""
SELECT src, client,
  CASE WHEN next_id IS NOT NULL THEN TRUE
       -- before 2025-11-25 a client resumes only "if it wishes": no miss to claim
       WHEN coalesce(pv, '2025-11-25') < '2025-11-25' THEN NULL
       WHEN tend >= t1 + {wait} THEN FALSE END AS ok,
  id, ts,
  'stream #' || id || ' at ' || substr(ts, 12, 12) || ' closed (' || how || ') before '
    || 'its answer; ' || CASE WHEN next_id IS NOT NULL
      THEN 'GET #' || next_id || ' after ' || (next_t0 - t1) || ' ms'
    WHEN coalesce(pv, '2025-11-25') < '2025-11-25' THEN 'no GET followed, under ' || pv
      || ', where resuming is the client''s choice (the polling SHOULD is 2025-11-25''s)'
    WHEN tend >= t1 + {wait} THEN 'no GET followed'
    ELSE 'the recording ends ' || (tend - t1) || ' ms after, before a GET was due' END
    AS evidence
FROM ({cut_next}) WHERE m AND kind = {sql(Kind.REQUEST)} AND (NOT final OR resumed)
  AND how IN {sql_in(StreamEnd.COMPLETE, StreamEnd.EOF)}"""


def _reconnect_after_cut_sql() -> str:
    """A GET stream the far side ended while the session went on: was it reopened?"""
    return f"""
SELECT c.src, c.cl AS client,
  CASE WHEN n.id IS NOT NULL THEN TRUE WHEN a.id IS NOT NULL THEN FALSE END AS ok, c.id, c.ts,
  'GET stream ' || {_at("c")} || CASE WHEN c.injected.action = 'idle_cut'
    THEN ' cut by the proxy (' || c.injected.rule || ')' ELSE ' ended (' || c.sse."end" || ')'
    END || ' after ' || CAST(round(c.tcut - c.t0) AS BIGINT) || ' ms; ' ||
    CASE WHEN n.id IS NOT NULL
      THEN 'GET #' || n.id || ' after ' || (n.t0 - c.tcut) || ' ms' ||
        CASE WHEN list_contains(n.requestHeaders, 'last-event-id')
          THEN ' with Last-Event-ID' ELSE '' END
    WHEN a.id IS NOT NULL THEN 'no GET followed, while the session went on (#' || a.id || ')'
    ELSE 'no GET followed, and nothing else of the session: the client may have been '
      || 'leaving' END AS evidence
FROM r c LEFT JOIN LATERAL {_NEXT_GET} n ON TRUE
LEFT JOIN LATERAL (
  SELECT a.id FROM r a
  WHERE a.src = c.src AND a.session = c.session AND a.sent AND a.kind <> {sql(Kind.STREAM)}
    AND a.t0 > c.tcut
  ORDER BY a.t0, a.seq LIMIT 1) a ON TRUE
WHERE c.m AND c.kind = {sql(Kind.STREAM)} AND c.status BETWEEN 200 AND 299 AND NOT c.shutdown
  -- the sentence is 2025-11-25's; 2026-07-28 has no standby GET stream to reopen
  AND c.sse IS NOT NULL AND coalesce(c.pv, '') >= '2025-11-25'
  AND c.pv < '2026-07-28'
  -- Ended by the far side. A GET that ended `error` unmarked may be the client's own
  -- hang-up: the recording cannot tell, so it is not judged.
  AND (c.sse."end" IN {sql_in(StreamEnd.EOF, StreamEnd.COMPLETE)}
    OR coalesce(c.injected.action, '') = 'idle_cut')
  AND NOT EXISTS (
    SELECT 1 FROM r e WHERE e.src = c.src AND e.session = c.session
      AND e.kind = {sql(Kind.SESSION_END)} AND e.t0 <= c.tcut
        + greatest({RECONNECT_GRACE_MS}, coalesce(c.retryMs, 0) * {VERY_LATE_FACTOR}))"""


def _retry_after_sql() -> str:
    """A retry of a 429/503 that carried `Retry-After`: did the client wait? Only the
    client's own transport retries: a resend of the same message, or a repeat of a method
    the model does not choose; never a repeat the model asked for (`retryOrigin: model`)."""
    model = ", ".join(f"'{m}'" for m in MODEL_METHODS)
    # `model`: the proxy saw the model ask for the call again (issue 28), whatever the method.
    by_model = (
        f"(coalesce(r.retryOrigin, {sql(RetryOrigin.NONE)}) = {sql(RetryOrigin.MODEL)} "
        f"OR (coalesce(r.retryOrigin, {sql(RetryOrigin.NONE)}) <> {sql(RetryOrigin.RESEND)} "
        f"AND coalesce(r.method, '') IN ({model})))"
    )
    return f"""
SELECT r.src, r.cl AS client,
  CASE WHEN {by_model} THEN NULL ELSE r.retryAfterHonored END AS ok, r.id, r.ts,
  {_at("r")} || ' ' || coalesce(r.retryOrigin, '?') || ' of #'
    || coalesce(CAST(r.retryOf AS VARCHAR), '?') || ' after '
    || coalesce(CAST(round(r.retryDelayMs) AS BIGINT) || ' ms', '?') || ', asked '
    || coalesce(CAST(p.retryAfterMs AS VARCHAR) || ' ms', '?') ||
    CASE WHEN {by_model} THEN ': not graded, ' || coalesce(r.method, '') || ' under a new id: '
      || {queries.literal(MODEL_REPEAT)} ELSE '' END AS evidence
FROM r LEFT JOIN r p ON p.src = r.src AND p.id = r.retryOf
WHERE r.m AND r.retryAfterHonored IS NOT NULL"""


def _get_405_sql() -> str:
    """A GET answered 405: did the client carry on with POSTs, or give the session up?"""
    return f"""
SELECT g.src, g.cl AS client,
  CASE WHEN n.id IS NOT NULL THEN TRUE WHEN q.id IS NOT NULL THEN FALSE END AS ok, g.id, g.ts,
  'GET ' || {_at("g")} || ' answered 405; ' || CASE
    WHEN n.id IS NOT NULL THEN 'then ' || coalesce(n.method, n.kind) || ' ' || {_at("n")}
    WHEN q.id IS NOT NULL THEN 'then it gave the session up: '
      || CASE WHEN q.kind = {sql(Kind.SESSION_END)} THEN 'DELETE' ELSE 'initialize' END || ' '
      || {_at("q")}
    ELSE 'no POST followed, and the client did not give the session up: it may have had '
      || 'nothing more to ask' END AS evidence
FROM r g LEFT JOIN LATERAL (
  SELECT n.id, n.ts, n.method, n.kind FROM r n
  WHERE n.src = g.src AND n.session = g.session AND n.t0 >= g.t0 AND n.seq <> g.seq
    AND n.kind = {sql(Kind.REQUEST)}
  ORDER BY n.t0, n.seq LIMIT 1) n ON TRUE
LEFT JOIN LATERAL (
  SELECT q.id, q.ts, q.kind FROM r q
  WHERE q.src = g.src AND q.cl = g.cl AND q.server = g.server AND q.t0 >= g.t0
    AND q.ua IS NOT DISTINCT FROM g.ua
    AND q.t0 <= g.t0 + {SESSION_LINK_MS}
    AND ((q.kind = {sql(Kind.SESSION_END)} AND q.session = g.session AND q.sent)
         OR (q.kind = {sql(Kind.REQUEST)} AND q.method = 'initialize'))
  ORDER BY q.t0, q.seq LIMIT 1) q ON TRUE
WHERE g.m AND g.kind = {sql(Kind.STREAM)} AND g.status = 405"""


def _initialized_sql() -> str:
    """A successful `initialize`: did `notifications/initialized` follow in its session?"""
    return f"""
SELECT i.src, i.cl AS client,
  CASE WHEN n.id IS NOT NULL THEN TRUE WHEN o.id IS NOT NULL THEN FALSE END AS ok,
  i.id, i.ts,
  'initialize ' || {_at("i")} || CASE
    WHEN n.id IS NOT NULL THEN ': initialized ' || {_at("n")}
    WHEN o.id IS NOT NULL THEN ': no notifications/initialized; the client went on with '
      || coalesce(o.method, o.kind) || ' ' || {_at("o")}
    ELSE ': nothing followed in its session' END AS evidence
FROM r i LEFT JOIN LATERAL (
  SELECT n.id, n.ts FROM r n
  WHERE n.src = i.src AND n.session = i.session AND n.t0 >= i.t0 AND n.seq <> i.seq
    AND n.kind = {sql(Kind.NOTIFICATION)} AND n.method = 'notifications/initialized'
  ORDER BY n.t0, n.seq LIMIT 1) n ON TRUE
LEFT JOIN LATERAL (
  SELECT o.id, o.ts, o.method, o.kind FROM r o
  WHERE o.src = i.src AND o.session = i.session AND o.t0 >= i.t1 - 5 AND o.sent
    AND o.seq <> i.seq AND coalesce(o.method, '') <> 'notifications/initialized'
  ORDER BY o.t0, o.seq LIMIT 1) o ON TRUE
WHERE i.m AND i.kind = {sql(Kind.REQUEST)} AND i.method = 'initialize'
  AND i.outcome = {sql(Outcome.SUCCESS)} AND coalesce(i.pv, '') NOT LIKE '2026%'"""


def _delete_sql() -> str:
    """A session the server issued: did the client DELETE it when done with it?

    A DELETE the client sent counts, whatever it was answered. Without one, the client
    missed it only if it was shown to be done with the session: its last exchange of the
    session ended with the client hanging up (`error`, not the proxy stopping nor a
    fault), or it went on in a later session to the same server. A session the proxy
    ended (idle, evicted, its own shutdown) proves neither; one the server ended (404)
    needs no DELETE. Linear: the later session is found by a window over the client's
    sessions (the last one it opened), not by a join per session."""
    return f"""
SELECT src, cl AS client,
  CASE WHEN delete_id IS NOT NULL THEN TRUE
       WHEN hung_up OR later_t0 > last_t1 THEN FALSE END AS ok,
  first_id AS id, first_ts AS ts,
  'session ' || session || CASE
    WHEN delete_id IS NOT NULL THEN ': DELETE #' || delete_id || ' ('
      || coalesce(CAST(delete_status AS VARCHAR), 'unanswered') || ')'
    WHEN hung_up THEN ': no DELETE; the client hung up its last exchange #' || last_id
      || ' (' || last_end || ') and sent nothing more'
    WHEN later_t0 > last_t1 THEN ': no DELETE; the client went on in session ' || later
      || ' (#' || later_id || ' at ' || substr(later_ts, 12, 12) || ')'
    ELSE ': no DELETE, but nothing shows the client was done with it (ended '
      || coalesce(end_reason, 'unseen') || ')' END AS evidence
FROM (
  SELECT *,
    max(start_t0) OVER k AS later_t0, arg_max(session, (start_t0, session)) OVER k AS later,
    arg_max(first_sent_id, (start_t0, session)) OVER k AS later_id,
    arg_max(first_sent_ts, (start_t0, session)) OVER k AS later_ts
  FROM (
    SELECT src, session, min(cl) AS cl, min(server) AS server,
      min(ua) AS ua, max(pv) AS pv,
      bool_or(m) AS m, min(id) AS first_id, min(ts) AS first_ts,
      min(t0) FILTER (WHERE sent) AS start_t0,
      arg_min(id, (t0, seq)) FILTER (WHERE sent) AS first_sent_id,
      arg_min(ts, (t0, seq)) FILTER (WHERE sent) AS first_sent_ts,
      min(id) FILTER (WHERE kind = {sql(Kind.SESSION_END)} AND sent) AS delete_id,
      arg_min(status, (id, seq)) FILTER (WHERE kind = {sql(Kind.SESSION_END)} AND sent)
        AS delete_status,
      bool_or(kind = {sql(Kind.SESSION_END)} AND endReason = {sql(EndReason.NOT_FOUND)})
        AS lost,
      arg_max(endReason, seq) FILTER (WHERE endReason IS NOT NULL) AS end_reason,
      max(t1) FILTER (WHERE sent) AS last_t1,
      arg_max(id, (t1, seq)) FILTER (WHERE sent) AS last_id,
      arg_max(sse."end", (t1, seq)) FILTER (WHERE sent) AS last_end,
      coalesce(arg_max(sse."end" = {sql(StreamEnd.ERROR)} AND NOT shutdown
          AND injected IS NULL, (t1, seq)) FILTER (WHERE sent), FALSE) AS hung_up
    FROM r WHERE issued
    GROUP BY src, session)
  WINDOW k AS (PARTITION BY src, cl, server, ua))
-- DELETE ends a session from 2025-03-26 on; 2024-11-05's HTTP+SSE sessions have none.
WHERE m AND (delete_id IS NOT NULL OR NOT lost) AND coalesce(pv, '') <> '2024-11-05'"""


def _rules() -> tuple[Rule, ...]:
    cut_next = f"""
  SELECT c.src, c.cl AS client, c.id, c.kind, c.ts, c.m, c.tcut AS t1, c.tend, c.retryMs,
    c.pv,
    n.id AS next_id,
    n.ts AS next_ts,
    n.t0 AS next_t0, n.requestHeaders AS next_headers, c.sse.final AS final, c.sse."end" AS how,
    coalesce(c.sse.resumed, FALSE) AS resumed
  FROM r c LEFT JOIN LATERAL {_NEXT_GET} n ON TRUE
  -- 2026-07-28 removed resumability ("Resumable SSE streams via `Last-Event-ID` are not
  -- supported"): its streams are no instance of the resumption checks.
  WHERE {_CUT} AND coalesce(c.pv, '') < '2026-07-28'"""
    return (
        Rule(
            "mcp-layers/session-renegotiate-on-404",
            "2025-03-26",
            "Transport: Session Management",
            Level.MUST,
            "after a 404 on its session, start a new session: `initialize` without a session id",
            _renegotiate_sql(),
            url=_spec("2025-03-26", "transports", "session-management"),
            quote=SESSION_404,
            evidence=(
                "a 404 on a request of the session (`session_end` `not_found`), and the "
                "`initialize` that names it as `previousSession`, or the client's first "
                "`initialize` within SESSION_LINK_MS of it; its `requestHeaders` say whether "
                "it carried a session id (undecidable without them)"
            ),
        ),
        Rule(
            "mcp-layers/session-continues-after-renegotiation",
            "2025-03-26",
            "Transport: Session Management",
            Level.SHOULD,
            "after re-initialising, carry on in the new session (the work the 404 interrupted)",
            _continues_sql(),
            url=_spec("2025-03-26", "transports", "session-management"),
            quote=SESSION_404,
            evidence=(
                "a successful `initialize` that re-initialises after a 404 (linked as above), "
                "and any request of the new session after it"
            ),
        ),
        Rule(
            "client-sse-last-event-id",
            "2025-03-26",
            "Transport: Resumability and Redelivery",
            Level.SHOULD,
            "resume a lost stream that had event ids with a GET carrying `Last-Event-ID`",
            f"""
SELECT src, client,
  list_contains(next_headers, 'last-event-id') AS ok, id, ts,
  'stream #' || id || ' at ' || substr(ts, 12, 12) || ' ended ' || how ||
    CASE WHEN next_headers IS NULL
           THEN '; GET #' || next_id || ': its request headers were not recorded'
         WHEN list_contains(next_headers, 'last-event-id')
           THEN '; GET #' || next_id || ' carried Last-Event-ID'
         ELSE '; GET #' || next_id || ' without Last-Event-ID' END AS evidence
-- The instance is the resumption: a client that never came back did not wish to resume
-- (the suite has no such check either; `client-sse-graceful-reconnect` grades that).
FROM ({cut_next}) WHERE m AND next_id IS NOT NULL""",
            url=_spec("2025-03-26", "transports", "resumability-and-redelivery"),
            quote=LAST_EVENT_ID,
            evidence=(
                "a stream with event ids cut before its end (not by the proxy stopping), and "
                "the session's first GET after it: its `requestHeaders` carry `last-event-id` "
                "or not (undecidable without headers); no GET, no instance"
            ),
        ),
        Rule(
            "client-sse-retry-timing",
            "2025-11-25",
            "Transport: Resumability and Redelivery (polling)",
            Level.MUST,
            "wait the stream's SSE `retry:` delay before reconnecting (not less, and not over "
            "twice as long: a backoff of its own ignores it)",
            f"""
SELECT src, client, gap >= retryMs - {WAIT_TOLERANCE_MS}
    AND gap <= retryMs + {LATE_TOLERANCE_MS} AS ok,
  -- As the suite grades it: early or over twice the delay (a backoff of its own) FAILs,
  -- slightly late is a WARNING. The MUST is 2025-11-25's: under an earlier version (or
  -- one the recording does not know) a miss is a WARNING.
  (gap >= retryMs - {WAIT_TOLERANCE_MS} AND gap <= retryMs * {VERY_LATE_FACTOR})
    OR coalesce(pv, '') < '2025-11-25' AS soft,
  id, ts,
  'stream #' || id || ' asked retry ' || retryMs || ' ms; GET #' || next_id
    || ' came after ' || gap || ' ms' ||
    CASE WHEN gap < retryMs - {WAIT_TOLERANCE_MS} THEN ' (too early)'
         WHEN gap > retryMs * {VERY_LATE_FACTOR} THEN ' (over twice the delay)'
         WHEN gap > retryMs + {LATE_TOLERANCE_MS} THEN ' (late)' ELSE '' END ||
    CASE WHEN coalesce(pv, '') < '2025-11-25' THEN ' under ' || coalesce(pv, 'an unknown '
      || 'version') || ', before 2025-11-25 made it a MUST' ELSE '' END AS evidence
FROM (SELECT *, next_t0 - t1 AS gap FROM ({cut_next}))
WHERE m AND retryMs IS NOT NULL AND next_id IS NOT NULL""",
            url=_spec("2025-11-25", "transports", "resumability-and-redelivery"),
            quote=RETRY_FIELD,
            evidence=(
                "a cut stream that set `retry:` (`retryMs`) and the session's first GET after "
                "it: the gap from the cut to the GET; more than 50 ms early or over twice "
                "the delay FAILs, over 200 ms late is a WARNING (as the suite grades it); no "
                "GET, no instance"
            ),
            soft="soft",
        ),
        Rule(
            "client-sse-graceful-reconnect",
            "2025-11-25",
            "Transport: Sending Messages to the Server (polling)",
            Level.SHOULD,
            "when the server closes a POST's stream (event ids, no answer yet), reconnect "
            "with GET to receive the answer",
            _graceful_sql(cut_next),
            url=_spec("2025-11-25", "transports", "sending-messages-to-the-server"),
            quote=POLL,
            evidence=(
                "a POST's stream with event ids that the server closed cleanly before the "
                "answer, and a GET of the session after it (or none before the session ended)"
            ),
        ),
        Rule(
            "mcp-layers/sse-reconnect-after-cut",
            "2025-11-25",
            "Transport: Listening for Messages from the Server; Resumability (polling)",
            Level.SHOULD,
            "when the server or a middlebox ends its GET stream while the session goes on, "
            "open it again with GET",
            _reconnect_after_cut_sql(),
            url=_spec("2025-11-25", "transports", "listening-for-messages-from-the-server"),
            quote=POLL_GET,
            evidence=(
                "a GET stream the server or a middlebox ended while the session went on, and "
                "the session's next GET (or none)"
            ),
        ),
        Rule(
            "mcp-layers/retry-after-honored",
            "RFC 9110",
            "§10.2.3 Retry-After (HTTP semantics, under every MCP version's HTTP transport)",
            Level.SHOULD,
            "after a 429/503 with `Retry-After`, wait at least that long before retrying",
            _retry_after_sql(),
            url="https://www.rfc-editor.org/rfc/rfc9110#section-10.2.3",
            quote=RETRY_AFTER,
            evidence=(
                "a retry of a 429/503 with `Retry-After` (`retryAfterHonored`), and its "
                "delay: a resend of the same message, or a repeat of a method the model does "
                "not choose; a `tools/call`, `resources/read` or `prompts/get` under a new id "
                "may be the model's decision and is undecidable"
            ),
        ),
        Rule(
            "mcp-layers/protocol-version-header",
            "2025-06-18",
            "Transport: Protocol Version Header",
            Level.MUST,
            "send `MCP-Protocol-Version` on every request after initialisation",
            f"""
SELECT src, cl AS client, list_contains(requestHeaders, 'mcp-protocol-version') AS ok, id, ts,
  {_at("r")} || ' ' || coalesce(method, kind) || ' (' || pv || ') ' ||
    CASE WHEN list_contains(requestHeaders, 'mcp-protocol-version') THEN 'carried it'
         ELSE 'without MCP-Protocol-Version' END AS evidence
FROM r
WHERE m AND requestHeaders IS NOT NULL AND pv >= '2025-06-18'
  AND coalesce(method, '') <> 'initialize'
  AND (kind IN {POSTS_AND_GETS}
       OR (kind = {sql(Kind.SESSION_END)} AND len(requestHeaders) > 0))""",
            url=_spec("2025-06-18", "transports", "protocol-version-header"),
            quote=VERSION_HEADER,
            evidence=(
                "each request, notification, response, GET and DELETE after `initialize` "
                "under 2025-06-18 or later whose `requestHeaders` were recorded"
            ),
        ),
        Rule(
            "mcp-layers/accept-json-and-sse",
            "2025-03-26",
            "Transport: Sending Messages to the Server",
            Level.MUST,
            "a POST's `Accept` lists both `application/json` and `text/event-stream`",
            f"""
SELECT src, cl AS client,
  list_contains(accept, 'application/json') AND list_contains(accept, 'text/event-stream')
    AS ok, id, ts,
  {_at("r")} || ' ' || coalesce(method, kind) || ' Accept: ' ||
    CASE WHEN len(accept) = 0 THEN '(none)' ELSE array_to_string(accept, ', ') END
    AS evidence
FROM r
WHERE m AND requestHeaders IS NOT NULL AND pv >= '2025-03-26'
  AND kind IN {POSTS}""",
            url=_spec("2025-03-26", "transports", "sending-messages-to-the-server"),
            quote=ACCEPT_POST,
            evidence="each POST whose `requestHeaders` were recorded, and its `accept`",
        ),
        Rule(
            "mcp-layers/get-accept-sse",
            "2025-03-26",
            "Transport: Listening for Messages from the Server",
            Level.MUST,
            "a GET stream's `Accept` lists `text/event-stream`",
            f"""
SELECT src, cl AS client, list_contains(accept, 'text/event-stream') AS ok, id, ts,
  'GET ' || {_at("r")} || ' Accept: ' ||
    CASE WHEN len(accept) = 0 THEN '(none)' ELSE array_to_string(accept, ', ') END
    AS evidence
FROM r
WHERE m AND kind = {sql(Kind.STREAM)} AND requestHeaders IS NOT NULL AND pv >= '2025-03-26'""",
            url=_spec("2025-03-26", "transports", "listening-for-messages-from-the-server"),
            quote=ACCEPT_GET,
            evidence="each GET whose `requestHeaders` were recorded, and its `accept`",
        ),
        Rule(
            "mcp-layers/get-405-not-fatal",
            "2025-03-26",
            "Transport: Listening for Messages from the Server",
            Level.SHOULD,
            "a 405 on the GET stream means no stream is offered: carry on with POSTs",
            _get_405_sql(),
            url=_spec("2025-03-26", "transports", "listening-for-messages-from-the-server"),
            quote=GET_405,
            evidence="a GET answered 405, and a request of the session after it (or none)",
        ),
        Rule(
            "mcp-layers/initialized-notification",
            "2024-11-05",
            "Lifecycle: Initialization",
            Level.MUST,
            "after a successful `initialize`, send `notifications/initialized`",
            _initialized_sql(),
            url=_spec("2024-11-05", "lifecycle", "initialization"),
            quote=INITIALIZED,
            evidence=(
                "a successful `initialize`, and `notifications/initialized` in its session "
                "after it (or none)"
            ),
        ),
        Rule(
            "mcp-layers/request-ids-unique",
            "2024-11-05",
            "Basic: Requests",
            Level.MUST,
            "a request id is not reused within a session (a resend of the same request aside)",
            f"""
SELECT src, min(cl) AS client, max(n) = 1 AS ok, min(first_id) AS id, min(first_ts) AS ts,
  'session ' || session || CASE WHEN max(n) = 1 THEN ': ' || sum(n) || ' ids, all distinct'
    ELSE ': id ' || arg_max(rid, (n, rid)) || ' used by ' || arg_max(ids, (n, rid)) END
    AS evidence
FROM (
  SELECT src, session, min(cl) AS cl, CAST(jsonrpc.id AS VARCHAR) AS rid,
    count(*) AS n, min(id) AS first_id, min(ts) AS first_ts,
    string_agg('#' || id, ', ' ORDER BY seq) AS ids
  FROM r
  WHERE m AND kind = {sql(Kind.REQUEST)} AND issued AND jsonrpc IS NOT NULL
    AND coalesce(retryOrigin, {sql(RetryOrigin.NONE)}) <> {sql(RetryOrigin.RESEND)}
  GROUP BY src, session, CAST(jsonrpc.id AS VARCHAR))
GROUP BY src, session""",
            url=_spec("2024-11-05", "messages", "requests"),
            quote=IDS_UNIQUE,
            evidence=(
                "the JSON-RPC ids of the requests of one session the server issued (resends aside)"
            ),
        ),
        Rule(
            "mcp-layers/session-delete",
            "2025-03-26",
            "Transport: Session Management",
            Level.SHOULD,
            "end a session it no longer needs with HTTP DELETE",
            _delete_sql(),
            url=_spec("2025-03-26", "transports", "session-management"),
            quote=DELETE,
            evidence=(
                "a DELETE the client sent (whatever its status), or a session whose client "
                "was done with it (it closed its connections, or carried on in another "
                "session) and ended without one"
            ),
        ),
    )


RULES: Final = _rules()

#: Rule by id.
RULE: Final = {rule.id: rule for rule in RULES}

HEADERS: Final = ("client", "check", "verdict", "level", "spec", "evidence")

#: Rules whose instances start at a failure or a cut stream: a FAIL of theirs also says
#: what the client did next (hang forensics).
ABOUT_INCIDENTS: Final = frozenset(
    {
        "client-sse-last-event-id",
        "client-sse-retry-timing",
        "client-sse-graceful-reconnect",
        "mcp-layers/sse-reconnect-after-cut",
        "mcp-layers/session-renegotiate-on-404",
        "mcp-layers/session-continues-after-renegotiation",
        "mcp-layers/retry-after-honored",
        "mcp-layers/get-405-not-fatal",
    }
)


def rule_sql(rule: Rule, filters: Filters, session: str | None = None) -> str:
    """One rule's instances: client, ok, src, id, evidence, soft, ts, in input order.
    `session`: only the instances about that session's records (`bundle --session`; the
    rule still reads the whole recording, since a client's next move after a 404 is in its
    next session)."""
    about = ""
    if session is not None:
        about = f"\nWHERE (src, id, ts) IN ({queries.session_records(session)})"
    return (
        f"WITH {base(filters, http_only=rule.id not in ANY_TRANSPORT)}\n"
        f"SELECT client, ok, src, id, evidence, {rule.soft} AS soft, ts FROM ({rule.sql})"
        f"{about}\nORDER BY ts, src, id, evidence"
    )


class Seen(StrEnum):
    """What an instance counts as in its client's tally of a rule."""

    PASSED = "passed"
    #: Broke a MUST.
    FAILED = "failed"
    #: Missed a SHOULD (or a MUST rule's softer part).
    MISSED = "missed"
    UNDECIDED = "undecided"


def _seen_sql(rule: Rule) -> str:
    """SQL over `rule_sql`'s columns: what the instance counts as (`Seen`)."""
    seen = {s: queries.literal(s) for s in Seen}
    failed = seen[Seen.FAILED] if rule.level == Level.MUST else seen[Seen.MISSED]
    return (
        f"CASE WHEN ok IS NULL THEN {seen[Seen.UNDECIDED]} WHEN ok THEN {seen[Seen.PASSED]}"
        f" WHEN soft THEN {seen[Seen.MISSED]} ELSE {failed} END"
    )


def tallied_sql(rule: Rule, filters: Filters, session: str | None = None) -> str:
    """One rule's instances counted per client and `Seen`, with the first `MAX_EVIDENCE`
    of each in input order: client, seen, count, src, id, evidence. DuckDB sums them, so
    what Python holds does not grow with the recording (a rule has an instance per
    session, or per request)."""
    return f"""SELECT client, seen, count(*) OVER (PARTITION BY client, seen) AS n, src, id,
  coalesce(evidence, '#' || id) AS evidence
FROM (
  SELECT *, {_seen_sql(rule)} AS seen FROM ({rule_sql(rule, filters, session)}))
QUALIFY row_number() OVER (PARTITION BY client, seen ORDER BY ts, src, id, evidence)
  <= {MAX_EVIDENCE}
ORDER BY client, seen, ts, src, id, evidence"""


def clients_sql(filters: Filters) -> str:
    """Every client that sent something: a recording holding only its DELETE names it
    too, so that reading recordings together adds up what each says alone."""
    return f"""WITH {base(filters)}
SELECT DISTINCT cl FROM r WHERE m AND sent
ORDER BY cl"""


@dataclass(slots=True)
class Kept:
    """How many instances of one kind a tally counted, and the evidence of the first
    `MAX_EVIDENCE` of them."""

    count: int = 0
    first: list[str] = field(default_factory=list)


@dataclass(slots=True)
class Tally:
    """One client's instances of one rule, counted by `Seen`."""

    kept: dict[Seen, Kept] = field(default_factory=lambda: {s: Kept() for s in Seen})

    @property
    def verdict(self) -> Verdict:
        if self.kept[Seen.FAILED].count:
            return Verdict.FAIL
        if self.kept[Seen.MISSED].count:
            return Verdict.WARNING
        if self.kept[Seen.PASSED].count:
            return Verdict.PASS
        return Verdict.UNDECIDABLE if self.kept[Seen.UNDECIDED].count else Verdict.NOT_EXERCISED

    def evidence(self) -> str:
        """The instances behind the verdict: the failures first, else the passes, else the
        undecided ones (each says why it could not be decided)."""
        failed, missed = self.kept[Seen.FAILED], self.kept[Seen.MISSED]
        passed, undecided = self.kept[Seen.PASSED], self.kept[Seen.UNDECIDED]
        bad = Kept(failed.count + missed.count, failed.first + missed.first)
        shown = bad if bad.count else passed if passed.count else undecided
        decided = passed.count + bad.count
        parts = shown.first[:MAX_EVIDENCE]
        if shown.count > MAX_EVIDENCE:
            parts.append(f"… {shown.count - MAX_EVIDENCE} more")
        if decided > 1:
            parts.insert(0, f"{bad.count} of {decided} failed" if bad.count else f"{decided} ok")
        if undecided.count and shown is not undecided:
            parts.append(f"{undecided.count} not decidable from this recording")
        return "; ".join(parts)


def combine(verdicts: Iterable[Verdict]) -> Verdict:
    """The verdict of several recordings read together, from each one's verdict: the
    worst of them, where an undecided instance outweighs none."""
    worst = (Verdict.FAIL, Verdict.WARNING, Verdict.PASS, Verdict.UNDECIDABLE)
    found = set(verdicts)
    return next((v for v in worst if v in found), Verdict.NOT_EXERCISED)


#: Every client's tally of every rule that had an instance, by (client, rule id).
Tallies = dict[tuple[str, str], Tally]


def judge(clients: Sequence[str], tallies: Tallies) -> list[list[str | None]]:
    """The table: a row per client and rule."""
    rows: list[list[str | None]] = []
    for client in clients:
        for rule in RULES:
            tally = tallies.get((client, rule.id)) or Tally()
            rows.append(
                [
                    client,
                    rule.id,
                    tally.verdict.value,
                    rule.level.value,
                    f"{rule.spec} {rule.section}",
                    tally.evidence() or None,
                ]
            )
    return rows


def tallies(engine: Engine, filters: Filters, session: str | None = None) -> Tallies:
    """Every rule's instances, counted (`tallied_sql`); a failure's evidence about an
    incident also says what the client did next (hang forensics)."""
    found: list[tuple[Rule, str, Seen, int, int, int, str]] = []
    for rule in RULES:
        for client, seen, n, src, record_id, evidence in engine.rows(
            tallied_sql(rule, filters, session)
        ):
            found.append((rule, client, Seen(seen), n, src, record_id, evidence))
    # Only the failures shown are followed: a stall or a request left in flight is said
    # instead of leaving the silence unsaid.
    incidents = {
        (src, record_id)
        for rule, _, seen, _, src, record_id, _ in found
        if rule.id in ABOUT_INCIDENTS and seen in (Seen.FAILED, Seen.MISSED)
    }
    then = (
        {
            (a.src, a.id): forensics.phrase(a)
            for a in forensics.aftermaths(engine, base(filters), filters, about=incidents)
        }
        if incidents
        else {}
    )
    out: Tallies = {}
    for rule, client, seen, n, src, record_id, evidence in found:
        kept = out.setdefault((client, rule.id), Tally()).kept[seen]
        kept.count = n
        failed = rule.id in ABOUT_INCIDENTS and seen in (Seen.FAILED, Seen.MISSED)
        aftermath = then.get((src, record_id)) if failed else None
        kept.first.append(evidence if aftermath is None else f"{evidence} ({aftermath})")
    return out


def verdict_rows(engine: Engine, filters: Filters) -> list[list[str | None]]:
    clients = [row[0] for row in engine.rows(clients_sql(filters))]
    counted = tallies(engine, filters)
    # A rule's instance names its client: never drop it for want of a listed client.
    named = {client for client, _ in counted}
    return judge(sorted(set(clients) | named), counted)
