"""The classifier: the seed article's eleven cases as it states them, then every rule."""

from __future__ import annotations

import json

import pytest
from mcp_layers_core.classify import (
    LAYER_OF,
    Layer,
    Outcome,
    Verdict,
    classify_answer,
    classify_body,
)
from mcp_layers_core.notes import Note

GOOD = {
    "jsonrpc": "2.0",
    "id": 1,
    "result": {
        "resultType": "complete",
        "content": [{"type": "text", "text": "ok"}],
        "isError": False,
    },
}
RPC_ERROR = {
    "jsonrpc": "2.0",
    "id": 1,
    "error": {"code": -32602, "message": "synthetic invalid params"},
}
TOOL_ERROR = {
    "jsonrpc": "2.0",
    "id": 1,
    "result": {
        "resultType": "complete",
        "content": [{"type": "text", "text": "failed"}],
        "isError": True,
    },
}
INPUT_REQUIRED = {
    "jsonrpc": "2.0",
    "id": 1,
    "result": {
        "resultType": "input_required",
        "inputRequests": {
            "approval": {
                "method": "elicitation/create",
                "params": {
                    "mode": "form",
                    "message": "synthetic input",
                    "requestedSchema": {"type": "object", "properties": {}},
                },
            }
        },
    },
}
LEGACY = {
    "jsonrpc": "2.0",
    "id": 1,
    "result": {"content": [{"type": "text", "text": "legacy ok"}], "isError": False},
}
NOT_AN_ARRAY = {
    "jsonrpc": "2.0",
    "id": 1,
    "result": {"resultType": "complete", "content": "not-an-array", "isError": False},
}


def body(value: object) -> bytes:
    return value.encode() if isinstance(value, str) else json.dumps(value).encode()


# (name, status, body, expected outcome, expected layer, expected code) as the seed's
# `classifyToolCall` returns them. The 503-then-200 case is two exchanges.
SEED_CASES = [
    ("baseline", 200, GOOD, "TOOL_SUCCESS", "application", None),
    (
        "explicit_http_503_then_200 (first)",
        503,
        {"note": "synthetic outage"},
        "HTTP_ERROR",
        "transport",
        None,
    ),
    ("explicit_http_503_then_200 (second)", 200, GOOD, "TOOL_SUCCESS", "application", None),
    ("jsonrpc_error", 200, RPC_ERROR, "JSONRPC_ERROR", "protocol", -32602),
    ("tool_isError", 200, TOOL_ERROR, "TOOL_ERROR", "application", None),
    ("transport_precedence", 500, GOOD, "HTTP_ERROR", "transport", None),
    ("malformed_json", 200, "{unclosed", "MALFORMED_JSON", "protocol", None),
    (
        "conflicting_envelope",
        200,
        {**GOOD, "error": RPC_ERROR["error"]},
        "INVALID_ENVELOPE",
        "protocol",
        None,
    ),
    ("wrong_response_id", 200, {**GOOD, "id": 99}, "INVALID_ENVELOPE", "protocol", None),
    ("input_required", 200, INPUT_REQUIRED, "INPUT_REQUIRED", "interaction", None),
    ("legacy_resultType_absent", 200, LEGACY, "TOOL_SUCCESS", "application", None),
    ("invalid_tool_result", 200, NOT_AN_ARRAY, "INVALID_TOOL_RESULT", "protocol", None),
]


@pytest.mark.parametrize(("name", "status", "payload", "outcome", "layer", "code"), SEED_CASES)
def test_seed_article_cases(
    name: str, status: int, payload: object, outcome: str, layer: str, code: int | None
) -> None:
    verdict = classify_body("tools/call", 1, status, body(payload))
    assert (verdict.outcome.value, verdict.layer.value, verdict.error_code) == (
        outcome,
        layer,
        code,
    )


def test_seed_cases_cover_all_eight_outcomes_of_the_article() -> None:
    seen = {case[3] for case in SEED_CASES}
    assert seen == {
        "TOOL_SUCCESS", "HTTP_ERROR", "JSONRPC_ERROR", "TOOL_ERROR",
        "INPUT_REQUIRED", "MALFORMED_JSON", "INVALID_ENVELOPE", "INVALID_TOOL_RESULT",
    }  # fmt: skip


