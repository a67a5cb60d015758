"""`sessions` lists sessions; `show SESSION` prints one session's timeline.

`sessions` keeps a few numbers per session of the input being read and prints that input's
sessions (in order of first appearance) as soon as the input is done, so memory grows with
the sessions of one recording, not with the records. `show` keeps only the records of the
session asked for (at most `limits.MAX_SHOWN_RECORDS`) and prints them in the order their
POSTs arrived.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from .filters import Filters
from .inputs import Task
from .limits import MAX_SHOWN_RECORDS
from .render import Cell, Millis, Seconds
from .schema import HTTP_NOT_FOUND, INITIALIZE, NOT_FAILED, REQUEST, RESPONSE, SESSION_END
from .summary import is_probe

SESSION_HEADERS: Final = (
    "session",
    "client",
    "protocol",
    "scenario",
    "started",
    "seconds",
    "posts",
    "requests",
    "failed",
    "retries",
    "ended",
    "next_session",
)

SHOW_HEADERS: Final = (
    "offset_s",
    "id",
    "kind",
    "call",
    "statuses",
    "outcome",
    "ms",
    "attempt",
    "retry",
    "detail",
)


def seconds_between(first: str | None, last: str | None) -> float | None:
    """Seconds from one record `ts` to another; None when either is missing or bad."""
    if not first or not last:
        return None
    try:
        return (datetime.fromisoformat(last) - datetime.fromisoformat(first)).total_seconds()
    except ValueError:
        return None


# --------------------------------------------------------------------- sessions


@dataclass(slots=True)
class SessionStats:
    first: str | None = None  # earliest ts
    last: str | None = None  # latest ts
    client: str | None = None
    protocol: str | None = None
    scenario: str | None = None
    posts: int = 0
    requests: int = 0
    failed: int = 0
    retries: int = 0
    ended: str | None = None  # endReason of the session_end that ended it (the first)
    got_404: bool = False

    def add(self, other: SessionStats) -> None:
        if other.first is not None and (self.first is None or other.first < self.first):
            self.first = other.first
        if other.last is not None and (self.last is None or other.last > self.last):
            self.last = other.last
        self.client = self.client or other.client
        self.protocol = self.protocol or other.protocol
        self.scenario = self.scenario or other.scenario
        self.posts = max(self.posts, other.posts)
        self.requests += other.requests
        self.failed += other.failed
        self.retries += other.retries
        self.ended = self.ended or other.ended  # parts come in input order: the first end
        self.got_404 = self.got_404 or other.got_404

    def row(self, session: str, next_session: str | None) -> list[Cell]:
        seconds = seconds_between(self.first, self.last)
        ended = self.ended or ("404" if self.got_404 else None)
        return [
            session,
            self.client,
            self.protocol,
            self.scenario,
            self.first,
            None if seconds is None else Seconds(seconds),
            self.posts,
            self.requests,
            self.failed,
            self.retries,
            ended,
            next_session,
        ]


@dataclass(slots=True)
class SessionsPart:
    """One task's sessions (in first-seen order) and re-initialisations."""

    sessions: dict[str, SessionStats]
    next_session: dict[str, str] = field(default_factory=dict)


class SessionsJob:
    """The engine job for `sessions`: `on_row` gets each row when its input is done."""

    FIELDS: Final = (
        "kind",
        "ts",
        "session",
        "client",
        "protocolVersion",
        "scenario",
        "method",
        "postCount",
        "httpStatuses",
        "outcome",
        "retryOf",
        "previousSession",
        "endReason",
        "notes",
        "negotiation",
    )

    def __init__(self, filters: Filters, on_row: Callable[[list[Cell]], None]) -> None:
        self.filters = filters
        self.on_row = on_row
        self.fields = tuple(dict.fromkeys((*self.FIELDS, *filters.fields())))
        self.current: dict[str, SessionStats] = {}
        self.next_session: dict[str, str] = {}
        self.listed = 0

    # worker side
    def new_state(self) -> SessionsPart:
        self._keep = self.filters.predicate()
        return SessionsPart({})

    def feed(self, state: SessionsPart, records: list[Any], task: Task) -> None:
        keep = self._keep
        sessions = state.sessions
        for r in records:
            sid = r.session
            if sid is None:
                continue
            if r.previousSession is not None and r.method == INITIALIZE:
                state.next_session[r.previousSession] = sid
            if keep is not None and not keep(r):
                continue
            s = sessions.get(sid)
            if s is None:
                s = sessions[sid] = SessionStats()
            ts = r.ts
            if ts is not None:
                if s.first is None or ts < s.first:
                    s.first = ts
                if s.last is None or ts > s.last:
                    s.last = ts
            s.client = s.client or r.client
            s.protocol = s.protocol or r.protocolVersion
            s.scenario = s.scenario or r.scenario
            if r.postCount is not None and r.postCount > s.posts:
                s.posts = r.postCount
            kind = r.kind
            if kind == REQUEST:
                s.requests += 1
                if r.outcome not in NOT_FAILED and not is_probe(r):
                    s.failed += 1
                if r.retryOf is not None:
                    s.retries += 1
                st = r.httpStatuses
                if st and st[-1] == HTTP_NOT_FOUND:
                    s.got_404 = True
            elif kind == SESSION_END and s.ended is None and not _refused(r):
                s.ended = r.endReason

    def end_task(self, state: SessionsPart, task: Task) -> SessionsPart:
        part = SessionsPart(state.sessions, state.next_session)
        state.sessions = {}
        state.next_session = {}
        return part

    def end_worker(self, state: SessionsPart) -> None:
        return None

    # main side
    def consume(self, part: SessionsPart, task: Task) -> None:
        for sid, stats in part.sessions.items():
            mine = self.current.get(sid)
            if mine is None:
                self.current[sid] = stats
            else:
                mine.add(stats)
        self.next_session.update(part.next_session)
        if task.final:  # this input is done: list its sessions and forget them
            for sid, stats in self.current.items():
                self.on_row(stats.row(sid, self.next_session.get(sid)))
                self.listed += 1
            self.current = {}
            self.next_session = {}

    def merge(self, result: None) -> None:
        pass


