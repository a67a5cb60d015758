"""Fault rules on stdio: which lines `mcp-layers wrap --fault` answers, holds or drops (pure).

The rules, their parsing, matching, counting and replies are the proxy's (`faults`); this
module says what each decision means on a pipe, where there is no HTTP: a `REPLY` is a
line written to the client instead of forwarding the request (`jsonrpc_error`,
`tool_error`, `malformed`); `drop` forwards the request (with `upstream`) or not, and the
client never gets an answer; `delay` holds the server's answer line. Actions that only
exist over HTTP (a status, an SSE stream, a session id) are refused when the rules are
read, before the server starts (`check`).

One action exists only here: `crash`, the server killed (SIGKILL) as soon as the request
it matched is forwarded. It is read as a `drop upstream` rule (so it matches and counts
as every rule does: `crash_rule` inline, `parse_rules_file` in a rules file) whose name
the plan is given as a crash; its records say `action: crash`.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from .faults import (
    Delay,
    Drop,
    Effect,
    FaultPlan,
    FaultRule,
    FaultRuleError,
    JsonRpcError,
    Malformed,
    ToolError,
    parse_rules,
    request_view,
)
from .jsonrpc import NOT_JSON, id_key, try_loads
from .stdio import head_id

#: The actions that mean something on stdio.
STDIO_ACTIONS: Final = (JsonRpcError.KIND, ToolError.KIND, Malformed.KIND, Drop.KIND, Delay.KIND)

#: Answers held (to drop or delay) at once; past it the oldest hold is forgotten.
MAX_HELD: Final = 10_000


def check(rules: Sequence[FaultRule]) -> None:
    """Refuse what cannot happen on a pipe, naming the rule and what to write instead."""
    for rule in rules:
        a = rule.action
        why = None
        if a.KIND not in STDIO_ACTIONS:
            why = f'"{a.KIND}" needs HTTP; on stdio use one of {", ".join(STDIO_ACTIONS)}'
        elif getattr(a, "sse", False):
            why = "there is no SSE on stdio; remove sse"
        elif isinstance(a, Delay) and a.where != "headers":
            why = "there are no events on stdio; delay the whole answer (where=headers)"
        elif isinstance(a, JsonRpcError) and a.status != 200:
            why = "there is no HTTP status on stdio; remove status"
        if why is not None:
            raise FaultRuleError(f'rule "{rule.name}"', rule.line, why)


CRASH: Final = "crash"


def crash_rule(inline: str) -> tuple[str, str] | None:
    """An inline `crash [key=value ...]` rule as the `drop upstream` rule that matches the
    same calls, and its name; None for any other rule."""
    words = shlex.split(inline)
    if not words or words[0] != CRASH:
        return None
    named = [w.partition("=")[2] for w in words[1:] if w.startswith("name=")]
    rest = " ".join(shlex.quote(w) for w in words[1:])
    name = named[0] if named else CRASH
    return f"drop upstream {rest}" + ("" if named else f" name={CRASH}"), name


#: A rules file's `"action": "crash"` member, and what stands for it: the `drop upstream`
#: rule that matches the same calls, on the same line (messages name the file's lines).
_CRASH_MEMBER: Final = re.compile(r'"action"(\s*:\s*)"crash"')
_AS_DROP: Final = r'"action"\1"drop", "upstream": true'


def parse_rules_file(text: str, source: str) -> tuple[list[FaultRule], frozenset[str]]:
    """A rules file (docs/faults.md) whose rules may be `{"action": "crash", ...}`: its
    rules, each crash read as `crash_rule` reads one inline, and the crash rules' names.
    The proxy's parser knows no `crash` (it is stdio's), so its member is rewritten in
    place before the file is parsed; everything else is the proxy's reading."""
    crashes = _crash_indices(text, source)
    if not crashes:
        return parse_rules(text, source), frozenset()
    rewritten, found = _CRASH_MEMBER.subn(_AS_DROP, text)
    rules = parse_rules(rewritten, source)
    if found != len(crashes) or not all(_is_drop_upstream(rules[i]) for i in crashes):
        # `"action": "crash"` written somewhere else too (inside a rule's `data`).
        raise FaultRuleError(
            source, None, 'a "crash" rule could not be read; write it {"action": "crash", ...}'
        )
    return rules, frozenset(rules[i].name for i in crashes)


