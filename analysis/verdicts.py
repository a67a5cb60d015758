"""`verdicts`: did each client do what the spec asks, judged from the traffic it sent.

Every requirement is a `Rule` (its id, the spec version and section it comes from, MUST
or SHOULD) and one SQL query over the `records` table that lists the requirement's
*instances*: each time a client was in the situation the requirement is about (a 404 on
its session, a stream cut after it carried event ids, a POST after initialisation), with
`ok` TRUE when the client did the right thing, FALSE when it did not, and NULL when the
recording cannot tell (an older recording without `requestHeaders`, say). Per client and
rule: FAIL when any instance failed, PASS when one passed and none failed, NOT_EXERCISED
when there was none. Ids are the conformance suite's where it has the check
(`client-sse-last-event-id`, …), and ids of the same style for the rest.

Times in the evidence are the records' `ts`; a "gap" runs from the end of one record
(`ts` + `durationMs`) to the start of the next.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Final

from . import forensics, queries
from .filters import Filters
from .load import Engine
from .table import SEQUENCE, SOURCE, TABLE


class Verdict(StrEnum):
    PASS = "PASS"
    FAIL = "FAIL"
    NOT_EXERCISED = "NOT_EXERCISED"


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    spec: str  # the first spec version with the requirement
    section: str
    level: str  # MUST | SHOULD
    requirement: str
    #: The query's instances: columns client, ok, id, ts, evidence.
    sql: str


#: Columns verdicts read.
COLUMNS: Final = (
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
    "client",
)

#: Tolerance on a measured wait: timestamps are per millisecond and the proxy sits between
#: (the conformance suite's `client-sse-retry-timing` allows the same 50 ms early).
WAIT_TOLERANCE_MS: Final = 50

#: A reconnection later than this many times the `retry:` delay ignores it (the suite's
#: "very late": the client uses a backoff of its own).
VERY_LATE_FACTOR: Final = 2

#: A session that ended this soon after its GET stream was cut (or within twice the
#: stream's `retry:`) had no need to reopen it: the client was leaving.
RECONNECT_GRACE_MS: Final = 2000

#: How many instances a verdict's evidence names.
MAX_EVIDENCE: Final = 3


def base(filters: Filters) -> str:
    """The records with what every rule reads: the session's client, start and end in ms,
    the last HTTP status, whether the filters match, and the input order."""
    return f"""r AS (
  SELECT {SOURCE} AS src, {SEQUENCE} AS seq, id, kind, ts, session, method, outcome,
    protocolVersion AS pv, httpStatuses, sse, retryOrigin, retryOf, retryDelayMs,
    retryAfterMs, retryAfterHonored, previousSession, endReason, requestHeaders, accept,
    eventIds, retryMs, notes, jsonrpc, negotiation, client, scenario, injected,
    coalesce(max(client) OVER (PARTITION BY {SOURCE}, session), '(unknown client)') AS cl,
    epoch_ms(TRY_CAST(ts AS TIMESTAMP)) AS t0,
    epoch_ms(TRY_CAST(ts AS TIMESTAMP)) + CAST(coalesce(durationMs, 0) AS BIGINT) AS t1,
    epoch_ms(TRY_CAST(ts AS TIMESTAMP))
      + CAST(coalesce(streamClosedMs, durationMs, 0) AS BIGINT) AS tcut,
    httpStatuses[len(httpStatuses)] AS status,
    coalesce(list_contains(notes, 'proxy_shutdown'), FALSE) AS shutdown,
    -- a POST's stream that ended before its record did (the request waited on for a
    -- resumption): not cut by the proxy stopping, even when the record says it stopped
    coalesce(streamClosedMs < durationMs, FALSE) AS closed_early,
    {queries.matched(filters)} AS m
  FROM {TABLE}
)"""


def _at(alias: str) -> str:
    """SQL: `#id at hh:mm:ss.mmm` of a record."""
    return f"'#' || {alias}.id || ' at ' || substr({alias}.ts, 12, 12)"


# A stream the client lost before its answer: a POST's SSE answer without its final
# response, or a GET stream, that carried event ids; ended by the server or the network,
# not by the proxy stopping.
_CUT = """(c.eventIds AND (NOT c.shutdown OR c.closed_early) AND c.sse IS NOT NULL
   AND ((c.kind = 'request' AND (NOT c.sse.final OR c.sse.resumed)) OR c.kind = 'stream'))"""

# The first GET stream of the same session opened after the cut stream ended.
_NEXT_GET = """(SELECT g.id, g.ts, g.t0, g.requestHeaders FROM r g
   WHERE g.src = c.src AND g.session = c.session AND g.kind = 'stream' AND g.t0 >= c.tcut - 5
     AND g.seq <> c.seq
   ORDER BY g.t0, g.seq LIMIT 1)"""


def _rules() -> tuple[Rule, ...]:
    cut_next = f"""
  SELECT c.src, c.cl AS client, c.id, c.ts, c.m, c.tcut AS t1, c.retryMs, n.id AS next_id,
    n.ts AS next_ts,
    n.t0 AS next_t0, n.requestHeaders AS next_headers, c.sse.final AS final, c.sse."end" AS how,
    coalesce(c.sse.resumed, FALSE) AS resumed
  FROM r c LEFT JOIN LATERAL {_NEXT_GET} n ON TRUE
  WHERE {_CUT}"""
    return (
        Rule(
            "client-session-renegotiate-on-404",
            "2025-03-26",
            "Transport: Session Management",
            "MUST",
            "after a 404 on its session, start a new session: `initialize` without a session id",
            f"""
