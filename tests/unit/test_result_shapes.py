"""Result shapes at every depth, held to what the official Python SDK client accepts.

The shapes are generated from the spec's JSON Schemas (spec/schema/); the judge is the
Python SDK client (`mcp` 2.3.0), which validates each result against the negotiated
version's types and then its own model before it hands the result to the application
(`ClientSession.send_request`). Every mutation of a valid result is classified the same
way by both: a failure where the SDK refuses the bytes, a success where it takes them.

Three documented differences are kept out of the comparison (docs/record-format.md):
pydantic's lax coercions (`"yes"` read as `true`, `"5"` as 5) and its reading of
`null` as an absent optional member, neither of which the schema or the TypeScript
SDK's zod types allow, so no mutation produces a coercible string and a null the SDK
takes for an optional member is not compared; and the 2026-07-28 rules on
`resultType`, which `classify` applies itself (tests/unit/test_classify.py).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.client import session as sdk_session
from mcp_layers_core import result_shapes_gen
from mcp_layers_core.classify import classify_answer
from mcp_layers_core.notes import Note
from mcp_layers_core.record import Outcome
from mcp_layers_core.result_shapes import VERSIONS
from mcp_layers_core.shapes import (
    INPUT_REQUIRED,
    is_plain_text_result,
    result_fault,
    schema_fault,
)
from mcp_types import methods as sdk_methods

OLD = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN = "2026-07-28"
CACHE = {"resultType": "complete", "ttlMs": 1000, "cacheScope": "private"}

ANNOTATIONS = {
    "audience": ["user", "assistant"],
    "priority": 0.5,
    "lastModified": "2026-01-01T00:00:00Z",
}
CONTENT = [
    {"type": "text", "text": "hi", "annotations": ANNOTATIONS},
    {"type": "image", "data": "aGk=", "mimeType": "image/png"},
    {"type": "audio", "data": "aGk=", "mimeType": "audio/wav"},
    {"type": "resource", "resource": {"uri": "file:///a", "text": "t", "mimeType": "text/plain"}},
    {"type": "resource", "resource": {"uri": "file:///b", "blob": "aGk="}},
    {"type": "resource_link", "uri": "file:///c", "name": "c"},
]
TOOL = {
    "name": "echo",
    "description": "d",
    "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}},
    "annotations": {"readOnlyHint": True, "title": "Echo"},
}
PROMPT = {"name": "p", "arguments": [{"name": "a", "required": True}]}
RESOURCE = {"uri": "file:///a", "name": "a", "mimeType": "text/plain"}
TEMPLATE = {"uriTemplate": "file:///{x}", "name": "t"}
CAPABILITIES = {"tools": {"listChanged": True}, "resources": {"subscribe": False}}
SERVER_INFO = {"name": "srv", "version": "1.0"}

#: A valid result of each method, before 2026-07-28.
OLD_RESULTS: dict[str, dict[str, Any]] = {
    "tools/call": {"content": CONTENT, "isError": False, "_meta": {"k": 1}},
    "tools/list": {"tools": [TOOL], "nextCursor": "n"},
    "prompts/list": {"prompts": [PROMPT]},
    "prompts/get": {"messages": [{"role": "user", "content": CONTENT[0]}]},
    "resources/list": {"resources": [RESOURCE]},
    "resources/templates/list": {"resourceTemplates": [TEMPLATE]},
    "resources/read": {"contents": [CONTENT[3]["resource"], CONTENT[4]["resource"]]},
    "completion/complete": {"completion": {"values": ["a"], "total": 1, "hasMore": False}},
    "initialize": {
        "protocolVersion": "2025-06-18",
        "capabilities": CAPABILITIES,
        "serverInfo": SERVER_INFO,
    },
    "ping": {},
}


def _modern(method: str) -> dict[str, Any] | None:
    if method in ("initialize", "ping"):
        return None  # no such method in 2026-07-28
    result = dict(copy.deepcopy(OLD_RESULTS[method]), resultType="complete")
    if method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list"):
        result.update(CACHE)
    if method == "resources/read":
        result.update(CACHE)
    return result


MODERN_RESULTS: dict[str, dict[str, Any]] = {
    m: r for m in OLD_RESULTS if (r := _modern(m)) is not None
} | {
    "server/discover": dict(
        CACHE, supportedVersions=[MODERN], capabilities=CAPABILITIES, serverInfo=SERVER_INFO
    ),
}

CASES = [(m, v, r) for v in OLD for m, r in OLD_RESULTS.items()] + [
    (m, MODERN, r) for m, r in MODERN_RESULTS.items()
]

#: What a mutation puts in place of a value: every JSON type, none a string pydantic
#: would coerce to a boolean or a number.
REPLACEMENTS = [None, [], {}, "zz", 3.5, -7, 2.0, 1e400, 2**70, {"type": "video"}]


def sdk_accepts(method: str, version: str, result: dict[str, Any]) -> bool:
    """What `ClientSession.send_request` does with a result (mcp 2.3.0): floor a
    negative ttlMs, validate against the version's types, drop a later revision's
    members, validate against the SDK's own model."""
    raw = copy.deepcopy(result)
    sdk_session._clamp_inbound_ttl(raw)
    try:
        sdk_methods.validate_server_result(method, version, raw)
        later = sdk_session._later_revision_fields(method, version)
        raw = {k: v for k, v in raw.items() if k not in later}
        sdk_methods._adapter(sdk_methods.MONOLITH_RESULTS[method]).validate_python(
            raw, by_name=False
        )
    except (ValueError, TypeError):  # pydantic's ValidationError is a ValueError
        return False
    return True


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(value, dict):
        for key, sub in value.items():
            found += paths(sub, (*prefix, key))
    elif isinstance(value, list):
        for index, sub in enumerate(value):
            found += paths(sub, (*prefix, index))
    return found


