"""The replayed server's state: which recorded answer a live request gets. Pure (no sockets).

A live request is matched in its scope (see `script`) by key and ordinal: the n-th live
request of a key gets the n-th recorded answer of that key, which is what replays "a 503,
then a 200" to a client that retries with a new JSON-RPC id. Sessions run as the server
ran them: each recorded session opened by a live `initialize` gets a fresh id; after a
recorded 404 on it, every later request naming it is answered 404.
"""

from __future__ import annotations

import json
import secrets
import threading
from dataclasses import dataclass, field
from typing import Any, Final

from mcp_layers_core.record import StreamEnd

from .script import (
    Answer,
    Event,
    Exchange,
    Scope,
    Script,
    Stream,
    canonical,
    key_of,
)

#: The JSON-RPC error code of a request the recording does not hold (implementation-
#: defined server errors are -32000 to -32099).
MISS_CODE: Final = -32099

#: What a session the replay does not know gets: a real server's answer to an unknown or
#: expired session (2025-11-25: "MUST respond … with HTTP 404 Not Found").
NOT_FOUND_BODY: Final = {
    "jsonrpc": "2.0",
    "id": None,
    "error": {"code": -32001, "message": "Session not found"},
}


@dataclass(frozen=True, slots=True)
class Reply:
    """What to send, and when. `status` None: drop the connection without a response."""

    status: int | None
    headers: tuple[tuple[str, str], ...] = ()
    #: A JSON (or empty) body, sent after `delay_s`.
    body: bytes = b""
    delay_s: float = 0.0
    #: SSE: each event's bytes and its offset from the request (scaled), then `end`:
    #: `complete`/`eof` close the stream cleanly, `error` resets the connection.
    sse: tuple[tuple[float, bytes], ...] | None = None
    end: StreamEnd | None = None
    #: A GET stream held open this long (scaled) before it ends; None: until the client
    #: leaves or its session ends (`Player.alive`).
    hold_s: float | None = 0.0


@dataclass(frozen=True, slots=True)
class Miss:
    """A live request the recording holds no answer for."""

    method: str
    ordinal: int
    why: str

    def __str__(self) -> str:
        return f"{self.method} (occurrence {self.ordinal}): {self.why}"


