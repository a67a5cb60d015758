"""Issue 18 wire cases the SDK client cannot send: a raw client through a real mitmdump.

The SDK-judged cases (content type, 202, SSE event type, id-less errors, batches,
encodings, result shapes) are in test_adversarial_sweep.py. These need a client that
sends what no SDK sends (ids past 64 bits, a BOM, a task-augmented call) and are
judged by the spec; they reuse the module proxy, upstream and sentinel of
test_wire_cases.py.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import test_wire_cases as cases
from mcp_layers_support.harness import Proxy
from mcp_layers_support.scripted_upstream import Reply, ScriptedUpstream, json_reply
from test_wire_cases import PROTOCOL, Wire, request_headers, result, tool_call

pytestmark = pytest.mark.e2e

# The wire-case module's proxy and upstream fixtures, a fresh pair for this module.
upstream = cases.upstream
proxy = cases.proxy


@pytest.fixture
def raw(upstream: ScriptedUpstream, proxy: Proxy) -> Wire:
    return Wire(upstream, proxy)


BIG = 2**64 + 1  # past 64 bits: orjson would read it as a float


def _one(raw: Wire) -> dict[str, Any]:
    records = raw.records()
    assert len(records) == 1, records
    return records[0]


def test_big_id_answered_with_the_next_id_is_a_wrong_id(raw: Wire) -> None:
    # 2**64+1 and 2**64+2 are the same float: before, the wrong answer was paired as right.
    raw.script([json_reply(result(BIG + 1))])
    got = raw.post(tool_call(BIG), request_headers("sess-big-wrong"))
    assert got.status == 200
    record = _one(raw)
    assert record["outcome"] == "INVALID_ENVELOPE", record
    assert record["jsonrpc"]["id"] == BIG and type(record["jsonrpc"]["id"]) is int


def test_big_id_answered_right_is_exact_in_the_record(raw: Wire) -> None:
    raw.script([json_reply(result(BIG))])
    raw.post(tool_call(BIG), request_headers("sess-big-right"))
    record = _one(raw)
    assert record["outcome"] == "TOOL_SUCCESS", record
    # The line on disk holds the id's digits, not a rounded float.
    line = next(x for x in raw.proxy.text().splitlines() if str(BIG) in x)
    assert json.loads(line)["jsonrpc"]["id"] == BIG


def test_post_with_a_bom_is_recorded(raw: Wire) -> None:
    # The Python SDK server answers a BOM-prefixed body 400 + -32700 with a null id.
    parse_error = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse"}}
    raw.script([json_reply(parse_error, 400)])
    body = b"\xef\xbb\xbf" + json.dumps(tool_call(7101)).encode()
    got = raw.post(body, request_headers("sess-bom"))
    assert got.status == 400
    record = _one(raw)
    assert record["outcome"] == "HTTP_ERROR", record
    assert record["jsonrpc"]["errorCode"] == -32700
    assert record["jsonrpc"]["id"] == 7101
    assert "request_bom" in record["notes"]


CREATE_TASK = {
    "task": {
        "taskId": "t-1",
        "status": "working",
        "createdAt": "2025-11-25T00:00:00Z",
        "lastUpdatedAt": "2025-11-25T00:00:00Z",
        "ttl": 60000,
    }
}


def test_task_augmented_call_answered_with_its_task_is_valid(raw: Wire) -> None:
    request = tool_call(7102)
    request["params"]["task"] = {"ttl": 60000}
    raw.script([json_reply({"jsonrpc": "2.0", "id": 7102, "result": CREATE_TASK})])
    raw.post(request, request_headers("sess-task", PROTOCOL))
    record = _one(raw)
    assert record["outcome"] == "SUCCESS", record
    assert "task_created" in record["notes"]


def test_a_task_result_to_a_plain_call_is_invalid(raw: Wire) -> None:
    # Without `params.task` the server owes a CallToolResult: no content is a violation.
    raw.script([json_reply({"jsonrpc": "2.0", "id": 7103, "result": CREATE_TASK})])
    raw.post(tool_call(7103), request_headers("sess-task-plain", PROTOCOL))
    assert _one(raw)["outcome"] == "INVALID_TOOL_RESULT"


def test_202_to_a_streamable_request_is_written_at_once(raw: Wire) -> None:
    # No 2024-11-05 GET stream in sight: nothing will answer on another stream, so the
    # record must not wait (it used to be parked for 300 s and blamed on the proxy).
    raw.script([Reply(202)])
    got = raw.post(tool_call(7104), request_headers("sess-202"))
    assert got.status == 202
    record = _one(raw)
    assert record["outcome"] == "TRANSPORT_VIOLATION", record
    assert record["layer"] == "transport"
    assert record["notes"] == ["202_for_request"]
    assert record["durationMs"] < 5_000


def test_small_zstd_body_names_its_encoding(raw: Wire) -> None:
    # 48 bytes are over no cap: the note says what really happened.
    raw.script([Reply(200, [("Content-Type", "application/json"), ("Content-Encoding", "zstd")],
                       b"\x28\xb5\x2f\xfd" + b"\x00" * 44)])  # fmt: skip
    raw.post(tool_call(7105), request_headers("sess-zstd"))
    record = _one(raw)
    assert record["outcome"] == "UNINSPECTED", record
    assert record["notes"] == ["encoded_body:zstd"]
