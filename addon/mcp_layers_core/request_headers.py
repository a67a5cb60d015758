"""What a request's headers say about the client, as record values: names, never values.

The verdicts ask whether a client sent `MCP-Protocol-Version`, `Last-Event-ID` and a
proper `Accept`; the record answers with the header names present and `Accept`'s media
types. Values of the other headers (a session id, an event id) never leave the core.
"""

from __future__ import annotations

from collections.abc import Mapping

from .record import MAX_ACCEPT_CHARS, MAX_ACCEPT_TYPES, RECORDED_REQUEST_HEADERS


def header_names(headers: Mapping[str, str]) -> tuple[str, ...]:
    """The recorded request headers present (lower-case names, sorted)."""
    return tuple([h for h in RECORDED_REQUEST_HEADERS if h in headers])  # inlined: no call


def accept_types(headers: Mapping[str, str]) -> tuple[str, ...]:
    """`Accept`'s media types, lower-case, parameters dropped, in order; bounded."""
    value = headers.get("accept")
    if not value:
        return ()
    types: list[str] = []
    for part in value.split(","):
        media = part.split(";", 1)[0].strip().lower()
        if media:
            types.append(media[:MAX_ACCEPT_CHARS])
            if len(types) == MAX_ACCEPT_TYPES:
                break
    return tuple(types)
