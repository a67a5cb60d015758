"""The fault plan: which rule acts on a request and what the adapter must do about it.

`FaultPlan(rules, seed)` holds the only mutable state (per-scope call counters, the
sessions a `session_expired` rule ended, one seeded `random.Random` per rule);
`plan.decide(view)` returns a `Decision` (its `Effect`, the `Reply` to send, the delays,
the `SseCutter` to apply) or None to leave the exchange alone.
"""

from __future__ import annotations

import hashlib
import random
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Final

from .fault_encoding import _JSON, _dumps
from .fault_replies import (
    Reply,
    _answer,
    _empty,
    _envelope,
    _input_required,
)
from .fault_request import RequestView
from .fault_rules import (
    Delay,
    Drop,
    FaultRule,
    FaultRuleError,
    HttpStatus,
    InputRequired,
    JsonRpcError,
    Malformed,
    Scope,
    SessionExpired,
    SseTruncate,
    ToolError,
)
from .limits import MAX_EVENT_BYTES
from .sse_cutter import SseCutter

#: (rule, scope key) call counters a plan keeps; past it the least recently used is
#: forgotten (its count restarts at 0: documented).
MAX_FAULT_COUNTERS: Final = 10_000
#: Sessions a `session_expired` rule ended that a plan remembers (least recent forgotten).
MAX_EXPIRED_SESSIONS: Final = 10_000
#: Every `requestState` the proxy issues starts with this: a continuation carrying it is
#: the proxy's own and is stripped before it reaches the upstream, whatever the plan.
REQUEST_STATE_PREFIX: Final = "mcp-layers."


#: Actions whose reply is a JSON-RPC answer: they need a request (an id) to answer.
_NEEDS_ID: Final = (JsonRpcError, ToolError, InputRequired, Malformed, SseTruncate)


class Effect(StrEnum):
    REPLY = "reply"  # answer with `reply`; the upstream is not called
    DROP = "drop"  # close the client connection without an answer
    ALTER = "alter"  # call the upstream; rewrite the request or delay/cut the answer


@dataclass(frozen=True, slots=True)
class Decision:
    rule: str
    action: str
    effect: Effect
    reply: Reply | None = None
    drop_after_upstream: bool = False
    strip_continuation: bool = False  # forward params without inputResponses/requestState
    delay_headers_ms: int = 0
    delay_events_ms: int = 0
    truncate_after_events: int | None = None
    truncate_before_final: bool = False

    @property
    def calls_upstream(self) -> bool:
        return self.effect is Effect.ALTER or (
            self.effect is Effect.DROP and self.drop_after_upstream
        )

    @property
    def injected(self) -> dict[str, str]:
        """The record's `injected` field."""
        return {"rule": self.rule, "action": self.action}

    def cutter(self, rpc_id: object, max_event_bytes: int = MAX_EVENT_BYTES) -> SseCutter | None:
        """The stream filter this decision needs on an SSE answer, if any (truncation,
        or event-by-event pieces to sleep between)."""
        if self.truncate_before_final:
            return SseCutter(before_final_for_id=rpc_id, max_event_bytes=max_event_bytes)
        if self.truncate_after_events is not None:
            return SseCutter(
                after_events=self.truncate_after_events, max_event_bytes=max_event_bytes
            )
        if self.delay_events_ms:
            return SseCutter(max_event_bytes=max_event_bytes)
        return None


