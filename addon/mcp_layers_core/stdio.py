"""stdio as the tracker sees it: lines in, the same records out (sans-IO).

`mcp-layers wrap` (addon/mcp_layers_stdio.py) moves the bytes; this module is told what
lines passed, each way, and when the pipes and the process ended, and returns records.

Why it speaks to the `Tracker` in its HTTP vocabulary rather than growing a second state
machine: a stdio request line is exactly a POST whose body is that line, and the
server's answer line with the same id is exactly a `200 application/json` body. So a
request line opens a flow (`PostReceived`), its answer line ends it (`ResponseStarted` +
`ResponseBody`), and a line that expects no answer (a notification, the client's answer
to a server request) is closed at once, as a `202` would close it. Pairing, the three
layers and their outcomes, client identity from `initialize`, the negotiated version,
tool safety and retries then come from the same code as over HTTP. What only the proxy
invented (the statuses, the content type, the header names) is taken back out of each
record, which is marked `transport: stdio` instead.

The session is the wrapped process: every request carries one stand-in `Mcp-Session-Id`
per wrapper run, so the tracker keeps one lifeline for it; its `session_end` is built
here when the process ends (`endReason: exited`), with what only stdio knows as notes
(how the process ended, stderr lines, lines that were not JSON, a partial last line).

Requests still unanswered when the process ends are failed (`FlowFailed`): NO_RESPONSE,
noted `server_exited:<how>` (and `stdin_closed_pending` when the client had already
closed stdin). An answer whose request the client cancelled is paired all the same and
noted `late_answer`.
"""

from __future__ import annotations

import re
from typing import Any, Final

from .events import FlowFailed, PostReceived, ProxyStopping, ResponseBody, ResponseStarted
from .finished import FinishedSession
from .jsonrpc import (
    NOT_JSON,
    id_key,
    is_notification,
    is_request,
    is_response,
    messages_of,
    try_loads,
)
from .notes import NO_DETAIL, Note
from .record import EndReason, Kind, NoteCode, Transport
from .records import render_note, session_record
from .settings import Settings
from .tracker import Emitted, Tracker

#: What the wrapper keeps of a line longer than its cap: enough to read an answer's id.
HEAD_BYTES: Final = 4096

#: Answers kept for a request the recorder has not heard of yet (`_early_answer`).
MAX_EARLY: Final = 256

#: Server requests remembered (id -> method, when) until the client answers them.
MAX_ASKED: Final = 1024

#: The id of a JSON-RPC message, read from the start of a line too long to parse: only
#: when it is the first member (or follows `"jsonrpc":"2.0"`), as the SDKs write it, so
#: that an `id` nested in a result is never taken for the envelope's.
_HEAD_ID: Final = re.compile(
    rb'^\s*\{\s*(?:"jsonrpc"\s*:\s*"2\.0"\s*,\s*)?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")'
)

#: The headers every synthetic POST carries: the run's session, nothing else.
_JSON: Final = {"content-type": "application/json"}


def head_id(head: bytes) -> object:
    """The envelope id at the start of `head`, or `NOT_JSON` when none can be read."""
    m = _HEAD_ID.match(head)
    return NOT_JSON if m is None else try_loads(m.group(1))


