"""Fault injection, the pure part: rules, their parsing, which call they hit, what to send.

Theory of operation. A rules file (JSON) or a one-line rule is parsed into frozen
`FaultRule`s; bad input raises `FaultRuleError`, whose message names the source, the
line and the reason and says what to write instead (the fault addon refuses to start
with it). `FaultPlan(rules, seed)` holds the only mutable state: per-scope call
counters, the sessions a `session_expired` rule ended, and one seeded `random.Random`
per rule. For each request the fault addon builds a `RequestView` (see `request_view`)
and asks `plan.decide(view)`; `None` means "leave this exchange alone", otherwise the
`Decision` says exactly what to do:

- `Effect.REPLY`: answer with `decision.reply` (status, headers, body bytes, built here
  from the request: its JSON-RPC id with its JSON type, the right content type) and do
  not call the upstream;
- `Effect.DROP`: close the client connection without an answer (after the upstream has
  handled the request when `drop_after_upstream`);
- `Effect.ALTER`: call the upstream, but rewrite the request (`strip_continuation`),
  delay the response (`delay_headers_ms`, `delay_events_ms`), cut its event stream
  (`decision.cutter(rpc_id)` returns the `SseCutter` that does it), or close the client's
  connection once the event stream has been silent `idle_cut_ms` (the adapter keeps
  that timer: this package keeps no clock).

Nothing here does I/O, keeps a clock or raises on what a peer sends: `request_view`,
`strip_continuation`, `decide` and `SseCutter` accept any bytes. The format and every
decision are documented in docs/faults.md.

Four modules, each importing only the others' public names; this package re-exports
them all, so callers write `faults.FaultPlan`, `faults.parse_rules` and so on:

- `rules`: the rule model (`FaultRule`, `Match`, `Which`, `Scope`, the actions),
  `FaultRuleError`, and the compact JSON fault bodies are written in;
- `parse`: rules validated and read from a rules file (`parse_rules`) or the inline
  form (`parse_inline`), and the named presets (`PRESETS`, `preset`);
- `plan`: `RequestView`, `request_view`, `strip_continuation`, `Reply`, and `FaultPlan`,
  `Decision`, `Effect`: which rule acts and how;
- `cutter`: `SseCutter` and `Cut`, which cut an event stream at the event ends the SSE
  parser reports.
"""

from __future__ import annotations

from .cutter import NO_ID as NO_ID
from .cutter import Cut, SseCutter
from .parse import INLINE_SOURCE as INLINE_SOURCE
from .parse import PRESETS, parse_inline, parse_rules, preset, preset_names
from .plan import (
    GET,
    GET_RESUME,
    MAX_EXPIRED_SESSIONS,
    MAX_FAULT_COUNTERS,
    REQUEST_STATE_PREFIX,
    RETRY_AFTER_DATE,
    Decision,
    Effect,
    FaultPlan,
    Reply,
    RequestView,
    request_view,
    strip_continuation,
)
from .rules import ABSENT as ABSENT
from .rules import (
    ACTIONS,
    Delay,
    Drop,
    FaultRule,
    FaultRuleError,
    HttpStatus,
    IdleCut,
    InputRequired,
    JsonRpcError,
    Malformed,
    Match,
    RpcError,
    Scope,
    SessionExpired,
    SseTruncate,
    ToolError,
    Which,
)
from .rules import Action as Action

__all__ = [
    "ACTIONS",
    "GET",
    "GET_RESUME",
    "MAX_EXPIRED_SESSIONS",
    "MAX_FAULT_COUNTERS",
    "PRESETS",
    "REQUEST_STATE_PREFIX",
    "RETRY_AFTER_DATE",
    "Cut",
    "Decision",
    "Delay",
    "Drop",
    "Effect",
    "FaultPlan",
    "FaultRule",
    "FaultRuleError",
    "HttpStatus",
    "IdleCut",
    "InputRequired",
    "JsonRpcError",
    "Malformed",
    "Match",
    "Reply",
    "RequestView",
    "RpcError",
    "Scope",
    "SessionExpired",
    "SseCutter",
    "SseTruncate",
    "ToolError",
    "Which",
    "parse_inline",
    "parse_rules",
    "preset",
    "preset_names",
    "request_view",
    "strip_continuation",
]