def mutate(result: dict[str, Any], path: tuple[Any, ...], replacement: Any) -> dict[str, Any]:
    out = copy.deepcopy(result)
    parent: Any = out
    for step in path[:-1]:
        parent = parent[step]
    if replacement is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = copy.deepcopy(replacement)
    return out


DELETE = object()


def test_generated_shapes_are_current() -> None:
    assert result_shapes_gen.main(["--check"]) == 0, (
        "run: python -m mcp_layers_core.result_shapes_gen"
    )


@pytest.mark.parametrize(("method", "version", "result"), CASES)
def test_every_valid_result_fits_and_the_sdk_agrees(
    method: str, version: str, result: dict[str, Any]
) -> None:
    assert sdk_accepts(method, version, result)
    assert result_fault(method, version, result) is None


@settings(
    max_examples=400,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.data())
def test_a_mutated_result_fails_exactly_when_the_sdk_refuses_it(data: st.DataObject) -> None:
    method, version, result = data.draw(st.sampled_from(CASES))
    where = data.draw(st.sampled_from(paths(result) or [("extra",)]))
    if where[-1] == "resultType":
        return  # classify's rule, not the shape's (see the module docstring)
    replacement = data.draw(st.sampled_from([DELETE, *REPLACEMENTS]))
    if replacement is DELETE and where == ("extra",):
        return
    mutated = mutate(result, where, replacement)
    fault = result_fault(method, version, mutated)
    accepted = sdk_accepts(method, version, mutated)
    if replacement is None and accepted and fault is not None and fault.path == where:
        return  # pydantic reads null as an absent optional member; the schema and zod do not
    assert (fault is None) == accepted, (where, replacement, fault)


@pytest.mark.parametrize(
    ("method", "version", "result", "detail"),
    [
        (
            "tools/call",
            "2025-06-18",
            {"content": [{"type": "resource", "resource": {"uri": "x"}}]},
            "content/0/resource: fits no alternative",
        ),
        (
            "tools/call",
            "2025-11-25",
            {"content": [{"type": "text", "text": "t", "annotations": {"priority": 2}}]},
            "content/0/annotations/priority: above the maximum 1",
        ),
        (
            "tools/call",
            "2025-11-25",
            {"content": [{"type": "text", "text": "t", "annotations": {"audience": ["bot"]}}]},
            "content/0/annotations/audience/0: not one of 'assistant', 'user'",
        ),
        ("tools/call", "2025-06-18", {"content": [], "structuredContent": [1]}, None),
        ("tools/list", "2025-06-18", {"tools": [{"name": "a"}]}, "tools/0/inputSchema: missing"),
        (
            "initialize",
            "2025-06-18",
            {"protocolVersion": "x", "capabilities": {}, "serverInfo": {"name": "s"}},
            "serverInfo/version: missing",
        ),
        ("server/discover", MODERN, dict(CACHE, capabilities={}), "supportedVersions: missing"),
    ],
)
def test_faults_name_the_path(
    method: str, version: str, result: dict[str, Any], detail: str | None
) -> None:
    fault = result_fault(method, version, result)
    assert fault is not None and not sdk_accepts(method, version, result)
    if detail is not None:
        assert fault.detail() == detail


def test_numbers_follow_json_schema_not_the_parser() -> None:
    listing = dict(MODERN_RESULTS["tools/list"])
    assert result_fault("tools/list", MODERN, dict(listing, ttlMs=1000.0)) is None
    assert result_fault("tools/list", MODERN, dict(listing, ttlMs=2**70)) is None
    # 1e400 reads as infinity: no integer for JSON Schema in Python, nor for either SDK.
    assert result_fault("tools/list", MODERN, dict(listing, ttlMs=float("inf"))) is not None
    # Clients floor a negative ttlMs (2026-07-28 caching: "clients SHOULD ignore it").
    assert result_fault("tools/list", MODERN, dict(listing, ttlMs=-5)) is None
    assert sdk_accepts("tools/list", MODERN, dict(listing, ttlMs=-5))


def test_an_unknown_version_is_a_fault_only_when_no_version_fits() -> None:
    old_call = {"content": [{"type": "text", "text": "t"}]}
    assert result_fault("tools/call", None, old_call) is None
    assert result_fault("tools/call", "2099-01-01", old_call) is None
    assert result_fault("tools/call", None, {"content": 5}) is not None
    assert result_fault("vendor/method", "2025-11-25", {"anything": 1}) is None


