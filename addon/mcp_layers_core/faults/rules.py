"""The fault rule model: frozen `FaultRule`s, what they match, which calls they pick, and
their actions; `FaultRuleError`, raised for a rule written wrong; and the compact JSON
and content types the bodies of faults are written with.

A rule is data only: `parse` builds rules from what a user writes, `plan` applies them.
docs/faults.md describes every action and parameter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Final

JSON_TYPE: Final = "application/json"
SSE_TYPE: Final = "text/event-stream"
TEXT_TYPE: Final = "text/plain; charset=utf-8"


def compact_json(value: object) -> bytes:
    """Compact and on one line (JSON escapes newlines in strings): also a valid SSE data line."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


ACTIONS: Final = (
    "http_status",
    "jsonrpc_error",
    "tool_error",
    "input_required",
    "malformed",
    "sse_truncate",
    "drop",
    "delay",
    "idle_cut",
    "session_expired",
)


class FaultRuleError(ValueError):
    """A rule or rules file is wrong. The message: `source:line: reason; what to write`."""

    def __init__(self, source: str, line: int | None, reason: str) -> None:
        self.source = source
        self.line = line
        self.reason = reason
        where = source if line is None else f"{source}:{line}"
        super().__init__(f"{where}: {reason}")


class _Absent:
    """Marks an optional member that was not given (JSON `null` is a value)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()


class Scope(StrEnum):
    """Whose calls a rule counts: each session's, each client's, or all together."""

    SESSION = "session"
    CLIENT = "client"
    GLOBAL = "global"


@dataclass(frozen=True, slots=True)
class Match:
    """Which requests a rule looks at. Each field is a tuple of exact names or globs
    (`fnmatch`, case-sensitive), any of which may match; None matches anything."""

    method: tuple[str, ...] = ("tools/call",)
    tool: tuple[str, ...] | None = None
    session: tuple[str, ...] | None = None
    client: tuple[str, ...] | None = None
    protocol: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class Which:
    """Which of the matching calls (1-based) a rule acts on. At most one of `nth`,
    `every`, `from_`; none means every matching call. `probability` then draws."""

    nth: int | None = None
    every: int | None = None
    from_: int | None = None
    probability: float | None = None

    def selects(self, count: int) -> bool:
        """Does the `count`-th matching call pass the counting part (not the draw)?"""
        if self.nth is not None:
            return count == self.nth
        if self.every is not None:
            return count % self.every == 0
        if self.from_ is not None:
            return count >= self.from_
        return True


@dataclass(frozen=True, slots=True)
class RpcError:
    """A JSON-RPC `error` member."""

    code: int
    message: str
    data: object = ABSENT

    def member(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not ABSENT:
            err["data"] = self.data
        return err


@dataclass(frozen=True, slots=True)
class HttpStatus:
    KIND: ClassVar[str] = "http_status"
    statuses: tuple[int, ...]  # the k-th time the rule acts it answers statuses[k-1]
    retry_after: str | None = None
    body: bytes | None = None  # None: not given (a 2xx then passes through)
    content_type: str | None = None
    error: RpcError | None = None  # a JSON-RPC error body with the request's id


@dataclass(frozen=True, slots=True)
class JsonRpcError:
    KIND: ClassVar[str] = "jsonrpc_error"
    error: RpcError
    status: int = 200
    sse: bool = False


@dataclass(frozen=True, slots=True)
class ToolError:
    KIND: ClassVar[str] = "tool_error"
    text: str
    sse: bool = False


@dataclass(frozen=True, slots=True)
class InputRequired:
    KIND: ClassVar[str] = "input_required"
    message: str
    key: str = "approval"
    sse: bool = False


@dataclass(frozen=True, slots=True)
class Malformed:
    KIND: ClassVar[str] = "malformed"
    kind: str  # invalid_json | wrong_id | result_and_error
    sse: bool = False


@dataclass(frozen=True, slots=True)
class SseTruncate:
    KIND: ClassVar[str] = "sse_truncate"
    after_events: int | None = None  # None: cut before the final response instead


@dataclass(frozen=True, slots=True)
class Drop:
    KIND: ClassVar[str] = "drop"
    upstream: bool = False  # True: let the upstream handle it, then drop the answer


@dataclass(frozen=True, slots=True)
class Delay:
    KIND: ClassVar[str] = "delay"
    ms: int
    where: str = "headers"  # headers | events


@dataclass(frozen=True, slots=True)
class IdleCut:
    """Close the client's connection once the answer's event stream has been silent
    `after_ms` (each upstream chunk restarts the wait), as idle timeouts of CDNs and load
    balancers do; `graceful` ends the stream cleanly first where the framing allows."""

    KIND: ClassVar[str] = "idle_cut"
    after_ms: int
    graceful: bool = False


@dataclass(frozen=True, slots=True)
class SessionExpired:
    KIND: ClassVar[str] = "session_expired"


Action = (
    HttpStatus
    | JsonRpcError
    | ToolError
    | InputRequired
    | Malformed
    | SseTruncate
    | Drop
    | Delay
    | IdleCut
    | SessionExpired
)


@dataclass(frozen=True, slots=True)
class FaultRule:
    name: str
    action: Action
    match: Match = field(default_factory=Match)
    which: Which = field(default_factory=Which)
    scope: Scope = Scope.SESSION
    line: int | None = None  # where it was written, for messages

    @property
    def kind(self) -> str:
        return self.action.KIND
