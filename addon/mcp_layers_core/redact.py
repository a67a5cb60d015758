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

#: A name whose value is a secret: these words, or any name ending in them
#: (`access_token`, `clientSecret`, `x-api-key`, `mcp-session-id`, `secret_key`), but
#: not `progressToken`, MCP's progress correlation (matched case-insensitively).
_SECRET_NAME = (
    r"(?!progress[_-]?token\b)[A-Za-z0-9_.-]*?"
    r"(?:api[_-]?key|(?:access|secret|signing|private)[_-]?key|[_-]key|token|secret"
    r"|password|passwd|pwd|credentials?|authorization|auth|cookie|session[_-]?id"
    r"|signature|sig)"
)

_PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    # Authorization schemes: "Bearer abc", "Basic dXNlcjpw", "token abc".
    (re.compile(r"(?i)\b(bearer|basic|token|digest)\s+[A-Za-z0-9._~+/=-]{6,}"), rf"\1 {REDACTED}"),
    # JWTs (three base64url parts, the first one a JSON header).
    (re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*"), REDACTED),
    # Well-known API key shapes: OpenAI/Anthropic, GitHub, Slack, AWS, Google, Stripe,
    # GitLab, Hugging Face, SendGrid.
    (
        re.compile(
            r"\b(?:sk|pk|rk)-[A-Za-z0-9_-]{12,}"
            r"|\bgh[pousr]_[A-Za-z0-9]{20,}"
            r"|\bgithub_pat_[A-Za-z0-9_]{20,}"
            r"|\bxox[abposr]-[A-Za-z0-9-]{10,}"
            r"|\b(?:AKIA|ASIA)[0-9A-Z]{16}"
            r"|\bAIza[0-9A-Za-z_-]{30,}"
            r"|\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"
            r"|\bglpat-[A-Za-z0-9_-]{20,}"
            r"|\bhf_[A-Za-z0-9]{30,}"
            r"|\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"
        ),
        REDACTED,
    ),
    # key=value and "key": "value" secrets. The name may have a prefix (`auth_token`,
    # `secret_key`, `sessionToken`: the hardening proofs found those passing), and only
    # starts where a name starts, so a long run of name characters is scanned once.
    (
        re.compile(
            r"(?i)(\"?(?<![A-Za-z0-9_.-])" + _SECRET_NAME + r"\"?\s*[:=]\s*)"
            r"(\"[^\"]*\"|'[^']*'|[^\s,;&}]+)"
        ),
        rf"\1{REDACTED}",
    ),
    # Long opaque strings (hex or base64 of 32+ characters) are credentials more often
    # than not in an error message; a request id worth keeping is rarely that long.
    (re.compile(r"\b[A-Fa-f0-9]{32,}\b|\b[A-Za-z0-9+/_-]{40,}={0,2}"), REDACTED),
)


#: Scrubbing reads at most this many times the characters that are kept. A server can
#: send a 16 MiB error message, and scrubbing all of it would hold the proxy's only
#: event loop for seconds (found by tests/hardening). The window is wide enough that a
#: token cut at its edge could only come back into the kept part if the scrubbing
#: before it shrank the text by more than the window (redacted tokens are ~10 chars).
SCRUB_WINDOW = 16


def scrub(text: str) -> str:
    """Replace every token-like substring of `text` with `[redacted]`."""
    for pattern, replacement in _PATTERNS:
        text = pattern.sub(replacement, text)
    return text


def error_message(text: str | None, limit: int = MAX_ERROR_MESSAGE_CHARS) -> str | None:
    """A JSON-RPC error message as a record keeps it: scrubbed, then cut."""
    if text is None:
        return None
    text = scrub(text[: limit * SCRUB_WINDOW])
    return text if len(text) <= limit else text[: limit - 1] + "…"


@functools.lru_cache(maxsize=4096)  # the same few session ids come back on every POST
def pseudonym(prefix: str, value: str) -> str:
    """A stable short stand-in for an identifier that may be a credential."""
    return prefix + hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()[:10]


#: Member names whose values are secrets whatever they look like (`_SECRET_NAME`; it
#: used to be a list of exact names, and `accessToken`, `clientSecret`, `auth_token`
#: passed: found by tests/hardening).
_SECRET_KEYS = re.compile(r"(?i)" + _SECRET_NAME)

#: Characters of one string value kept in a recorded body.
MAX_BODY_STRING_CHARS = 2000

#: Nesting kept in a recorded body; deeper values are replaced by a marker.
MAX_BODY_DEPTH = 32


def redact_json(value: object, depth: int = 0) -> object:
    """A JSON value fit for a recording: secret members blanked, strings scrubbed and cut."""
    if depth > MAX_BODY_DEPTH:
        return "[too deep]"
    if isinstance(value, dict):
        # Member names are scrubbed too: a token can be a key (`{"sk-…": "prod"}`).
        return {
            scrub(str(k)): REDACTED if _SECRET_KEYS.fullmatch(str(k)) else redact_json(v, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact_json(v, depth + 1) for v in value]
    if isinstance(value, str):
        text = scrub(value[: MAX_BODY_STRING_CHARS * SCRUB_WINDOW])
        return text if len(text) <= MAX_BODY_STRING_CHARS else text[:MAX_BODY_STRING_CHARS] + "…"
    return value
