"""Named fault presets: Cakewalk's default scenarios and the failures an agent lab needs.

Each preset is written in the inline rule syntax (`faults.parse_inline`), so a preset
reads exactly like the `--set mcp_fault=...` a user would type, and docs/faults.md shows
the same text (a unit test keeps the two in step). Decisions per preset are explained in
docs/faults.md ("Presets"); the short version:

- Counters are per client (`counter=client`) wherever the fault fires once: a client that
  answers a 503 or a 404 by opening a new session must not meet the fault again in the
  new session, or a session-scoped "first call" would fail forever.
- `errors.http_status_sequence` applies `[503, 200]` to tools/call only (Cakewalk counts
  every POST, so there `initialize` absorbs the 503 and no tool call ever sees it).
- `compat.sdk_v2` refuses 2026-07-28 requests the way a server that predates that version
  does (400 + -32022), so clients must fall back to `initialize`.
"""

from __future__ import annotations

from typing import Final

from .faults import FaultRule, FaultRuleError, parse_inline

#: name -> the inline rules it stands for (an empty tuple: no fault at all).
PRESETS: Final[dict[str, tuple[str, ...]]] = {
    "none": (),
    "baseline": (),
    "errors.http_status_sequence": (
        "http_status=503,200 counter=client name=errors.http_status_sequence",
    ),
    "errors.jsonrpc_error": (
        'jsonrpc_error=-32603 message="Internal error" nth=1 counter=client'
        " name=errors.jsonrpc_error",
    ),
    "errors.tool_error": (
        'tool_error="Injected tool failure" nth=1 counter=client name=errors.tool_error',
    ),
    "elicitation.approval": (
        'input_required="Allow this tool call?" nth=1 counter=client name=elicitation.approval',
    ),
    "compat.sdk_v2": (
        "http_status=400 code=-32022 'message=Unsupported protocol version'"
        ' \'data={"supported":["2025-11-25","2025-06-18","2025-03-26"]}\''
        " method=* protocol=2026-* name=compat.sdk_v2",
    ),
    "errors.rate_limited": (
        "http_status=429,200 retry_after=2 counter=client name=errors.rate_limited",
    ),
    "errors.session_expired": ("session_expired nth=1 counter=client name=errors.session_expired",),
    "errors.stream_cut": ("sse_truncate=before_final nth=1 counter=client name=errors.stream_cut",),
    # Beyond Cakewalk: the agent lab's "server down" and "connection dropped".
    "errors.unavailable": (
        "http_status=503 method=initialize,tools/list,tools/call name=errors.unavailable",
    ),
    "errors.connection_dropped": ("drop nth=1 counter=client name=errors.connection_dropped",),
}


def preset_names() -> list[str]:
    return list(PRESETS)


def preset(name: str) -> list[FaultRule]:
    """The rules of a named preset. Raises FaultRuleError for an unknown name."""
    texts = PRESETS.get(name)
    if texts is None:
        known = ", ".join(PRESETS)
        raise FaultRuleError("preset", None, f'unknown preset "{name}"; presets are {known}')
    return [parse_inline(text, source=f"preset {name}") for text in texts]
