"""Fault rules on stdio (mcp_layers_core/stdio_faults.py): what each decision does to a line."""

from __future__ import annotations

import json

import pytest
from mcp_layers_core.faults import FaultRuleError, parse_inline
from mcp_layers_core.stdio_faults import StdioFaults


def line(rpc_id: int, tool: str = "echo") -> bytes:
    params = {"name": tool, "arguments": {}}
    return json.dumps(
        {"jsonrpc": "2.0", "id": rpc_id, "method": "tools/call", "params": params}
    ).encode()


def plan(*rules: str) -> StdioFaults:
    return StdioFaults([parse_inline(r) for r in rules])


def test_a_reply_is_written_instead_of_forwarding() -> None:
    v = plan("tool_error=nope nth=1").client_line(line(7))
    assert not v.forward and v.rpc_id == 7
    assert v.injected == {"rule": "tool_error", "action": "tool_error"}
    assert v.reply is not None
    reply = json.loads(v.reply)
    assert reply["id"] == 7 and reply["result"]["isError"] is True


def test_drop_and_delay_hold_the_servers_answer_by_id() -> None:
    f = plan("drop upstream nth=1", "delay=250 nth=2")
    assert f.client_line(line(1)).forward
    assert f.client_line(line("a")).forward  # type: ignore[arg-type]
    assert f.server_line(b'{"jsonrpc":"2.0","id":1,"result":{}}') == ("drop", 0)
    # The TypeScript SDK writes the id last: read whole.
    assert f.server_line(b'{"result":{},"jsonrpc":"2.0","id":"a"}') == ("delay", 250)
    assert f.server_line(b'{"jsonrpc":"2.0","id":1,"result":{}}') is None  # once
    assert not f.held


def test_drop_before_the_server_forwards_nothing() -> None:
    v = plan("drop").client_line(line(3))
    assert not v.forward and v.reply is None and v.injected is not None


def test_what_is_not_a_request_passes() -> None:
    f = plan("tool_error=x")
    for other in (b"not json", b'{"jsonrpc":"2.0","method":"notifications/initialized"}'):
        assert f.client_line(other).forward


@pytest.mark.parametrize(
    "rule", ["http_status=503", "session_expired", "sse_truncate", "tool_error=x sse"]
)
def test_http_only_faults_are_refused(rule: str) -> None:
    with pytest.raises(FaultRuleError):
        plan(rule)


def test_crash_is_a_drop_upstream_rule_that_kills() -> None:
    from mcp_layers_core.stdio_faults import crash_rule

    assert crash_rule("tool_error=x") is None
    text, name = crash_rule("crash tool=echo nth=2")  # type: ignore[misc]
    assert name == "crash"
    f = StdioFaults([parse_inline(text)], crashes=frozenset({name}))
    assert not f.client_line(line(1)).crash
    v = f.client_line(line(2))
    assert v.forward and v.crash and v.injected == {"rule": "crash", "action": "crash"}
    # An answer that comes before the kill lands never reaches the client.
    assert f.server_line(b'{"jsonrpc":"2.0","id":2,"result":{}}') == ("drop", 0)
    assert crash_rule("crash name=boom")[1] == "boom"  # type: ignore[index]


def test_crash_in_a_rules_file() -> None:
    from mcp_layers_core.stdio_faults import parse_rules_file

    text = """{"rules": [
  {"action": "tool_error", "text": "x", "tool": "other"},
  {"action" : "crash", "tool": "echo", "nth": 2},
  {"action": "crash", "name": "boom", "tool": "write"}
]}"""
    rules, crashes = parse_rules_file(text, "dir/rules.json")
    assert crashes == {"rules.json#2", "boom"}
    f = StdioFaults(rules, crashes=crashes)
    assert not f.client_line(line(1)).crash
    v = f.client_line(line(2))
    assert v.forward and v.crash and v.injected == {"rule": "rules.json#2", "action": "crash"}
    assert f.client_line(line(3, "write")).crash
    # Without a crash rule, the file is the proxy's.
    assert parse_rules_file('[{"action": "drop"}]', "r.json")[1] == frozenset()


@pytest.mark.parametrize(
    ("text", "says", "at_line"),
    [
        # Messages name the file's own lines: the rewrite keeps them.
        ('[\n{"action": "crash"},\n{"action": "crash", "nth": "x"}\n]', "nth", 3),
        ('[{"action": "crash", "upstream": true}]', '"crash" takes no "upstream"', None),
        (
            '[{"action": "crash"}, {"action": "jsonrpc_error", "code": -1,'
            ' "data": {"action": "crash"}}]',
            "could not be read",
            None,
        ),
    ],
)
def test_a_crash_rule_a_file_cannot_hold_is_refused(
    text: str, says: str, at_line: int | None
) -> None:
    from mcp_layers_core.stdio_faults import parse_rules_file

    with pytest.raises(FaultRuleError) as e:
        parse_rules_file(text, "rules.json")
    assert says in str(e.value)
    assert e.value.line == at_line
