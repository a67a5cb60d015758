"""Sessions and their lifelines: who opened them, how many POSTs, how they ended.

A *real* session is one a server issued: an `Mcp-Session-Id` (2025 Streamable HTTP) or
the `session_id`/`sessionId` of a 2024-11-05 `endpoint` event. Where there is none
(stateless servers, 2026-07-28) the client's address and user agent stand in, so that
POST counts and client names still have a home; stand-ins never "end".

A lifeline starts with the `initialize` that obtained the session id and ends with a
DELETE, a 404 (the server forgot it), or the proxy stopping. After a 404, the next
`initialize` of the same client (address, user agent, client name) names the lost
session in `previousSession`: a client that never comes back shows as a 404 with no
successor.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from . import limits
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
    ended: str | None = None  # delete | not_found | shutdown
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


class SessionBook:
    """All sessions seen recently (least recently used forgotten first), and 404 links."""

    def __init__(self, raw_ids: bool = False, max_sessions: int = limits.MAX_SESSIONS) -> None:
        self.raw_ids = raw_ids
        self._max = max_sessions
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lost: OrderedDict[Identity, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def key_of(self, session_id: str) -> str:
        return session_id if self.raw_ids else pseudonym("s-", session_id)

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
        return self._get(pseudonym("c-", f"{host} {user_agent or ''}"), real=False)

    def _get(self, key: str, real: bool) -> Session:
        s = self._sessions.get(key)
        if s is None:
            s = self._sessions[key] = Session(key, real)
            if len(self._sessions) > self._max:
                self._sessions.popitem(last=False)
        else:
            self._sessions.move_to_end(key)
        return s

    def lost(self, session: Session) -> None:
        """A 404 ended `session`: its client's next `initialize` will link to it."""
        session.ended = session.ended or "not_found"
        if session.identity is not None:
            self._lost[session.identity] = session.key
            if len(self._lost) > self._max:
                self._lost.popitem(last=False)

    def take_lost(self, identity: Identity) -> str | None:
        """The session this client lost to a 404 and has not re-initialised since."""
        return self._lost.pop(identity, None)

    def find(self, key: str) -> Session | None:
        return self._sessions.get(key)

    def live_real(self) -> list[Session]:
        return [s for s in self._sessions.values() if s.real and s.ended is None]