def test_every_outcome_has_a_layer() -> None:
    assert set(LAYER_OF) == set(Outcome)
    assert Verdict(Outcome.UNINSPECTED).layer is Layer.PROXY


@pytest.mark.parametrize(
    ("answer", "outcome"),
    [
        ([GOOD], Outcome.INVALID_ENVELOPE),  # an array answering a single request
        ("just a string", Outcome.INVALID_ENVELOPE),
        (None, Outcome.INVALID_ENVELOPE),
        ({**GOOD, "jsonrpc": "1.0"}, Outcome.INVALID_ENVELOPE),
        ({k: v for k, v in GOOD.items() if k != "jsonrpc"}, Outcome.INVALID_ENVELOPE),
        ({"jsonrpc": "2.0", "id": 1}, Outcome.INVALID_ENVELOPE),  # neither result nor error
        ({**GOOD, "id": "1"}, Outcome.INVALID_ENVELOPE),  # "1" is not 1
        ({**GOOD, "id": True}, Outcome.INVALID_ENVELOPE),  # true is not 1 either
        ({k: v for k, v in GOOD.items() if k != "id"}, Outcome.INVALID_ENVELOPE),
        ({**RPC_ERROR, "error": {"code": "x", "message": "m"}}, Outcome.INVALID_ENVELOPE),
        ({**RPC_ERROR, "error": {"code": 1.5, "message": "m"}}, Outcome.INVALID_ENVELOPE),
        ({**RPC_ERROR, "error": {"code": -1, "message": 7}}, Outcome.INVALID_ENVELOPE),
        ({**RPC_ERROR, "error": None}, Outcome.INVALID_ENVELOPE),
        ({**RPC_ERROR, "id": 2}, Outcome.INVALID_ENVELOPE),
        ({**RPC_ERROR, "error": {"code": -32603.0, "message": "m"}}, Outcome.JSONRPC_ERROR),
        ({"jsonrpc": "2.0", "id": 1, "result": None}, Outcome.INVALID_TOOL_RESULT),
        ({"jsonrpc": "2.0", "id": 1, "result": []}, Outcome.INVALID_TOOL_RESULT),
        (
            {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "task", "content": []}},
            Outcome.INVALID_TOOL_RESULT,
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "result": {"resultType": 3, "content": []}},
            Outcome.INVALID_TOOL_RESULT,
        ),
        ({"jsonrpc": "2.0", "id": 1, "result": {"isError": False}}, Outcome.INVALID_TOOL_RESULT),
        (
            {"jsonrpc": "2.0", "id": 1, "result": {"content": [], "isError": "yes"}},
            Outcome.INVALID_TOOL_RESULT,
        ),
        ({"jsonrpc": "2.0", "id": 1, "result": {"content": []}}, Outcome.TOOL_SUCCESS),
    ],
)
def test_tools_call_rules(answer: object, outcome: Outcome) -> None:
    assert classify_answer("tools/call", 1, answer).outcome is outcome


def test_error_without_id_keeps_the_code_and_says_so() -> None:
    verdict = classify_answer(
        "tools/call", 1, {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "bad"}}
    )
    assert verdict == Verdict(Outcome.JSONRPC_ERROR, -32600, "bad", note=Note("error_without_id"))


def test_other_methods_are_success_or_invalid_result() -> None:
    ok = {"jsonrpc": "2.0", "id": 7, "result": {"tools": []}}
    assert classify_answer("tools/list", 7, ok) == Verdict(Outcome.SUCCESS, result_type="complete")
    assert (
        classify_answer("ping", 7, {"jsonrpc": "2.0", "id": 7, "result": 3}).outcome
        is Outcome.INVALID_RESULT
    )
    mrtr = {
        "jsonrpc": "2.0",
        "id": 7,
        "result": {"resultType": "input_required", "requestState": "s"},
    }
    assert classify_answer("prompts/get", 7, mrtr).outcome is Outcome.INPUT_REQUIRED


def test_recorded_fields_of_a_tool_result() -> None:
    assert classify_answer("tools/call", 1, TOOL_ERROR) == Verdict(
        Outcome.TOOL_ERROR, result_type="complete", is_error=True
    )
    assert classify_answer("tools/call", 1, LEGACY).result_type == "complete"


