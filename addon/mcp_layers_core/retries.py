"""Is this request a retry, of what, how, and was it safe? Answers from the wire alone.

A retry repeats an earlier request of the same client (same method, same `params` once
`_meta`, `inputResponses` and `requestState` are left out, compared in canonical form)
after the earlier one did not end in success. How it was repeated gives its origin:

- `reinit`: the earlier attempt's session is gone and this one runs in a session the
  client initialised after it (the "session expired, re-initialise, send again" path);
- `resend`: the same JSON-RPC id and the very same message: a transport or SDK resend;
- `reissue`: a new id: the application (or the model, or a person) asked again.

Limits, stated plainly: the wire cannot tell an application's retry loop from a person
pressing enter or a model calling the same tool again; `retryDelayMs` is the evidence
(analysis buckets it). "Same client" means the same client name/version, user agent and
address: two identical agents behind one NAT look like one.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any, NamedTuple

from . import limits
from .classify import SUCCESSFUL, Outcome
from .record import EndReason, RetryOrigin, ToolSafety

try:
    import orjson

    def _canonical(value: object) -> bytes:
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except (TypeError, ValueError):  # orjson refuses ints over 64 bits, for one
            return _canonical_json(value)

except ImportError:  # pragma: no cover - the addon also loads into a bare mitmproxy

    def _canonical(value: object) -> bytes:
        return _canonical_json(value)


def _canonical_json(value: object) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=repr).encode()


#: `params` members that do not change what is being asked.
VOLATILE_PARAMS = frozenset({"_meta", "inputResponses", "requestState"})

#: Outcomes after which a side effect may or may not have happened.
#: A TRANSPORT_VIOLATION was answered by the server (the tool may have run) in a form
#: the client could not take: its side effect is as uncertain as a lost answer's.
UNCERTAIN = frozenset({Outcome.NO_RESPONSE, Outcome.STREAM_INCOMPLETE, Outcome.TRANSPORT_VIOLATION})


def call_signature(method: str, params: object) -> str:
    """What is being asked, independent of ids, `_meta` noise and key order."""
    if isinstance(params, dict):
        params = {k: v for k, v in params.items() if k not in VOLATILE_PARAMS}
    return hashlib.sha256(_canonical([method, params])).hexdigest()[:20]


def message_digest(msg: dict[str, Any]) -> str:
    """The whole message, id and `_meta` included: equal digests mean a byte-level resend."""
    return hashlib.sha256(_canonical(msg)).hexdigest()[:20]


def is_continuation(params: object) -> bool:
    """A 2026-07-28 multi round-trip follow-up carries the answers or the server's state."""
    return isinstance(params, dict) and ("inputResponses" in params or "requestState" in params)


def retry_after_ms(value: str | None, now: float) -> int | None:
    """`Retry-After` as milliseconds: delta-seconds or an HTTP date (relative to `now`)."""
    if not value:
        return None
    value = value.strip()
    if value.isascii() and value.isdigit():  # "²".isdigit() is true, int("²") is not
        return int(value) * 1000 if len(value) <= 9 else None
    try:
        when = parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0, round((when - now) * 1000))


def tool_safety(annotations: object) -> str:
    """`read_only`, `idempotent` or `unsafe` from a tool's hints, with the spec's defaults
    (readOnlyHint false, idempotentHint false, destructiveHint true) when absent."""
    hints = annotations if isinstance(annotations, dict) else {}
    if hints.get("readOnlyHint") is True:
        return ToolSafety.READ_ONLY
    if hints.get("idempotentHint") is True:
        return ToolSafety.IDEMPOTENT
    return ToolSafety.UNSAFE


class ToolSafetyBook:
    """Each server's tools as its `tools/list` answers described them (pages merge).

    Bounded as a whole, not per server: at most `max_tools` names over all servers and
    `max_servers` servers, the least recently listed server forgotten first.
    """

    def __init__(
        self, max_servers: int = limits.MAX_TOOL_SERVERS, max_tools: int = limits.MAX_TOOL_NAMES
    ) -> None:
        self._servers: OrderedDict[str, dict[str, str]] = OrderedDict()
        self._max_servers = max_servers
        self._max_tools = max_tools
        self._total = 0  # names over all servers

    def __len__(self) -> int:
        return self._total

    def learn(self, server: str, result: object) -> None:
        tools = result.get("tools") if isinstance(result, dict) else None
        if not isinstance(tools, list):
            return
        known = self._servers.pop(server, {})
        self._total -= len(known)
        for tool in tools[: self._max_tools]:
            if not isinstance(tool, dict):
                continue
            name = tool.get("name")
            if isinstance(name, str) and len(name) <= limits.MAX_TOOL_NAME_CHARS:
                known[name] = tool_safety(tool.get("annotations"))
        while len(known) > self._max_tools:
            known.pop(next(iter(known)))
        while self._servers and (
            self._total + len(known) > self._max_tools or len(self._servers) >= self._max_servers
        ):
            _, gone = self._servers.popitem(last=False)
            self._total -= len(gone)
        self._servers[server] = known
        self._total += len(known)

    def safety(self, server: str, tool: str | None) -> str:
        if tool is None:
            return ToolSafety.UNKNOWN
        return self._servers.get(server, {}).get(tool, ToolSafety.UNKNOWN)


