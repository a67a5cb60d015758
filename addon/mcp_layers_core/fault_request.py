"""What a fault rule sees of a request (`RequestView`, built by `request_view`), and the
request as the upstream gets it when the proxy answered a continuation itself
(`strip_continuation`). Neither raises, whatever bytes a client sends.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from .fault_encoding import _dumps
from .jsonrpc import (
    META_CLIENT_INFO,
    META_PROTOCOL_VERSION,
    client_of,
    is_request,
    messages_of,
    meta_of,
    tool_of,
    try_loads,
)

_CONTINUATION_KEYS: Final = ("inputResponses", "requestState")


@dataclass(frozen=True, slots=True)
class RequestView:
    """What a rule can look at. `method` is None for GET/DELETE and for POSTs that carry
    no single JSON-RPC request or notification (batches, answers): only an expired
    session can affect those. `rpc_id` is None for notifications. `session` and `client`
    are what records show (`session`, `client`), so rules can be written from a
    recording."""

    method: str | None
    rpc_id: object = None
    tool: str | None = None
    session: str | None = None
    client: str | None = None
    protocol_version: str | None = None
    params: Mapping[str, Any] | None = None
    http_method: str = "POST"

    @property
    def is_continuation(self) -> bool:
        """A 2026-07-28 multi round-trip follow-up (carries answers or the state)."""
        return self.params is not None and any(k in self.params for k in _CONTINUATION_KEYS)


def request_view(
    body: bytes | None,
    *,
    session: str | None = None,
    client: str | None = None,
    protocol_version: str | None = None,
    http_method: str = "POST",
) -> RequestView:
    """Build the view of one request from its body. Never raises.

    `client` and `protocol_version` are what the proxy already knows (the session's, the
    header's); the body's own `_meta` (2026-07-28) or `initialize` clientInfo wins.
    """
    none = RequestView(
        None,
        session=session,
        client=client,
        protocol_version=protocol_version,
        http_method=http_method,
    )
    if http_method != "POST" or not body:
        return none
    messages = messages_of(try_loads(body))
    if not messages or len(messages) != 1 or not isinstance(messages[0].get("method"), str):
        return none  # not JSON-RPC, a batch, or an answer: nothing for a rule to match
    msg = messages[0]
    params = msg.get("params")
    params = params if isinstance(params, dict) else None
    meta = meta_of(msg)
    found = client_of(meta.get(META_CLIENT_INFO))
    if found is None and msg["method"] == "initialize" and params is not None:
        found = client_of(params.get("clientInfo"))
    version = meta.get(META_PROTOCOL_VERSION)
    rpc_id = msg.get("id") if is_request(msg) else None
    return RequestView(
        method=msg["method"],
        rpc_id=None if isinstance(rpc_id, bool) else rpc_id,
        tool=tool_of(msg),
        session=session,
        client=found or client,
        protocol_version=version if isinstance(version, str) else protocol_version,
        params=params,
        http_method=http_method,
    )


def strip_continuation(body: bytes) -> bytes:
    """The request body without `inputResponses`/`requestState` in its params: what the
    upstream gets when the proxy itself asked for the input. Unchanged if not JSON-RPC."""
    value = try_loads(body)
    messages = messages_of(value)
    if not messages:
        return body
    changed = False
    for msg in messages:
        params = msg.get("params")
        if isinstance(params, dict) and any(k in params for k in _CONTINUATION_KEYS):
            msg["params"] = {k: v for k, v in params.items() if k not in _CONTINUATION_KEYS}
            changed = True
    return _dumps(value) if changed else body