def test_http_error_keeps_a_jsonrpc_error_from_its_body() -> None:
    payload = {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32022, "message": "Unsupported protocol version"},
    }
    verdict = classify_body("server/discover", 1, 400, body(payload))
    assert verdict == Verdict(Outcome.HTTP_ERROR, -32022, "Unsupported protocol version")
    assert classify_body("tools/call", 1, 503, b"\xff\xfe binary").error_code is None


def test_no_status_is_no_response() -> None:
    assert classify_body("tools/call", 1, None, None).outcome is Outcome.NO_RESPONSE


@pytest.mark.parametrize("raw", [b"", b"   ", b"\xff\xfe\x00", b"[" * 100_000, b'{"a":' * 50_000])
def test_bodies_that_are_not_json_never_raise(raw: bytes) -> None:
    assert classify_body("tools/call", 1, 200, raw).outcome in {Outcome.MALFORMED_JSON}


# -- issue 18: what the client saw ---------------------------------------------------------


def test_answer_form_fault_names_the_cause() -> None:
    from mcp_layers_core.classify import answer_form_fault, event_type_ok

    assert answer_form_fault(200, "application/json") is None
    assert answer_form_fault(200, "text/event-stream") is None
    assert answer_form_fault(200, None) == Note("no_content_type")
    assert answer_form_fault(200, "text/html") == Note("content_type", "text/html")
    assert answer_form_fault(202, "application/json") == Note("202_for_request")
    assert answer_form_fault(500, "text/html") is None  # HTTP_ERROR decides that one
    assert event_type_ok("message") and not event_type_ok("Message")
    assert not event_type_ok("result")


def test_result_type_means_something_only_from_2026() -> None:
    mrtr = {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required"}}
    # No inputRequests nor requestState: the spec's MUST is broken.
    assert classify_answer("tools/call", 1, mrtr).outcome is Outcome.INVALID_TOOL_RESULT
    with_state = {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required",
                                                        "requestState": "s"}}  # fmt: skip
    assert classify_answer("tools/call", 1, with_state).outcome is Outcome.INPUT_REQUIRED
    legacy = {"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required",
              "content": [{"type": "text", "text": "x"}]}}  # fmt: skip
    verdict = classify_answer("tools/call", 1, legacy, version="2025-11-25")
    assert verdict.outcome is Outcome.TOOL_SUCCESS
    assert verdict.result_type == "input_required"  # recorded, not judged


def test_create_task_result_only_for_a_task_augmented_call() -> None:
    task = {"jsonrpc": "2.0", "id": 1, "result": {"task": {"taskId": "t", "status": "working"}}}
    verdict = classify_answer("tools/call", 1, task, version="2025-11-25", task=True)
    assert verdict == Verdict(Outcome.SUCCESS, result_type="complete", note=Note("task_created"))
    assert classify_answer("tools/call", 1, task).outcome is Outcome.INVALID_TOOL_RESULT


def test_batches_only_in_2025_03_26() -> None:
    answer = [{"jsonrpc": "2.0", "id": 1, "result": {}}]
    assert classify_answer("ping", 1, answer, version="2025-06-18") == Verdict(
        Outcome.INVALID_ENVELOPE, note=Note("batch_answer", "2025-06-18")
    )


def test_required_members_and_2026_cache_directives() -> None:
    bare = {"jsonrpc": "2.0", "id": 1, "result": {"tools": []}}
    assert classify_answer("tools/list", 1, bare, version="2025-11-25").outcome is Outcome.SUCCESS
    modern = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [], "resultType": "complete"}}
    assert classify_answer("tools/list", 1, modern, version="2026-07-28") == Verdict(
        Outcome.INVALID_RESULT, result_type="complete", note=Note("result_missing", "cacheScope")
    )
    modern["result"]["cacheScope"] = "public"
    assert classify_answer("tools/list", 1, modern, version="2026-07-28").note == Note(
        "result_missing", "ttlMs"
    )
    # Members are checked in the schema's order (alphabetical in every published schema).
    empty = {"jsonrpc": "2.0", "id": 1, "result": {}}
    assert classify_answer("initialize", 1, empty).note == Note("result_missing", "capabilities")


def test_big_ids_stay_exact() -> None:
    from mcp_layers_core.jsonrpc import same_id, try_loads

    a = try_loads(b'{"id": 18446744073709551617}')["id"]
    b = try_loads(b'{"id": 18446744073709551618}')["id"]
    assert a == 2**64 + 1 and type(a) is int
    assert not same_id(a, b)
