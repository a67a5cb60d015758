"""MCP protocol versions, and what each allows on the wire: the one place that knows.

Versions are date strings (`2025-11-25`) and compare as strings, so "from this version
on" is `>=`. A version the addon does not know (None: nothing named one yet, or a
string from the future) is judged by the rule that can still apply, as each predicate
says; nothing here raises on what a peer sends. Every "2026-07-28 on" rule is this one
string comparison (earlier code also tested `startswith("2026")` in places): a later
date, and a draft's name such as `DRAFT-2026-v1` (letters sort after digits), take the
newest rules; a made-up `2026-01-15` takes the older ones.
"""

from __future__ import annotations

from typing import Final

#: HTTP+SSE: a GET stream announces the POST URL (`endpoint` event) and carries the
#: answers; a POST is only acknowledged.
V2024_11_05: Final = "2024-11-05"
#: Streamable HTTP, `Mcp-Session-Id`, and (in this version only) JSON-RPC batches.
V2025_03_26: Final = "2025-03-26"
V2025_06_18: Final = "2025-06-18"
#: SSE polling: a stream may end after an event id and be resumed by a GET.
V2025_11_25: Final = "2025-11-25"
#: No sessions; each request names its version in `_meta`; `resultType` on results.
V2026_07_28: Final = "2026-07-28"

#: Every version the addon knows, oldest first.
KNOWN: Final = (V2024_11_05, V2025_03_26, V2025_06_18, V2025_11_25, V2026_07_28)


def batch_allowed(version: str | None) -> bool:
    """JSON-RPC batches exist only in 2025-03-26 (and an unknown version may be it)."""
    return version is None or version == V2025_03_26


def has_result_type(version: str | None) -> bool:
    """Does `result.resultType` mean anything? Only from 2026-07-28 on; before, it is an
    unknown member a client ignores. An unknown version is judged by the newest rules."""
    return version is None or version >= V2026_07_28


def requires_result_type(version: str | None) -> bool:
    """Must every result name its `resultType` (2026-07-28 on: a server MUST)? Unlike
    `has_result_type`, an unknown version is not held to it."""
    return version is not None and version >= V2026_07_28


def is_sessionless(version: str | None) -> bool:
    """Does `version` have no sessions (2026-07-28 and later)?"""
    return version is not None and version >= V2026_07_28


def names_version_per_request(version: str | None) -> bool:
    """Does every request carry its own version (2026-07-28 on), so that a rejection of
    any of them may be version negotiation?"""
    return version is not None and version >= V2026_07_28


def resumes_streams(version: str | None) -> bool:
    """May a POST's stream that ended after an event id be resumed by a GET? Not from
    2026-07-28 on (no sessions to resume in); an unknown version may be 2025-11-25."""
    return not is_sessionless(version)


def answers_on_get_stream(version: str | None) -> bool:
    """Does a POST's answer travel on the session's GET stream (HTTP+SSE, 2024-11-05)?"""
    return version == V2024_11_05
