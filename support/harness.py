"""The bundled MCP server and mitmdump with the addon, as context managers with their own logs.

The process plumbing (ports, start, stop, timeouts) is `procs`; the end-to-end tests, the
hardening proofs, the long-stream and load runners and the benchmarks start their
processes through these classes.
"""

import json
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from mcp_layers_demo import procs
from mcp_layers_support import recordings

HOST = procs.HOST
ADDON = procs.ADDON


@dataclass(frozen=True)
class ServerMode:
    """One of the four ways the bundled server answers."""

    json: bool
    stateless: bool
    #: SSE events carry ids, and a cut stream can be resumed (`Last-Event-ID`)
    resumable: bool = False

    @property
    def name(self) -> str:
        name = f"{'json' if self.json else 'sse'}-{'stateless' if self.stateless else 'stateful'}"
        return f"{name}-resumable" if self.resumable else name


SSE_STATEFUL = ServerMode(json=False, stateless=False)
JSON_STATEFUL = ServerMode(json=True, stateless=False)
SSE_STATELESS = ServerMode(json=False, stateless=True)
JSON_STATELESS = ServerMode(json=True, stateless=True)
SERVER_MODES = (SSE_STATEFUL, JSON_STATEFUL, SSE_STATELESS, JSON_STATELESS)
#: Not one of the four: the SSE server whose streams can be resumed.
SSE_RESUMABLE = ServerMode(json=False, stateless=False, resumable=True)


class Server:
    """The bundled server in one mode, as a context manager."""

    def __init__(self, mode: ServerMode, workdir: Path) -> None:
        self.mode = mode
        self.log = workdir / f"server-{mode.name}.log"
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Self:
        self.port = procs.free_port()
        self._proc = procs.start_server(
            self.port, self.log, self.mode.json, self.mode.stateless, self.mode.resumable
        )
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
            stats: dict[str, Any] = json.loads(answer.read())  # PostLog.snapshot()
        return stats

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
        return recordings.recording_files(self.record_dir)

    def text(self) -> str:
        """Every recording file of this proxy, concatenated, as written."""
        return "".join(p.read_text(encoding="utf-8") for p in self.files())

    def records(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for path in self.files():
            out += recordings.read_jsonl(path)
        return out

    def log_text(self) -> str:
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def failure_context(self) -> str:
        return f"mitmdump log {self.log}:\n{procs.log_tail(self.log, 40)}"


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
