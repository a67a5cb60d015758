"""Fault injection, the pure part: rules, their parsing, which call they hit, what to send.

Theory of operation. A rules file (JSON) or a one-line rule is parsed into frozen
`FaultRule`s; bad input raises `FaultRuleError`, whose message names the source, the
line and the reason and says what to write instead (the adapter refuses to start with
it). `FaultPlan(rules, seed)` holds the only mutable state: per-scope call counters, the
sessions a `session_expired` rule ended, and one seeded `random.Random` per rule. For
each request the adapter builds a `RequestView` (see `request_view`) and asks
`plan.decide(view)`; `None` means "leave this exchange alone", otherwise the `Decision`
says exactly what to do:

- `Effect.REPLY`: answer with `decision.reply` (status, headers, body bytes, built here
  from the request: its JSON-RPC id with its JSON type, the right content type) and do
  not call the upstream;
- `Effect.DROP`: close the client connection without an answer (after the upstream has
  handled the request when `drop_after_upstream`);
- `Effect.ALTER`: call the upstream, but rewrite the request (`strip_continuation`),
  delay the response (`delay_headers_ms`, `delay_events_ms`) or cut its event stream
  (`decision.cutter(rpc_id)` returns the `SseCutter` that does it).

Nothing here does I/O, keeps a clock or raises on what a peer sends: `request_view`,
`strip_continuation`, `decide` and `SseCutter` accept any bytes. The format and every
decision are documented in docs/faults.md.

This module is the facade: it re-exports the public names of the modules that do the
work, so callers keep writing `faults.FaultPlan`, `faults.parse_rules` and so on.

- `fault_rules`: the rule model (`FaultRule`, `Match`, `Which`, `Scope`, the actions)
  and `FaultRuleError`;
- `fault_validate`: one JSON-shaped rule checked into a `FaultRule`, errors explained;
- `fault_parse`: rules files (`parse_rules`) and the inline form (`parse_inline`);
- `fault_request`: `RequestView`, `request_view`, `strip_continuation`;
- `fault_replies`: `Reply` and the bodies a fault answers with;
- `fault_encoding`: the compact JSON and content types those bodies use;
- `fault_plan`: `FaultPlan`, `Decision`, `Effect`: which rule acts and how;
- `sse_cutter`: `SseCutter` and `Cut`, which cut an event stream on event boundaries.
"""

from __future__ import annotations

from .fault_parse import INLINE_SOURCE as INLINE_SOURCE
from .fault_parse import parse_inline, parse_rules
from .fault_plan import (
    MAX_EXPIRED_SESSIONS,
    MAX_FAULT_COUNTERS,
    REQUEST_STATE_PREFIX,
    Decision,
    Effect,
    FaultPlan,
)
from .fault_replies import Reply
from .fault_request import RequestView, request_view, strip_continuation
from .fault_rules import ABSENT as ABSENT
from .fault_rules import (
    ACTIONS,
    Delay,
    Drop,
    FaultRule,
    FaultRuleError,
    HttpStatus,
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
from .fault_rules import Action as Action
from .sse_cutter import NO_ID as NO_ID
from .sse_cutter import Cut, SseCutter

__all__ = [
    "ACTIONS",
    "MAX_EXPIRED_SESSIONS",
    "MAX_FAULT_COUNTERS",
    "REQUEST_STATE_PREFIX",
    "Cut",
    "Decision",
    "Delay",
    "Drop",
    "Effect",
    "FaultPlan",
    "FaultRule",
    "FaultRuleError",
    "HttpStatus",
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
    "request_view",
    "strip_continuation",
]
