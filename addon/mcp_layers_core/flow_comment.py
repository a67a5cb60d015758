"""The verdict as mitmproxy shows it: a record's one-line flow comment and its marker.

`mitmweb`, mitmproxy's console and saved flows (`-w`) carry `flow.comment` and
`flow.marked`; the adapter sets both from the records of each flow, so whoever looks at
the flows sees the verdict without reading the JSONL. Pure: a record dict in, strings out.

    #7 TOOL_ERROR · application · tools/call get_weather · retry of #4 (reinit)

The `#id` is the record's, so `retry of #4` points at the flow commented `#4 …`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .record import NOT_FAILED, Kind, Outcome

SEP: Final = " · "

#: `flow.marked` is a string in mitmproxy 12: empty is unmarked; an emoji shortcode is
#: shown as its glyph (console, mitmweb); `~marked` and `~marker REGEX` filter on it.
MARK_FAILED: Final = ":warning:"
MARK_INJECTED: Final = ":syringe:"

_NOT_FAILED_VALUES: Final = frozenset(o.value for o in NOT_FAILED)


def comment_of(record: Mapping[str, Any]) -> str:
    """`#id` and what the record says of its flow, in a line (` · ` between parts)."""
    kind = record.get("kind")
    parts = [f"#{record.get('id')} {_headline(record, kind)}"]
    if kind == Kind.REQUEST:
        parts += _request_parts(record)
    elif kind == Kind.NOTIFICATION:
        parts += [str(record.get("method")), _ack(record)]
    elif kind == Kind.RESPONSE:
        parts += [str(record.get("serverMethod") or "answer"), _ack(record)]
    elif kind == Kind.SESSION_END:
        statuses = record.get("httpStatuses") or []
        parts += [str(record.get("endReason"))] + [str(s) for s in statuses[-1:]]
    elif kind == Kind.MODEL_TURN:
        parts += _model_parts(record.get("modelTurn"))
    injected = record.get("injected")
    if isinstance(injected, Mapping):
        parts.append(f"injected: {injected.get('rule')}/{injected.get('action')}")
    return SEP.join(parts)


def mark_of(record: Mapping[str, Any]) -> str:
    """The marker: injected faults first, then failed calls (not negotiation probes);
    empty for the rest."""
    if record.get("injected"):
        return MARK_INJECTED
    return MARK_FAILED if is_failure(record) else ""


def is_failure(record: Mapping[str, Any]) -> bool:
    """A request whose outcome is a failure, unless it was a version-negotiation probe."""
    if record.get("kind") != Kind.REQUEST or record.get("negotiation") is True:
        return False
    outcome = record.get("outcome")
    return outcome is not None and outcome not in _NOT_FAILED_VALUES


def _headline(record: Mapping[str, Any], kind: object) -> str:
    if kind == Kind.REQUEST:
        outcome = str(record.get("outcome"))
        statuses = record.get("httpStatuses") or []
        if outcome == Outcome.HTTP_ERROR and statuses:
            return f"{outcome} {statuses[-1]}"
        return outcome
    if kind == Kind.SESSION_END:
        return "session end"
    return str(kind)


def _model_parts(turn: object) -> list[str]:
    """`anthropic claude-x`, the stop reason, the tool calls asked for, `cut`."""
    if not isinstance(turn, Mapping):
        return []
    parts = [" ".join(str(p) for p in (turn.get("provider"), turn.get("model")) if p)]
    parts.append(str(turn.get("stopReason") or "no stop reason"))
    calls = turn.get("toolCalls") or []
    if calls:
        parts.append(f"{len(calls)} tool call{'s' if len(calls) > 1 else ''}")
    if turn.get("complete") is False:
        parts.append("cut")
    return parts


def _request_parts(record: Mapping[str, Any]) -> list[str]:
    method = str(record.get("method"))
    tool = record.get("tool")
    parts = [str(record.get("layer")), f"{method} {tool}" if tool else method]
    call = record.get("modelCall")
    if isinstance(call, Mapping):
        parts.append(f"asked by model turn #{call.get('turn')} ({call.get('join')})")
    if record.get("retryOf") is not None:
        parts.append(f"retry of #{record['retryOf']} ({record.get('retryOrigin')})")
    if record.get("continues") is not None:
        parts.append(f"continues #{record['continues']}")
    if record.get("negotiation") is True:
        parts.append("negotiation probe")
    return parts


def _ack(record: Mapping[str, Any]) -> str:
    """How the POST was acknowledged: `202`, `200 with body`, or `no response`."""
    note = record.get("ackNote")
    if note:
        return str(note)
    statuses = record.get("httpStatuses") or []
    return str(statuses[-1]) if statuses else "no response"
