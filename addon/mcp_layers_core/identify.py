"""Who is asking: the session a request belongs to, and its client and protocol version."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from .jsonrpc import META_CLIENT_INFO, META_PROTOCOL_VERSION, client_of, meta_of
from .sessions import Session, SessionBook
from .versions import is_sessionless

Agent = tuple[str, str | None]


def host(peer: str) -> str:
    return peer.rsplit(":", 1)[0]


def named_version(msg: dict[str, Any] | None, headers: Mapping[str, str]) -> str | None:
    """The version a request names for itself: its 2026-07-28 `_meta`, else its
    `MCP-Protocol-Version` header (None: it names none; the session's then holds)."""
    version = meta_of(msg).get(META_PROTOCOL_VERSION) if msg is not None else None
    return version if isinstance(version, str) else headers.get("mcp-protocol-version")


class Identifier:
    """Sessions by header, URL or stand-in; client names remembered per agent too."""

    def __init__(self, sessions: SessionBook, max_agents: int) -> None:
        self.sessions = sessions
        self.max_agents = max_agents
        # A stateless 2025 client sends clientInfo once, in `initialize`, and may then
        # come back on another connection: remember it by address and user agent too.
        self.client_by_agent: OrderedDict[Agent, str] = OrderedDict()

    def session_for(
        self,
        header: str | None,
        query: str | None,
        peer: str,
        user_agent: str | None,
        version: str | None = None,
    ) -> Session:
        """The session of a request that carries `header` (its `Mcp-Session-Id`), `query`
        (a 2024-11-05 POST URL's session) and names `version` (`named_version`)."""
        if header and not is_sessionless(version):
            # From 2026-07-28 on, a session id (a stale one, from an older version) names
            # no session: the client stands in, so no lifeline starts, and none is lost
            # to a 404 (mcp 2.3.0 keeps an id only from an `initialize` answer, which
            # 2026-07-28 has not, and reads such a 404 as METHOD_NOT_FOUND).
            return self.sessions.real(header)
        if query:  # 2024-11-05: the POST URL names the session the GET stream announced
            return self.sessions.real(query)
        return self.sessions.stand_in(host(peer), user_agent)

    def identify(
        self, session: Session, msg: dict[str, Any], headers: Mapping[str, str], agent: Agent
    ) -> tuple[str | None, str | None]:
        """The client and protocol version this POST speaks for, remembering what it teaches."""
        meta = meta_of(msg)
        client = client_of(meta.get(META_CLIENT_INFO))
        if client is None and msg.get("method") == "initialize":
            params = msg.get("params")
            client = client_of(params.get("clientInfo")) if isinstance(params, dict) else None
        if client is not None:
            session.client = client
            self.client_by_agent[agent] = client
            if len(self.client_by_agent) > self.max_agents:
                self.client_by_agent.popitem(last=False)
        else:
            client = session.client or self.client_by_agent.get(agent)
        version = meta.get(META_PROTOCOL_VERSION)
        if isinstance(version, str):
            # 2026-07-28 names its version per request: nothing for the session to keep.
            return client, version
        if msg.get("method") == "initialize":
            # A handshake starts afresh: what it asks for until its result says what
            # was negotiated (an older probe on the same stand-in does not count).
            params = msg.get("params")
            asked = params.get("protocolVersion") if isinstance(params, dict) else None
            return client, asked if isinstance(asked, str) else None
        return client, headers.get("mcp-protocol-version") or session.protocol_version
