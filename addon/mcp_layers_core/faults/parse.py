"""Reading what a user writes into `FaultRule`s: one JSON-shaped rule validated (every
failure a `FaultRuleError` with the source, the line, the reason and what to write
instead, in the syntax the user is writing), a JSON rules file (`parse_rules`, errors
point at the rule's or the key's line), the one-line inline form (`parse_inline`), and
the named presets (`PRESETS`, `preset`), written in that inline form.

Presets: Cakewalk's default scenarios and the failures an agent lab needs. Each reads
exactly like the `--set mcp_fault=...` a user would type, and docs/faults.md shows the
same text (a unit test keeps the two in step). Decisions per preset are explained in
docs/faults.md ("Presets"); the short version:

- Counters are per client (`counter=client`) wherever the fault fires once: a client that
  answers a 503 or a 404 by opening a new session must not meet the fault again in the
  new session, or a session-scoped "first call" would fail forever.
- `errors.http_status_sequence` applies `[503, 200]` to tools/call only (Cakewalk counts
  every POST, so there `initialize` absorbs the 503 and no tool call ever sees it).
- `compat.sdk_v2` refuses 2026-07-28 requests the way a server that predates that version
  does (400 + -32022), so clients must fall back to `initialize`.
"""

from __future__ import annotations

import difflib
import json
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from json.decoder import scanstring  # type: ignore[attr-defined]  # in CPython, not in typeshed
from typing import Any, Final, NoReturn

from mcp_layers_core.jsonrpc import NOT_JSON, try_loads

from .rules import (
    ABSENT,
    ACTIONS,
    JSON_TYPE,
    TEXT_TYPE,
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
    Match,
    RpcError,
    Scope,
    SessionExpired,
    SseTruncate,
    ToolError,
    Which,
    compact_json,
)

# -- one rule, validated ------------------------------------------------------------------

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
    "idle_cut": ("after_ms", "graceful"),
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
    "idle_cut": "after_ms",
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
        if isinstance(value, str) and value in choices:
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
            if retry_after.startswith("date+") and not retry_after[5:].isdigit():
                reason = '"retry_after=date+N" needs whole seconds after the plus'
                f.fail(f"{reason}; write {f.example('retry_after', 'date+2')}", "retry_after")
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
            body, default_type = raw_body.encode(), TEXT_TYPE
        else:
            body, default_type = compact_json(raw_body), JSON_TYPE
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


def _parse_idle_cut(f: _Fields) -> IdleCut:
    return IdleCut(f.integer("after_ms", 1, _MAX_MS, "3000"), f.boolean("graceful"))


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
    "idle_cut": _parse_idle_cut,
    "session_expired": _parse_session_expired,
}


# -- the JSON rules file ---------------------------------------------------------------

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


# -- the inline form --------------------------------------------------------------------

INLINE_SOURCE: Final = "mcp_fault"

_INT_KEYS: Final = frozenset({"nth", "every", "from", "after_events", "ms", "after_ms", "code"})
_BOOL_KEYS: Final = frozenset({"sse", "before_final", "upstream", "graceful"})
_BOOL_WORDS: Final = {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}


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


# -- presets ----------------------------------------------------------------------------

#: name -> the inline rules it stands for (an empty tuple: no fault at all).
PRESETS: Final[dict[str, tuple[str, ...]]] = {
    "none": (),
    "baseline": (),
    "errors.http_status_sequence": (
        "http_status=503,200 counter=client name=errors.http_status_sequence",
    ),
    "errors.jsonrpc_error": (
        'jsonrpc_error=-32603 message="Internal error" nth=1 counter=client'
        " name=errors.jsonrpc_error",
    ),
    "errors.tool_error": (
        'tool_error="Injected tool failure" nth=1 counter=client name=errors.tool_error',
    ),
    "elicitation.approval": (
        'input_required="Allow this tool call?" nth=1 counter=client name=elicitation.approval',
    ),
    "compat.sdk_v2": (
        "http_status=400 code=-32022 'message=Unsupported protocol version'"
        ' \'data={"supported":["2025-11-25","2025-06-18","2025-03-26"]}\''
        " method=* protocol=2026-* name=compat.sdk_v2",
    ),
    "errors.rate_limited": (
        "http_status=429,200 retry_after=2 counter=client name=errors.rate_limited",
    ),
    "errors.session_expired": ("session_expired nth=1 counter=client name=errors.session_expired",),
    "errors.stream_cut": ("sse_truncate=before_final nth=1 counter=client name=errors.stream_cut",),
    # Beyond Cakewalk: the agent lab's "server down" and "connection dropped".
    "errors.unavailable": (
        "http_status=503 method=initialize,tools/list,tools/call name=errors.unavailable",
    ),
    "errors.connection_dropped": ("drop nth=1 counter=client name=errors.connection_dropped",),
    # What real middleboxes (proxies, CDNs, gateways) do; docs/faults.md says what the spec
    # expects of the client in each, and which `mcp-layers verdicts` check judges it.
    "middlebox.get_405": ("http_status=405 method=GET name=middlebox.get_405",),
    "middlebox.resume_refused": (
        "http_status=404 method=GET:resume name=middlebox.resume_refused",
        "sse_truncate=before_final nth=1 counter=client name=middlebox.resume_refused.cut",
    ),
    "middlebox.rate_limited_seconds": (
        "http_status=429,200 retry_after=2 nth=1 counter=client"
        " name=middlebox.rate_limited_seconds",
    ),
    "middlebox.rate_limited_date": (
        "http_status=429,200 retry_after=date+3 nth=1 counter=client"
        " name=middlebox.rate_limited_date",
    ),
    "middlebox.unavailable_retry_after": (
        "http_status=503,200 retry_after=2 nth=1 counter=client"
        " name=middlebox.unavailable_retry_after",
    ),
    "middlebox.unavailable_date": (
        "http_status=503,200 retry_after=date+3 nth=1 counter=client"
        " name=middlebox.unavailable_date",
    ),
    "middlebox.late_answer": ("delay=70000 nth=1 counter=client name=middlebox.late_answer",),
    # The lab's short stand-in for Cloudflare's 100 s idle timeout on the standby stream.
    "middlebox.idle_cut": ("idle_cut=3000 method=GET name=middlebox.idle_cut",),
    "middlebox.graceful_close": (
        "idle_cut=3000 graceful=true method=GET name=middlebox.graceful_close",
    ),
}


def preset_names() -> list[str]:
    return list(PRESETS)


def preset(name: str) -> list[FaultRule]:
    """The rules of a named preset. Raises FaultRuleError for an unknown name."""
    texts = PRESETS.get(name)
    if texts is None:
        known = ", ".join(PRESETS)
        raise FaultRuleError("preset", None, f'unknown preset "{name}"; presets are {known}')
    return [parse_inline(text, source=f"preset {name}") for text in texts]
