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
"""

from __future__ import annotations

import difflib
import hashlib
import json
import random
import re
import shlex
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from fnmatch import fnmatchcase
from json.decoder import scanstring
from typing import Any, ClassVar, Final, NoReturn

from .jsonrpc import (
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    NOT_JSON,
    client_of,
    is_request,
    is_response,
    messages_of,
    meta_of,
    same_id,
    tool_of,
    try_loads,
)
from .limits import MAX_EVENT_BYTES
from .sse import EVENT_OVER_CAP, SseAnomaly, SseEvent, SseParser

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

#: (rule, scope key) call counters a plan keeps; past it the least recently used is
#: forgotten (its count restarts at 0: documented).
MAX_FAULT_COUNTERS: Final = 10_000
#: Sessions a `session_expired` rule ended that a plan remembers (least recent forgotten).
MAX_EXPIRED_SESSIONS: Final = 10_000
#: Every `requestState` the proxy issues starts with this: a continuation carrying it is
#: the proxy's own and is stripped before it reaches the upstream, whatever the plan.
REQUEST_STATE_PREFIX: Final = "mcp-layers."

ACTIONS: Final = (
    "http_status",
    "jsonrpc_error",
    "tool_error",
    "input_required",
    "malformed",
    "sse_truncate",
    "drop",
    "delay",
    "session_expired",
)

_CONTINUATION_KEYS: Final = ("inputResponses", "requestState")
_JSON: Final = "application/json"
_SSE: Final = "text/event-stream"
_TEXT: Final = "text/plain; charset=utf-8"


class FaultRuleError(ValueError):
    """A rule or rules file is wrong. The message: `source:line: reason; what to write`."""

    def __init__(self, source: str, line: int | None, reason: str) -> None:
        self.source = source
        self.line = line
        self.reason = reason
        where = source if line is None else f"{source}:{line}"
        super().__init__(f"{where}: {reason}")


class _Absent:
    """Marks an optional member that was not given (JSON `null` is a value)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()


# -- the rule model -------------------------------------------------------------------


class Scope(StrEnum):
    """Whose calls a rule counts: each session's, each client's, or all together."""

    SESSION = "session"
    CLIENT = "client"
    GLOBAL = "global"


@dataclass(frozen=True, slots=True)
class Match:
    """Which requests a rule looks at. Each field is a tuple of exact names or globs
    (`fnmatch`, case-sensitive), any of which may match; None matches anything."""

    method: tuple[str, ...] = ("tools/call",)
    tool: tuple[str, ...] | None = None
    session: tuple[str, ...] | None = None
    client: tuple[str, ...] | None = None
    protocol: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Which:
    """Which of the matching calls (1-based) a rule acts on. At most one of `nth`,
    `every`, `from_`; none means every matching call. `probability` then draws."""

    nth: int | None = None
    every: int | None = None
    from_: int | None = None
    probability: float | None = None

    def selects(self, count: int) -> bool:
        """Does the `count`-th matching call pass the counting part (not the draw)?"""
        if self.nth is not None:
            return count == self.nth
        if self.every is not None:
            return count % self.every == 0
        if self.from_ is not None:
            return count >= self.from_
        return True