@dataclass(slots=True)
class Player:
    """Thread-safe: the server's handler threads share one player."""

    script: Script
    speed: float = 1.0
    misses: list[Miss] = field(default_factory=list)
    _minted: dict[str, str] = field(default_factory=dict)  # live id -> recorded session
    #: Ended sessions, with the recorded 404 that ended one (None: a DELETE ended it), so
    #: that every later request gets that same answer.
    _expired: dict[str, Exchange | None] = field(default_factory=dict)
    _counts: dict[tuple[Scope, Any], int] = field(default_factory=dict)
    #: Per session: the answers (as SSE events) a resumed GET owes, their POST streams
    #: having been cut before them, as recorded.
    _owed: dict[str | None, list[bytes]] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def post(self, session_header: str | None, body: bytes) -> Reply:
        """The reply to a POST with this session header and body."""
        with self._lock:
            return self._post(session_header, body)

    def get(self, session_header: str | None, last_event_id: str | None = None) -> Reply:
        """A GET: the next recorded standby stream, or, with `Last-Event-ID`, the next
        recorded resumption, carrying the answers whose own streams were cut."""
        with self._lock:
            scope = self._scope(session_header)
            if isinstance(scope, Reply):
                return scope
            resumes = last_event_id is not None
            n = self._next((scope, "GET resume" if resumes else "GET"))
            streams = [s for s in self.script.streams.get(scope, []) if s.resumes == resumes]
            owed = self._owed.pop(session_header, []) if resumes else []
            if n > len(streams):
                if owed:  # resumed more often than recorded: still deliver what is owed
                    return self._stream(Stream(200, 0.0, StreamEnd.COMPLETE, False), owed)
                return Reply(405, (("allow", "POST, DELETE"),))
            return self._stream(streams[n - 1], owed)

    def alive(self, session_header: str | None) -> bool:
        """Is the session a held GET stream belongs to still open?"""
        with self._lock:
            return session_header is None or session_header not in self._expired

    def delete(self, session_header: str | None) -> Reply:
        with self._lock:
            scope = self._scope(session_header)
            if isinstance(scope, Reply):
                return scope
            if session_header is not None:
                self._expired[session_header] = None
            status = self.script.deletes.get(scope or "", 200)
            return Reply(status)

    # -- matching ------------------------------------------------------------------

    def _scope(
        self, session_header: str | None, live: dict[str, Any] | None = None
    ) -> Scope | Reply:
        """The recorded scope a request is in, or the 404 a real server would give: the
        recorded one that ended the session, for every request after it."""
        if session_header is None or not self.script.issued:
            return None  # a stateless server ignores a session id it never issued
        if session_header in self._expired:
            ended_by = self._expired[session_header]
            if ended_by is not None:
                return self._answer(ended_by, live or {}, None)
            return _json_reply(404, NOT_FOUND_BODY)
        if session_header not in self._minted:
            return _json_reply(404, NOT_FOUND_BODY)
        return self._minted[session_header]

    def _next(self, counter: tuple[Scope, Any]) -> int:
        n = self._counts.get(counter, 0) + 1
        self._counts[counter] = n
        return n

    def _post(self, session_header: str | None, body: bytes) -> Reply:
        try:
            message = json.loads(body)
        except ValueError:
            return self._miss("(not JSON)", 1, None, "the body is not JSON")
        if not isinstance(message, dict) or not isinstance(message.get("method"), str):
            # A client's answer to a server request, or a batch: acknowledged.
            return Reply(202)
        scope = self._scope(session_header, message)
        if isinstance(scope, Reply):
            return scope
        method: str = message["method"]
        params = message.get("params")
        key = key_of(method, params, redacted=False, notification="id" not in message)
        n = self._next((scope, key))
        recorded = self.script.exchanges.get(scope, {}).get(key, [])
        if n > len(recorded):
            why = self._why(scope, method, params, key, n, len(recorded))
            if "id" not in message:  # a notification: nothing to put an error in
                self.misses.append(Miss(method, n, why))
                return Reply(202)
            return self._miss(method, n, message.get("id"), why)
        exchange = recorded[n - 1]
        reply = self._answer(exchange, message, session_header)
        if exchange.answer.status == 404 and session_header is not None:
            self._expired[session_header] = exchange  # from now on, as the real server did
        return reply

    def _why(self, scope: Scope, method: str, params: Any, key: Any, n: int, held: int) -> str:
        if held:
            return f"the recording holds {held} such request(s) in this session; this is #{n}"
        nearest = self.script.candidates(scope, method)
        if not nearest:
            where = "before any session" if scope is None else "in this session"
            return f"the recording holds no {method} {where}"
        return f"nearest recorded: {nearest[0].where}, differs in {_differs(nearest[0], key)}"

    def _miss(self, method: str, n: int, rpc_id: Any, why: str) -> Reply:
        self.misses.append(Miss(method, n, why))
        body = {
            "jsonrpc": "2.0",
            "id": rpc_id,
            "error": {
                "code": MISS_CODE,
                "message": f"mcp-layers replay: no recorded answer: {why}",
            },
        }
        return _json_reply(200, body)

    # -- answers -------------------------------------------------------------------

    def _answer(self, x: Exchange, live: dict[str, Any], session_header: str | None) -> Reply:
        a = x.answer
        if a.status is None:
            return Reply(None, delay_s=self._scaled(a.duration_ms))
        headers: list[tuple[str, str]] = []
        if a.opens is not None:
            minted = secrets.token_hex(16)
            self._minted[minted] = a.opens
            headers.append(("mcp-session-id", minted))
        elif session_header is not None and session_header in self._minted:
            headers.append(("mcp-session-id", session_header))
        if a.retry_after_ms is not None:
            headers.append(("retry-after", str(max(0, round(a.retry_after_ms / 1000)))))
        if a.resumed and a.body is not None:
            self._owed.setdefault(session_header, []).append(
                _event_bytes(Event(0.0, f"resumed-{a.rpc_id}", None, None, a.body, True),
                             a.rpc_id, live)
            )  # fmt: skip
        if a.is_sse:
            headers.append(("content-type", "text/event-stream"))
            headers.append(("cache-control", "no-cache"))
            return Reply(
                a.status,
                tuple(headers),
                delay_s=self._scaled(a.headers_ms or 0.0),
                sse=tuple(self._events(a, live)),
                end=a.sse_end or StreamEnd.COMPLETE,
            )
        body = b"" if a.body is None else _dumps(_rekeyed(a.body, a.rpc_id, live))
        if a.content_type is not None:
            headers.append(("content-type", a.content_type))
        return Reply(a.status, tuple(headers), body, delay_s=self._scaled(a.duration_ms))

    def _events(self, a: Answer, live: dict[str, Any]) -> list[tuple[float, bytes]]:
        if a.events:
            return [(self._scaled(e.ms), _event_bytes(e, a.rpc_id, live)) for e in a.events]
        if a.sse_final and a.body is not None and not a.resumed:  # no events kept: the answer
            only = Event(a.duration_ms, None, None, a.retry_ms, a.body, True)
            return [(self._scaled(a.duration_ms), _event_bytes(only, a.rpc_id, live))]
        return []

    def _stream(self, s: Stream, owed: list[bytes] | None = None) -> Reply:
        if s.status is None:
            return Reply(None)
        if not 200 <= s.status < 300:
            return Reply(s.status)
        headers = (("content-type", "text/event-stream"), ("cache-control", "no-cache"))
        return Reply(
            s.status,
            headers,
            sse=tuple((0.0, event) for event in owed or ()),
            end=s.end or StreamEnd.COMPLETE,
            hold_s=None if s.held else self._scaled(s.duration_ms),
        )

    def _scaled(self, ms: float) -> float:
        return max(0.0, ms / 1000.0 / self.speed)


