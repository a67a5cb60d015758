"""The SDK client's run through the proxy, with its own account of every POST it sent (the
ground truth the records are checked against).

The server and the proxy are `mcp_layers_support.harness`'s.
"""

import json
import secrets
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
from mcp_layers_demo.client import CallResult, run_calls
from mcp_layers_support.harness import Proxy, Server


@dataclass
class Post:
    """One POST as the client sent it, and the response headers it got (if any)."""

    method: str | None
    id: Any
    tool: str | None
    session_header: str | None
    status: int | None = None
    content_type: str | None = None
    session_in_response: str | None = None


def _post_from_request(request: httpx2.Request) -> Post:
    body = json.loads(request.content)
    if isinstance(body, list):  # the SDK does not batch; keep the first for the account
        body = body[0]
    params = body.get("params") or {}
    tool = params.get("name") if body.get("method") == "tools/call" else None
    return Post(
        method=body.get("method"),
        id=body.get("id"),
        tool=tool,
        session_header=request.headers.get("mcp-session-id"),
    )


@dataclass
class ClientRun:
    """The SDK client's run through the proxy, with everything needed to judge the records."""

    server: Server
    proxy: Proxy
    client_mode: str
    calls: list[tuple[str, dict]]
    canary: str = field(default_factory=lambda: f"canary-{secrets.token_hex(12)}")
    results: list[CallResult] = field(default_factory=list)
    posts: list[Post] = field(default_factory=list)
    other_requests: list[str] = field(default_factory=list)
    other_responses: list[tuple[str, int]] = field(default_factory=list)
    server_posts: list[dict[str, Any]] = field(default_factory=list)
    records: list[dict[str, Any]] = field(default_factory=list)
    text: str = ""
    proxy_log: str = ""

    @property
    def name(self) -> str:
        return f"{self.client_mode}/{self.server.mode.name}"

    def execute(self, client_name: str) -> None:
        """Run the calls, stop the proxy, then collect the recording and the server's count."""
        by_request: dict[int, Post] = {}

        def on_request(request: httpx2.Request) -> None:
            # The canary must really be on the wire, or its absence from the file proves nothing.
            assert request.headers.get("authorization") == f"Bearer {self.canary}"
            if request.method != "POST":
                self.other_requests.append(request.method)
                return
            post = _post_from_request(request)
            by_request[id(request)] = post
            self.posts.append(post)

        def on_response(response: httpx2.Response) -> None:
            if response.request.method != "POST":
                self.other_responses.append((response.request.method, response.status_code))
                return
            post = by_request.get(id(response.request))
            if post is not None:
                post.status = response.status_code
                ctype = response.headers.get("content-type")
                post.content_type = ctype.split(";")[0].strip() if ctype else None
                post.session_in_response = response.headers.get("mcp-session-id")

        before = self.server.stats()["count"]
        self.results = anyio.run(
            lambda: run_calls(
                self.proxy.url,
                self.client_mode,
                client_name,
                self.calls,
                headers={"Authorization": f"Bearer {self.canary}"},
                on_request=on_request,
                on_response=on_response,
            )
        )
        self.proxy.stop()
        stats = self.server.stats()
        self.server_posts = [p for p in stats["posts"] if p["n"] > before]
        assert stats["count"] - before == len(self.server_posts), "server post log overflowed"
        self.text = self.proxy.text()
        self.records = self.proxy.records()
        self.proxy_log = self.proxy.log_text()

    def raw_session_ids(self) -> set[str]:
        ids = {p.session_header for p in self.posts if p.session_header}
        ids |= {p.session_in_response for p in self.posts if p.session_in_response}
        return ids

    def failure_context(self) -> str:
        lines = [f"run {self.name}: client POSTs:"]
        lines += [f"  {p}" for p in self.posts]
        lines += [f"other requests: {self.other_requests}, answers: {self.other_responses}"]
        lines += ["records:"] + [f"  {json.dumps(r, sort_keys=True)}" for r in self.records]
        lines += [self.proxy.failure_context()]
        return "\n".join(lines)
