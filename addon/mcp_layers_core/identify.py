"""Who is asking: the session a request belongs to, and its client and protocol version."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from .jsonrpc import META_CLIENT_INFO, META_PROTOCOL_VERSION, client_of, meta_of
from .sessions import Session, SessionBook

Agent = tuple[str, str | None]


def host(peer: str) -> str:
    return peer.rsplit(":", 1)[0]


class Identifier:
    """Sessions by header, URL or stand-in; client names remembered per agent too."""

    def __init__(self, sessions: SessionBook, max_agents: int) -> None:
        self.sessions = sessions
        self.max_agents = max_agents
        # A stateless 2025 client sends clientInfo once, in `initialize`, and may then
        # come back on another connection: remember it by address and user agent too.
        self.client_by_agent: OrderedDict[Agent, str] = OrderedDict()

    def session_for(
        self, header: str | None, query: str | None, peer: str, user_agent: str | None
    ) -> Session:
        if header:
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