def _crash_indices(text: str, source: str) -> list[int]:
    """The positions of the rules whose action is `crash` (none when the file is not the
    shape of a rules file: `parse_rules` then says what is wrong)."""
    try:
        value = json.loads(text.removeprefix("\ufeff"))
    except (ValueError, RecursionError):
        return []
    raw = value.get("rules") if isinstance(value, dict) else value
    if not isinstance(raw, list):
        return []
    out = []
    for i, rule in enumerate(raw):
        if isinstance(rule, dict) and rule.get("action") == CRASH:
            if "upstream" in rule:
                reason = f'rule {i + 1}: "crash" takes no "upstream" (the call is always sent)'
                raise FaultRuleError(source, None, reason)
            out.append(i)
    return out


def _is_drop_upstream(rule: FaultRule) -> bool:
    return isinstance(rule.action, Drop) and rule.action.upstream


class ClientLine(NamedTuple):
    """What to do with a line the client wrote."""

    forward: bool
    #: A line to write to the client instead of an answer (without its newline).
    reply: bytes | None = None
    #: The record's `injected`, and the id of the request it marks.
    injected: dict[str, str] | None = None
    rpc_id: object = None
    #: Kill the server once the line is forwarded.
    crash: bool = False


PASS: Final = ClientLine(True)


class StdioFaults:
    """One plan for one wrapped server. Not thread-safe: the stdin pump decides on
    client lines, the stdout pump asks about answers; `held` is the only state both touch,
    one key at a time (a dict's single operations are atomic in CPython)."""

    def __init__(
        self, rules: Sequence[FaultRule], seed: int = 0, crashes: frozenset[str] = frozenset()
    ) -> None:
        check(rules)
        self.plan = FaultPlan(rules, seed)
        self.crashes = crashes  # the names of the rules that are `crash` rules
        self.client: str | None = None
        self.protocol_version: str | None = None
        #: id key -> ("drop", 0) or ("delay", ms): what becomes of the server's answer.
        self.held: dict[tuple[str, object], tuple[str, int]] = {}

    def client_line(self, line: bytes) -> ClientLine:
        view = request_view(line, client=self.client, protocol_version=self.protocol_version)
        if view.method == "initialize":
            self.client = view.client or self.client
        if view.method is None or view.rpc_id is None:
            return PASS  # answers, notifications, batches, not JSON: no rule acts on them
        d = self.plan.decide(view)
        if d is None:
            return PASS
        key = id_key(view.rpc_id)
        if d.rule in self.crashes:
            # The server may answer before the kill lands (a busy machine): that answer is
            # swallowed, so that the client sees the crash, not a reply, every time.
            self._hold(key, "drop", 0)
            return ClientLine(True, None, {"rule": d.rule, "action": CRASH}, view.rpc_id, True)
        if d.effect is Effect.REPLY:
            assert d.reply is not None
            return ClientLine(False, d.reply.body, d.injected, view.rpc_id)
        if d.effect is Effect.DROP:
            if d.drop_after_upstream:
                self._hold(key, "drop", 0)
            return ClientLine(d.drop_after_upstream, None, d.injected, view.rpc_id)
        if d.delay_headers_ms:
            self._hold(key, "delay", d.delay_headers_ms)
            return ClientLine(True, None, d.injected, view.rpc_id)
        return PASS

    def server_line(self, line: bytes) -> tuple[str, int] | None:
        """For an answer line while answers are held: ("drop", 0), ("delay", ms) or None."""
        rid: Any = head_id(line)
        if rid is NOT_JSON:
            # Not first in the line (the TypeScript SDK writes `id` last): read it whole.
            value = try_loads(line)
            if not isinstance(value, dict) or "id" not in value:
                return None
            rid = value["id"]
        return self.held.pop(id_key(rid), None)

    def _hold(self, key: tuple[str, object], what: str, ms: int) -> None:
        if len(self.held) >= MAX_HELD:
            self.held.pop(next(iter(self.held)))
        self.held[key] = (what, ms)