SELECT l.src, l.cl AS client,
  CASE WHEN i.id IS NULL THEN FALSE
       WHEN i.requestHeaders IS NULL THEN TRUE
       ELSE NOT list_contains(i.requestHeaders, 'mcp-session-id') END AS ok,
  l.id, l.ts,
  'session lost ' || {_at("l")} || CASE WHEN i.id IS NULL
    THEN ': no initialize followed'
    ELSE ': initialize ' || {_at("i")} ||
      CASE WHEN list_contains(i.requestHeaders, 'mcp-session-id')
        THEN ' still carried a session id' ELSE '' END END AS evidence
FROM r l LEFT JOIN LATERAL (
  SELECT i.id, i.ts, i.requestHeaders FROM r i
  WHERE i.src = l.src AND i.seq > l.seq AND i.kind = 'request' AND i.method = 'initialize'
    AND (i.previousSession = l.session OR i.cl = l.cl)
  ORDER BY i.seq LIMIT 1) i ON TRUE
WHERE l.m AND l.kind = 'session_end' AND l.endReason = 'not_found'""",
        ),
        Rule(
            "client-session-continues-after-renegotiation",
            "2025-03-26",
            "Transport: Session Management",
            "SHOULD",
            "after re-initialising, carry on in the new session (the work the 404 interrupted)",
            f"""
SELECT i.src, i.cl AS client, n.id IS NOT NULL AS ok, i.id, i.ts,
  'new session ' || {_at("i")} || CASE WHEN n.id IS NULL
    THEN ': no request followed in it'
    ELSE ': then ' || coalesce(n.method, '?') || ' ' || {_at("n")} END AS evidence
FROM r i LEFT JOIN LATERAL (
  SELECT n.id, n.ts, n.method FROM r n
  WHERE n.src = i.src AND n.session = i.session AND n.seq > i.seq AND n.kind = 'request'
    AND n.method <> 'initialize'
  ORDER BY n.seq LIMIT 1) n ON TRUE
WHERE i.m AND i.kind = 'request' AND i.method = 'initialize' AND i.outcome = 'SUCCESS'
  AND (i.previousSession IS NOT NULL OR EXISTS (
    SELECT 1 FROM r l WHERE l.src = i.src AND l.seq < i.seq AND l.cl = i.cl
      AND l.kind = 'session_end' AND l.endReason = 'not_found'))""",
        ),
        Rule(
            "client-sse-last-event-id",
            "2025-03-26",
            "Transport: Resumability and Redelivery",
            "SHOULD",
            "resume a lost stream that had event ids with a GET carrying `Last-Event-ID`",
            f"""
SELECT src, client,
  CASE WHEN next_id IS NULL OR next_headers IS NULL THEN NULL
       ELSE list_contains(next_headers, 'last-event-id') END AS ok,
  id, ts,
  'stream #' || id || ' at ' || substr(ts, 12, 12) || ' ended ' || how ||
    CASE WHEN next_id IS NULL THEN ', no GET followed'
         WHEN list_contains(next_headers, 'last-event-id')
           THEN '; GET #' || next_id || ' carried Last-Event-ID'
         ELSE '; GET #' || next_id || ' without Last-Event-ID' END AS evidence
FROM ({cut_next}) WHERE m""",
        ),
        Rule(
            "client-sse-retry-timing",
            "2025-11-25",
            "Transport: Resumability and Redelivery (polling)",
            "MUST",
            "wait the stream's SSE `retry:` delay before reconnecting (not less, and not over "
            "twice as long: a backoff of its own ignores it)",
            f"""