@dataclass(slots=True)
class Attempt:
    """One attempt of a logical call, as later attempts need to know it."""

    record_id: int
    rpc_id: object
    digest: str
    session: str
    start: float
    attempt: int
    statuses: list[int]
    end: float | None = None
    outcome: Outcome | None = None
    retry_after_ms: int | None = None
    input_required: bool = False


@dataclass(frozen=True, slots=True)
class RetryInfo:
    """What a new request's record says about its predecessors."""

    attempt: int = 1
    retry_of: int | None = None
    origin: str = RetryOrigin.NONE
    delay_ms: float | None = None
    after_ms_honored: bool | None = None
    unsafe: bool | None = None
    continues: int | None = None
    earlier_statuses: tuple[int, ...] = ()


NOT_A_RETRY = RetryInfo()


class SessionView(NamedTuple):  # a tuple: made once per request, on the hot path
    """What the retry rules need to know about sessions, from the session book."""

    #: This attempt's session is server-issued (not a connection stand-in).
    real: bool
    #: When this attempt's session was initialised, if known.
    created: float | None
    #: A session key -> (how it ended or None, server-issued?), or None if forgotten.
    lookup: Callable[[str], tuple[EndReason | None, bool] | None]


def _origin(prev: Attempt, attempt: Attempt, session: SessionView) -> str | None:
    """`reinit`, `resend`, `reissue`, or None when the repeat is a new conversation."""
    if prev.session != attempt.session:
        previous_ended, previous_real = session.lookup(prev.session) or (None, False)
        if previous_ended in (EndReason.DELETE, EndReason.SHUTDOWN, EndReason.IDLE):
            # Closed on purpose, or left unused for the idle time: a new conversation.
            return None
        if session.real:
            # Only a session opened after the failed attempt can be its recovery; an
            # older one is a concurrent conversation of a look-alike client.
            if session.created is not None and session.created >= prev.start:
                return RetryOrigin.REINIT
            return None
        if previous_real:
            return None  # a real session, then a connection stand-in: another client run
        # Stateless clients may well retry on a new connection: fall through.
    same_id = prev.rpc_id == attempt.rpc_id and type(prev.rpc_id) is type(attempt.rpc_id)
    return RetryOrigin.RESEND if same_id and prev.digest == attempt.digest else RetryOrigin.REISSUE


class RetryBook:
    """The last attempt of every (client, server, call signature) seen recently, bounded."""

    def __init__(self, max_entries: int = limits.MAX_RETRY_SIGNATURES) -> None:
        self._last: OrderedDict[tuple[object, str], Attempt] = OrderedDict()
        self._max = max_entries

    def finish(
        self,
        attempt: Attempt,
        end: float,
        outcome: Outcome,
        statuses: list[int],
        retry_after_ms: int | None,
    ) -> None:
        """What a finished attempt tells the next one: how, and when, it ended."""
        attempt.end = end
        attempt.outcome = outcome
        attempt.statuses = statuses
        attempt.retry_after_ms = retry_after_ms
        attempt.input_required = outcome is Outcome.INPUT_REQUIRED

    def begin(
        self,
        key: tuple[object, str],
        attempt: Attempt,
        *,
        continuation: bool,
        session: SessionView,
        safety: str,
    ) -> RetryInfo:
        """Register `attempt` as the latest of `key`; say how it relates to the previous one.

        `key` is (who asks and where, what): client, user agent, address and server, then
        the call signature. `session` describes this attempt's session and can look up
        the previous attempt's.
        """
        prev = self._last.get(key)
        self._last[key] = attempt
        self._last.move_to_end(key)
        if len(self._last) > self._max:
            self._last.popitem(last=False)
        if prev is None:
            return NOT_A_RETRY
        if prev.input_required and continuation:
            return RetryInfo(continues=prev.record_id)
        if prev.outcome in SUCCESSFUL:
            return NOT_A_RETRY  # asked again after a success: a new call, not a retry
        origin = _origin(prev, attempt, session)
        if origin is None:
            return NOT_A_RETRY
        attempt.attempt = prev.attempt + 1
        delay = None if prev.end is None else round(max(0.0, attempt.start - prev.end) * 1000, 1)
        honored = None
        if prev.retry_after_ms is not None and delay is not None:
            honored = delay >= prev.retry_after_ms
        # Did the failed attempt perhaps do its work? Then repeating an unsafe tool may
        # do it twice. A 4xx or a JSON-RPC error says it did not run; these do not.
        uncertain = (
            prev.outcome is None
            or prev.outcome in UNCERTAIN
            or any(s >= 500 for s in prev.statuses[-1:])
        )
        return RetryInfo(
            attempt=attempt.attempt,
            retry_of=prev.record_id,
            origin=origin,
            delay_ms=delay,
            after_ms_honored=honored,
            unsafe=safety == ToolSafety.UNSAFE and uncertain,
            earlier_statuses=tuple(prev.statuses),
        )
