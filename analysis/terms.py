"""The record's vocabulary as SQL: every term a query names is rendered here.

The terms themselves are the record's (`mcp_layers_core.record`: `Kind`, `Outcome`,
`Layer`, `RetryOrigin`, `EndReason`, `StreamEnd`, `NoteCode`, `STAND_IN_PREFIX`); this
module only spells them in SQL, so that no query writes `'request'` or `'SUCCESS'` by
hand and a renamed or removed term fails where it is named (mypy), not in a query that
quietly matches nothing. `tests/unit/test_vocabulary_literals.py` holds every product
module but this one and the record to it.

`sql(Kind.REQUEST)` is `'request'`; `sql_in(Kind.REQUEST, Kind.STREAM)` is
`('request', 'stream')`, for `kind IN …`. The named predicates below are the decisions the
queries share (a note present, an issued session), each written once.
"""

from __future__ import annotations

from typing import Final

from mcp_layers_core.record import (
    STAND_IN_PREFIX,
    EndReason,
    Kind,
    Layer,
    NoteCode,
    Outcome,
    RetryOrigin,
    StreamEnd,
    ToolSafety,
)

#: A term of the record's vocabulary.
Term = Kind | Layer | Outcome | RetryOrigin | EndReason | StreamEnd | NoteCode | ToolSafety


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def sql(term: Term) -> str:
    """The SQL literal of one term: `'request'`."""
    return _quote(term.value)


def sql_in(*terms: Term) -> str:
    """The parenthesised SQL list of `terms`, in the order given, for `IN`: `('a', 'b')`.
    Pass a set's members sorted, so that the query's text does not vary from run to run."""
    if not terms:
        raise ValueError("an IN list needs at least one term")
    return "(" + ", ".join(sql(t) for t in terms) + ")"


def has_note(code: NoteCode, notes: str = "notes") -> str:
    """SQL: the record's `notes` hold exactly `code` (a note without detail); FALSE, never
    NULL, when they do not or there are none."""
    return f"coalesce(list_contains({notes}, {sql(code)}), FALSE)"


def has_note_starting(code: NoteCode, notes: str = "notes") -> str:
    """SQL: some note of `notes` starts with `code` (`not_ended:405`). Without notes it
    is FALSE in DuckDB and NULL where `concat` keeps NULLs (Spark): wrap it in
    `coalesce`. A separator no note holds (chr(1)) marks where each note starts."""
    pattern = _quote(f"{code.value}%")
    return f"concat(chr(1), array_to_string({notes}, chr(1))) LIKE concat('%', chr(1), {pattern})"


def issued_session(session: str = "session") -> str:
    """SQL: the record's `session` is one the server issued, not the client stand-in.

    The SQL of `record.is_issued_session`, which decides it for every reader (the OTel
    export calls it): a session that is neither null nor empty and does not begin with
    `STAND_IN_PREFIX`. It holds under `mcp_raw_session_ids` too, where an issued id is
    written as it is: the record never writes an issued id that begins like a stand-in
    (`record.may_write_raw`). FALSE, never NULL."""
    prefix = _quote(STAND_IN_PREFIX)
    return f"coalesce({session} <> '' AND NOT starts_with({session}, {prefix}), FALSE)"


#: The kinds of record a POST makes: a request, notifications, the client's answer to the
#: server.
POSTS: Final = sql_in(Kind.REQUEST, Kind.NOTIFICATION, Kind.RESPONSE)

#: The kinds of record a POST or a GET makes (a DELETE makes a `session_end`, as the
#: proxy's own ends of a session do).
POSTS_AND_GETS: Final = sql_in(Kind.REQUEST, Kind.NOTIFICATION, Kind.RESPONSE, Kind.STREAM)


#: SQL: when a record started, in ms since the epoch (NULL when its `ts` is not a time).
STARTED_MS: Final = "epoch_ms(TRY_CAST(ts AS TIMESTAMP))"

#: SQL: when a record ended, in ms since the epoch: its start and its `durationMs` (none: 0).
ENDED_MS: Final = f"{STARTED_MS} + CAST(coalesce(durationMs, 0) AS BIGINT)"
