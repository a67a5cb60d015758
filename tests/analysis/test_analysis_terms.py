"""`terms`: the record's vocabulary as SQL, and the decisions the queries share with the
rest of the project (whether a session is one the server issued)."""

from __future__ import annotations

from typing import Any

import duckdb
import pytest
from mcp_layers_analysis import terms
from mcp_layers_core.record import (
    STAND_IN_PREFIX,
    Kind,
    NoteCode,
    Outcome,
    StreamEnd,
    is_issued_session,
    may_write_raw,
)
from mcp_layers_core.redact import pseudonym

#: Sessions as records hold them: none, hashed, the stand-in, raw ids of every shape
#: (`mcp_raw_session_ids`), and what looks like one but is not.
SESSIONS = (
    None,
    "",
    "c-0123456789",
    "s-0123456789",
    "1868a90c-93f0-4b4b-9d61-2f9e4c2a8f11",
    "C-upper-case-is-no-stand-in",
    "sess-c-0123",
    "c",
    "s-",
    "it's",
)


def value_of(expression: str, column: str, sql_type: str, value: Any) -> Any:
    """`expression` over one row whose `column` (of `sql_type`) holds `value`."""
    with duckdb.connect() as con:
        query = f"SELECT {expression} FROM (SELECT CAST(? AS {sql_type}) AS {column})"
        row = con.execute(query, [value]).fetchone()
    assert row is not None
    return row[0]


def test_a_term_is_its_sql_literal() -> None:
    assert terms.sql(Kind.REQUEST) == "'request'"
    assert terms.sql(Outcome.SUCCESS) == "'SUCCESS'"
    assert terms.sql_in(StreamEnd.EOF, StreamEnd.COMPLETE) == "('eof', 'complete')"
    assert terms.POSTS == "('request', 'notification', 'response')"
    with pytest.raises(ValueError):
        terms.sql_in()


@pytest.mark.parametrize("session", SESSIONS)
def test_the_sql_decides_an_issued_session_as_the_record_does(session: str | None) -> None:
    """One decision: the verdicts' SQL and the OTel export (`record.is_issued_session`)
    agree on every session, raw ids included."""
    got = value_of(terms.issued_session("s"), "s", "VARCHAR", session)
    assert got is is_issued_session(session), session


def test_every_key_the_addon_writes_is_told_apart_by_its_prefix_alone() -> None:
    """The writer's half of the decision (`record.may_write_raw`): an issued id is written
    raw only if it does not begin like a stand-in, and hashed (`s-…`) otherwise; a stand-in
    is `c-` and a hash. So `is_issued_session` is exact in both modes."""
    ids = [s for s in SESSIONS if s] + [STAND_IN_PREFIX + "0123456789", "c-"]
    for session_id in ids:
        raw = session_id if may_write_raw(session_id) else pseudonym("s-", session_id)
        assert is_issued_session(raw), (session_id, raw)
        assert is_issued_session(pseudonym("s-", session_id))
        assert not is_issued_session(pseudonym(STAND_IN_PREFIX, f"127.0.0.1 {session_id}"))
    assert not may_write_raw("c-0123456789") and may_write_raw("C-0123456789")


@pytest.mark.parametrize(
    ("notes", "exact", "starting"),
    [
        (["session_lost"], True, False),
        (["not_ended:405"], False, True),
        (["batch:2", "not_ended"], False, True),
        (["was_not_ended:405"], False, False),
        ([], False, False),
        (None, False, False),
    ],
)
def test_notes_are_found_by_their_code(
    notes: list[str] | None, exact: bool, starting: bool
) -> None:
    assert value_of(terms.has_note(NoteCode.SESSION_LOST, "n"), "n", "VARCHAR[]", notes) is exact
    got = value_of(terms.has_note_starting(NoteCode.NOT_ENDED, "n"), "n", "VARCHAR[]", notes)
    assert bool(got) is starting  # NULL without notes where concat keeps NULLs (Spark)