@dataclass(frozen=True, slots=True)
class RpcError:
    """A JSON-RPC `error` member."""

    code: int
    message: str
    data: object = ABSENT

    def member(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not ABSENT:
            err["data"] = self.data
        return err


@dataclass(frozen=True, slots=True)
class HttpStatus:
    KIND: ClassVar[str] = "http_status"
    statuses: tuple[int, ...]  # the k-th time the rule acts it answers statuses[k-1]
    retry_after: str | None = None
    body: bytes | None = None  # None: not given (a 2xx then passes through)
    content_type: str | None = None
    error: RpcError | None = None  # a JSON-RPC error body with the request's id


@dataclass(frozen=True, slots=True)
class JsonRpcError:
    KIND: ClassVar[str] = "jsonrpc_error"
    error: RpcError
    status: int = 200
    sse: bool = False


@dataclass(frozen=True, slots=True)
class ToolError:
    KIND: ClassVar[str] = "tool_error"
    text: str
    sse: bool = False


@dataclass(frozen=True, slots=True)
class InputRequired:
    KIND: ClassVar[str] = "input_required"
    message: str
    key: str = "approval"
    sse: bool = False


@dataclass(frozen=True, slots=True)
class Malformed:
    KIND: ClassVar[str] = "malformed"
    kind: str  # invalid_json | wrong_id | result_and_error
    sse: bool = False


@dataclass(frozen=True, slots=True)
class SseTruncate:
    KIND: ClassVar[str] = "sse_truncate"
    after_events: int | None = None  # None: cut before the final response instead


@dataclass(frozen=True, slots=True)
class Drop:
    KIND: ClassVar[str] = "drop"
    upstream: bool = False  # True: let the upstream handle it, then drop the answer


@dataclass(frozen=True, slots=True)
class Delay:
    KIND: ClassVar[str] = "delay"
    ms: int
    where: str = "headers"  # headers | events


@dataclass(frozen=True, slots=True)
class SessionExpired:
    KIND: ClassVar[str] = "session_expired"


Action = (
    HttpStatus
    | JsonRpcError
    | ToolError
    | InputRequired
    | Malformed
    | SseTruncate
    | Drop
    | Delay
    | SessionExpired
)

#: Actions whose reply is a JSON-RPC answer: they need a request (an id) to answer.
_NEEDS_ID: Final = (JsonRpcError, ToolError, InputRequired, Malformed, SseTruncate)


@dataclass(frozen=True, slots=True)
class FaultRule:
    name: str
    action: Action
    match: Match = field(default_factory=Match)
    which: Which = field(default_factory=Which)
    scope: Scope = Scope.SESSION
    line: int | None = None  # where it was written, for messages

    @property
    def kind(self) -> str:
        return self.action.KIND


# -- what the adapter passes in and gets back ------------------------------------------


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


@dataclass(frozen=True, slots=True)
class Reply:
    """A complete HTTP answer. No Content-Length: the proxy frames the body itself."""

    status: int
    headers: tuple[tuple[str, str], ...]
    body: bytes

    def header(self, name: str) -> str | None:
        name = name.lower()
        return next((v for k, v in self.headers if k == name), None)


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


def request_view(
    body: bytes | None,
    *,
    session: str | None = None,
    client: str | None = None,
    protocol_version: str | None = None,
    http_method: str = "POST",
) -> RequestView:
    """Build the view of one request from its body. Never raises.

    `client` and `protocol_version` are what the proxy already knows (the session's, the
    header's); the body's own `_meta` (2026-07-28) or `initialize` clientInfo wins.
    """
    none = RequestView(
        None,
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
    return _dumps(value) if changed else body


# -- the plan ---------------------------------------------------------------------------


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


# -- replies ------------------------------------------------------------------------------


def _reply(rule: FaultRule, reply: Reply) -> Decision:
    return Decision(rule.name, rule.kind, Effect.REPLY, reply=reply)


def _dumps(value: object) -> bytes:
    # Compact and on one line (JSON escapes newlines in strings): also a valid SSE data line.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _empty(status: int, headers: tuple[tuple[str, str], ...] = ()) -> Reply:
    return Reply(status, headers, b"")


def _message_reply(payload: bytes, *, status: int = 200, sse: bool = False) -> Reply:
    """One JSON-RPC message as a JSON body or as a one-event SSE stream."""
    if sse:
        body = b"event: message\ndata: " + payload + b"\n\n"
        return Reply(status, (("content-type", _SSE), ("cache-control", "no-cache")), body)
    return Reply(status, (("content-type", _JSON),), payload)


def _envelope(rpc_id: object, **member: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rpc_id, **member}


def _http_status(name: str, a: HttpStatus, acted: int, request: RequestView) -> Decision | None:
    if acted > len(a.statuses):
        return None  # the sequence is spent: later calls pass (docs/faults.md)
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


def _tool_result(request: RequestView, text: str, is_error: bool) -> dict[str, Any]:
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": is_error}
    if (request.protocol_version or "") >= "2026":
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
    return _message_reply(_dumps(_envelope(request.rpc_id, result=result)), sse=a.sse)


def _answer(a: Action, request: RequestView) -> Reply:
    """The reply of jsonrpc_error, tool_error and malformed."""
    rid = request.rpc_id
    if isinstance(a, JsonRpcError):
        payload = _dumps(_envelope(rid, error=a.error.member()))
        return _message_reply(payload, status=a.status, sse=a.sse)
    if isinstance(a, ToolError):
        payload = _dumps(_envelope(rid, result=_tool_result(request, a.text, True)))
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
        return _dumps(_envelope(_other_id(rid), result=result))
    if kind == "result_and_error":
        error = {"code": -32603, "message": "injected: result and error together"}
        return _dumps(_envelope(rid, result=result, error=error))
    # invalid_json: a real answer without its closing brace (the id is still readable).
    return _dumps(_envelope(rid, result=result))[:-1]


def _other_id(rpc_id: object) -> object:
    """A different id of the same JSON type (a type change is a different fault)."""
    if isinstance(rpc_id, int):
        return rpc_id + 1000
    if isinstance(rpc_id, str):
        return f"{rpc_id}-not-yours"
    return 1000


# -- the stream cutter ---------------------------------------------------------------------

_LINE_END: Final = re.compile(rb"\r\n|\r|\n")
_BOM: Final = b"\xef\xbb\xbf"


class _NoId:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_ID"


NO_ID: Final = _NoId()


@dataclass(frozen=True, slots=True)
class Cut:
    """What to forward now, in event-aligned pieces, and whether to close the stream."""

    pieces: tuple[bytes, ...]
    close: bool

    @property
    def data(self) -> bytes:
        return b"".join(self.pieces)


class SseCutter:
    """Forward an event stream's exact bytes up to an event boundary, then stop.

    `SseCutter(after_events=N)` closes right after the N-th event (0: before any byte);
    `SseCutter(before_final_for_id=ID)` closes before the event that carries the
    JSON-RPC response to ID; `SseCutter()` never cuts and only aligns pieces on events
    (for a delay between events). An event counts when `SseParser` dispatches it (data,
    `event`, `id` or `retry` lines; comment-only blocks do not count).

    Bytes are held until the blank line that ends their event (a client acts on whole
    events only, so holding them changes nothing it can see), then forwarded unchanged.
    The forwarded bytes and the cut point are the same however the stream is chunked. An
    event larger than `max_event_bytes` is forwarded as it arrives instead of held: it
    still counts, but it cannot be recognised as the final response.
    """

    __slots__ = (
        "_after",
        "_cap",
        "_cut",
        "_done",
        "_ended",
        "_events",
        "_final_id",
        "_held",
        "_line_started",
        "_parser",
        "_passing",
        "_scan",
        "_started",
    )

    def __init__(
        self,
        *,
        after_events: int | None = None,
        before_final_for_id: object = NO_ID,
        max_event_bytes: int = MAX_EVENT_BYTES,
    ) -> None:
        if after_events is not None and before_final_for_id is not NO_ID:
            raise ValueError("give after_events or before_final_for_id, not both")
        if after_events is not None and after_events < 0:
            raise ValueError(f"after_events must be 0 or more, not {after_events}")
        self._after = after_events
        self._final_id = before_final_for_id
        self._cap = max_event_bytes
        self._parser = SseParser(max_event_bytes)
        self._held = bytearray()
        self._scan = 0  # start of the line being read, in _held
        self._line_started = False  # that line has bytes already forwarded (passing mode)
        self._passing = False  # the current event is over the cap: forward as it comes
        self._started = False  # past a possible leading BOM
        self._events = 0
        self._cut = False
        self._done = False
        self._ended = False

    @property
    def cut(self) -> bool:
        """Did the cutter cut the stream (the fault took effect)?"""
        return self._cut

    @property
    def events(self) -> int:
        """Events forwarded so far."""
        return self._events

    def feed(self, chunk: bytes) -> Cut:
        """The next upstream bytes; returns what to send on and whether to close now."""
        if self._after == 0 and not self._done:
            self._done = self._cut = True  # cut before the first byte
        if self._done or not chunk:
            return Cut((), self._done)
        self._held += chunk
        return Cut(tuple(self._drain()), self._done)

    def end(self) -> Cut:
        """The upstream stream ended: forward what is held (an unfinished event as is)."""
        if self._done:
            return Cut((), True)
        self._ended = True
        pieces = self._drain()
        if not self._done:
            if self._held:
                pieces.append(bytes(self._held))
                self._parser.feed(bytes(self._held))
                self._held = bytearray()
            self._done = True
        return Cut(tuple(pieces), True)

    def _drain(self) -> list[bytes]:
        pieces: list[bytes] = []
        if not self._started and not self._skip_bom():
            return pieces
        while not self._done:
            end = self._event_end()
            if end is None:
                break
            block = bytes(self._held[:end])
            del self._held[:end]
            self._scan = 0
            self._take(block, pieces)
        if not self._done and (self._passing or len(self._held) > self._cap):
            self._pass_on(pieces)
        return pieces

    def _skip_bom(self) -> bool:
        """Leave a leading BOM out of line scanning (its bytes are forwarded as they are)."""
        if len(self._held) < len(_BOM) and _BOM.startswith(self._held) and not self._ended:
            return False  # could still be a BOM
        self._started = True
        if self._held.startswith(_BOM):
            self._scan = len(_BOM)
        return True

    def _event_end(self) -> int | None:
        """The offset just past the blank line that ends the held event, if it is there."""
        held = self._held
        while (m := _LINE_END.search(held, self._scan)) is not None:
            if m.end() == len(held) and held[-1] == 0x0D and not self._ended:
                return None  # a CR at the end may be half of a CRLF: wait for the next byte
            blank = m.start() == self._scan and not self._line_started
            self._scan = m.end()
            self._line_started = False
            if blank:
                return m.end()
        return None

    def _take(self, block: bytes, pieces: list[bytes]) -> None:
        """A whole event block: forward it, or cut before it, or cut after it."""
        was_passing, self._passing = self._passing, False
        items = self._parser.feed(block)
        if not was_passing and self._is_final(items):
            self._done = self._cut = True
            return
        pieces.append(block)
        self._events += sum(1 for i in items if _counts(i))
        if self._after is not None and self._events >= self._after:
            self._done = self._cut = True

    def _is_final(self, items: list[SseEvent | SseAnomaly]) -> bool:
        if self._final_id is NO_ID:
            return False
        for item in items:
            if isinstance(item, SseEvent) and item.has_data:
                messages = messages_of(try_loads(item.data)) or []
                if any(is_response(m) and same_id(m.get("id"), self._final_id) for m in messages):
                    return True
        return False

    def _pass_on(self, pieces: list[bytes]) -> None:
        """Over the cap: forward the event's bytes now, keeping only a trailing CR."""
        self._passing = True
        held = self._held
        keep = 1 if held.endswith(b"\r") else 0
        n = len(held) - keep
        if n <= 0:
            return
        piece = bytes(held[:n])
        self._parser.feed(piece)
        pieces.append(piece)
        self._line_started = self._line_started or self._scan < n
        self._scan = max(self._scan - n, 0)
        del held[:n]


def _counts(item: SseEvent | SseAnomaly) -> bool:
    return isinstance(item, SseEvent) or item.kind == EVENT_OVER_CAP


# -- parsing: shared validation -----------------------------------------------------------

_MATCH_KEYS: Final = ("method", "tool", "session", "client", "protocol")
_WHICH_KEYS: Final = ("nth", "every", "from", "probability")
_COMMON_KEYS: Final = ("name", "action", "counter", "comment", *_MATCH_KEYS, *_WHICH_KEYS)
_ACTION_KEYS: Final[dict[str, tuple[str, ...]]] = {
    "http_status": ("status", "retry_after", "body", "content_type", "code", "message", "data"),
    "jsonrpc_error": ("code", "message", "data", "status", "sse"),
    "tool_error": ("text", "sse"),
    "input_required": ("message", "key", "sse"),
    "malformed": ("kind", "sse"),
    "sse_truncate": ("after_events", "before_final"),
    "drop": ("upstream",),
    "delay": ("ms", "where"),
    "session_expired": (),
}
_MALFORMED_KINDS: Final = ("invalid_json", "wrong_id", "result_and_error")
_MAX_TEXT: Final = 10_000
_MAX_NAME: Final = 100
_MAX_MS: Final = 600_000
_BIG: Final = 1_000_000_000


def _hint(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f'did you mean "{close[0]}"? ' if close else ""


def _show(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False) if _jsonable(value) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _jsonable(value: object) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


@dataclass(frozen=True, slots=True)
class _Where:
    """Where a rule was written, to point errors at its line (or its key's line)."""

    source: str
    label: str  # "rule 2" in a file, "" inline
    line: int | None = None
    key_lines: Mapping[str, int] = field(default_factory=dict)
    inline: bool = False


class _Fields:
    """Typed, explained access to one rule's members. Every failure raises FaultRuleError."""

    def __init__(self, raw: Mapping[str, Any], where: _Where) -> None:
        self.raw = raw
        self.where = where

    def fail(self, reason: str, key: str | None = None) -> NoReturn:
        w = self.where
        line = w.key_lines.get(key, w.line) if key is not None else w.line
        raise FaultRuleError(w.source, line, f"{w.label}: {reason}" if w.label else reason)

    def example(self, key: str, value: str) -> str:
        """How to write key=value in the syntax the user is writing."""
        if not self.where.inline:
            return f'"{key}": {value}'
        action = self.raw.get("action")
        if isinstance(action, str) and _PRIMARY.get(action) == key:
            return f"{action}={value}"  # the inline form writes it after the action
        return f"{key}={value}"

    def has(self, key: str) -> bool:
        return key in self.raw

    def integer(self, key: str, lo: int, hi: int, example: str, default: int | None = None) -> int:
        value = self.raw.get(key, default)
        if isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi:
            return value
        if key not in self.raw:
            self.fail(f'"{key}" is required; write {self.example(key, example)}', key)
        if isinstance(value, str) and _INT_RE.fullmatch(value) and lo <= int(value) <= hi:
            example = value  # a number in quotes: show it without them
        reason = f'"{key}" must be an integer from {lo} to {hi}, not {_show(value)}'
        self.fail(f"{reason}; write {self.example(key, example)}", key)

    def optional_int(self, key: str, lo: int, hi: int, example: str) -> int | None:
        return self.integer(key, lo, hi, example) if key in self.raw else None

    def boolean(self, key: str, default: bool = False) -> bool:
        value = self.raw.get(key, default)
        if isinstance(value, bool):
            return value
        self.fail(
            f'"{key}" must be true or false, not {_show(value)}; write {self.example(key, "true")}',
            key,
        )

    def text(self, key: str, default: str | None, example: str, limit: int = _MAX_TEXT) -> str:
        value = self.raw.get(key, default)
        if isinstance(value, str) and value and len(value) <= limit:
            return value
        if key not in self.raw:
            self.fail(f'"{key}" is required; write {self.example(key, example)}', key)
        self.fail(
            f'"{key}" must be a non-empty string of at most {limit} characters, not '
            f"{_show(value)}; write {self.example(key, example)}",
            key,
        )

    def header_value(self, key: str, example: str) -> str:
        """Text that goes into an HTTP header: printable, no line breaks (no injection)."""
        value = self.text(key, None, example, limit=200)
        if not value.isprintable():
            fix = self.example(key, example)
            self.fail(f'"{key}" must be printable text on one line; write {fix}', key)
        return value

    def choice(self, key: str, choices: Sequence[str], default: str) -> str:
        value = self.raw.get(key, default)
        if value in choices:
            return value
        shown = ", ".join(f'"{c}"' for c in choices)
        close = difflib.get_close_matches(value, choices, n=1) if isinstance(value, str) else []
        fix = self.example(key, self.quoted((close or choices)[0]))
        self.fail(f'"{key}" must be one of {shown}, not {_show(value)}; write {fix}', key)

    def patterns(self, key: str) -> tuple[str, ...] | None:
        value = self.raw.get(key)
        if value is None and key not in self.raw:
            return None
        items = [value] if isinstance(value, str) else value
        if (
            isinstance(items, list)
            and items
            and all(isinstance(p, str) and p and len(p) <= 200 for p in items)
        ):
            return tuple(items)
        fix = self.example(key, self.quoted("tools/call" if key == "method" else "search*"))
        reason = f'"{key}" must be a name or glob, or a list of them, not {_show(value)}'
        self.fail(f"{reason}; write {fix}", key)

    def quoted(self, text: str) -> str:
        """A string value as the user writes it: bare inline, quoted in JSON."""
        return text if self.where.inline else f'"{text}"'


def _rule_from(raw: object, where: _Where, default_name: str) -> FaultRule:
    """Validate one rule given as a JSON-shaped mapping (from a file or the inline form)."""
    if not isinstance(raw, dict):
        shape = '{"action": "http_status", "status": 503}'
        reason = f"{where.label}: a rule must be an object such as {shape}"
        raise FaultRuleError(where.source, where.line, reason)
    f = _Fields(raw, where)
    action = raw.get("action")
    if action not in _ACTION_KEYS:
        shown = ", ".join(ACTIONS)
        if action is None:
            fix = f.example("action", f.quoted("http_status"))
            f.fail(f'no "action"; write {fix} (one of {shown})')
        hint = _hint(action, ACTIONS) if isinstance(action, str) else ""
        f.fail(f"unknown action {_show(action)}; {hint}actions are {shown}", "action")
    _check_keys(f, action)
    name = f.text("name", default_name, '"flaky-search"', limit=_MAX_NAME)
    if not name.isprintable():
        f.fail('"name" must be printable text on one line', "name")
    rule = FaultRule(
        name=name,
        action=_ACTION_PARSERS[action](f),
        match=_match(f),
        which=_which(f),
        scope=Scope(f.choice("counter", [s.value for s in Scope], Scope.SESSION.value)),
        line=where.line,
    )
    _check_method(f, rule)
    return rule


def _check_keys(f: _Fields, action: str) -> None:
    allowed = (*_COMMON_KEYS, *_ACTION_KEYS[action])
    for key in f.raw:
        if key in allowed:
            continue
        owners = ", ".join(a for a, keys in _ACTION_KEYS.items() if key in keys)
        takes = ", ".join(_ACTION_KEYS[action]) or "no parameters"
        if owners:
            reason = f'"{key}" is not a parameter of {action} (it belongs to {owners})'
            f.fail(f"{reason}; {action} takes {takes}", key)
        common = ", ".join(_COMMON_KEYS)
        hint = _hint(key, [*_COMMON_KEYS, *(k for keys in _ACTION_KEYS.values() for k in keys)])
        f.fail(f'unknown key "{key}"; {hint}a rule takes {common}; {action} takes {takes}', key)


def _check_method(f: _Fields, rule: FaultRule) -> None:
    """Reply shapes that only a tools/call can have must be able to meet one."""
    if isinstance(rule.action, ToolError | InputRequired) and not any(
        fnmatchcase("tools/call", p) for p in rule.match.method
    ):
        reason = f'{rule.kind} answers a tools/call, but "method" cannot match tools/call'
        fix = f.example("method", f.quoted("tools/call"))
        f.fail(f'{reason}; leave "method" out or write {fix}', "method")


def _match(f: _Fields) -> Match:
    method = f.patterns("method")
    return Match(
        method=method if method is not None else ("tools/call",),
        tool=f.patterns("tool"),
        session=f.patterns("session"),
        client=f.patterns("client"),
        protocol=f.patterns("protocol"),
    )


def _which(f: _Fields) -> Which:
    given = [k for k in ("nth", "every", "from") if f.has(k)]
    if len(given) > 1:
        what = "nth: only that call, every: each k-th, from: that call and all after"
        f.fail(f'"{given[0]}" and "{given[1]}" exclude each other; choose one ({what})', given[1])
    probability = None
    if f.has("probability"):
        p = f.raw["probability"]
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0 < p <= 1:
            reason = f'"probability" must be a number above 0 and at most 1, not {_show(p)}'
            f.fail(f"{reason}; write {f.example('probability', '0.25')}", "probability")
        probability = float(p)
    return Which(
        nth=f.optional_int("nth", 1, _BIG, "1"),
        every=f.optional_int("every", 1, _BIG, "3"),
        from_=f.optional_int("from", 1, _BIG, "2"),
        probability=probability,
    )


def _rpc_error(f: _Fields, default_code: int | None, default_message: str) -> RpcError:
    code = f.integer("code", -(2**53), 2**53, "-32603", default_code)
    message = f.text("message", default_message, '"Internal error"', limit=1000)
    return RpcError(code, message, f.raw.get("data", ABSENT))


def _statuses(f: _Fields) -> tuple[int, ...]:
    value = f.raw.get("status")
    items = value if isinstance(value, list) else [value]
    ok = all(isinstance(s, int) and not isinstance(s, bool) and 100 <= s <= 599 for s in items)
    if value is None or not ok or not 1 <= len(items) <= 100:
        what = "is required" if value is None else f"must be a status or a list, not {_show(value)}"
        fix = f.example("status", "503,200" if f.where.inline else "[503, 200]")
        note = "statuses 100-599; a 2xx lets that call through"
        f.fail(f'"status" {what}; write {fix} ({note})', "status")
    return tuple(items)


def _parse_http_status(f: _Fields) -> HttpStatus:
    statuses = _statuses(f)
    retry_after = None
    if f.has("retry_after"):
        value = f.raw["retry_after"]
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _BIG:
            retry_after = str(value)
        elif isinstance(value, str):
            retry_after = f.header_value("retry_after", "2")
        else:
            reason = (
                f'"retry_after" must be seconds (0 or more) or an HTTP date, not {_show(value)}'
            )
            f.fail(f"{reason}; write {f.example('retry_after', '2')}", "retry_after")
    content_type = f.header_value("content_type", '"text/plain"') if f.has("content_type") else None
    error = None
    if f.has("code") or f.has("message") or f.has("data"):
        if f.has("body"):
            why = '"code" builds a JSON-RPC error body with the request\'s id'
            f.fail(f'"body" and "code" exclude each other ({why}); keep one', "body")
        error = _rpc_error(f, None, "Injected error")
    body = None
    if f.has("body"):
        raw_body = f.raw["body"]
        if isinstance(raw_body, str):
            body, default_type = raw_body.encode(), _TEXT
        else:
            body, default_type = _dumps(raw_body), _JSON
        content_type = content_type or default_type
    return HttpStatus(statuses, retry_after, body, content_type, error)


def _parse_jsonrpc_error(f: _Fields) -> JsonRpcError:
    error = _rpc_error(f, -32603, "Internal error")
    status = f.integer("status", 100, 599, "200", 200)
    return JsonRpcError(error, status, f.boolean("sse"))


def _parse_tool_error(f: _Fields) -> ToolError:
    return ToolError(f.text("text", "Injected tool error", '"disk full"'), f.boolean("sse"))


def _parse_input_required(f: _Fields) -> InputRequired:
    message = f.text("message", "Allow this tool call?", '"Deploy to production?"')
    key = f.text("key", "approval", '"approval"', limit=_MAX_NAME)
    return InputRequired(message, key, f.boolean("sse"))


def _parse_malformed(f: _Fields) -> Malformed:
    return Malformed(f.choice("kind", _MALFORMED_KINDS, "invalid_json"), f.boolean("sse"))


def _parse_sse_truncate(f: _Fields) -> SseTruncate:
    if f.has("after_events") and f.has("before_final"):
        f.fail('"after_events" and "before_final" exclude each other; keep one', "before_final")
    if f.has("before_final") and not f.boolean("before_final"):
        fix = f.example("after_events", "N")
        f.fail(f'"before_final" false cuts nothing; write {fix} instead', "before_final")
    return SseTruncate(f.optional_int("after_events", 0, _BIG, "2"))


def _parse_drop(f: _Fields) -> Drop:
    return Drop(f.boolean("upstream"))


def _parse_delay(f: _Fields) -> Delay:
    return Delay(
        f.integer("ms", 0, _MAX_MS, "500"), f.choice("where", ("headers", "events"), "headers")
    )


def _parse_session_expired(f: _Fields) -> SessionExpired:
    return SessionExpired()


_ACTION_PARSERS: Final[dict[str, Callable[[_Fields], Action]]] = {
    "http_status": _parse_http_status,
    "jsonrpc_error": _parse_jsonrpc_error,
    "tool_error": _parse_tool_error,
    "input_required": _parse_input_required,
    "malformed": _parse_malformed,
    "sse_truncate": _parse_sse_truncate,
    "drop": _parse_drop,
    "delay": _parse_delay,
    "session_expired": _parse_session_expired,
}


# -- parsing: the JSON rules file ---------------------------------------------------------

_WS: Final = re.compile(r"[ \t\n\r]*")
_DECODER: Final = json.JSONDecoder()
_FILE_SHAPE: Final = 'a rules file is a JSON list of rules, or {"rules": [...]}'


def parse_rules(text: str, source: str) -> list[FaultRule]:
    """Parse a rules file (its text; `source` names it in messages). Raises FaultRuleError."""
    text = text.removeprefix("\ufeff")
    if not text.strip():
        raise FaultRuleError(source, 1, f"the file is empty; {_FILE_SHAPE} (write [] for none)")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise FaultRuleError(
            source, e.lineno, f"not valid JSON: {e.msg} (column {e.colno}); {_FILE_SHAPE}"
        ) from None
    except RecursionError:
        raise FaultRuleError(source, None, f"nested too deeply; {_FILE_SHAPE}") from None
    rules: list[FaultRule] = []
    names: dict[str, int] = {}
    for index, (raw, offset) in enumerate(_rule_positions(text, value, source), start=1):
        rule = _located_rule(text, raw, offset, source, index)
        if rule.name in names:
            reason = f'rule {index}: the name "{rule.name}" is already used by rule '
            raise FaultRuleError(source, rule.line, f"{reason}{names[rule.name]}; rename one")
        names[rule.name] = index
        rules.append(rule)
    return rules


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _rule_positions(text: str, value: object, source: str) -> list[tuple[object, int]]:
    """Each rule with the offset where it starts. Runs on text json.loads accepted."""
    start = _skip_ws(text, 0)
    if isinstance(value, list):
        return _elements(text, start)
    if not isinstance(value, dict):
        raise FaultRuleError(
            source, _line(text, start), f"found {type(value).__name__}; {_FILE_SHAPE}"
        )
    members = _members(text, start)
    rules_at = None
    for key, key_at, value_at in members:
        if key == "rules" and rules_at is not None:
            raise FaultRuleError(source, _line(text, key_at), '"rules" is given twice; keep one')
        if key == "rules":
            rules_at = value_at
        elif key != "comment":
            reason = f'unknown top-level key "{key}"; {_hint(key, ["rules"])}{_FILE_SHAPE}'
            raise FaultRuleError(source, _line(text, key_at), reason)
    if rules_at is None or not isinstance(value["rules"], list):
        line = _line(text, rules_at if rules_at is not None else start)
        raise FaultRuleError(source, line, f'"rules" must be a list; {_FILE_SHAPE}')
    return _elements(text, rules_at)


def _located_rule(text: str, raw: object, offset: int, source: str, index: int) -> FaultRule:
    line = _line(text, offset)
    key_lines: dict[str, int] = {}
    if isinstance(raw, dict):
        for key, key_at, _ in _members(text, offset):
            if key in key_lines:
                reason = f'rule {index}: "{key}" is given twice; keep one'
                raise FaultRuleError(source, _line(text, key_at), reason)
            key_lines[key] = _line(text, key_at)
    name = raw.get("name") if isinstance(raw, dict) else None
    label = f'rule {index} ("{name}")' if isinstance(name, str) and name else f"rule {index}"
    where = _Where(source, label, line, key_lines)
    return _rule_from(raw, where, f"{source.rsplit('/', 1)[-1]}#{index}")


def _elements(text: str, at: int) -> list[tuple[object, int]]:
    """(value, offset) of each element of the JSON array starting at text[at]."""
    out: list[tuple[object, int]] = []
    i = _skip_ws(text, at + 1)
    while text[i] != "]":
        value, end = _DECODER.raw_decode(text, i)
        out.append((value, i))
        i = _skip_ws(text, end)
        if text[i] == ",":
            i = _skip_ws(text, i + 1)
    return out


def _members(text: str, at: int) -> list[tuple[str, int, int]]:
    """(key, key offset, value offset) of each member of the JSON object at text[at]."""
    out: list[tuple[str, int, int]] = []
    i = _skip_ws(text, at + 1)
    while text[i] != "}":
        key, after = scanstring(text, i + 1)
        value_at = _skip_ws(text, _skip_ws(text, after) + 1)  # past the colon
        _, end = _DECODER.raw_decode(text, value_at)
        out.append((key, i, value_at))
        i = _skip_ws(text, end)
        if text[i] == ",":
            i = _skip_ws(text, i + 1)
    return out


def _skip_ws(text: str, i: int) -> int:
    m = _WS.match(text, i)  # always matches (possibly empty)
    return m.end() if m is not None else i


# -- parsing: the inline form ---------------------------------------------------------------

INLINE_SOURCE: Final = "mcp_fault"

#: The value written right after the action (`http_status=503,200`) is this parameter.
_PRIMARY: Final = {
    "http_status": "status",
    "jsonrpc_error": "code",
    "tool_error": "text",
    "input_required": "message",
    "malformed": "kind",
    "sse_truncate": "after_events",
    "delay": "ms",
}
_INT_KEYS: Final = frozenset({"nth", "every", "from", "after_events", "ms", "code"})
_BOOL_KEYS: Final = frozenset({"sse", "before_final", "upstream"})
_BOOL_WORDS: Final = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}
_INT_RE: Final = re.compile(r"[+-]?\d{1,18}")


def parse_inline(rule: str, source: str = INLINE_SOURCE) -> FaultRule:
    """Parse the one-line form: `ACTION[=VALUE] [key=value ...]` (docs/faults.md).

    Words are split as a shell would (quote values with spaces); `key=a,b` gives a list
    for match keys and statuses; a bare boolean key means true.
    """
    where = _Where(f"{source} {rule.strip()!r}" if len(rule) <= 200 else source, "", inline=True)
    try:
        words = shlex.split(rule)
    except ValueError as e:
        raise FaultRuleError(where.source, None, f"{e} (close the quote)") from None
    if not words:
        reason = "empty rule; write e.g. mcp_fault='http_status=503 nth=1'"
        raise FaultRuleError(where.source, None, reason)
    raw = _inline_fields(words, where)
    return _rule_from(raw, where, raw["action"] if isinstance(raw["action"], str) else "inline")


def _inline_fields(words: list[str], where: _Where) -> dict[str, Any]:
    action, has_value, value = words[0].partition("=")
    raw: dict[str, Any] = {"action": action}
    if has_value and action in _ACTION_KEYS:  # an unknown action is reported by _rule_from
        primary = _PRIMARY.get(action)
        if primary is None:
            reason = f'"{action}" takes no value after "="; write e.g. "{action} nth=1"'
            raise FaultRuleError(where.source, None, reason)
        if action == "sse_truncate" and value == "before_final":
            raw["before_final"] = True
        else:
            raw[primary] = _inline_value(primary, value)
    for word in words[1:]:
        key, has_eq, text = word.partition("=")
        if key in raw:
            raise FaultRuleError(where.source, None, f'"{key}" is given twice; keep one')
        if has_eq:
            raw[key] = _inline_value(key, text)
        elif key in _BOOL_KEYS:
            raw[key] = True
        else:
            raise FaultRuleError(where.source, None, f'"{word}" needs a value; write {key}=VALUE')
    return raw


def _inline_value(key: str, text: str) -> object:
    """Turn the text of key=text into the JSON value a rules file would hold. Values that
    do not convert stay strings: the shared validator then explains what is expected."""
    if key in _INT_KEYS or key == "retry_after":
        return int(text) if _INT_RE.fullmatch(text) else text
    if key == "status":
        parts = text.split(",")
        if all(_INT_RE.fullmatch(p) for p in parts):
            return [int(p) for p in parts] if len(parts) > 1 else int(parts[0])
        return text
    if key == "probability":
        try:
            return float(text)
        except ValueError:
            return text
    if key in _BOOL_KEYS:
        return _BOOL_WORDS.get(text.lower(), text)
    if key in _MATCH_KEYS:
        return text.split(",") if "," in text else text
    if key == "data":
        parsed = try_loads(text)
        return text if parsed is NOT_JSON else parsed
    return text
