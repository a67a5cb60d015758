"""The fault plan: which rule acts on a request and what the adapter must do about it.

`request_view(body, ...)` builds what a rule can see of a request (`RequestView`);
`FaultPlan(rules, seed)` holds the only mutable state (per-scope call counters, the
sessions a `session_expired` rule ended, one seeded `random.Random` per rule);
`plan.decide(view)` returns a `Decision` (its `Effect`, the `Reply` to send, the delays,
the `SseCutter` to apply) or None to leave the exchange alone. Replies carry the
request's JSON-RPC id with its JSON type. `strip_continuation` gives the request as the
upstream gets it when the proxy answered a continuation itself. Nothing here raises on
what a client sends.
"""

from __future__ import annotations

import hashlib
import random
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Any, Final

from mcp_layers_core.jsonrpc import (
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    client_of,
    is_request,
    messages_of,
    meta_of,
    tool_of,
    try_loads,
)
from mcp_layers_core.limits import MAX_EVENT_BYTES
from mcp_layers_core.versions import has_result_type

from .cutter import SseCutter
from .rules import (
    JSON_TYPE,
    SSE_TYPE,
    Action,
    Delay,
    Drop,
    FaultRule,
    FaultRuleError,
    HttpStatus,
    IdleCut,
    InputRequired,
    JsonRpcError,
    Malformed,
    Scope,
    SessionExpired,
    SseTruncate,
    ToolError,
    compact_json,
)

# -- what a rule sees of a request ------------------------------------------------------

_CONTINUATION_KEYS: Final = ("inputResponses", "requestState")

#: The pseudo-methods of GET streams: a standby (or any) GET, and a resumption GET.
GET: Final = "GET"
GET_RESUME: Final = "GET:resume"

#: `retry_after=date+N`: an HTTP date N seconds after the reply is made.
RETRY_AFTER_DATE: Final = "date+"


@dataclass(frozen=True, slots=True)
class RequestView:
    """What a rule can look at. `method` is None for GET/DELETE and for POSTs that carry
    no single JSON-RPC request or notification (batches, answers): only an expired
    session can affect those. `rpc_id` is None for notifications. `session` and `client`
    are what records show (`session`, `client`), so rules can be written from a
    recording."""

    method: str | None
    rpc_id: object = None
    tool: str | None = None
    session: str | None = None
    client: str | None = None
    protocol_version: str | None = None
    params: Mapping[str, Any] | None = None
    http_method: str = "POST"

    @property
    def is_continuation(self) -> bool:
        """A 2026-07-28 multi round-trip follow-up (carries answers or the state)."""
        return self.params is not None and any(k in self.params for k in _CONTINUATION_KEYS)


def request_view(
    body: bytes | None,
    *,
    session: str | None = None,
    client: str | None = None,
    protocol_version: str | None = None,
    http_method: str = "POST",
    resumption: bool = False,
) -> RequestView:
    """Build the view of one request from its body. Never raises.

    `client` and `protocol_version` are what the proxy already knows (the session's, the
    header's); the body's own `_meta` (2026-07-28) or `initialize` clientInfo wins. A GET
    (an event stream) is seen as the method `GET`, or `GET:resume` when it carries
    `Last-Event-ID` (`resumption`): only rules that name it act on it.
    """
    none = RequestView(
        (GET_RESUME if resumption else GET) if http_method == "GET" else None,
        session=session,
        client=client,
        protocol_version=protocol_version,
        http_method=http_method,
    )
    if http_method != "POST" or not body:
        return none
    messages = messages_of(try_loads(body))
    if not messages or len(messages) != 1 or not isinstance(messages[0].get("method"), str):
        return none  # not JSON-RPC, a batch, or an answer: nothing for a rule to match
    msg = messages[0]
    params = msg.get("params")
    params = params if isinstance(params, dict) else None
    meta = meta_of(msg)
    found = client_of(meta.get(META_CLIENT_INFO))
    if found is None and msg["method"] == "initialize" and params is not None:
        found = client_of(params.get("clientInfo"))
    version = meta.get(META_PROTOCOL_VERSION)
    rpc_id = msg.get("id") if is_request(msg) else None
    return RequestView(
        method=msg["method"],
        rpc_id=None if isinstance(rpc_id, bool) else rpc_id,
        tool=tool_of(msg),
        session=session,
        client=found or client,
        protocol_version=version if isinstance(version, str) else protocol_version,
        params=params,
        http_method=http_method,
    )


