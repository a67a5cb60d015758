"""Sessions and their lifelines: who opened them, how many POSTs, how they ended.

A *real* session is one a server issued: an `Mcp-Session-Id` (2025 Streamable HTTP) or
the `session_id`/`sessionId` of a 2024-11-05 `endpoint` event. Where there is none
(stateless servers, 2026-07-28) the client's address and user agent stand in, so that
POST counts and client names still have a home; stand-ins never "end".

A lifeline starts with the `initialize` that obtained the session id and ends exactly
once: with a DELETE, a 404 (the server forgot it), no traffic for the idle time
(`idle`), the book forgetting it to stay within its cap (`evicted`), or the proxy
stopping. Each end is written when it happens. A session forgotten after its end is
remembered in a bounded memo of ended keys, so that a late DELETE (or late traffic) of
it does not start a second lifeline; a session that returns after even the memo forgot
it starts a new one, under the same key. After a 404, the next
`initialize` of the same client (address, user agent, client name) names the lost
session in `previousSession`: a client that never comes back shows as a 404 with no
successor.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass

from . import limits
from .lifecycle import SessionPhase, step_session
from .record import STAND_IN_PREFIX, EndReason, may_write_raw
from .redact import pseudonym

#: (client address, user agent, "name@version"): who a session belongs to.
Identity = tuple[str, str | None, str | None]


@dataclass(slots=True)
class Session:
    key: str
    real: bool
    server: str = ""
    created: float | None = None
    client: str | None = None
    protocol_version: str | None = None
    identity: Identity | None = None
    posts: int = 0
    ended: EndReason | None = None  # set once, with `phase` (`SessionBook.end`)
    phase: SessionPhase = SessionPhase.OPEN
    last_seen: float = 0.0  # the last traffic of the session (see `SessionBook.touch`)
    get_streams: int = 0
    #: Open 2024-11-05 GET streams that announced this session (`endpoint` event): while
    #: one is open, a POST's answer travels on it, not in the POST's own response.
    legacy_streams: int = 0
    server_requests: int = 0
    server_notifications: int = 0

    def stats(self) -> dict[str, int]:
        return {
            "posts": self.posts,
            "getStreams": self.get_streams,
            "serverRequests": self.server_requests,
            "serverNotifications": self.server_notifications,
        }


#: A session's `last_seen` is refreshed by stream traffic at most this often: the book's
#: order (least recently seen first) is then right to within this, far below any idle time.
TOUCH_EVERY_S = 1.0


class SessionBook:
    """All sessions seen recently (least recently seen first), and 404 links.

    `now` is the latest time the tracker has seen; a session looked up or created takes
    it as its `last_seen`. Live sessions the cap pushes out wait in `dropped` for the
    tracker to write their end.
    """

    def __init__(
        self,
        raw_ids: bool = False,
        max_sessions: int = limits.MAX_SESSIONS,
        idle_s: float = limits.SESSION_IDLE_S,
    ) -> None:
        self.raw_ids = raw_ids
        self._max = max_sessions
        self._idle_s = idle_s
        self.now = 0.0
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lost: OrderedDict[Identity, str] = OrderedDict()
        #: key -> end reason of sessions forgotten after their end (bounded like the book).
        self._gone: OrderedDict[str, EndReason] = OrderedDict()
        self.dropped: list[Session] = []
        #: `idle` finds nothing before this time (the tracker skips the call till then).
        self.next_idle_check = 0.0

    def __len__(self) -> int:
        return len(self._sessions)

    @property
    def max_sessions(self) -> int:
        return self._max

    @max_sessions.setter
    def max_sessions(self, value: int) -> None:
        self._max = value
        while len(self._sessions) > self._max:
            self._forget(self._sessions.popitem(last=False)[1])

    @property
    def idle_s(self) -> float:
        return self._idle_s

    @idle_s.setter
    def idle_s(self, value: float) -> None:
        self._idle_s = value
        self.next_idle_check = 0.0  # look again with the new time

    @property
    def ended_memo(self) -> int:
        """Ended sessions remembered after the book forgot them."""
        return len(self._gone)

    def key_of(self, session_id: str) -> str:
        """The session's key in the records: hashed, or with `raw_ids` the id itself,
        unless it begins as a stand-in's key does (it is hashed then, so that no issued
        session is ever read as a stand-in: `record.is_issued_session`)."""
        if self.raw_ids and may_write_raw(session_id):
            return session_id
        return pseudonym("s-", session_id)

    def real(self, session_id: str, ts: float | None = None) -> Session:
        """The server-issued session `session_id`, created if new."""
        s = self._get(self.key_of(session_id), real=True)
        if s.created is None:
            s.created = ts
        return s

    def stand_in(self, host: str, user_agent: str | None) -> Session:
        """The stand-in for a client that has no session: its address and user agent.

        Not the connection: SDK clients close the connection after every SSE answer, so
        a per-connection key would make every POST a "session" of its own.
        """
        return self._get(pseudonym(STAND_IN_PREFIX, f"{host} {user_agent or ''}"), real=False)

    def _get(self, key: str, real: bool) -> Session:
        s = self._sessions.get(key)
        if s is None:
            s = self._sessions[key] = Session(key, real)
            if not real:
                s.phase = SessionPhase.STAND_IN
            elif (ended := self._gone.pop(key, None)) is not None:
                # A session that already ended and was forgotten: its lifeline stays ended.
                s.ended, s.phase = ended, SessionPhase.ENDED
            if len(self._sessions) > self._max:
                self._forget(self._sessions.popitem(last=False)[1])
        else:
            self._sessions.move_to_end(key)
        s.last_seen = self.now
        return s

    def touch(self, session: Session, ts: float) -> None:
        """Traffic on a flow of `session` (a stream chunk, a response): it is not idle."""
        if ts - session.last_seen > TOUCH_EVERY_S:
            session.last_seen = ts
            if self._sessions.get(session.key) is session:
                self._sessions.move_to_end(session.key)

    def end(self, s: Session, reason: EndReason) -> None:
        """`s` ended, for `reason`: the one way a lifeline ends (`SESSION_TRANSITIONS`)."""
        s.phase = step_session(s.phase, reason, s.key)
        s.ended = reason

    def _forget(self, s: Session) -> None:
        if not s.real:
            return  # a stand-in has no lifeline
        if s.ended is None:
            self.end(s, EndReason.EVICTED)
            self.dropped.append(s)
        assert s.ended is not None
        self._gone[s.key] = s.ended
        self._gone.move_to_end(s.key)
        if len(self._gone) > self._max:
            self._gone.popitem(last=False)

    def idle(self, now: float, limit: int = limits.MAX_IDLE_ENDS_PER_EVENT) -> list[Session]:
        """Forget the sessions idle for `idle_s` at `now`; return the live ones among them
        (just ended `idle`), at most `limit` per call (the rest on a later call)."""
        self.now = now
        if not self._idle_s:
            self.next_idle_check = math.inf  # switched off: nothing is ever due
            return []
        if now < self.next_idle_check:
            return []  # the usual case: one comparison per event
        ended: list[Session] = []
        sessions = self._sessions
        while sessions:
            s = next(iter(sessions.values()))
            if now - s.last_seen < self._idle_s or len(ended) >= limit:
                break
            del sessions[s.key]
            if s.real and s.ended is None:
                self.end(s, EndReason.IDLE)
                ended.append(s)
            self._forget(s)
        # The front is the least recently seen (to within TOUCH_EVERY_S): nothing else
        # can be idle before it is.
        if len(ended) >= limit:
            self.next_idle_check = now
        elif sessions:
            self.next_idle_check = next(iter(sessions.values())).last_seen + self._idle_s
        else:
            self.next_idle_check = now + self._idle_s
        return ended

    def take_dropped(self) -> list[Session]:
        dropped, self.dropped = self.dropped, []
        return dropped

    def lost(self, session: Session) -> None:
        """A 404 ended `session`: its client's next `initialize` will link to it."""
        if session.ended is None:
            self.end(session, EndReason.NOT_FOUND)
        if session.identity is not None:
            self._lost[session.identity] = session.key
            if len(self._lost) > self._max:
                self._lost.popitem(last=False)

    def take_lost(self, identity: Identity) -> str | None:
        """The session this client lost to a 404 and has not re-initialised since."""
        return self._lost.pop(identity, None)

    def phases(self) -> list[SessionPhase]:
        """The phase of every session in the book."""
        return [s.phase for s in self._sessions.values()]

    def find(self, key: str) -> Session | None:
        return self._sessions.get(key)

    def live_real(self) -> list[Session]:
        return [s for s in self._sessions.values() if s.real and s.ended is None]
