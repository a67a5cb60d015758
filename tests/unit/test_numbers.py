"""Numbers are classified by the spec, not by the fast parser's limits.

orjson refuses a number past double range (`1e400`) and rounds an integer past 64 bits
to a float; both are valid JSON, which both SDK clients read (`JSON.parse` gives
Infinity and a rounded number; Python's `json` gives `inf` and the exact integer). A
record never calls such an answer malformed, and an error code keeps its digits.
"""

from __future__ import annotations

import json

import pytest
from mcp_layers_core.jsonl import dumps_line
from mcp_layers_core.jsonrpc import NOT_JSON, try_loads
from wire import SSE, Run, call, event

BIG = 123456789012345678901234567890  # past 64 bits


def text_block_answer(extra: str) -> bytes:
    return (
        b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"t"}],'
        b'"structuredContent":{"x":' + extra.encode() + b"}}}"
    )


@pytest.mark.parametrize("number", ["1e400", "-1e400", str(BIG), "1000.0", "1E+2"])
def test_valid_json_numbers_anywhere_are_not_malformed(number: str) -> None:
    r = Run()
    record = r.exchange(call(1), text_block_answer(number))
    assert record["outcome"] == "TOOL_SUCCESS"


@pytest.mark.parametrize("carrier", ["json", "sse"])
def test_an_error_code_past_64_bits_keeps_its_digits(carrier: str) -> None:
    r = Run()
    body = b'{"jsonrpc":"2.0","id":1,"error":{"code":%d,"message":"odd"}}' % BIG
    flow = r.post(call(1))
    if carrier == "json":
        (record,) = r.json(flow, 200, body)
    else:
        (record,) = r.sse(flow, [b"data: " + body + b"\n\n"])
    assert record["outcome"] == "JSONRPC_ERROR"
    assert record["jsonrpc"]["errorCode"] == BIG
    line = dumps_line(record)
    assert b'"errorCode":%d' % BIG in line  # the exact digits, as a JSON number
    assert json.loads(line)["jsonrpc"]["errorCode"] == BIG


def test_an_integral_float_error_code_is_an_integer() -> None:
    r = Run()
    record = r.exchange(
        call(1), b'{"jsonrpc":"2.0","id":1,"error":{"code":-32602.0,"message":"m"}}'
    )
    assert (record["outcome"], record["jsonrpc"]["errorCode"]) == ("JSONRPC_ERROR", -32602)


def test_an_error_code_of_infinity_is_no_integer() -> None:
    # 1e400 reads as infinity in every client: no integer, so no valid error object.
    r = Run()
    record = r.exchange(call(1), b'{"jsonrpc":"2.0","id":1,"error":{"code":1e400,"message":"m"}}')
    assert record["outcome"] == "INVALID_ENVELOPE"


def test_an_id_past_double_range_is_written_as_valid_json() -> None:
    r = Run()
    flow = r.post(b'{"jsonrpc":"2.0","id":1e400,"method":"tools/call","params":{"name":"e"}}')
    (record,) = r.json(flow, 200, b'{"jsonrpc":"2.0","id":1e400,"result":{"content":[]}}')
    record["jsonrpc"]["errorCode"] = BIG  # forces the stdlib writer, which has no Infinity
    line = dumps_line(record)
    assert json.loads(line)["jsonrpc"]["id"] is None


def test_nan_and_infinity_literals_are_not_json() -> None:
    for text in (b"NaN", b'{"a": Infinity}', b"-Infinity", b"\xff{}", "{}".encode("utf-16")):
        assert try_loads(text) is NOT_JSON


def test_sse_events_follow_the_same_rules() -> None:
    r = Run()
    flow = r.post(call(1))
    (record,) = r.sse(flow, [event(json.loads(text_block_answer("1")))], headers=SSE)
    assert record["outcome"] == "TOOL_SUCCESS"
    flow = r.post(call(2))
    answer = text_block_answer("1e400").replace(b'"id":1', b'"id":2')
    (record,) = r.sse(flow, [b"data: " + answer + b"\n\n"])
    assert record["outcome"] == "TOOL_SUCCESS"


def test_a_lone_surrogate_is_recorded_as_its_escape() -> None:
    # Valid JSON (JSON.stringify of an emoji cut in half), but no UTF-8: orjson refuses
    # it, the stdlib reads it, and the record is still written, as one valid line.
    r = Run()
    answer = b'{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a \\ud83d"}]}}'
    record = r.exchange(call(1), answer)
    assert record["outcome"] == "TOOL_SUCCESS"
    record["client"] = "agent \ud83d"
    line = dumps_line(record)
    assert line.endswith(b"\n") and b"\\ud83d" in line
    assert json.loads(line)["client"] == "agent \ud83d"
