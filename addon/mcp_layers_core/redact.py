"""Scrub token-like strings from the little free text a record keeps.

Records keep no bodies and no headers beyond an allow-list, so the only free text is a
JSON-RPC `error.message`. Servers do echo secrets there ("invalid token sk-…"), so it is
scrubbed before it is cut, and the cut happens after scrubbing so that half a token can
never survive at the boundary.
"""

from __future__ import annotations

import functools
import hashlib
import re

from .limits import MAX_ERROR_MESSAGE_CHARS

REDACTED = "[redacted]"

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Authorization schemes: "Bearer abc", "Basic dXNlcjpw", "token abc".
    (re.compile(r"(?i)\b(bearer|basic|token|digest)\s+[A-Za-z0-9._~+/=-]{6,}"), rf"\1 {REDACTED}"),
    # JWTs (three base64url parts, the first one a JSON header).
    (re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"), REDACTED),
    # Well-known API key shapes: OpenAI/Anthropic, GitHub, Slack, AWS, Google, Stripe.
    (
        re.compile(
            r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{12,}"
            r"|\bgh[pousr]_[A-Za-z0-9]{20,}"
            r"|\bgithub_pat_[A-Za-z0-9_]{20,}"
            r"|\bxox[abposr]-[A-Za-z0-9-]{10,}"
            r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}"
            r"|\bAIza[0-9A-Za-z_-]{30,}"
            r"|\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"
        ),
        REDACTED,
    ),
    # key=value and "key": "value" secrets.
    (
        re.compile(
            r"(?i)(\"?\b(?:api[_-]?key|access[_-]?token|refresh[_-]?token|id[_-]?token|token"
            r"|secret|client[_-]?secret|password|passwd|pwd|authorization|cookie|session[_-]?id"
            r"|private[_-]?key|signature|sig)\"?\s*[:=]\s*)(\"[^\"]*\"|'[^']*'|[^\s,;&}]+)"
        ),
        rf"\1{REDACTED}",
    ),
    # Long opaque strings (hex or base64 of 32+ characters) are credentials more often
    # than not in an error message; a request id worth keeping is rarely that long.
    (re.compile(r"\b[A-Fa-f0-9]{32,}\b|\b[A-Za-z0-9+/_-]{40,}={0,2}"), REDACTED),
)


def scrub(text: str) -> str:
    """Replace every token-like substring of `text` with `[redacted]`."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def error_message(text: str | None, limit: int = MAX_ERROR_MESSAGE_CHARS) -> str | None:
    """A JSON-RPC error message as a record keeps it: scrubbed, then cut."""
    if text is None:
        return None
    text = scrub(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


@functools.lru_cache(maxsize=4096)  # the same few session ids come back on every POST
def pseudonym(prefix: str, value: str) -> str:
    """A stable short stand-in for an identifier that may be a credential."""
    return prefix + hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()[:10]


#: Member names whose values are secrets whatever they look like.
_SECRET_KEYS = re.compile(
    r"(?i)^(authorization|proxy-authorization|cookie|set-cookie|password|passwd|pwd|secret"
    r"|client_secret|token|access_token|refresh_token|id_token|api[_-]?key|x-api-key"
    r"|private[_-]?key|session[_-]?id|mcp-session-id|credentials?)$"
)

#: Characters of one string value kept in a recorded body.
MAX_BODY_STRING_CHARS = 2000

#: Nesting kept in a recorded body; deeper values are replaced by a marker.
MAX_BODY_DEPTH = 32


def redact_json(value: object, depth: int = 0) -> object:
    """A JSON value fit for a recording: secret members blanked, strings scrubbed and cut."""
    if depth > MAX_BODY_DEPTH:
        return "[too deep]"
    if isinstance(value, dict):
        return {
            k: REDACTED if _SECRET_KEYS.match(str(k)) else redact_json(v, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact_json(v, depth + 1) for v in value]
    if isinstance(value, str):
        text = scrub(value)
        return text if len(text) <= MAX_BODY_STRING_CHARS else text[:MAX_BODY_STRING_CHARS] + "…"
    return value