class FaultPlan:
    """Rules plus the state they need: counters, expired sessions, seeded draws.

    Rules are tried in order. Every rule whose match applies counts the call (so a
    rule's "n-th call" does not depend on other rules); the first one that selects the
    call and does something to it acts, and the rules after it only count. Not
    thread-safe: one plan per proxy, called from its event loop.
    """

    def __init__(
        self,
        rules: Sequence[FaultRule] = (),
        seed: int = 0,
        *,
        max_counters: int = MAX_FAULT_COUNTERS,
        max_expired: int = MAX_EXPIRED_SESSIONS,
    ) -> None:
        seen: set[str] = set()
        for rule in rules:
            if rule.name in seen:
                raise FaultRuleError(
                    "fault rules",
                    rule.line,
                    f'two rules are named "{rule.name}"; give each rule its own "name"',
                )
            seen.add(rule.name)
        self.rules: tuple[FaultRule, ...] = tuple(rules)
        self.seed = seed
        # One generator per rule, seeded by the rule's name too: adding a rule does not
        # shift the draws of the others. String seeds are hashed with SHA-512 by
        # `random`, so they do not depend on PYTHONHASHSEED.
        self._rngs = [random.Random(f"{seed}/{rule.name}") for rule in self.rules]
        self._counters: OrderedDict[tuple[int, str | None], list[int]] = OrderedDict()
        self._expired: OrderedDict[str, str] = OrderedDict()  # session -> rule name
        self._issued = 0
        self._max_counters = max_counters
        self._max_expired = max_expired

    @property
    def counters(self) -> int:
        """Counter keys held now (at most `max_counters`)."""
        return len(self._counters)

    def is_expired(self, session: str | None) -> bool:
        return session is not None and session in self._expired

    def decide(self, request: RequestView) -> Decision | None:
        """What to do with this request; None to let it through untouched."""
        expired = self._expired_reply(request)
        if expired is not None:
            return expired
        if request.method is None:
            return None
        if _ours(request):
            # The proxy asked for this input; the upstream never saw the question.
            return Decision(
                rule=_issuer(self.rules),
                action=InputRequired.KIND,
                effect=Effect.ALTER,
                strip_continuation=True,
            )
        decision: Decision | None = None
        for index, rule in enumerate(self.rules):
            if not _applies(rule, request):
                continue
            counts = self._count(index, rule.scope, request)
            if decision is None and self._selects(index, rule, counts[0]):
                counts[1] += 1
                # None here is a rule letting the call through (a 2xx in its sequence,
                # a spent sequence): later rules may still act on it.
                decision = self._act(rule, counts[1], request)
        return decision

    # -- counting ---------------------------------------------------------------------

    def _count(self, index: int, scope: Scope, request: RequestView) -> list[int]:
        """[matching calls seen, times acted] for this rule and scope key; LRU-bounded."""
        if scope is Scope.SESSION:
            key = (index, request.session)
        elif scope is Scope.CLIENT:
            key = (index, request.client)
        else:
            key = (index, None)
        counts = self._counters.get(key)
        if counts is None:
            counts = self._counters[key] = [0, 0]
            if len(self._counters) > self._max_counters:
                self._counters.popitem(last=False)
        else:
            self._counters.move_to_end(key)
        counts[0] += 1
        return counts

    def _selects(self, index: int, rule: FaultRule, count: int) -> bool:
        if not rule.which.selects(count):
            return False
        p = rule.which.probability
        # Draw only for calls the count selected, so the draws a rule makes do not
        # depend on how many calls it skipped.
        return p is None or self._rngs[index].random() < p

    # -- acting -------------------------------------------------------------------------

    def _act(self, rule: FaultRule, acted: int, request: RequestView) -> Decision | None:
        a = rule.action
        if isinstance(a, HttpStatus):
            return _http_status(rule.name, a, acted, request)
        if isinstance(a, SessionExpired):
            if request.session is not None:
                self._expire(request.session, rule.name)
            return _reply(rule, _empty(404))
        if isinstance(a, InputRequired):
            return _reply(rule, _input_required(a, request, self._next_state(rule.name)))
        if isinstance(a, SseTruncate):
            return Decision(
                rule.name,
                a.KIND,
                Effect.ALTER,
                truncate_after_events=a.after_events,
                truncate_before_final=a.after_events is None,
            )
        if isinstance(a, Drop):
            return Decision(rule.name, a.KIND, Effect.DROP, drop_after_upstream=a.upstream)
        if isinstance(a, Delay):
            ms = (a.ms, 0) if a.where == "headers" else (0, a.ms)
            return Decision(
                rule.name, a.KIND, Effect.ALTER, delay_headers_ms=ms[0], delay_events_ms=ms[1]
            )
        return _reply(rule, _answer(a, request))

    def _expire(self, session: str, rule: str) -> None:
        self._expired[session] = rule
        self._expired.move_to_end(session)
        if len(self._expired) > self._max_expired:
            self._expired.popitem(last=False)

    def _expired_reply(self, request: RequestView) -> Decision | None:
        # `initialize` starts a new session: it is how a client recovers from the 404.
        if request.session is None or request.method == "initialize":
            return None
        rule = self._expired.get(request.session)
        if rule is None:
            return None
        self._expired.move_to_end(request.session)
        return Decision(rule, SessionExpired.KIND, Effect.REPLY, reply=_empty(404))

    def _next_state(self, rule: str) -> str:
        """An opaque, reproducible `requestState` (same seed, same order: same states)."""
        self._issued += 1
        digest = hashlib.sha256(f"{self.seed}/{rule}/{self._issued}".encode()).hexdigest()
        return f"{REQUEST_STATE_PREFIX}{self._issued}.{digest[:16]}"


def _applies(rule: FaultRule, request: RequestView) -> bool:
    if request.rpc_id is None and isinstance(rule.action, _NEEDS_ID):
        return False  # a notification has no answer to replace or cut
    m = rule.match
    return (
        _matches(m.method, request.method)
        and _matches(m.tool, request.tool)
        and _matches(m.session, request.session)
        and _matches(m.client, request.client)
        and _matches(m.protocol, request.protocol_version)
    )


def _matches(patterns: tuple[str, ...] | None, value: str | None) -> bool:
    if patterns is None:
        return True
    # A missing value is "": only a pattern such as "*" matches it.
    return any(fnmatchcase(value or "", p) for p in patterns)


def _ours(request: RequestView) -> bool:
    state = request.params.get("requestState") if request.params is not None else None
    return isinstance(state, str) and state.startswith(REQUEST_STATE_PREFIX)


def _issuer(rules: Sequence[FaultRule]) -> str:
    """The input_required rule that asked, for `injected.rule` (the first such rule)."""
    return next((r.name for r in rules if isinstance(r.action, InputRequired)), "input_required")


def _reply(rule: FaultRule, reply: Reply) -> Decision:
    return Decision(rule.name, rule.kind, Effect.REPLY, reply=reply)


def _http_status(name: str, a: HttpStatus, acted: int, request: RequestView) -> Decision | None:
    if len(a.statuses) == 1:
        status = a.statuses[0]  # a single status applies to every selected call
    elif acted > len(a.statuses):
        return None  # the sequence is spent: later calls pass (docs/faults.md)
    else:
        status = a.statuses[acted - 1]
    if 200 <= status < 300 and a.body is None and a.error is None:
        return None  # a 2xx in a sequence means "let this one through"
    headers: list[tuple[str, str]] = []
    if a.retry_after is not None:
        headers.append(("retry-after", a.retry_after))
    if a.error is not None:
        body = _dumps(_envelope(request.rpc_id, error=a.error.member()))
        headers.insert(0, ("content-type", a.content_type or _JSON))
    else:
        body = a.body or b""
        if a.content_type:
            headers.insert(0, ("content-type", a.content_type))
    return Decision(name, HttpStatus.KIND, Effect.REPLY, reply=Reply(status, tuple(headers), body))
