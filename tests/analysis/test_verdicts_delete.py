"""`mcp-layers/session-delete` and the issued-session predicate, on hand-built recordings."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_analysis_verdicts import SESSION, Book, later, standby, verdict_of

CHECK = "mcp-layers/session-delete"


def test_a_delete_counts_whatever_it_was_answered(tmp_path: Path) -> None:
    book = Book().opened()
    book.add(
        "session_end",
        1,
        endReason=None,
        httpStatuses=[405],
        notes=["not_ended:405"],
        requestHeaders=["mcp-session-id"],
    )
    verdict, evidence = verdict_of(book, tmp_path, CHECK)
    assert verdict == "PASS" and "DELETE #4 (405)" in (evidence or "")


@pytest.mark.parametrize("reason", ["shutdown", "idle", "evicted"])
def test_a_session_the_proxy_ended_is_no_evidence(tmp_path: Path, reason: str) -> None:
    book = Book().opened()
    book.add("session_end", 5, endReason=reason)
    verdict, evidence = verdict_of(book, tmp_path, CHECK)
    assert verdict == "UNDECIDABLE" and "nothing shows the client was done" in (evidence or "")


def test_a_client_that_hung_up_and_left_missed_the_delete(tmp_path: Path) -> None:
    book = Book().opened()
    standby(book, 0.3, end="error", duration_s=2)  # the client closed its GET stream
    book.add("session_end", 60, endReason="idle")
    verdict, evidence = verdict_of(book, tmp_path, CHECK)
    assert verdict == "WARNING" and "hung up its last exchange #4" in (evidence or "")


def test_a_client_that_went_on_in_another_session_missed_the_delete(tmp_path: Path) -> None:
    book = Book().opened()
    book.request(5, "initialize", 0, session="s-dddddddddd")
    book.add("notification", 5.1, method="notifications/initialized", session="s-dddddddddd")
    book.add(
        "session_end",
        6,
        endReason="delete",
        session="s-dddddddddd",
        requestHeaders=["mcp-session-id"],
        httpStatuses=[200],
    )
    later(book, 7)
    verdict, evidence = verdict_of(book, tmp_path, CHECK)
    assert verdict == "WARNING", evidence
    assert f"session {SESSION}: no DELETE; the client went on in session s-dddddddddd" in (
        evidence or ""
    )


def test_raw_session_ids_are_issued_sessions_and_stand_ins_are_not(tmp_path: Path) -> None:
    """Under `mcp_raw_session_ids` a server's id is kept as is (no `s-`); the client's
    stand-in (`c-…`, a server that issues none) is no session to DELETE or to judge ids in."""
    raw = "1868a90c-93f0-4b4b-9d61-2f9e4c2a8f11"
    book = Book()
    book.request(0, "initialize", 0, session=raw)
    book.request(0.2, "tools/list", 1, session=raw)
    book.request(0.3, "tools/call", 1, session=raw)  # the id reused
    assert verdict_of(book, tmp_path, "mcp-layers/request-ids-unique")[0] == "FAIL"
    book = Book()
    book.request(0, "tools/list", 1, session="c-0123456789")
    book.request(0.3, "tools/call", 1, session="c-0123456789")
    assert verdict_of(book, tmp_path, "mcp-layers/request-ids-unique")[0] == "NOT_EXERCISED"
    assert verdict_of(book, tmp_path, CHECK)[0] == "NOT_EXERCISED"
