"""The flow comment and marker of a record: a pure function of the record."""

from __future__ import annotations

from typing import Any

import pytest
from mcp_layers_core.flow_comment import MARK_FAILED, MARK_INJECTED, comment_of, mark_of
from mcp_layers_core.record import NOT_FAILED, Outcome


def request(**fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "id": 5,
        "kind": "request",
        "method": "tools/call",
        "tool": "get_weather",
        "outcome": "TOOL_ERROR",
        "layer": "application",
        "httpStatuses": [200],
        "retryOrigin": "none",
        "retryOf": None,
        "continues": None,
        "negotiation": None,
        "injected": None,
    }
    record.update(fields)
    return record


def test_a_retried_tool_error() -> None:
    record = request(retryOf=4, retryOrigin="reinit")
    assert comment_of(record) == (
        "#5 TOOL_ERROR · application · tools/call get_weather · retry of #4 (reinit)"
    )
    assert mark_of(record) == MARK_FAILED


def test_an_http_error_names_its_last_status_and_an_injected_fault_its_rule() -> None:
    record = request(
        outcome="HTTP_ERROR",
        layer="transport",
        httpStatuses=[503, 503],
        injected={"rule": "flaky", "action": "http_status"},
    )
    assert comment_of(record) == (
        "#5 HTTP_ERROR 503 · transport · tools/call get_weather · injected: flaky/http_status"
    )
    assert mark_of(record) == MARK_INJECTED  # injected first: it explains the failure


def test_a_method_without_a_tool_and_a_continuation() -> None:
    record = request(method="tools/list", tool=None, outcome="SUCCESS", layer="protocol")
    assert comment_of(record) == "#5 SUCCESS · protocol · tools/list"
    assert mark_of(record) == ""
    record = request(outcome="TOOL_SUCCESS", continues=3)
    assert comment_of(record).endswith("· continues #3")


def test_a_negotiation_probe_is_not_a_failure_but_a_refused_call_is() -> None:
    probe = request(
        method="server/discover", tool=None, outcome="HTTP_ERROR", layer="transport",
        httpStatuses=[400], negotiation=True,
    )  # fmt: skip
    assert (
        comment_of(probe) == "#5 HTTP_ERROR 400 · transport · server/discover · negotiation probe"
    )
    assert mark_of(probe) == ""
    assert mark_of({**probe, "negotiation": False}) == MARK_FAILED


@pytest.mark.parametrize("outcome", list(Outcome))
def test_every_outcome_is_marked_exactly_when_it_failed(outcome: Outcome) -> None:
    record = request(outcome=outcome.value)
    assert mark_of(record) == ("" if outcome in NOT_FAILED else MARK_FAILED)
    assert comment_of(record).startswith(f"#5 {outcome.value}")


def test_notifications_answers_and_session_ends() -> None:
    base = {"id": 9, "injected": None, "ackNote": None}
    note = {**base, "kind": "notification", "method": "notifications/initialized",
            "httpStatuses": [202]}  # fmt: skip
    assert comment_of(note) == "#9 notification · notifications/initialized · 202"
    odd = {**note, "httpStatuses": [200], "ackNote": "200 with body"}
    assert comment_of(odd) == "#9 notification · notifications/initialized · 200 with body"
    lost = {**note, "httpStatuses": []}
    assert comment_of(lost) == "#9 notification · notifications/initialized · no response"
    answer = {**base, "kind": "response", "method": None, "serverMethod": "elicitation/create",
              "httpStatuses": [202]}  # fmt: skip
    assert comment_of(answer) == "#9 response · elicitation/create · 202"
    end = {**base, "kind": "session_end", "endReason": "delete", "httpStatuses": [200]}
    assert comment_of(end) == "#9 session end · delete · 200"
    gone = {**base, "kind": "session_end", "endReason": "not_found", "httpStatuses": [404]}
    assert comment_of(gone) == "#9 session end · not_found · 404"
    assert {mark_of(r) for r in (note, odd, lost, answer, end, gone)} == {""}
