"""`hangs`: each stall in an agent's run, and who was being waited on.

A recording made by a proxy that sees both the model API and the MCP server (issue 28,
docs/model-turns.md) holds both halves of the agent's turn: `model_turn` records and the
MCP records. Every record is an interval, from its `ts` to `ts` + `durationMs`; its two
ends are *moments of traffic* (something was sent, or an answer ended). A *stall* is a
silence of at least `--min-s` between two consecutive moments of one input, and who was
waited on is what spanned it:

- `model`: a model request was in flight the whole time (no answer yet, or a stream that
  had not ended);
- `mcp_server`: an MCP request (a `tools/call`, …) was in flight without its answer. An
  answer stream whose last event (`lastEventMs`, a progress notification) came during the
  silence is named *slow*, not hung; one whose last event came before it is hung;
- `agent`: nothing was in flight: the model and the server had both answered and the
  agent sent nothing (a permission prompt, a local tool, an agent stuck after a result);
- `none`: nothing was in flight and the model's last answer ended its turn (no tool call
  asked for): the agent was waiting for its user, which is no hang;
- `unknown`: nothing was in flight and the input holds no model traffic at all, so the
  silence may be the agent's or its unseen model's.

A GET stream (a standby stream, open for the session's life) and `subscriptions/listen`
are never what is waited on. One query (`hangs_sql`) finds the silences and what spanned
each; `hang_rows` phrases them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Final

from mcp_layers_core.record import Kind, NoteCode

from .filters import Filters
from .load import Engine
from .queries import matched
from .render import Cell, Seconds
from .table import SOURCE, TABLE
from .terms import ENDED_MS, STARTED_MS, sql, sql_in

#: A silence this long is a stall, here and in the forensics after an incident.
STALL_MS: Final = 10_000

#: `--min-s`'s default.
DEFAULT_MIN_S: Final = STALL_MS / 1000

HANG_HEADERS: Final = ("input", "since", "seconds", "waited_on", "in_flight", "detail")

#: The record columns `hangs_sql` reads (besides the filters' own).
HANG_COLUMNS: Final = (
    "kind",
    "ts",
    "durationMs",
    "method",
    "tool",
    "outcome",
    "sse",
    "lastEventMs",
    "modelTurn",
    "endReason",
    "notes",
)


class WaitedOn(StrEnum):
    """Who a silence waited on (the module's docstring says when each is named)."""

    MODEL = "model"
    MCP_SERVER = "mcp_server"
    AGENT = "agent"
    NONE = "none"
    UNKNOWN = "unknown"


#: The kinds of records that are moments of traffic and may be in flight.
_TRAFFIC: Final = (Kind.REQUEST, Kind.NOTIFICATION, Kind.RESPONSE, Kind.MODEL_TURN)


def hangs_sql(filters: Filters, min_ms: int) -> str:
    """One row per silence of at least `min_ms`: input, start and end (epoch ms), what
    spanned it, and the last model turn before it."""
    subscription = f"list_contains(coalesce(notes, []), {sql(NoteCode.SUBSCRIPTION)})"
    return f"""WITH r AS (
  -- Scalars only: the structs and lists they come from are wide, and every later step
  -- (the gaps' self-join above all) would carry them.
  SELECT {SOURCE} AS src, id, kind, method, tool, outcome, lastEventMs,
    sse.events AS events, sse.final AS final,
    modelTurn.provider AS provider, modelTurn.model AS model,
    modelTurn.complete AS complete, modelTurn.ttftMs AS ttft,
    array_length(modelTurn.toolCalls) AS calls, modelTurn.stopReason AS stop,
    {subscription} AS subscription,
    {STARTED_MS} AS t0,
    {ENDED_MS} AS t1
  FROM {TABLE}
  WHERE ts IS NOT NULL AND (kind = {sql(Kind.MODEL_TURN)} OR {matched(filters)})
    AND kind IN {sql_in(*_TRAFFIC, Kind.SESSION_END)}
), moments AS (
  -- A session's end counts by its end alone: an idle end's `ts` is its last traffic.
  SELECT DISTINCT src, t FROM (
    SELECT src, t0 AS t FROM r WHERE kind <> {sql(Kind.SESSION_END)}
    UNION ALL SELECT src, t1 FROM r)
  WHERE t IS NOT NULL
), gaps AS (
  SELECT src, t AS a, nt AS b FROM (
    SELECT src, t, lead(t) OVER (PARTITION BY src ORDER BY t) AS nt FROM moments)
  WHERE nt - t >= {min_ms}
), flight AS (
  -- Spans started in the same millisecond come in the order they were sent (the record
  -- id). Input order (`_seq`) would number every record first, a window over the whole
  -- input: at 4M records the command took 23.2 s with it and 14.1 s without.
  SELECT g.src, g.a, g.b,
    list(struct_pack(id := f.id, kind := f.kind, method := f.method, tool := f.tool,
      outcome := f.outcome, events := f.events, final := f.final,
      last_event := f.lastEventMs, provider := f.provider, model := f.model,
      complete := f.complete, ttft := f.ttft, started := f.t0)
      ORDER BY f.t0, f.id, f.t1, f.kind, f.method, f.tool) AS spans
  FROM gaps g JOIN r f ON f.src = g.src AND f.kind IN {sql_in(Kind.REQUEST, Kind.MODEL_TURN)}
    AND f.t0 <= g.a AND f.t1 >= g.b AND NOT f.subscription
  GROUP BY g.src, g.a, g.b
), last_turn AS (
  SELECT g.src, g.a, g.b,
    arg_max(struct_pack(id := t.id, calls := t.calls, stop := t.stop,
      complete := t.complete), t.t1) AS turn
  FROM gaps g JOIN r t ON t.src = g.src AND t.kind = {sql(Kind.MODEL_TURN)} AND t.t1 <= g.a
  GROUP BY g.src, g.a, g.b
), models AS (
  SELECT src, count(*) AS n FROM r WHERE kind = {sql(Kind.MODEL_TURN)} GROUP BY src
)
SELECT g.src, g.a, g.b, f.spans, l.turn, coalesce(m.n, 0) AS model_turns
FROM gaps g
LEFT JOIN flight f ON f.src = g.src AND f.a = g.a
LEFT JOIN last_turn l ON l.src = g.src AND l.a = g.a
LEFT JOIN models m ON m.src = g.src
ORDER BY g.src, g.a"""


def _iso(ms: int) -> str:
    return (
        datetime.fromtimestamp(ms / 1000, UTC)
        .isoformat(timespec="milliseconds")
        .replace("+00:00", "Z")
    )


def _span(s: dict[str, Any], a: int) -> str:
    """One record in flight, as a reader wants it named."""
    since = f"{(a - s['started']) / 1000:.1f} s before"
    if s["kind"] == Kind.MODEL_TURN:
        what = f"#{s['id']} model {s['provider'] or '?'}"
        if s["model"]:
            what += f" {s['model']}"
        return f"{what} (asked {since})"
    what = f"#{s['id']} {s['method'] or '?'}"
    if s["tool"]:
        what += f" {s['tool']}"
    return f"{what} (sent {since})"


def classify(
    spans: list[dict[str, Any]] | None,
    turn: dict[str, Any] | None,
    model_turns: int,
    b: int,
    a: int | None = None,
) -> tuple[WaitedOn, str]:
    """(waited_on, detail) of one silence, from `a` to `b` (epoch ms)."""
    spans = spans or []
    model = [s for s in spans if s["kind"] == Kind.MODEL_TURN]
    mcp = [s for s in spans if s["kind"] != Kind.MODEL_TURN]
    if model:
        s = model[-1]
        output_at = None if s["ttft"] is None else s["started"] + s["ttft"]
        if output_at is None:
            detail = "no output"
        elif output_at >= b - 1000:  # came as the silence ended (within a second)
            detail = f"no output during the silence (the first came {s['ttft'] / 1000:.1f} s in)"
        else:
            detail = f"output came {s['ttft'] / 1000:.1f} s in, then the stream went silent"
        if s["complete"] is False:
            detail += "; the answer never completed"
        return WaitedOn.MODEL, detail
    if mcp:
        s = mcp[-1]
        events = s["events"] or 0
        if s["final"] is not True and events > 0:
            return WaitedOn.MCP_SERVER, _progress(s, events, a)
        end = s["outcome"] or "no answer"
        return WaitedOn.MCP_SERVER, f"no answer during the silence (finally: {end})"
    if model_turns == 0:
        return WaitedOn.UNKNOWN, "nothing in flight, and no model traffic in this input"
    if turn is not None and turn["calls"] == 0 and turn["complete"]:
        said = f"the model's last answer (#{turn['id']}, {turn['stop']}) ended its turn"
        return WaitedOn.NONE, said
    if turn is not None and turn["calls"]:
        said = f"every answer was in; model turn #{turn['id']} had asked for a tool"
        return WaitedOn.AGENT, said
    return WaitedOn.AGENT, "every answer was in, and the agent sent nothing"


@dataclass(frozen=True, slots=True)
class Silence:
    """One stall: a silence of an input's traffic and who was waited on through it."""

    src: int
    #: Its start and end, epoch ms.
    start_ms: int
    end_ms: int
    waited_on: WaitedOn
    detail: str
    #: What was in flight, phrased (None: nothing).
    in_flight: str | None

    @property
    def ms(self) -> int:
        return self.end_ms - self.start_ms


def silences(engine: Engine, filters: Filters, min_ms: int) -> list[Silence]:
    """Every silence of at least `min_ms`, input by input, in time order."""
    out: list[Silence] = []
    for src, a, b, spans, turn, model_turns in engine.rows(hangs_sql(filters, min_ms)):
        waited_on, detail = classify(spans, turn, int(model_turns), int(b), int(a))
        in_flight = "; ".join(_span(s, int(a)) for s in spans or []) or None
        out.append(Silence(int(src), int(a), int(b), waited_on, detail, in_flight))
    return out


def _progress(s: dict[str, Any], events: int, a: int | None) -> str:
    """An unanswered call whose stream carried events: slow if one came during the
    silence, hung if the last came before it (`lastEventMs`; older recordings lack it)."""
    last = s.get("last_event")
    if last is None or a is None:
        return f"slow, not hung: {events} events came on the answer stream"
    into = s["started"] + last - a
    if into >= 1000:  # a second into the silence: not the moment that began it
        return f"slow, not hung: its last of {events} events came {into / 1000:.1f} s in"
    before = max(0.0, -into / 1000)
    said = f"the last of {events} came {before:.1f} s before it"
    return f"no answer, and no event during the silence ({said})"


def hang_rows(engine: Engine, filters: Filters, min_s: float, names: list[str]) -> list[list[Cell]]:
    """`hangs`' rows, input by input, in time order (`names`: the inputs', by index)."""
    return [
        [
            names[s.src] if 0 <= s.src < len(names) else str(s.src),
            _iso(s.start_ms),
            Seconds(s.ms / 1000),
            str(s.waited_on),
            s.in_flight,
            s.detail,
        ]
        for s in silences(engine, filters, int(min_s * 1000))
    ]