SELECT src, client,
  CASE WHEN next_id IS NULL THEN NULL
       ELSE next_t0 - t1 >= retryMs - {WAIT_TOLERANCE_MS}
         AND next_t0 - t1 <= retryMs * {VERY_LATE_FACTOR} END AS ok,
  id, ts,
  'stream #' || id || ' asked retry ' || retryMs || ' ms; ' ||
    CASE WHEN next_id IS NULL THEN 'no GET followed'
         ELSE 'GET #' || next_id || ' came after ' || (next_t0 - t1) || ' ms' END AS evidence
FROM ({cut_next}) WHERE m AND retryMs IS NOT NULL""",
        ),
        Rule(
            "client-sse-graceful-reconnect",
            "2025-11-25",
            "Transport: Resumability and Redelivery (polling)",
            "MUST",
            "when the server closes a POST's stream (event ids, no answer yet), reconnect "
            "with GET to receive the answer",
            f"""
SELECT src, client, next_id IS NOT NULL AS ok, id, ts,
  'stream #' || id || ' at ' || substr(ts, 12, 12) || ' closed (' || how || ') before '
    || 'its answer; ' || CASE WHEN next_id IS NULL THEN 'no GET followed'
    ELSE 'GET #' || next_id || ' after ' || (next_t0 - t1) || ' ms' END AS evidence
FROM ({cut_next}) WHERE m AND (NOT final OR resumed) AND how IN ('complete', 'eof')
  AND id IN (SELECT id FROM r WHERE kind = 'request')""",
        ),
        Rule(
            "client-sse-reconnect-after-cut",
            "2025-11-25",
            "Transport: Listening for Messages from the Server; Resumability (polling)",
            "SHOULD",
            "when the server or a middlebox ends its GET stream while the session goes on, "
            "open it again with GET",
            f"""
SELECT c.src, c.cl AS client, n.id IS NOT NULL AS ok, c.id, c.ts,
  'GET stream ' || {_at("c")} || CASE WHEN c.injected.action = 'idle_cut'
    THEN ' cut by the proxy (' || c.injected.rule || ')' ELSE ' ended (' || c.sse."end" || ')'
    END || ' after ' || CAST(round(c.tcut - c.t0) AS BIGINT) || ' ms; ' ||
    CASE WHEN n.id IS NULL THEN 'no GET followed'
    ELSE 'GET #' || n.id || ' after ' || (n.t0 - c.tcut) || ' ms' ||
      CASE WHEN list_contains(n.requestHeaders, 'last-event-id')
        THEN ' with Last-Event-ID' ELSE '' END END AS evidence
FROM r c LEFT JOIN LATERAL {_NEXT_GET} n ON TRUE
WHERE c.m AND c.kind = 'stream' AND c.status BETWEEN 200 AND 299 AND NOT c.shutdown
  AND c.sse IS NOT NULL AND coalesce(c.pv, '') >= '2025-03-26'
  -- Ended by the far side. A GET that ended `error` unmarked may be the client's own
  -- hang-up: the recording cannot tell, so it is not judged.
  AND (c.sse."end" IN ('eof', 'complete') OR coalesce(c.injected.action, '') = 'idle_cut')
  AND NOT EXISTS (
    SELECT 1 FROM r e WHERE e.src = c.src AND e.session = c.session
      AND e.kind = 'session_end' AND e.t0 <= c.tcut
        + greatest({RECONNECT_GRACE_MS}, coalesce(c.retryMs, 0) * {VERY_LATE_FACTOR}))""",
        ),
        Rule(
            "client-retry-after-honored",
            "2025-03-26",
            "Transport (HTTP semantics, RFC 9110 §10.2.3 Retry-After)",
            "SHOULD",
            "after a 429/503 with `Retry-After`, wait at least that long before retrying",
            f"""
SELECT r.src, r.cl AS client, r.retryAfterHonored AS ok, r.id, r.ts,
  {_at("r")} || ' retried #' || coalesce(CAST(r.retryOf AS VARCHAR), '?') || ' after '
    || coalesce(CAST(round(r.retryDelayMs) AS BIGINT) || ' ms', '?') || ', asked '
    || coalesce(CAST(p.retryAfterMs AS VARCHAR) || ' ms', '?') AS evidence
FROM r LEFT JOIN r p ON p.src = r.src AND p.id = r.retryOf
WHERE r.m AND r.retryAfterHonored IS NOT NULL""",
        ),
        Rule(
            "client-protocol-version-header",
            "2025-06-18",
            "Transport: Protocol Version Header",
            "MUST",
            "send `MCP-Protocol-Version` on every request after initialisation",
            f"""
