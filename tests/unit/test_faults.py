"""Fault injection, the pure part: parsing, presets, matching and counters, the replies,
session expiry, input_required continuations and the SSE cutter (split invariance)."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_layers_core.classify import Outcome, classify_answer, classify_body
from mcp_layers_core.faults import (
    ACTIONS,
    PRESETS,
    REQUEST_STATE_PREFIX,
    Decision,
    Delay,
    Drop,
    Effect,
    FaultPlan,
    FaultRule,
    FaultRuleError,
    HttpStatus,
    IdleCut,
    InputRequired,
    JsonRpcError,
    Malformed,
    Match,
    RequestView,
    RpcError,
    Scope,
    SessionExpired,
    SseCutter,
    SseTruncate,
    ToolError,
    Which,
    parse_inline,
    parse_rules,
    preset,
    preset_names,
    request_view,
    strip_continuation,
)
from mcp_layers_core.jsonrpc import NOT_JSON, same_id, try_loads
from mcp_layers_core.sse import SseEvent, SseParser

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "faults.md").read_text()
FIXTURES = ROOT / "tests" / "fixtures" / "sse"


# -- helpers ------------------------------------------------------------------------------


def body(rpc_id: object, method: str = "tools/call", **params: Any) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if rpc_id is not None:
        msg["id"] = rpc_id
    if method == "tools/call":
        params = {"name": "echo", "arguments": {}, **params}
    if params:
        msg["params"] = params
    return json.dumps(msg).encode()


def view(
    rpc_id: object = 1,
    method: str | None = "tools/call",
    *,
    tool: str | None = "echo",
    session: str | None = "s-1",
    client: str | None = "cli@1",
    protocol: str | None = "2025-11-25",
    params: dict[str, Any] | None = None,
    http_method: str = "POST",
) -> RequestView:
    return RequestView(
        method=method,
        rpc_id=rpc_id,
        tool=tool if method == "tools/call" else None,
        session=session,
        client=client,
        protocol_version=protocol,
        params=params,
        http_method=http_method,
    )


def plan(*rules: str, seed: int = 0, **kw: Any) -> FaultPlan:
    return FaultPlan([parse_inline(r) for r in rules], seed, **kw)


def fired(p: FaultPlan, views: list[RequestView]) -> list[int]:
    """1-based positions of the views the plan acted on."""
    return [i for i, v in enumerate(views, 1) if p.decide(v) is not None]


def decoded(reply_body: bytes) -> Any:
    return json.loads(reply_body)


def sse_messages(data: bytes) -> list[dict[str, Any]]:
    """The JSON objects an SSE parser reads from a stream (priming events have none)."""
    p = SseParser()
    items = p.feed(data) + p.end()
    found = [try_loads(e.data) for e in items if isinstance(e, SseEvent) and e.has_data]
    return [m for m in found if isinstance(m, dict)]


def rule_error(text: str, source: str = "faults.json") -> str:
    with pytest.raises(FaultRuleError) as info:
        parse_rules(text, source)
    return str(info.value)


def inline_error(text: str) -> str:
    with pytest.raises(FaultRuleError) as info:
        parse_inline(text)
    return str(info.value)


# -- parsing: good files ---------------------------------------------------------------------

GOOD_FILE = """\
{
  "comment": "every action once",
  "rules": [
    {"name": "seq", "action": "http_status", "status": [503, 200], "retry_after": 2,
     "tool": "search*", "counter": "client"},
    {"action": "http_status", "status": 400, "code": -32022, "message": "Unsupported",
     "data": {"supported": ["2025-11-25"]}, "method": "*", "protocol": "2026-*"},
    {"action": "http_status", "status": 502, "body": "bad gateway", "every": 2},
    {"action": "http_status", "status": 500, "body": {"oops": true}, "from": 3},
    {"action": "jsonrpc_error", "code": -32000, "message": "busy", "data": null,
     "status": 500, "sse": true, "client": ["a@*", "b@2"]},
    {"action": "tool_error", "text": "disk full", "nth": 2, "probability": 0.5},
    {"action": "input_required", "message": "Deploy?", "key": "ok", "sse": true},
    {"action": "malformed", "kind": "wrong_id", "method": "tools/list"},
    {"action": "sse_truncate", "after_events": 0, "session": "s-*"},
    {"action": "sse_truncate", "before_final": true, "counter": "global"},
    {"action": "drop", "upstream": true, "method": "initialize"},
    {"action": "delay", "ms": 250, "where": "events"},
    {"action": "idle_cut", "after_ms": 3000, "graceful": true, "method": "GET"},
    {"action": "session_expired", "nth": 3, "comment": "third call"}
  ]
}
"""


def test_a_good_file_gives_every_action_with_its_parameters() -> None:
    rules = parse_rules(GOOD_FILE, "dir/faults.json")
    assert [r.kind for r in rules] == [
        "http_status", "http_status", "http_status", "http_status", "jsonrpc_error",
        "tool_error", "input_required", "malformed", "sse_truncate", "sse_truncate",
        "drop", "delay", "idle_cut", "session_expired",
    ]  # fmt: skip
    assert set(ACTIONS) == {r.kind for r in rules}
    seq = rules[0]
    assert seq == FaultRule(
        name="seq",
        action=HttpStatus((503, 200), retry_after="2"),
        match=Match(tool=("search*",)),
        scope=Scope.CLIENT,
        line=4,
    )
    assert rules[1].action == HttpStatus(
        (400,), error=RpcError(-32022, "Unsupported", {"supported": ["2025-11-25"]})
    )
    assert rules[1].match == Match(method=("*",), protocol=("2026-*",))
    assert rules[1].name == "faults.json#2"  # default names: file name and position
    assert rules[2].action == HttpStatus(
        (502,), body=b"bad gateway", content_type="text/plain; charset=utf-8"
    )
    assert rules[2].which == Which(every=2)
    assert rules[3].action.body == b'{"oops":true}'  # type: ignore[union-attr]
    assert rules[3].which == Which(from_=3)
    assert rules[4].action == JsonRpcError(RpcError(-32000, "busy", None), 500, sse=True)
    assert rules[4].match.client == ("a@*", "b@2")
    assert rules[5].action == ToolError("disk full") and rules[5].which == Which(
        nth=2, probability=0.5
    )
    assert rules[6].action == InputRequired("Deploy?", "ok", sse=True)
    assert rules[7].action == Malformed("wrong_id") and rules[7].match.method == ("tools/list",)
    assert rules[8].action == SseTruncate(after_events=0)
    assert rules[9].action == SseTruncate(None) and rules[9].scope is Scope.GLOBAL
    assert rules[10].action == Drop(upstream=True)
    assert rules[11].action == Delay(250, "events")
    assert rules[12].action == IdleCut(3000, graceful=True)
    assert rules[12].match.method == ("GET",)
    assert rules[13].action == SessionExpired() and rules[13].line == 20


def test_a_plain_list_a_bom_and_an_empty_list_are_files_too() -> None:
    rules = parse_rules('\ufeff[\n  {"action": "drop"}\n]\n', "f.json")
    assert rules == [FaultRule("f.json#1", Drop(), line=2)]
    assert parse_rules("[]", "f.json") == []
    assert parse_rules('{"rules": []}', "f.json") == []


def test_defaults() -> None:
    (r,) = parse_rules('[{"action": "jsonrpc_error"}, {"action": "tool_error"}]', "f")[:1]
    assert r.match == Match(method=("tools/call",)) and r.which == Which()
    assert r.scope is Scope.SESSION
    assert r.action == JsonRpcError(RpcError(-32603, "Internal error"), 200, sse=False)
    tool, required, broken, cut, drop, delay, idle = (
        parse_inline(t).action
        for t in (
            "tool_error",
            "input_required",
            "malformed",
            "sse_truncate",
            "drop",
            "delay=1",
            "idle_cut=1",
        )
    )
    assert tool == ToolError("Injected tool error")
    assert required == InputRequired("Allow this tool call?", "approval")
    assert broken == Malformed("invalid_json")
    assert cut == SseTruncate(None)
    assert drop == Drop(upstream=False)
    assert delay == Delay(1, "headers")
    assert idle == IdleCut(1, graceful=False)


# -- parsing: bad files, with the exact message ----------------------------------------------

BAD_FILES = [
    ("", "faults.json:1: the file is empty; a rules file is a JSON list of rules, or "
     '{"rules": [...]} (write [] for none)'),
    ('[\n  {"action": "drop",}\n]', "faults.json:2: not valid JSON: Expecting property name "
     'enclosed in double quotes (column 21); a rules file is a JSON list of rules, or {"rules": [...]}'),
    ('[\n  {"action": "drop"}\n', "faults.json:3: not valid JSON: Expecting ',' delimiter "
     '(column 1); a rules file is a JSON list of rules, or {"rules": [...]}'),
    ('\n\n"rules"', 'faults.json:3: found str; a rules file is a JSON list of rules, or {"rules": [...]}'),
    ('{\n  "rule": []\n}', 'faults.json:2: unknown top-level key "rule"; did you mean "rules"? '
     'a rules file is a JSON list of rules, or {"rules": [...]}'),
    ('{\n  "rules":\n    {"action": "drop"}\n}', 'faults.json:3: "rules" must be a list; a rules '
     'file is a JSON list of rules, or {"rules": [...]}'),
    ('{"rules": [],\n "rules": []}', 'faults.json:2: "rules" is given twice; keep one'),
    ("{}", 'faults.json:1: "rules" must be a list; a rules file is a JSON list of rules, or {"rules": [...]}'),
    ('[\n  {"action": "drop"},\n  42\n]', 'faults.json:3: rule 2: a rule must be an object such '
     'as {"action": "http_status", "status": 503}'),
    ('[\n  {"status": 503}\n]', 'faults.json:2: rule 1: no "action"; write "action": '
     '"http_status" (one of http_status, jsonrpc_error, tool_error, input_required, malformed, '
     "sse_truncate, drop, delay, idle_cut, session_expired)"),
    ('[\n  {"name": "x",\n   "action": "jsonrpc-error"}\n]', 'faults.json:3: rule 1 ("x"): unknown '
     'action "jsonrpc-error"; did you mean "jsonrpc_error"? actions are http_status, jsonrpc_error, '
     "tool_error, input_required, malformed, sse_truncate, drop, delay, idle_cut, session_expired"),
    ('[{"action": "drop"},\n {"action": "http_status",\n  "retry-after": 2}]', 'faults.json:3: '
     'rule 2: unknown key "retry-after"; did you mean "retry_after"? a rule takes name, action, '
     "counter, comment, method, tool, session, client, protocol, nth, every, from, probability; "
     "http_status takes status, retry_after, body, content_type, code, message, data"),
    ('[{"action": "jsonrpc_error",\n  "text": "x"}]', 'faults.json:2: rule 1: "text" is not a '
     "parameter of jsonrpc_error (it belongs to tool_error); jsonrpc_error takes code, message, "
     "data, status, sse"),
    ('[{"action": "drop", "nth": 1,\n  "nth": 2}]', 'faults.json:2: rule 1: "nth" is given twice; keep one'),
    ('[{"action": "drop",\n  "nth": "2"}]', 'faults.json:2: rule 1: "nth" must be an integer from '
     '1 to 1000000000, not "2"; write "nth": 2'),
    ('[{"action": "drop",\n  "every": 0}]', 'faults.json:2: rule 1: "every" must be an integer '
     'from 1 to 1000000000, not 0; write "every": 3'),
    ('[{"action": "drop", "nth": 1,\n  "from": 2}]', 'faults.json:2: rule 1: "nth" and "from" '
     "exclude each other; choose one (nth: only that call, every: each k-th, from: that call "
     "and all after)"),
    ('[{"action": "drop",\n  "probability": 1.5}]', 'faults.json:2: rule 1: "probability" must '
     'be a number above 0 and at most 1, not 1.5; write "probability": 0.25'),
    ('[{"action": "drop",\n  "counter": "sesion"}]', 'faults.json:2: rule 1: "counter" must be '
     'one of "session", "client", "global", not "sesion"; write "counter": "session"'),
    ('[{"action": "drop",\n  "method": []}]', 'faults.json:2: rule 1: "method" must be a name or '
     'glob, or a list of them, not []; write "method": "tools/call"'),
    ('[{"action": "drop",\n  "upstream": "yes"}]', 'faults.json:2: rule 1: "upstream" must be '
     'true or false, not "yes"; write "upstream": true'),
    ('[{"action": "http_status"}]', 'faults.json:1: rule 1: "status" is required; write "status": '
     "[503, 200] (statuses 100-599; a 2xx lets that call through)"),
    ('[{"action": "http_status",\n  "status": [503, 99]}]', 'faults.json:2: rule 1: "status" must '
     'be a status or a list, not [503, 99]; write "status": [503, 200] (statuses 100-599; a 2xx '
     "lets that call through)"),
    ('[{"action": "http_status", "status": 429,\n  "retry_after": "2\\r\\nX-Evil: 1"}]',
     'faults.json:2: rule 1: "retry_after" must be printable text on one line; write "retry_after": 2'),
    ('[{"action": "http_status", "status": 429,\n  "retry_after": -1}]', 'faults.json:2: rule 1: '
     '"retry_after" must be seconds (0 or more) or an HTTP date, not -1; write "retry_after": 2'),
    ('[{"action": "http_status", "status": 400, "code": 1,\n  "body": "x"}]', 'faults.json:2: '
     'rule 1: "body" and "code" exclude each other ("code" builds a JSON-RPC error body with the '
     "request's id); keep one"),
    ('[{"action": "http_status", "status": 400,\n  "message": "no code"}]', 'faults.json:1: rule '
     '1: "code" is required; write "code": -32603'),
    ('[{"action": "tool_error",\n  "method": "tools/list"}]', 'faults.json:2: rule 1: tool_error '
     'answers a tools/call, but "method" cannot match tools/call; leave "method" out or write '
     '"method": "tools/call"'),
    ('[{"action": "tool_error",\n  "text": ""}]', 'faults.json:2: rule 1: "text" must be a '
     'non-empty string of at most 10000 characters, not ""; write "text": "disk full"'),
    ('[{"action": "malformed",\n  "kind": "wrong-id"}]', 'faults.json:2: rule 1: "kind" must be '
     'one of "invalid_json", "wrong_id", "result_and_error", not "wrong-id"; write "kind": "wrong_id"'),
    ('[{"action": "sse_truncate", "after_events": 1,\n  "before_final": true}]', 'faults.json:2: '
     'rule 1: "after_events" and "before_final" exclude each other; keep one'),
    ('[{"action": "sse_truncate",\n  "before_final": false}]', 'faults.json:2: rule 1: '
     '"before_final" false cuts nothing; write "after_events": N instead'),
    ('[{"action": "delay"}]', 'faults.json:1: rule 1: "ms" is required; write "ms": 500'),
    ('[{"action": "delay",\n  "ms": 600001}]', 'faults.json:2: rule 1: "ms" must be an integer '
     'from 0 to 600000, not 600001; write "ms": 500'),
    ('[{"action": "delay", "ms": 1,\n  "where": "body"}]', 'faults.json:2: rule 1: "where" must '
     'be one of "headers", "events", not "body"; write "where": "headers"'),
    ('[{"action": "idle_cut"}]', 'faults.json:1: rule 1: "after_ms" is required; write '
     '"after_ms": 3000'),
    ('[{"action": "idle_cut",\n  "after_ms": 0}]', 'faults.json:2: rule 1: "after_ms" must be '
     'an integer from 1 to 600000, not 0; write "after_ms": 3000'),
    ('[{"action": "idle_cut", "after_ms": 100,\n  "graceful": "yes"}]', 'faults.json:2: rule 1: '
     '"graceful" must be true or false, not "yes"; write "graceful": true'),
    ('[{"action": "idle_cut", "after_ms": 100,\n  "ms": 5}]', 'faults.json:2: rule 1: "ms" is '
     "not a parameter of idle_cut (it belongs to delay); idle_cut takes after_ms, graceful"),
    ('[{"action": "drop", "name": "a"},\n {"action": "drop", "name": "a"}]', 'faults.json:2: rule '
     '2: the name "a" is already used by rule 1; rename one'),
    ('[{"action": "drop",\n  "name": "two\\nlines"}]', 'faults.json:2: rule 1 ("two\nlines"): '
     '"name" must be printable text on one line'),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), BAD_FILES)
def test_a_bad_file_is_refused_with_its_line_and_reason(text: str, message: str) -> None:
    assert rule_error(text) == message


def test_the_error_carries_source_line_and_reason() -> None:
    with pytest.raises(FaultRuleError) as info:
        parse_rules('[\n{"action": "delay"}]', "x.json")
    assert (info.value.source, info.value.line) == ("x.json", 2)
    assert info.value.reason == 'rule 1: "ms" is required; write "ms": 500'
    assert isinstance(info.value, ValueError)


def test_deeply_nested_json_is_refused_not_crashed() -> None:
    message = rule_error("[" * 100_000 + "]" * 100_000)
    assert message.startswith("faults.json")


# -- parsing: the inline form ------------------------------------------------------------------

INLINE_EQUALS_FILE = [
    ("http_status=503,200 retry_after=2 counter=client",
     {"action": "http_status", "status": [503, 200], "retry_after": 2, "counter": "client"}),
    ("http_status=429 retry_after='Wed, 21 Oct 2026 07:28:00 GMT' tool=search from=3",
     {"action": "http_status", "status": 429, "retry_after": "Wed, 21 Oct 2026 07:28:00 GMT",
      "tool": "search", "from": 3}),
    ("http_status=400 code=-32022 'message=Unsupported protocol version' data='{\"a\":[1]}' method=*",
     {"action": "http_status", "status": 400, "code": -32022,
      "message": "Unsupported protocol version", "data": {"a": [1]}, "method": "*"}),
    ("http_status=500 body='{not json' content_type=text/html",
     {"action": "http_status", "status": 500, "body": "{not json", "content_type": "text/html"}),
    ('jsonrpc_error=-32603 message="Internal error" nth=2 status=500 sse',
     {"action": "jsonrpc_error", "code": -32603, "message": "Internal error", "nth": 2,
      "status": 500, "sse": True}),
    ("jsonrpc_error data=plain", {"action": "jsonrpc_error", "data": "plain"}),
    ('tool_error="disk full" tool=write_file,edit_* client=claude-code@*',
     {"action": "tool_error", "text": "disk full", "tool": ["write_file", "edit_*"],
      "client": "claude-code@*"}),
    ('input_required="Deploy to production?" key=deploy sse=false',
     {"action": "input_required", "message": "Deploy to production?", "key": "deploy", "sse": False}),
    ("malformed=result_and_error method=tools/list every=3",
     {"action": "malformed", "kind": "result_and_error", "method": "tools/list", "every": 3}),
    ("sse_truncate=2 session=s-abc*", {"action": "sse_truncate", "after_events": 2, "session": "s-abc*"}),
    ("sse_truncate=before_final", {"action": "sse_truncate", "before_final": True}),
    ("drop upstream probability=0.25", {"action": "drop", "upstream": True, "probability": 0.25}),
    ("delay=200 where=events protocol=2026-*",
     {"action": "delay", "ms": 200, "where": "events", "protocol": "2026-*"}),
    ("idle_cut=3000 method=GET", {"action": "idle_cut", "after_ms": 3000, "method": "GET"}),
    ("idle_cut=100 graceful method=GET:resume,GET",
     {"action": "idle_cut", "after_ms": 100, "graceful": True, "method": ["GET:resume", "GET"]}),
    ("idle_cut=100 graceful=false", {"action": "idle_cut", "after_ms": 100, "graceful": False}),
    ("session_expired nth=3 counter=global name=expire-third",
     {"action": "session_expired", "nth": 3, "counter": "global", "name": "expire-third"}),
]  # fmt: skip


@pytest.mark.parametrize(("text", "raw"), INLINE_EQUALS_FILE)
def test_inline_rules_mean_what_the_same_file_rule_means(text: str, raw: dict[str, Any]) -> None:
    inline = parse_inline(text)
    (from_file,) = parse_rules(json.dumps([raw]), "f")
    assert inline.action == from_file.action
    assert (inline.match, inline.which, inline.scope) == (
        from_file.match,
        from_file.which,
        from_file.scope,
    )
    assert inline.name == raw.get("name", raw["action"]) and inline.line is None


BAD_INLINE = [
    ("", "mcp_fault '': empty rule; write e.g. mcp_fault='http_status=503 nth=1'"),
    ('tool_error="x', "mcp_fault 'tool_error=\"x': No closing quotation (close the quote)"),
    ("http_stat=503", "mcp_fault 'http_stat=503': unknown action \"http_stat\"; did you mean "
     '"http_status"? actions are http_status, jsonrpc_error, tool_error, input_required, '
     "malformed, sse_truncate, drop, delay, idle_cut, session_expired"),
    ("drop=1", 'mcp_fault \'drop=1\': "drop" takes no value after "="; write e.g. "drop nth=1"'),
    ("http_status", 'mcp_fault \'http_status\': "status" is required; write http_status=503,200 '
     "(statuses 100-599; a 2xx lets that call through)"),
    ("http_status=5o3", "mcp_fault 'http_status=5o3': \"status\" must be a status or a list, not "
     '"5o3"; write http_status=503,200 (statuses 100-599; a 2xx lets that call through)'),
    ("delay", "mcp_fault 'delay': \"ms\" is required; write delay=500"),
    ("delay=soon", "mcp_fault 'delay=soon': \"ms\" must be an integer from 0 to 600000, not "
     '"soon"; write delay=500'),
    ("idle_cut method=GET", "mcp_fault 'idle_cut method=GET': \"after_ms\" is required; write "
     "idle_cut=3000"),
    ("idle_cut=3s", "mcp_fault 'idle_cut=3s': \"after_ms\" must be an integer from 1 to 600000, "
     'not "3s"; write idle_cut=3000'),
    ("idle_cut=600001", "mcp_fault 'idle_cut=600001': \"after_ms\" must be an integer from 1 to "
     "600000, not 600001; write idle_cut=3000"),
    ("idle_cut=100 graceful=maybe", "mcp_fault 'idle_cut=100 graceful=maybe': \"graceful\" must "
     'be true or false, not "maybe"; write graceful=true'),
    ("drop nth=x", "mcp_fault 'drop nth=x': \"nth\" must be an integer from 1 to 1000000000, not "
     '"x"; write nth=1'),
    ("drop nth=1 nth=2", "mcp_fault 'drop nth=1 nth=2': \"nth\" is given twice; keep one"),
    ("drop nth", "mcp_fault 'drop nth': \"nth\" needs a value; write nth=VALUE"),
    ("drop upstream=maybe", "mcp_fault 'drop upstream=maybe': \"upstream\" must be true or "
     'false, not "maybe"; write upstream=true'),
    ("drop retry-after=1", "mcp_fault 'drop retry-after=1': unknown key \"retry-after\"; did you "
     'mean "retry_after"? a rule takes name, action, counter, comment, method, tool, session, '
     "client, protocol, nth, every, from, probability; drop takes upstream"),
    ("malformed=wrong", "mcp_fault 'malformed=wrong': \"kind\" must be one of \"invalid_json\", "
     '"wrong_id", "result_and_error", not "wrong"; write malformed=wrong_id'),
    ("input_required method=initialize", "mcp_fault 'input_required method=initialize': "
     'input_required answers a tools/call, but "method" cannot match tools/call; leave "method" '
     "out or write method=tools/call"),
    ("drop probability=often", "mcp_fault 'drop probability=often': \"probability\" must be a "
     'number above 0 and at most 1, not "often"; write probability=0.25'),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), BAD_INLINE)
def test_a_bad_inline_rule_is_refused_with_the_reason(text: str, message: str) -> None:
    assert inline_error(text) == message


def test_the_documented_error_examples_are_real() -> None:
    examples = DOC.split("```text\n", 1)[1].split("```", 1)[0].strip().splitlines()
    flaky = '[\n  {"action": "drop"},\n  {\n    "name": "flaky",\n    "action": "jsonrpc_error",\n\n    "retry_after": 2\n  }\n]'
    nth = '[\n  {\n    "action": "drop",\n    "nth": "2"\n  }\n]'
    produced = [rule_error(flaky), rule_error(nth), inline_error("malformed=wrong")]
    # As mitmdump prints them: one line each, after the program and addon names.
    assert examples == [f"mitmdump: mcp-layers: {line}" for line in produced]


# -- presets --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", preset_names())
def test_every_preset_parses_and_names_its_rules_after_itself(name: str) -> None:
    rules = preset(name)
    assert len(rules) == len(PRESETS[name])
    # A preset of several rules names each after itself: `<preset>.<part>`.
    assert all(r.name == name or r.name.startswith(f"{name}.") for r in rules)
    FaultPlan(rules)  # unique names, valid plan


def test_the_issue_presets_exist() -> None:
    wanted = {
        "baseline", "errors.http_status_sequence", "errors.jsonrpc_error", "errors.tool_error",
        "elicitation.approval", "compat.sdk_v2", "errors.rate_limited", "errors.session_expired",
        "errors.stream_cut", "none",
    }  # fmt: skip
    assert wanted <= set(preset_names())
    assert preset("baseline") == [] and preset("none") == []


def test_an_unknown_preset_is_refused() -> None:
    with pytest.raises(FaultRuleError, match=r'^preset: unknown preset "errors\.nope"; presets '):
        preset("errors.nope")


def test_the_documented_preset_table_is_the_code() -> None:
    table = DOC.split("## Presets", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `([\w.]+)` \| (.*) \|$", table, flags=re.M)
    documented = {
        name: () if cell == "(no rules)" else tuple(re.findall(r"`([^`]+)`", cell))
        for name, cell in rows
    }
    assert documented == PRESETS


def test_documented_actions_are_the_real_ones() -> None:
    section = DOC.split("## Actions", 1)[1].split("\n## ", 1)[0]
    assert re.findall(r"^\| `(\w+)` \|", section, flags=re.M) == list(ACTIONS)


def test_the_documented_rules_file_parses() -> None:
    example = DOC.split("```json\n", 1)[1].split("```", 1)[0]
    rules = parse_rules(example, "faults.json")
    assert [r.name for r in rules] == ["flaky-search", "slow-list", "faults.json#3"]


def test_preset_behaviour_http_status_sequence_applies_to_tools_call_only() -> None:
    p = FaultPlan(preset("errors.http_status_sequence"))
    assert p.decide(view(1, "initialize", session=None)) is None
    assert p.decide(view(2, "tools/list")) is None
    first = p.decide(view(3))
    assert first is not None and first.reply is not None and first.reply.status == 503
    assert p.decide(view(4)) is None  # the 200: passes
    # Once per client, even in a new session (a client that re-initialises after a 503).
    assert p.decide(view(5, session="s-2")) is None


def test_preset_behaviour_rate_limited_and_compat() -> None:
    d = FaultPlan(preset("errors.rate_limited")).decide(view(1))
    assert d is not None and d.reply is not None
    assert (d.reply.status, d.reply.header("retry-after")) == (429, "2")
    compat = FaultPlan(preset("compat.sdk_v2"))
    refused = compat.decide(view("a", "server/discover", protocol="2026-07-28"))
    assert refused is not None and refused.reply is not None and refused.reply.status == 400
    answer = decoded(refused.reply.body)
    assert answer["id"] == "a" and answer["error"]["code"] == -32022
    assert classify_body("server/discover", "a", 400, refused.reply.body).error_code == -32022
    assert compat.decide(view(2, "initialize", protocol="2025-11-25")) is None


# -- matching, selection and counters ---------------------------------------------------------


def calls(n: int, **kw: Any) -> list[RequestView]:
    return [view(i, **kw) for i in range(1, n + 1)]


@pytest.mark.parametrize(
    ("which", "expected"),
    [
        ("", [1, 2, 3, 4, 5, 6, 7]),
        ("nth=3", [3]),
        ("every=3", [3, 6]),
        ("from=5", [5, 6, 7]),
    ],
)
def test_nth_every_from(which: str, expected: list[int]) -> None:
    assert fired(plan(f"drop {which}"), calls(7)) == expected


def test_probability_is_reproducible_per_seed_and_roughly_right() -> None:
    runs = [fired(plan("drop probability=0.3", seed=s), calls(2000)) for s in (7, 7, 8)]
    assert runs[0] == runs[1] != runs[2]
    assert 450 < len(runs[0]) < 750
    # Combined with a count: only selected calls draw.
    hits = fired(plan("drop every=2 probability=0.5", seed=1), calls(200))
    assert hits and all(i % 2 == 0 for i in hits) and len(hits) < 100


def test_adding_a_rule_does_not_shift_another_rules_draws() -> None:
    alone = plan("drop probability=0.5 name=a", seed=3)
    with_other = plan("delay=1 method=tools/list probability=0.5", "drop probability=0.5 name=a",
                      seed=3)  # fmt: skip
    mixed = [view(i, "tools/list" if i % 3 == 0 else "tools/call") for i in range(1, 300)]
    a = [v.rpc_id for v in mixed if (d := alone.decide(v)) and d.rule == "a"]
    b = [v.rpc_id for v in mixed if (d := with_other.decide(v)) and d.rule == "a"]
    assert a == b and a


def test_counters_per_session_client_and_global_are_independent() -> None:
    order = [("s-1", "a@1"), ("s-2", "a@1"), ("s-1", "a@1"), ("s-3", "b@1"), ("s-2", "a@1")]
    views = [view(i, session=s, client=c) for i, (s, c) in enumerate(order, 1)]
    # nth=2 in each scope's own count.
    assert fired(plan("drop nth=2"), views) == [3, 5]
    assert fired(plan("drop nth=2 counter=client"), views) == [2]
    assert fired(plan("drop nth=2 counter=global"), views) == [2]
    assert fired(plan("drop nth=4 counter=global"), views) == [4]


def test_each_rule_counts_every_call_it_matches_and_the_first_acting_rule_wins() -> None:
    p = plan("drop nth=2 name=a", "delay=5 nth=2 name=b", "delay=9 nth=3 name=c")
    decisions = [p.decide(v) for v in calls(3)]
    assert [d.rule if d else None for d in decisions] == [None, "a", "c"]


def test_a_rule_letting_a_call_through_does_not_stop_later_rules() -> None:
    p = plan("http_status=503,200", "tool_error nth=2")
    d1, d2, d3 = (p.decide(v) for v in calls(3))
    assert d1 is not None and d1.action == "http_status"
    assert d2 is not None and d2.action == "tool_error"
    assert d3 is None


def test_match_keys_globs_lists_and_missing_values() -> None:
    rule = "drop tool=search*,fetch client=claude-*@2.* protocol=2025-* session=s-1"
    p = plan(rule)
    assert p.decide(view(1, tool="search_docs", client="claude-code@2.1")) is not None
    assert p.decide(view(2, tool="fetch", client="claude-code@2.0")) is not None
    assert p.decide(view(3, tool="Search", client="claude-code@2.0")) is None  # case counts
    assert p.decide(view(4, tool="fetch", client="codex@2.0")) is None
    assert p.decide(view(5, tool="fetch", client="claude-code@2.0", session="s-2")) is None
    assert p.decide(view(6, tool="fetch", client="claude-code@2.0", protocol=None)) is None
    star = plan("drop client=* method=*")
    assert star.decide(view(7, "ping", client=None)) is not None  # "*" matches a missing value
    assert plan("drop").decide(view(8, "tools/list")) is None  # default method: tools/call


def test_notifications_only_meet_actions_that_need_no_answer() -> None:
    note = view(None, "notifications/initialized")
    for rule in ("jsonrpc_error", "malformed", "sse_truncate", "input_required", "tool_error"):
        method = "" if rule in ("input_required", "tool_error") else " method=*"
        assert plan(rule + method).decide(note) is None, rule
    d = plan("http_status=503 method=notifications/*").decide(note)
    assert d is not None and d.reply is not None and d.reply.status == 503
    assert plan("drop method=*").decide(note) is not None


def test_gets_deletes_batches_and_answers_are_not_matched() -> None:
    p = plan("drop method=*")
    assert p.decide(view(None, None, http_method="GET")) is None
    assert p.decide(view(None, None, http_method="DELETE")) is None
    batch = b'[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]'
    assert p.decide(request_view(batch, session="s-1")) is None
    answer = b'{"jsonrpc":"2.0","id":"srv-1","result":{}}'
    assert p.decide(request_view(answer, session="s-1")) is None


def test_counters_are_bounded_and_a_forgotten_counter_restarts() -> None:
    p = plan("drop nth=2", max_counters=3)
    for i in range(100):
        p.decide(view(i, session=f"s-{i}"))
        assert p.counters <= 3
    # s-0's count was forgotten: its next call is its "first" again, not its second.
    assert p.decide(view(1000, session="s-0")) is None
    assert p.decide(view(1001, session="s-0")) is not None


def test_duplicate_names_across_sources_are_refused_by_the_plan() -> None:
    with pytest.raises(FaultRuleError, match='two rules are named "drop"'):
        FaultPlan([parse_inline("drop"), parse_inline("drop nth=2")])


# -- replies ----------------------------------------------------------------------------------

IDS = [0, "abc", 7, "", -1]


@pytest.mark.parametrize("rpc_id", IDS)
@pytest.mark.parametrize(
    ("rule", "outcome"),
    [
        ("jsonrpc_error=-32001 message=busy", Outcome.JSONRPC_ERROR),
        ("tool_error=nope", Outcome.TOOL_ERROR),
        ("input_required", Outcome.INPUT_REQUIRED),
        ("malformed=invalid_json", Outcome.MALFORMED_JSON),
        ("malformed=wrong_id", Outcome.INVALID_ENVELOPE),
        ("malformed=result_and_error", Outcome.INVALID_ENVELOPE),
    ],
)
@pytest.mark.parametrize("sse", [False, True])
def test_replies_carry_the_request_id_with_its_type_and_classify_as_meant(
    rpc_id: object, rule: str, outcome: Outcome, sse: bool
) -> None:
    d = plan(rule + (" sse" if sse else "")).decide(view(rpc_id))
    assert d is not None and d.effect is Effect.REPLY and not d.calls_upstream
    reply = d.reply
    assert reply is not None and reply.status == 200
    if sse:
        assert reply.header("content-type") == "text/event-stream"
        p = SseParser()
        (event,) = p.feed(reply.body) + p.end()
        assert isinstance(event, SseEvent) and event.event == "message"
        data = event.data.encode()
    else:
        assert reply.header("content-type") == "application/json"
        data = reply.body
    answer = try_loads(data)
    assert classify_answer("tools/call", rpc_id, answer).outcome is outcome
    if answer is NOT_JSON:
        assert data.startswith(b'{"jsonrpc":"2.0","id":' + json.dumps(rpc_id).encode())
    elif "wrong_id" in rule:
        assert type(answer["id"]) is type(rpc_id) and answer["id"] != rpc_id
    else:
        assert same_id(answer["id"], rpc_id)


def test_jsonrpc_error_members_and_status() -> None:
    rule = "jsonrpc_error=-32602 message='Invalid params' data='{\"field\":\"x\"}' status=500"
    d = plan(rule).decide(view(7))
    assert d is not None and d.reply is not None and d.reply.status == 500
    assert decoded(d.reply.body) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {"code": -32602, "message": "Invalid params", "data": {"field": "x"}},
    }


def test_tool_error_shape_follows_the_protocol_version() -> None:
    old = plan("tool_error=boom").decide(view(1, protocol="2025-11-25"))
    new = plan("tool_error=boom").decide(view(1, protocol="2026-07-28"))
    assert old is not None and old.reply is not None and new is not None and new.reply is not None
    assert decoded(old.reply.body)["result"] == {
        "content": [{"type": "text", "text": "boom"}],
        "isError": True,
    }
    assert decoded(new.reply.body)["result"]["resultType"] == "complete"


def test_malformed_for_other_methods_and_string_ids() -> None:
    d = plan("malformed=result_and_error method=tools/list").decide(view("x", "tools/list"))
    assert d is not None and d.reply is not None
    answer = decoded(d.reply.body)
    assert answer["result"] == {} and answer["error"]["code"] == -32603 and answer["id"] == "x"
    wrong = plan("malformed=wrong_id").decide(view("x"))
    assert wrong is not None and wrong.reply is not None
    assert decoded(wrong.reply.body)["id"] == "x-not-yours"


def test_http_status_replies() -> None:
    d = plan("http_status=429 retry_after=3").decide(view(1))
    assert d is not None and d.reply is not None
    assert (d.reply.status, d.reply.headers, d.reply.body) == (429, (("retry-after", "3"),), b"")
    text = plan("http_status=502 body='Bad gateway'").decide(view(1))
    assert text is not None and text.reply is not None
    assert text.reply.headers == (("content-type", "text/plain; charset=utf-8"),)
    assert text.reply.body == b"Bad gateway"
    (json_rule,) = parse_rules('[{"action":"http_status","status":503,"body":{"e":1}}]', "f")
    j = FaultPlan([json_rule]).decide(view(1))
    assert j is not None and j.reply is not None
    assert (j.reply.header("content-type"), j.reply.body) == ("application/json", b'{"e":1}')
    rpc = plan("http_status=400 code=-32600 message=bad").decide(view("q"))
    assert rpc is not None and rpc.reply is not None
    assert decoded(rpc.reply.body) == {
        "jsonrpc": "2.0",
        "id": "q",
        "error": {"code": -32600, "message": "bad"},
    }
    note = plan("http_status=400 code=-32600 method=*").decide(view(None, "notifications/x"))
    assert note is not None and note.reply is not None and decoded(note.reply.body)["id"] is None


def test_a_status_sequence_applies_to_the_calls_the_rule_acts_on_then_passes() -> None:
    p = plan("http_status=503,429,200,500 nth=1 counter=global")
    assert [p.decide(v) is not None for v in calls(3)] == [True, False, False]
    p = plan("http_status=503,429,200,500")
    statuses = [d.reply.status if d and d.reply else None for d in map(p.decide, calls(6))]
    assert statuses == [503, 429, None, 500, None, None]
    every = plan("http_status=503,502 every=2")
    statuses = [d.reply.status if d and d.reply else None for d in map(every.decide, calls(6))]
    assert statuses == [None, 503, None, 502, None, None]
    # A 2xx with a body is a reply, not a pass.
    (ok,) = parse_rules('[{"action":"http_status","status":202,"body":""}]', "f")
    d = FaultPlan([ok]).decide(view(1))
    assert d is not None and d.reply is not None and (d.reply.status, d.reply.body) == (202, b"")


def test_alter_and_drop_decisions() -> None:
    cut = plan("sse_truncate=2").decide(view(1))
    final = plan("sse_truncate").decide(view(1))
    drop, after = plan("drop").decide(view(1)), plan("drop upstream").decide(view(1))
    slow, gaps = plan("delay=300").decide(view(1)), plan("delay=40 where=events").decide(view(1))
    assert cut == Decision("sse_truncate", "sse_truncate", Effect.ALTER, truncate_after_events=2)
    assert final == Decision(
        "sse_truncate", "sse_truncate", Effect.ALTER, truncate_before_final=True
    )
    assert drop == Decision("drop", "drop", Effect.DROP)
    assert after == Decision("drop", "drop", Effect.DROP, drop_after_upstream=True)
    assert slow == Decision("delay", "delay", Effect.ALTER, delay_headers_ms=300)
    assert gaps == Decision("delay", "delay", Effect.ALTER, delay_events_ms=40)
    upstream = {
        d.action + ("+upstream" if d.drop_after_upstream else ""): d.calls_upstream
        for d in (cut, final, drop, after, slow, gaps)
        if d is not None
    }
    assert upstream == {"sse_truncate": True, "drop": False, "drop+upstream": True, "delay": True}
    assert cut is not None and final is not None and gaps is not None and slow is not None
    assert isinstance(cut.cutter(1), SseCutter) and isinstance(final.cutter(1), SseCutter)
    assert isinstance(gaps.cutter(1), SseCutter) and slow.cutter(1) is None
    assert cut.injected == {"rule": "sse_truncate", "action": "sse_truncate"}


def test_idle_cut_decisions_call_the_upstream_and_name_get_streams_only_when_asked() -> None:
    get = request_view(None, session="s-1", http_method="GET")
    resume = request_view(None, session="s-1", http_method="GET", resumption=True)
    graceful = plan("idle_cut=1000 graceful method=GET name=close")
    d = graceful.decide(get)
    assert d == Decision(
        "close", "idle_cut", Effect.ALTER, idle_cut_ms=1000, idle_cut_graceful=True
    )
    assert d.calls_upstream and d.cutter(None) is None  # the bytes pass as they come
    assert d.injected == {"rule": "close", "action": "idle_cut"}
    assert graceful.decide(resume) is None  # `GET` is the standby stream; `GET:resume` apart
    # Without `method`, the rule acts on tools/call (answered with SSE), never on a GET.
    default = plan("idle_cut=500")
    assert default.decide(get) is None and default.decide(view(1, method="tools/list")) is None
    assert default.decide(view(1)) == Decision(
        "idle_cut", "idle_cut", Effect.ALTER, idle_cut_ms=500
    )
    # A notification has no stream to cut, but the action needs no id: a POST of one matches.
    assert plan("idle_cut=500 method=*").decide(view(None, "notifications/x")) is not None
    both = plan("idle_cut=500 method=GET,GET:resume nth=2")
    assert fired(both, [get, resume, get]) == [2]


# -- session_expired ---------------------------------------------------------------------------


def test_session_expired_answers_404_for_that_session_from_then_on() -> None:
    p = plan("session_expired nth=2 name=expire")
    assert p.decide(view(1)) is None
    first = p.decide(view(2))
    assert first is not None and first.reply is not None
    assert (first.reply.status, first.reply.headers, first.reply.body) == (404, (), b"")
    assert first.injected == {"rule": "expire", "action": "session_expired"}
    later = [
        view(3, "tools/list"),
        view(None, "notifications/cancelled"),
        view(None, None, http_method="GET"),
        view(None, None, http_method="DELETE"),
        view(4),
    ]
    for v in later:
        d = p.decide(v)
        assert d is not None and d.reply is not None and d.reply.status == 404, v
        assert d.injected == {"rule": "expire", "action": "session_expired"}
    assert p.is_expired("s-1") and not p.is_expired("s-2")
    assert p.decide(view(5, session="s-2")) is None  # other sessions are untouched
    assert p.decide(view(6, "initialize")) is None  # how a client recovers


def test_expired_sessions_are_bounded() -> None:
    p = plan("session_expired", max_expired=2)
    for i in range(5):
        p.decide(view(i, session=f"s-{i}"))
    assert [p.is_expired(f"s-{i}") for i in range(5)] == [False, False, False, True, True]


# -- input_required and its continuation ---------------------------------------------------------


def test_input_required_then_the_continuation_reaches_the_upstream_stripped() -> None:
    p = plan("input_required='Deploy?' nth=1 name=approve", seed=5)
    d = p.decide(request_view(body("a", arguments={"env": "prod"}), session="s-1"))
    assert d is not None and d.reply is not None and d.effect is Effect.REPLY
    result = decoded(d.reply.body)["result"]
    assert result["resultType"] == "input_required"
    asked = result["inputRequests"]["approval"]
    assert asked["method"] == "elicitation/create" and asked["params"]["message"] == "Deploy?"
    assert (
        asked["params"]["mode"] == "form" and asked["params"]["requestedSchema"]["type"] == "object"
    )
    state = result["requestState"]
    assert state.startswith(REQUEST_STATE_PREFIX)
    answers = {"approval": {"result": {"action": "accept", "content": {"approve": True}}}}
    follow = body("b", arguments={"env": "prod"}, inputResponses=answers, requestState=state)
    v = request_view(follow, session="s-1")
    assert v.is_continuation
    cont = p.decide(v)
    assert cont == Decision("approve", "input_required", Effect.ALTER, strip_continuation=True)
    assert cont.calls_upstream
    assert json.loads(strip_continuation(follow)) == json.loads(
        body("b", arguments={"env": "prod"})
    )
    # The continuation was not counted: the next fresh call is the rule's second (passes).
    assert p.decide(request_view(body("c"), session="s-1")) is None


def test_request_states_are_reproducible_and_distinct() -> None:
    def states(seed: int) -> list[str]:
        p = plan("input_required", seed=seed)
        return [decoded(p.decide(view(i)).reply.body)["result"]["requestState"] for i in range(3)]  # type: ignore[union-attr]

    assert states(1) == states(1) != states(2)
    assert len(set(states(1))) == 3


def test_a_continuation_of_the_upstreams_own_question_is_matched_normally() -> None:
    p = plan("tool_error")
    follow = body(2, inputResponses={"k": {}}, requestState="server-state")
    d = p.decide(request_view(follow))
    assert d is not None and d.action == "tool_error"
    assert strip_continuation(b"not json") == b"not json"
    plain = body(3)
    assert strip_continuation(plain) is plain  # nothing to strip: the very same bytes


# -- request_view ----------------------------------------------------------------------------------


def test_request_view_reads_method_id_tool_client_and_version() -> None:
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "agent", "version": "3"},
    }
    v = request_view(body(0, _meta=meta), session="c-1", client="old@1", protocol_version="x")
    assert (v.method, v.rpc_id, v.tool, v.session) == ("tools/call", 0, "echo", "c-1")
    assert (v.client, v.protocol_version) == ("agent@3", "2026-07-28")
    init = body(1, "initialize", clientInfo={"name": "cli", "version": "1.0"})
    assert request_view(init).client == "cli@1.0"
    plain = request_view(body(2, "tools/list"), client="known@1", protocol_version="2025-11-25")
    assert (plain.client, plain.protocol_version, plain.tool) == ("known@1", "2025-11-25", None)
    note = request_view(body(None, "notifications/initialized"))
    assert (note.method, note.rpc_id) == ("notifications/initialized", None)
    assert request_view(b'{"jsonrpc":"2.0","id":true,"method":"x"}').rpc_id is None
    for junk in (None, b"", b"\xff\xfe", b"[]", b"{}", b"42", b'{"jsonrpc":"2.0"}'):
        assert request_view(junk, session="s").method is None
    # A GET stream is the pseudo-method GET (GET:resume with Last-Event-ID): only rules
    # that name it act on it.
    assert request_view(body(1), http_method="GET").method == "GET"
    assert request_view(None, http_method="GET", resumption=True).method == "GET:resume"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300) | st.builds(lambda s: s.encode(), st.text(max_size=200)))
def test_nothing_a_peer_sends_makes_the_core_raise(data: bytes) -> None:
    p = plan("session_expired method=* nth=2", "input_required", "malformed=wrong_id method=*")
    for method in ("POST", "GET"):
        v = request_view(data, session="s", http_method=method)
        p.decide(v)
        p.decide(v)
    strip_continuation(data)
    c = SseCutter(before_final_for_id=1)
    c.feed(data)
    c.end()


# -- the SSE cutter --------------------------------------------------------------------------------


def ev(msg: object, name: str = "message", id_: str | None = None) -> bytes:
    head = f"event: {name}\n" + (f"id: {id_}\n" if id_ else "")
    return (head + f"data: {json.dumps(msg)}\n\n").encode()


PROGRESS = ev({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}})
FINAL = ev({"jsonrpc": "2.0", "id": 5, "result": {"content": []}})
STREAM = b"id: prime\ndata:\n\n" + PROGRESS + b": keep-alive\n\n" + PROGRESS + FINAL


def run(cutter: SseCutter, chunks: list[bytes]) -> tuple[bytes, bool, int]:
    """Feed the chunks until the cutter closes, then end: forwarded bytes, cut, events."""
    out = b""
    for chunk in chunks:
        cut = cutter.feed(chunk)
        out += cut.data
        if cut.close:
            return out, cutter.cut, cutter.events
    out += cutter.end().data
    return out, cutter.cut, cutter.events


def test_cut_before_the_final_response() -> None:
    out, cut, events = run(SseCutter(before_final_for_id=5), [STREAM])
    assert out == STREAM[: -len(FINAL)] and cut and events == 3
    # Another id is not the final response; the type counts too ("5" is not 5).
    assert run(SseCutter(before_final_for_id="5"), [STREAM]) == (STREAM, False, 4)
    assert run(SseCutter(before_final_for_id=6), [STREAM])[:2] == (STREAM, False)


def test_an_error_response_is_final_too() -> None:
    error = ev({"jsonrpc": "2.0", "id": "x", "error": {"code": -1, "message": "m"}})
    assert run(SseCutter(before_final_for_id="x"), [PROGRESS + error]) == (PROGRESS, True, 1)


@pytest.mark.parametrize(
    ("n", "expected"),
    [
        (0, b""),
        (1, b"id: prime\ndata:\n\n"),  # the priming event counts (it is dispatched)
        (2, b"id: prime\ndata:\n\n" + PROGRESS),
        (3, b"id: prime\ndata:\n\n" + PROGRESS + b": keep-alive\n\n" + PROGRESS),
        (4, STREAM),
    ],
)
def test_cut_after_n_events(n: int, expected: bytes) -> None:
    out, cut, events = run(SseCutter(after_events=n), [STREAM])
    assert (out, cut, events) == (expected, True, n)


def test_no_cut_when_the_stream_ends_first_and_the_tail_is_forwarded_as_is() -> None:
    tail = b"data: {unfinished"
    assert run(SseCutter(after_events=9), [STREAM + tail]) == (STREAM + tail, False, 4)
    assert run(SseCutter(), [STREAM]) == (STREAM, False, 4)


def test_line_ends_cr_crlf_and_a_bom() -> None:
    crlf = STREAM.replace(b"\n", b"\r\n")
    out, cut, _ = run(SseCutter(before_final_for_id=5), [crlf])
    assert cut and out == crlf[: -len(FINAL.replace(b"\n", b"\r\n"))]
    cr = b"\xef\xbb\xbf" + STREAM.replace(b"\n", b"\r")
    out, cut, _ = run(SseCutter(before_final_for_id=5), [cr])
    assert cut and out == cr[: -len(FINAL)]
    # A BOM then a blank line: the blank line ends an (empty) block, not an event.
    assert run(SseCutter(after_events=1), [b"\xef\xbb\xbf\n" + PROGRESS + FINAL]) == (
        b"\xef\xbb\xbf\n" + PROGRESS,
        True,
        1,
    )


def test_a_cr_at_a_chunk_end_waits_for_the_next_byte() -> None:
    c = SseCutter(after_events=1)
    assert c.feed(b"data: x\r\r").data == b""  # the LF of a CRLF may follow
    cut = c.feed(b"\ndata: y\r\r")
    assert (cut.data, cut.close) == (b"data: x\r\r\n", True)


def test_an_event_over_the_cap_is_forwarded_as_it_arrives_and_counts() -> None:
    big = b"data: " + b"x" * 300 + b"\n\n"
    c = SseCutter(before_final_for_id=5, max_event_bytes=100)
    first = c.feed(big[:150])
    assert first.data == big[:150] and not first.close  # passed on before its end
    rest = c.feed(big[150:] + FINAL)
    assert rest.data == big[150:] and rest.close and c.cut and c.events == 1
    # A final response over the cap cannot be recognised: it passes.
    huge_final = ev({"jsonrpc": "2.0", "id": 5, "result": {"pad": "y" * 100}})
    assert run(SseCutter(before_final_for_id=5, max_event_bytes=100), [huge_final]) == (
        huge_final,
        False,
        1,
    )


def test_after_close_nothing_more_is_forwarded() -> None:
    c = SseCutter(after_events=1)
    assert c.feed(PROGRESS + PROGRESS).data == PROGRESS
    assert c.feed(PROGRESS) == c.end() and not c.feed(PROGRESS).pieces
    assert c.end().close


def test_pieces_are_whole_events_for_delays_between_them() -> None:
    c = SseCutter()
    cut = c.feed(STREAM[:10])
    assert cut.pieces == ()
    cut = c.feed(STREAM[10:])
    assert cut.pieces == (
        b"id: prime\ndata:\n\n",
        PROGRESS,
        b": keep-alive\n\n",
        PROGRESS,
        FINAL,
    )


def test_misuse_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        SseCutter(after_events=1, before_final_for_id=1)
    with pytest.raises(ValueError):
        SseCutter(after_events=-1)


def chunked(data: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *sorted(set(cuts)), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


CUTTERS = [
    {"before_final_for_id": 5},
    {"after_events": 0},
    {"after_events": 2},
    {"after_events": 3},
    {"after_events": 10},
    {},
]
STREAMS = [
    STREAM,
    STREAM.replace(b"\n", b"\r\n"),
    STREAM.replace(b"\n", b"\r"),
    b"\xef\xbb\xbf" + STREAM + b"data: tail",
    b"data: a\r\n\r\ndata: b\r\rdata: c\n\r\n" + FINAL,
]


@pytest.mark.parametrize("kw", CUTTERS)
@pytest.mark.parametrize("stream", STREAMS)
def test_split_invariance_at_every_single_point(kw: dict[str, Any], stream: bytes) -> None:
    whole = run(SseCutter(**kw), [stream])
    assert stream.startswith(whole[0])
    for i in range(len(stream) + 1):
        assert run(SseCutter(**kw), chunked(stream, [i])) == whole, i
    assert run(SseCutter(**kw), [bytes([b]) for b in stream]) == whole


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(STREAMS),
    st.sampled_from(CUTTERS),
    st.lists(st.integers(0, 400), max_size=12),
    st.sampled_from([16, 64, 1 << 20]),
)
def test_split_invariance_any_chunking(
    stream: bytes, kw: dict[str, Any], cuts: list[int], cap: int
) -> None:
    cuts = [c for c in cuts if c <= len(stream)]
    whole = run(SseCutter(**kw, max_event_bytes=cap), [stream])
    assert run(SseCutter(**kw, max_event_bytes=cap), chunked(stream, cuts)) == whole
    assert stream.startswith(whole[0])


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.sse")), ids=lambda p: p.name)
def test_real_streams_are_cut_before_their_final_response(path: Path) -> None:
    data = path.read_bytes()
    finals = [m["id"] for m in sse_messages(data) if "id" in m and "method" not in m]
    for rpc_id in finals:
        out, cut, _ = run(SseCutter(before_final_for_id=rpc_id), [data])
        assert cut and data.startswith(out)
        assert all(not same_id(m.get("id"), rpc_id) for m in sse_messages(out))
        # At an event boundary: what is left starts a new event.
        assert out == b"" or out.endswith(b"\n\n")


def test_a_single_status_fails_every_selected_call() -> None:
    """`errors.unavailable` is a server that is down: not only its first call fails."""
    from mcp_layers_core.faults import preset

    plan = FaultPlan(preset("errors.unavailable"))
    view = request_view(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}', session="s")
    decisions = [plan.decide(view) for _ in range(4)]
    assert [d.reply.status if d and d.reply else None for d in decisions] == [503, 503, 503, 503]
