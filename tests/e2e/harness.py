"""Real processes for the end-to-end tests: the bundled MCP server and mitmdump with the addon.

The process plumbing (ports, start, stop, timeouts) is the demo's ``mcp_layers_demo.procs``;
this module adds context managers with per-test logs and a ``ClientRun`` that drives the SDK
client and keeps its own account of every POST it sent (the ground truth records are checked
against).
"""

import json
import secrets
import subprocess
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Self

import anyio
import httpx2
from mcp_layers_demo import procs
from mcp_layers_demo.client import CallResult, run_calls

HOST = procs.HOST
ADDON = procs.ADDON


@dataclass(frozen=True)
class ServerMode:
    """One of the four ways the bundled server answers."""

    json: bool
    stateless: bool

    @property
    def name(self) -> str:
        return f"{'json' if self.json else 'sse'}-{'stateless' if self.stateless else 'stateful'}"


SSE_STATEFUL = ServerMode(json=False, stateless=False)
JSON_STATEFUL = ServerMode(json=True, stateless=False)
SSE_STATELESS = ServerMode(json=False, stateless=True)
JSON_STATELESS = ServerMode(json=True, stateless=True)
SERVER_MODES = (SSE_STATEFUL, JSON_STATEFUL, SSE_STATELESS, JSON_STATELESS)


class Server:
    """The bundled server in one mode, as a context manager."""

    def __init__(self, mode: ServerMode, workdir: Path) -> None:
        self.mode = mode
        self.log = workdir / f"server-{mode.name}.log"
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Self:
        self.port = procs.free_port()
        self._proc = procs.start_server(self.port, self.log, self.mode.json, self.mode.stateless)
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        if self._proc is not None:
            procs.stop(self._proc)
            self._proc = None

    @property
    def url(self) -> str:
        """The server's own endpoint (bypassing the proxy)."""
        return f"http://{HOST}:{self.port}{procs.MCP_PATH}"

    def stats(self) -> dict[str, Any]:
        """The server's account of the POSTs it received (read directly, not via the proxy)."""
        with urllib.request.urlopen(f"http://{HOST}:{self.port}/stats", timeout=5) as answer:
            return json.loads(answer.read())

    def failure_context(self) -> str:
        return f"server {self.mode.name} log {self.log}:\n{procs.log_tail(self.log)}"


class Proxy:
    """mitmdump in reverse mode in front of ``upstream_port``, with the addon (or none)."""

    def __init__(
        self,
        upstream_port: int,
        workdir: Path,
        addon: Path | None = ADDON,
        scenario: str | None = "e2e",
        extra_sets: tuple[str, ...] = (),
    ) -> None:
        self.upstream_port = upstream_port
        self.record_dir = workdir / "records"
        self.log = workdir / "mitmdump.log"
        self.addon = addon
        self.scenario = scenario
        self.extra_sets = extra_sets
        self.port = 0
        self.exit_code: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Self:
        self.record_dir.mkdir(parents=True, exist_ok=True)
        self.port = procs.free_port()
        self._proc = procs.start_mitmdump(
            self.upstream_port,
            self.port,
            self.log,
            addon=self.addon,
            record_dir=self.record_dir,
            scenario=self.scenario,
            extra_sets=self.extra_sets,
        )
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}{procs.MCP_PATH}"

    def stop(self) -> int | None:
        """SIGTERM (the addon writes pending exchanges), then wait; idempotent."""
        if self._proc is not None:
            self.exit_code = procs.stop(self._proc)
            self._proc = None
        return self.exit_code

    def files(self) -> list[Path]:
        return procs.recording_files(self.record_dir)

    def text(self) -> str:
        """Every recording file of this proxy, concatenated, as written."""
        return "".join(p.read_text(encoding="utf-8") for p in self.files())

    def records(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for path in self.files():
            out += procs.read_jsonl(path)
        return out

    def log_text(self) -> str:
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def failure_context(self) -> str:
        return f"mitmdump log {self.log}:\n{procs.log_tail(self.log, 40)}"


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


class ServerPool:
    """One bundled server per mode, started on first use and kept for the session."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self._servers: dict[ServerMode, Server] = {}

    def get(self, mode: ServerMode) -> Server:
        if mode not in self._servers:
            self._servers[mode] = Server(mode, self.workdir).__enter__()
        return self._servers[mode]

    def failure_context(self) -> str:
        return "\n".join(server.failure_context() for server in self._servers.values())

    def close(self) -> None:
        for server in self._servers.values():
            server.stop()
        self._servers.clear()


class Proxies:
    """Starts proxies for one test (callable like ``Proxy``); all are stopped at teardown."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.started: list[Proxy] = []

    def __call__(self, upstream_port: int, **kwargs: Any) -> Proxy:
        proxy = Proxy(upstream_port, self.workdir / f"proxy{len(self.started)}", **kwargs)
        self.started.append(proxy)
        return proxy.__enter__()

    def stop_all(self) -> None:
        for proxy in self.started:
            proxy.stop()

    def failure_context(self) -> str:
        return "\n".join(proxy.failure_context() for proxy in self.started)