SELECT src, cl AS client, list_contains(requestHeaders, 'mcp-protocol-version') AS ok, id, ts,
  {_at("r")} || ' ' || coalesce(method, kind) || ' (' || pv || ') ' ||
    CASE WHEN list_contains(requestHeaders, 'mcp-protocol-version') THEN 'carried it'
         ELSE 'without MCP-Protocol-Version' END AS evidence
FROM r
WHERE m AND requestHeaders IS NOT NULL AND pv >= '2025-06-18'
  AND coalesce(method, '') <> 'initialize'
  AND (kind IN ('request', 'notification', 'response', 'stream')
       OR (kind = 'session_end' AND len(requestHeaders) > 0))""",
        ),
        Rule(
            "client-accept-json-and-sse",
            "2025-03-26",
            "Transport: Sending Messages to the Server",
            "MUST",
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
  AND kind IN ('request', 'notification', 'response')""",
        ),
        Rule(
            "client-get-accept-sse",
            "2025-03-26",
            "Transport: Listening for Messages from the Server",
            "MUST",
            "a GET stream's `Accept` lists `text/event-stream`",
            f"""
SELECT src, cl AS client, list_contains(accept, 'text/event-stream') AS ok, id, ts,
  'GET ' || {_at("r")} || ' Accept: ' ||
    CASE WHEN len(accept) = 0 THEN '(none)' ELSE array_to_string(accept, ', ') END
    AS evidence
FROM r WHERE m AND kind = 'stream' AND requestHeaders IS NOT NULL AND pv >= '2025-03-26'""",
        ),
        Rule(
            "client-get-405-not-fatal",
            "2025-03-26",
            "Transport: Listening for Messages from the Server",
            "MUST",
            "a 405 on the GET stream means no stream is offered: carry on with POSTs",
            f"""
SELECT g.src, g.cl AS client, n.id IS NOT NULL AS ok, g.id, g.ts,
  'GET ' || {_at("g")} || ' answered 405; ' || CASE WHEN n.id IS NULL
    THEN 'no POST followed' ELSE 'then ' || coalesce(n.method, n.kind) || ' ' || {_at("n")}
    END AS evidence
FROM r g LEFT JOIN LATERAL (
  SELECT n.id, n.ts, n.method, n.kind FROM r n
  WHERE n.src = g.src AND n.session = g.session AND n.seq > g.seq AND n.kind = 'request'
  ORDER BY n.seq LIMIT 1) n ON TRUE
WHERE g.m AND g.kind = 'stream' AND g.status = 405""",
        ),
        Rule(
            "client-initialized-notification",
            "2024-11-05",
            "Lifecycle: Initialization",
            "MUST",
            "after a successful `initialize`, send `notifications/initialized`",
            f"""
SELECT i.src, i.cl AS client, n.id IS NOT NULL AS ok, i.id, i.ts,
  'initialize ' || {_at("i")} || CASE WHEN n.id IS NULL
    THEN ': no notifications/initialized followed'
    ELSE ': initialized ' || {_at("n")} END AS evidence
FROM r i LEFT JOIN LATERAL (
  SELECT n.id, n.ts FROM r n
  WHERE n.src = i.src AND n.session = i.session AND n.seq > i.seq
    AND n.kind = 'notification' AND n.method = 'notifications/initialized'
  ORDER BY n.seq LIMIT 1) n ON TRUE
WHERE i.m AND i.kind = 'request' AND i.method = 'initialize' AND i.outcome = 'SUCCESS'
  AND coalesce(i.pv, '') NOT LIKE '2026%'""",
        ),
        Rule(
            "client-request-ids-unique",
            "2024-11-05",
            "Basic: Requests",
            "MUST",
            "a request id is not reused within a session (a resend of the same request aside)",
            """
SELECT src, any_value(cl) AS client, max(n) = 1 AS ok, min(first_id) AS id, min(first_ts) AS ts,
  'session ' || session || CASE WHEN max(n) = 1 THEN ': ' || sum(n) || ' ids, all distinct'
    ELSE ': id ' || arg_max(rid, n) || ' used by ' || arg_max(ids, n) END AS evidence
FROM (
  SELECT src, session, any_value(cl) AS cl, CAST(jsonrpc.id AS VARCHAR) AS rid,
    count(*) AS n, min(id) AS first_id, min(ts) AS first_ts,
    string_agg('#' || id, ', ' ORDER BY seq) AS ids
  FROM r
  WHERE m AND kind = 'request' AND session LIKE 's-%' AND jsonrpc IS NOT NULL
    AND coalesce(retryOrigin, 'none') <> 'resend'
  GROUP BY src, session, CAST(jsonrpc.id AS VARCHAR))
GROUP BY src, session""",
        ),
        Rule(
            "client-session-delete",
            "2025-03-26",
            "Transport: Session Management",
            "SHOULD",
            "end a session it no longer needs with HTTP DELETE",
            f"""
SELECT e.src, e.cl AS client,
  CASE WHEN e.endReason = 'not_found' THEN NULL
       ELSE e.endReason = 'delete' OR e.endReason IS NULL END AS ok, e.id, e.ts,
  'session ' || e.session || ' ended ' || {_at("e")} || ': ' ||
    CASE WHEN e.endReason = 'delete' OR e.endReason IS NULL THEN 'DELETE'
         ELSE e.endReason || ', no DELETE' END AS evidence
FROM r e
WHERE e.m AND e.kind = 'session_end' AND e.session LIKE 's-%'
  AND (e.endReason IS NOT NULL OR NOT EXISTS (
    SELECT 1 FROM r d WHERE d.src = e.src AND d.session = e.session
      AND d.kind = 'session_end' AND d.endReason IS NOT NULL))""",
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
        "client-sse-reconnect-after-cut",
        "client-session-renegotiate-on-404",
        "client-session-continues-after-renegotiation",
        "client-retry-after-honored",
        "client-get-405-not-fatal",
    }
)


