"""Parsing what a user writes into `FaultRule`s: a JSON rules file (`parse_rules`, errors
point at the rule's or the key's line) and the one-line inline form (`parse_inline`).
Both hand each rule to `fault_validate`; bad input raises `FaultRuleError`.
"""

from __future__ import annotations

import json
import re
import shlex
from json.decoder import scanstring
from typing import Any, Final

from .fault_rules import FaultRule, FaultRuleError
from .fault_validate import (
    _ACTION_KEYS,
    _INT_RE,
    _MATCH_KEYS,
    _PRIMARY,
    _hint,
    _rule_from,
    _Where,
)
from .jsonrpc import NOT_JSON, try_loads

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

_INT_KEYS: Final = frozenset({"nth", "every", "from", "after_events", "ms", "code"})
_BOOL_KEYS: Final = frozenset({"sse", "before_final", "upstream"})
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