class StdioObserver:
    """One wrapped server process: feed it the lines; write what it returns.

    Each method returns the records it finished (dicts in the record format), in order.
    """

    def __init__(
        self,
        *,
        server: str,
        run_id: str,
        started: float,
        settings: Settings | None = None,
    ) -> None:
        self.tracker = Tracker(settings)
        self.server = server
        self.started = started
        self._peer = f"stdio-{run_id}:0"
        self._headers = {"mcp-session-id": f"stdio-{run_id}"}
        self._session_key = self.tracker.sessions.key_of(f"stdio-{run_id}")
        self._next_flow = 0
        #: id key -> the flow of the request awaiting an answer with that id.
        self._pending: dict[tuple[str, object], str] = {}
        #: flow -> the id keys it awaits (a batch awaits several).
        self._flows: dict[str, list[tuple[str, object]]] = {}
        self._cancelled: set[tuple[str, object]] = set()
        self._closed_pending: set[str] = set()
        #: flow -> notes only stdio knows, added to its record when the tracker writes it.
        self._flow_notes: dict[str, list[str]] = {}
        self._asked: dict[tuple[str, object], tuple[str, float]] = {}
        #: Answers heard before their requests (`_early_answer`), and their ids as sent.
        self._early: dict[tuple[str, object], tuple[bytes, int, float]] = {}
        self._early_ids: dict[tuple[str, object], object] = {}
        #: Fault marks from the wrapper, for requests not heard of yet.
        self._injections: dict[tuple[str, object], dict[str, str]] = {}
        self._client: str | None = None
        self._version: str | None = None
        self._last_id = 0
        self._spare_id: int | None = None
        self._ended = False
        # What the session_end tells.
        self.posts = 0
        self.server_requests = 0
        self.server_notifications = 0
        self.stderr = 0
        self.stdout_not_json = 0
        self.stdin_not_json = 0
        self.over_cap: int | None = None
        self.partial: int | None = None
        self.unexpected_id: object = NO_DETAIL
        self.stdin_closed_with = 0
        self.epipe_to_client = False
        self.epipe_to_server = False
        self.dropped = 0
        self.skipped = 0
        self.client_closed_at: float | None = None

    # -- what passed ---------------------------------------------------------------

    def from_client(self, line: bytes, size: int, ts: float) -> list[dict[str, Any]]:
        """A complete line the client wrote (without its newline). `line` is shorter
        than `size` when the line was over the wrapper's cap: only its start was kept."""
        if len(line) < size:
            self._over_cap(size)
            return []
        msgs = messages_of(try_loads(line))
        if msgs is None:
            self.stdin_not_json += 1
            return []
        self.posts += 1
        self._next_flow += 1
        flow = f"s{self._next_flow}"
        out = self.tracker.handle(
            PostReceived(flow, ts, self.server, self._peer, self._headers, line, size)
        )
        keys = [id_key(m["id"]) for m in msgs if is_request(m)]
        if keys:
            self._flows[flow] = keys
            for k in keys:
                self._pending[k] = flow
            if self._injections:
                for k in keys:
                    if (injected := self._injections.pop(k, None)) is not None:
                        self.tracker.mark_injected(flow, injected)
            records = self._records(out)
            if self._early:
                for k in keys:
                    early = self._early.pop(k, None)
                    self._early_ids.pop(k, None)
                    if early is not None and flow in self._flows:
                        records += self._deliver(flow, *early)
            return records
        answered: tuple[str, float] | None = None
        for m in msgs:
            if is_notification(m) and m.get("method") == "notifications/cancelled":
                params = m.get("params")
                if isinstance(params, dict) and "requestId" in params:
                    k = id_key(params["requestId"])
                    if k in self._pending:
                        self._cancelled.add(k)
            elif is_response(m):
                answered = self._asked.pop(id_key(m.get("id")), None) or answered
        # Nothing answers these on stdio: closed at once, as a 202 closes them over HTTP.
        out += self.tracker.handle(ResponseStarted(flow, ts, 202, {}))
        out += self.tracker.handle(ResponseBody(flow, ts, b"", 0))
        records = self._records(out)
        if answered is not None:
            for r in records:
                if r["kind"] == Kind.RESPONSE:
                    method, asked_at = answered
                    r["method"] = None
                    r["serverMethod"] = method
                    r["answerMs"] = round(max(0.0, ts - asked_at) * 1000, 1)
        return records

    def from_server(self, line: bytes, size: int, ts: float) -> list[dict[str, Any]]:
        """A complete line the server wrote on stdout (as `from_client`)."""
        if len(line) < size:
            self._over_cap(size)
            rid = head_id(line)
            flow = None if rid is NOT_JSON else self._pending.get(id_key(rid))
            if flow is None:
                return []
            # Paired, but not read: UNINSPECTED with `body_over_cap`, as over HTTP.
            return self._deliver(flow, None, size, ts)
        value = try_loads(line)
        if value is NOT_JSON:
            self.stdout_not_json += 1
            return []
        if isinstance(value, list):  # a 2025-03-26 batch answer: its requests' flow
            for m in value:
                if isinstance(m, dict) and (flow := self._pending.get(id_key(m.get("id")))):
                    return self._deliver(flow, line, size, ts)
            self._unexpected(value[0].get("id") if value and isinstance(value[0], dict) else None)
            return []
        if not isinstance(value, dict):
            self.stdout_not_json += 1  # JSON, but no message (a bare number, a string)
            return []
        if is_request(value):
            self.server_requests += 1
            if len(self._asked) < MAX_ASKED:
                self._asked[id_key(value["id"])] = (value["method"], ts)
            return []
        if is_notification(value):
            self.server_notifications += 1
            return []
        key = id_key(value.get("id"))
        flow = self._pending.get(key)
        if flow is None:
            self._early_answer(key, value.get("id"), line, size, ts)
            return []
        return self._deliver(flow, line, size, ts)

    def injected(self, rpc_id: object, injected: dict[str, str]) -> None:
        """A fault rule of the wrapper answered, dropped or delayed the request `rpc_id`
        (told before the request's line arrives here): its record says so."""
        if len(self._injections) < MAX_EARLY:
            self._injections[id_key(rpc_id)] = injected

    def stderr_line(self) -> None:
        """A line on the server's stderr: counted, never a failure (2025-11-25)."""
        self.stderr += 1

    def client_closed(self, ts: float) -> None:
        """The client closed the server's stdin (EOF): a request still waiting then is
        one the client gave up on, or one the server may still answer."""
        self.client_closed_at = ts
        self._closed_pending = set(self._flows)

    def lost(self, n: int = 1) -> None:
        """Lines passed on but never observed (the recorder fell behind)."""
        self.dropped += n

    def server_closed(self, partial: int) -> None:
        """The server's stdout ended; `partial` bytes followed its last newline."""
        if partial:
            self.partial = partial

    # -- the end ---------------------------------------------------------------------

    def exited(self, ts: float, code: int | None, signal_name: str | None) -> list[dict[str, Any]]:
        """The process ended (`code`, or killed by `signal_name`; both None: unknown).
        Every request still waiting fails, and the session's end is written."""
        if self._ended:
            return []
        self._ended = True
        how = f"signal={signal_name}" if signal_name else (None if code is None else f"code={code}")
        out: list[Emitted] = []
        for flow in list(self._flows):
            flow_notes = self._flow_notes.setdefault(flow, [])
            if flow in self._closed_pending:
                # Still unanswered at the end: an answer after the EOF was not a failure.
                flow_notes.append(NoteCode.STDIN_CLOSED_PENDING)
                self.stdin_closed_with += 1
            if how is not None:
                flow_notes.append(render_note(Note(NoteCode.SERVER_EXITED, how)))
            self._forget(flow)
            out += self.tracker.handle(FlowFailed(flow, ts, "server exited"))
        out += self.tracker.handle(ProxyStopping(ts))
        for key in self._early:
            self._unexpected(self._early_ids[key])
        records = self._records(out)
        end = [] if how is None else [Note(NoteCode.SERVER_EXITED, how)]
        records.append(self._session_end(ts, EndReason.EXITED, end))
        return records

    def spawn_failed(self, ts: float, errno_name: str) -> dict[str, Any]:
        """The command could not be started: the run's one record."""
        self._ended = True
        return self._session_end(
            ts, EndReason.SPAWN_FAILED, [Note(NoteCode.SPAWN_FAILED, errno_name)]
        )

    # -- inside ------------------------------------------------------------------------

    def _deliver(self, flow: str, line: bytes | None, size: int, ts: float) -> list[dict[str, Any]]:
        late = any(k in self._cancelled for k in self._flows.get(flow, ()))
        self._forget(flow)
        if late:
            self._flow_notes.setdefault(flow, []).append(NoteCode.LATE_ANSWER)
        out = self.tracker.handle(ResponseStarted(flow, ts, 200, _JSON))
        out += self.tracker.handle(ResponseBody(flow, ts, line, size))
        return self._records(out)

    def _forget(self, flow: str) -> None:
        for k in self._flows.pop(flow, ()):
            if self._pending.get(k) == flow:
                del self._pending[k]
            self._cancelled.discard(k)

    def _early_answer(
        self, key: tuple[str, object], rpc_id: object, line: bytes, size: int, ts: float
    ) -> None:
        """An answer no pending request has. Usually its request is still on its way to
        the recorder (the pumps write first and report after, each on its own thread, so
        a fast server's answer can be reported before the request it answers): kept for
        that request, a few at a time. Those never claimed are unexpected at the end."""
        if rpc_id is None or len(self._early) >= MAX_EARLY:
            self._unexpected(rpc_id)
        else:
            self._early[key] = (line, size, ts)
            self._early_ids[key] = rpc_id

    def _over_cap(self, size: int) -> None:
        if self.over_cap is None:
            self.over_cap = size

    def _unexpected(self, rpc_id: object) -> None:
        if self.unexpected_id is NO_DETAIL:
            self.unexpected_id = rpc_id

    def _records(self, emitted: list[Emitted]) -> list[dict[str, Any]]:
        """The tracker's records as stdio records: HTTP-only facts taken out, stdio's
        notes added. Its own `session_end` (it stops as if a proxy stopped) is replaced by
        the one `exited` builds."""
        out: list[dict[str, Any]] = []
        for e in emitted:
            r = e.record
            if r["kind"] == Kind.SESSION_END:
                # The tracker's, written as if a proxy stopped: `exited` writes the
                # process's own, under this record's number (no gap in the ids).
                self._spare_id = r["id"]
                continue
            self._last_id = max(self._last_id, r["id"])
            r["transport"] = Transport.STDIO.value
            r["httpStatuses"] = []
            r["contentType"] = None
            r["requestHeaders"] = []
            r["accept"] = []
            r["ackNote"] = None
            if e.flow is not None and (extra := self._flow_notes.pop(e.flow, None)):
                r["notes"].extend(extra)
            if r["session"]:
                self._session_key = r["session"]  # a stand-in, where the version has none
            if r["client"]:
                self._client = r["client"]
            if r["protocolVersion"]:
                self._version = r["protocolVersion"]
            out.append(r)
        return out

    def _session_end(self, ts: float, reason: EndReason, notes: list[Note]) -> dict[str, Any]:
        for code, value in (
            (NoteCode.STDIN_CLOSED_PENDING, self.stdin_closed_with),
            (NoteCode.STDERR_LINES, self.stderr),
            (NoteCode.STDOUT_NOT_JSON, self.stdout_not_json),
            (NoteCode.STDIN_NOT_JSON, self.stdin_not_json),
            (NoteCode.PARTIAL_LAST_LINE, self.partial),
            (NoteCode.LINE_OVER_CAP, self.over_cap),
            (NoteCode.OBSERVER_DROPPED, self.dropped),
            (NoteCode.OBSERVER_SKIPPED, self.skipped),
        ):
            if value:
                notes.append(Note(code, value))
        if self.unexpected_id is not NO_DETAIL:
            notes.append(Note(NoteCode.UNEXPECTED_RESPONSE_ID, self.unexpected_id))
        if self.epipe_to_client:
            notes.append(Note(NoteCode.EPIPE_TO_CLIENT))
        if self.epipe_to_server:
            notes.append(Note(NoteCode.EPIPE_TO_SERVER))
        if self._spare_id is None:
            self._last_id += 1
        record = session_record(
            FinishedSession(
                record_id=self._spare_id or self._last_id,
                started=self.started,
                ended=ts,
                server=self.server,
                session=self._session_key,
                client=self._client,
                user_agent=None,
                protocol_version=self._version,
                posts=self.posts,
                status=None,
                scenario=self.tracker.settings.scenario,
                injected=None,
                end_reason=reason,
                stats={
                    "posts": self.posts,
                    "getStreams": 0,
                    "serverRequests": self.server_requests,
                    "serverNotifications": self.server_notifications,
                },
                delete_notes=tuple(notes),
                flow=None,
            )
        )
        record["transport"] = Transport.STDIO.value
        return record