def test_input_required_has_a_shape_too() -> None:
    ok = {"resultType": "input_required", "requestState": "s"}
    assert result_fault(INPUT_REQUIRED, MODERN, ok) is None
    assert result_fault(INPUT_REQUIRED, MODERN, dict(ok, inputRequests=5)) is not None
    assert result_fault(INPUT_REQUIRED, "2025-11-25", ok) is None  # no such shape before


def answer(result: object) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "result": result}


def test_classify_goes_to_every_depth() -> None:
    bad_block = {"content": [{"type": "resource", "resource": {"uri": "x"}}]}
    verdict = classify_answer("tools/call", 1, answer(bad_block), version="2025-06-18")
    assert verdict.outcome is Outcome.INVALID_TOOL_RESULT
    assert verdict.note == Note("malformed_content_block", "resource")
    no_version = {"tools": [{"name": "a", "inputSchema": {}}]}
    verdict = classify_answer("tools/list", 1, answer(no_version), version="2025-11-25")
    assert verdict.outcome is Outcome.INVALID_RESULT
    assert verdict.note == Note("result_shape", "tools/0/inputSchema/type: missing")
    verdict = classify_answer("tools/call", 1, answer({"content": [], "_meta": 3}))
    assert verdict.note == Note("result_shape", "_meta: not an object")


def test_2026_results_without_result_type_are_refused_as_the_sdk_refuses_them() -> None:
    # 2026-07-28 basic: "The `result` MUST include a `resultType` field"; the Python SDK
    # client (the one client that speaks 2026-07-28) refuses the result without it.
    bare = {"content": [{"type": "text", "text": "t"}]}
    assert not sdk_accepts("tools/call", MODERN, bare)
    verdict = classify_answer("tools/call", 1, answer(bare), version=MODERN)
    assert verdict.outcome is Outcome.INVALID_TOOL_RESULT
    assert verdict.note == Note("result_missing", "resultType")
    older = classify_answer("tools/call", 1, answer(bare), version="2025-11-25")
    assert older.outcome is Outcome.TOOL_SUCCESS


def test_any_json_value_where_the_2026_schema_says_json_value() -> None:
    # The schema's JSONValue lists no fractional number and no null; JSON and the SDK do.
    discover = dict(MODERN_RESULTS["server/discover"])
    discover["capabilities"] = {"logging": {"level": 0.5, "off": None, "nested": [{"a": 1.5}]}}
    assert sdk_accepts("server/discover", MODERN, discover)
    assert result_fault("server/discover", MODERN, discover) is None


def test_deep_values_are_no_fault_and_no_exception() -> None:
    deep: dict[str, Any] = {}
    cursor = deep
    for _ in range(5000):
        cursor["a"] = {}
        cursor = cursor["a"]
    discover = dict(MODERN_RESULTS["server/discover"])
    discover["capabilities"] = {"logging": deep, "experimental": deep}
    assert result_fault("server/discover", MODERN, discover) is None
    verdict = classify_answer("server/discover", 1, answer(discover), version=MODERN)
    assert verdict.outcome is Outcome.SUCCESS


# -- the plain text shortcut -----------------------------------------------------------

_JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=4))
_BLOCK = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": st.text(max_size=8)}),
    st.dictionaries(
        st.sampled_from(["type", "text", "annotations", "_meta", "extra"]),
        st.one_of(_JSON_LEAF, st.just("text"), st.just("image")),
        max_size=3,
    ),
)
_NEAR_PLAIN = st.one_of(
    st.fixed_dictionaries(
        {"content": st.lists(_BLOCK, max_size=3)},
        optional={"isError": st.one_of(st.booleans(), _JSON_LEAF)},
    ),
    st.dictionaries(
        st.sampled_from(["content", "isError", "resultType", "structuredContent", "x"]),
        st.one_of(_JSON_LEAF, st.lists(_BLOCK, max_size=2)),
        max_size=3,
    ),
    _JSON_LEAF,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(result=_NEAR_PLAIN, version=st.sampled_from([None, *sorted(VERSIONS)]))
def test_the_plain_shortcut_only_passes_what_the_schema_walk_passes(
    result: object, version: str | None
) -> None:
    """`is_plain_text_result` skips the walk: it may say True only where the walk finds
    no fault, and `result_fault` must agree with the walk either way."""
    if is_plain_text_result(result, version):
        assert schema_fault("tools/call", version, result) is None
    assert result_fault("tools/call", version, result) == schema_fault(
        "tools/call", version, result
    )


def test_the_plain_shortcut_takes_the_usual_answer_and_nothing_2026() -> None:
    plain = {"content": [{"type": "text", "text": "hi"}], "isError": False}
    assert is_plain_text_result(plain, "2025-11-25") and is_plain_text_result(plain, None)
    assert is_plain_text_result({"content": []}, "2024-11-05")
    assert not is_plain_text_result(plain, "2026-07-28")  # needs `resultType` there
    assert not is_plain_text_result({"content": [{"type": "text", "text": 1}]}, None)
    assert not is_plain_text_result({**plain, "isError": "no"}, None)
