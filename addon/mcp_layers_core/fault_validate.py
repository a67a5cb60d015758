"""Validation of one fault rule given as a JSON-shaped mapping (from a rules file or the
inline form) into a `FaultRule`. Every failure raises `FaultRuleError` with the source,
the line, the reason and what to write instead, in the syntax the user is writing.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Final, NoReturn

from .fault_encoding import _JSON, _TEXT, _dumps
from .fault_rules import (
    ABSENT,
    ACTIONS,
    Action,
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

#: The value written right after the action (`http_status=503,200`) is this parameter.
#: (The inline form's; `_Fields.example` writes examples in that form.)
_PRIMARY: Final = {
    "http_status": "status",
    "jsonrpc_error": "code",
    "tool_error": "text",
    "input_required": "message",
    "malformed": "kind",
    "sse_truncate": "after_events",
    "delay": "ms",
}
_INT_RE: Final = re.compile(r"[+-]?\d{1,18}")


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