def _json_reply(status: int, body: Any) -> Reply:
    return Reply(status, (("content-type", "application/json"),), _dumps(body))


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _rekeyed(message: Any, recorded_id: Any, live: dict[str, Any]) -> Any:
    """The recorded message as the live request must see it: the answer to the recorded
    request carries the live request's id (its JSON type kept), a progress notification
    the live request's progress token."""
    if not isinstance(message, dict):
        return message
    if ("result" in message or "error" in message) and message.get("id") == recorded_id:
        return {**message, "id": live.get("id")}
    params = message.get("params")
    if message.get("method") == "notifications/progress" and isinstance(params, dict):
        token = ((live.get("params") or {}).get("_meta") or {}).get("progressToken")
        if token is not None:
            return {**message, "params": {**params, "progressToken": token}}
    return message


def _event_bytes(e: Event, recorded_id: Any, live: dict[str, Any]) -> bytes:
    lines: list[str] = []
    if e.id is not None:
        lines.append(f"id: {e.id}")
    if e.event not in (None, "message"):
        lines.append(f"event: {e.event}")
    if e.retry is not None:
        lines.append(f"retry: {e.retry}")
    if e.data is not None:
        text = _dumps(_rekeyed(e.data, recorded_id, live)).decode() if e.json else str(e.data)
        lines += [f"data: {line}" for line in text.split("\n")]
    return ("\n".join(lines) + "\n\n").encode()


def _differs(recorded: Exchange, live_key: Any) -> str:
    """Which top-level params of the nearest recorded request differ from the live one's."""
    mine = json.loads(live_key[1]) if live_key[1] else {}
    theirs = json.loads(recorded.key[1]) if recorded.key[1] else {}
    if not isinstance(mine, dict) or not isinstance(theirs, dict):
        return "params"
    names = sorted(
        k for k in {*mine, *theirs} if canonical(mine.get(k)) != canonical(theirs.get(k))
    )
    if names == ["arguments"] and isinstance(mine.get("arguments"), dict):
        args, rec = mine["arguments"], theirs.get("arguments") or {}
        inner = sorted(k for k in {*args, *rec} if canonical(args.get(k)) != canonical(rec.get(k)))
        return ", ".join(f"arguments.{k}" for k in inner) or "arguments"
    return ", ".join(f"params.{k}" for k in names) or "nothing (a repeat beyond the recording)"