def strip_continuation(body: bytes) -> bytes:
    """The request body without `inputResponses`/`requestState` in its params: what the
    upstream gets when the proxy itself asked for the input. Unchanged if not JSON-RPC."""
    value = try_loads(body)
    messages = messages_of(value)
    if not messages:
        return body
    changed = False
    for msg in messages:
        params = msg.get("params")
        if isinstance(params, dict) and any(k in params for k in _CONTINUATION_KEYS):
            msg["params"] = {k: v for k, v in params.items() if k not in _CONTINUATION_KEYS}
            changed = True
    return compact_json(value) if changed else body


# -- replies ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reply:
    """A complete HTTP answer. No Content-Length: the proxy frames the body itself."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)


def _empty(status: int, headers: tuple[tuple[str, str], ...] = ()) -> Reply:
    return Reply(status, headers, b"")


def _message_reply(payload: bytes, *, status: int = 200, sse: bool = False) -> Reply:
    """One JSON-RPC message as a JSON body or as a one-event SSE stream."""
    if sse:
        body = b"event: message\ndata: " + payload + b"\n\n"
        return Reply(status, (("content-type", SSE_TYPE), ("cache-control", "no-cache")), body)
    return Reply(status, (("content-type", JSON_TYPE),), payload)


def _envelope(rpc_id: object, **member: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, **member}


def _tool_result(request: RequestView, text: str, is_error: bool) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": is_error}
    if request.protocol_version is not None and has_result_type(request.protocol_version):
        result = {"resultType": "complete", **result}  # the 2026-07-28 result shape
    return result


def _input_required(a: InputRequired, request: RequestView, state: str) -> Reply:
    asked = {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": a.message,
            "requestedSchema": {
                "type": "object",
                "properties": {"approve": {"type": "boolean", "title": "Approve"}},
                "required": ["approve"],
            },
        },
    }
    result = {
        "resultType": "input_required",
        "inputRequests": {a.key: asked},
        "requestState": state,
    }
    return _message_reply(compact_json(_envelope(request.rpc_id, result=result)), sse=a.sse)


def _answer(a: Action, request: RequestView) -> Reply:
    """The reply of jsonrpc_error, tool_error and malformed."""
    rid = request.rpc_id
    if isinstance(a, JsonRpcError):
        payload = compact_json(_envelope(rid, error=a.error.member()))
        return _message_reply(payload, status=a.status, sse=a.sse)
    if isinstance(a, ToolError):
        payload = compact_json(_envelope(rid, result=_tool_result(request, a.text, True)))
        return _message_reply(payload, sse=a.sse)
    assert isinstance(a, Malformed)
    return _message_reply(_malformed(a.kind, request), sse=a.sse)


def _malformed(kind: str, request: RequestView) -> bytes:
    rid = request.rpc_id
    if request.method == "tools/call":
        result: dict[str, Any] = _tool_result(request, "injected", False)
    else:
        result = {}
    if kind == "wrong_id":
        return compact_json(_envelope(_other_id(rid), result=result))
    if kind == "result_and_error":
        error = {"code": -32603, "message": "injected: result and error together"}
        return compact_json(_envelope(rid, result=result, error=error))
    # invalid_json: a real answer without its closing brace (the id is still readable).
    return compact_json(_envelope(rid, result=result))[:-1]


def _other_id(rpc_id: object) -> object:
    """A different id of the same JSON type (a type change is a different fault)."""
    if isinstance(rpc_id, int):
        return rpc_id + 1000
    if isinstance(rpc_id, str):
        return f"{rpc_id}-not-yours"
    return 1000


# -- the plan ---------------------------------------------------------------------------

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
    #: Close the client's connection once the answer's event stream was silent this long
    #: (0: never); `idle_cut_graceful`: end a chunked stream cleanly before closing.
    idle_cut_ms: int = 0
    idle_cut_graceful: bool = False

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
        if isinstance(a, IdleCut):
            return Decision(
                rule.name,
                a.KIND,
                Effect.ALTER,
                idle_cut_ms=a.after_ms,
                idle_cut_graceful=a.graceful,
            )
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
    if request.http_method == "GET" and not any(p.startswith(GET) for p in m.method):
        return False  # `method=*` means every POST: a GET stream is acted on when named
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
        # `date+N` stays as written: the adapter, which keeps the clock, makes the date.
        headers.append(("retry-after", a.retry_after))
    if a.error is not None:
        body = compact_json(_envelope(request.rpc_id, error=a.error.member()))
        headers.insert(0, ("content-type", a.content_type or JSON_TYPE))
    else:
        body = a.body or b""
        if a.content_type:
            headers.insert(0, ("content-type", a.content_type))
    return Decision(name, HttpStatus.KIND, Effect.REPLY, reply=Reply(status, tuple(headers), body))