def rule_sql(rule: Rule, filters: Filters) -> str:
    """One rule's instances: client, ok, id, ts, evidence, in input order."""
    return (
        f"WITH {base(filters)}\nSELECT client, ok, src, id, evidence FROM ({rule.sql})\n"
        "ORDER BY ts, id"
    )


def clients_sql(filters: Filters) -> str:
    return f"""WITH {base(filters)}
SELECT DISTINCT cl FROM r WHERE m AND kind IN ('request', 'notification', 'stream')
ORDER BY cl"""


@dataclass(slots=True)
class Tally:
    """One client's instances of one rule."""

    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    undecided: int = 0

    @property
    def verdict(self) -> Verdict:
        if self.failed:
            return Verdict.FAIL
        return Verdict.PASS if self.passed else Verdict.NOT_EXERCISED

    def evidence(self) -> str:
        shown = self.failed if self.failed else self.passed
        total = len(self.passed) + len(self.failed)
        parts = shown[:MAX_EVIDENCE]
        if len(shown) > MAX_EVIDENCE:
            parts.append(f"… {len(shown) - MAX_EVIDENCE} more")
        if total > 1:
            parts.insert(
                0, f"{len(self.failed)} of {total} failed" if self.failed else f"{total} ok"
            )
        if self.undecided:
            parts.append(f"{self.undecided} not decidable from this recording")
        return "; ".join(parts)


def judge(
    clients: Sequence[str], instances: dict[str, list[tuple[str, bool | None, str]]]
) -> list[list[str | None]]:
    """The table: a row per client and rule, from each rule's (client, ok, evidence)."""
    rows: list[list[str | None]] = []
    for client in clients:
        for rule in RULES:
            tally = Tally()
            for who, ok, evidence in instances.get(rule.id, ()):
                if who != client:
                    continue
                if ok is None:
                    tally.undecided += 1
                elif ok:
                    tally.passed.append(evidence)
                else:
                    tally.failed.append(evidence)
            rows.append(
                [
                    client,
                    rule.id,
                    tally.verdict.value,
                    rule.level,
                    f"{rule.spec} {rule.section}",
                    tally.evidence() or None,
                ]
            )
    return rows


def verdict_rows(engine: Engine, filters: Filters) -> list[list[str | None]]:
    clients = [row[0] for row in engine.rows(clients_sql(filters))]
    # What the client did after each failure or cut stream: a failed instance about one
    # says so (a stall, a request left in flight) instead of leaving the silence unsaid.
    then = {(a.src, a.id): forensics.phrase(a) for a in forensics.aftermaths(engine, base(filters))}
    instances: dict[str, list[tuple[str, bool | None, str]]] = {}
    for rule in RULES:
        found = []
        for client, ok, src, record_id, evidence in engine.rows(rule_sql(rule, filters)):
            aftermath = then.get((src, record_id)) if rule.id in ABOUT_INCIDENTS else None
            if ok is False and aftermath is not None:
                evidence = f"{evidence} ({aftermath})"
            found.append((client, ok, evidence))
        instances[rule.id] = found
    return judge(clients, instances)