def _refused(r: Any) -> bool:
    """A DELETE the server refused (note `not_ended:<status>`): it ended nothing."""
    return any(n.startswith("not_ended") for n in r.notes or ())


# --------------------------------------------------------------------- show


# A timeline entry: (ts, postCount, id, row cells without the offset).
Entry = tuple[str, int, int, list[Cell]]


class ShowJob:
    """The engine job for `show`: the records of one session, in POST order."""

    FIELDS: Final = (
        "id",
        "kind",
        "ts",
        "durationMs",
        "session",
        "method",
        "tool",
        "postCount",
        "httpStatuses",
        "sse",
        "outcome",
        "retryOrigin",
        "notes",
        "attempt",
        "retryOf",
        "continues",
        "previousSession",
        "serverMethod",
        "endReason",
        "injected",
        "negotiation",
    )

    def __init__(self, session: str, filters: Filters, warn: Callable[[str], None]) -> None:
        self.session = session
        self.filters = filters
        self.warn = warn
        self.fields = tuple(dict.fromkeys((*self.FIELDS, *filters.fields())))
        self.entries: list[Entry] = []
        self.dropped = 0

    # worker side
    def new_state(self) -> list[Entry]:
        self._keep = self.filters.predicate()
        return []

    def feed(self, state: list[Entry], records: list[Any], task: Task) -> None:
        target = self.session
        keep = self._keep
        for r in records:
            if r.session != target or (keep is not None and not keep(r)):
                continue
            state.append((r.ts or "", r.postCount or 0, r.id or 0, timeline_cells(r)))

    def end_task(self, state: list[Entry], task: Task) -> list[Entry]:
        part = list(state)
        state.clear()
        return part

    def end_worker(self, state: list[Entry]) -> None:
        return None

    # main side
    def consume(self, part: list[Entry], task: Task) -> None:
        room = MAX_SHOWN_RECORDS - len(self.entries)
        if len(part) > room:
            if not self.dropped:
                self.warn(
                    f"session {self.session} has more than {MAX_SHOWN_RECORDS} "
                    "records; showing the first"
                )
            self.dropped += len(part) - max(room, 0)
            part = part[: max(room, 0)]
        self.entries.extend(part)

    def merge(self, result: None) -> None:
        pass

    def rows(self) -> Iterator[list[Cell]]:
        entries = sorted(self.entries, key=lambda e: (e[0], e[1], e[2]))
        start = entries[0][0] if entries else None
        for ts, _, _, cells in entries:
            offset = seconds_between(start, ts)
            yield [None if offset is None else Seconds(offset), *cells]


def timeline_cells(r: Any) -> list[Cell]:
    """A record as a timeline row (everything but the time offset)."""
    kind = r.kind
    call: str | None
    if kind == RESPONSE:
        call = f"answer to {r.serverMethod or r.method or '?'}"
    elif kind == SESSION_END:
        call = "end of session"
    else:
        call = " ".join(x for x in (r.method, r.tool) if x) or None
    statuses = " ".join(map(str, r.httpStatuses)) if r.httpStatuses else None
    retry = None
    if r.retryOf is not None:
        retry = f"{r.retryOrigin or 'retry'} of #{r.retryOf}"
    elif r.continues is not None:
        retry = f"continues #{r.continues}"
    detail = []
    if kind == REQUEST and is_probe(r):
        detail.append("negotiation probe (not a failure)")
    if r.previousSession is not None:
        detail.append(f"replaces {r.previousSession}")
    if r.endReason is not None:
        detail.append(f"ended: {r.endReason}")
    if r.injected is not None:
        detail.append(f"injected: {r.injected.rule or '?'} {r.injected.action or ''}".rstrip())
    if r.sse is not None and r.sse.end not in (None, "complete"):
        detail.append(f"stream ended: {r.sse.end}")
    if r.sse is not None and r.sse.resumed:
        detail.append("answer resumed on a GET stream")
    detail.extend(r.notes or ())
    return [
        r.id,
        kind,
        call,
        statuses,
        r.outcome,
        None if r.durationMs is None else Millis(r.durationMs),
        r.attempt,
        retry,
        "; ".join(detail) or None,
    ]
