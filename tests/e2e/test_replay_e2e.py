"""Replay's proof: record a real client through the addon (with bodies) against the bundled
server under a fault, stop the server, replay the recording to the same client through the
addon again; the second recording equals the first exchange by exchange, and the client
does what it did the first time.

Exchanges are compared in the order they started: (kind, method, tool, HTTP statuses,
outcome, SSE event count). GET streams are compared by their statuses only: when a client
re-opens a refused GET depends on how long its run took, not on the server.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp_layers_demo import npm
from mcp_layers_demo.__main__ import ts_client
from mcp_layers_demo.client import run_calls
from mcp_layers_support.harness import (
    JSON_STATEFUL,
    SSE_RESUMABLE,
    SSE_STATEFUL,
    Proxy,
    Server,
    ServerMode,
    ServerPool,
)

pytestmark = pytest.mark.e2e

CLI = shutil.which("mcp-layers", path=os.path.dirname(sys.executable)) or "mcp-layers"
START_TIMEOUT_S = 20.0
BODIES = "mcp_record_bodies=true"


def row(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["kind"], r["method"], r["tool"], r["httpStatuses"], r["outcome"],
            (r["sse"] or {}).get("events"))  # fmt: skip


def exchanges(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    ordered = sorted(records, key=lambda r: r["ts"])
    return [row(r) for r in ordered if r["kind"] != "stream"]


def stream_statuses(records: list[dict[str, Any]]) -> set[tuple[int, ...]]:
    return {tuple(r["httpStatuses"]) for r in records if r["kind"] == "stream"}


@contextmanager
def replaying(recording: Path, *extra: str) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    """`mcp-layers replay RECORDING` on a free port; stopped (SIGTERM) at the end."""
    proc = subprocess.Popen(
        [CLI, "replay", str(recording), "--port", "0", *extra],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/mcp", line)
        assert found, f"replay did not start: {line}{proc.stderr.read() if proc.poll() else ''}"
        yield int(found.group(1)), proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def python_client(url: str) -> str:
    try:
        results = anyio.run(run_calls, url)
    except Exception as exc:  # the client gave up on the whole run: that is its behaviour
        return f"run failed: {type(exc).__name__}"
    # Timings differ between runs; what the client got does not.
    return "; ".join(r.summary() for r in results)


def record_then_replay(
    tmp_path: Path, mode: ServerMode, fault: str, client: Callable[[str], str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str, str, str]:
    """The client's run against the live server under `fault`, then against the replay of
    that recording (the live server stopped first: nothing can reach it)."""
    with (
        Server(mode, tmp_path) as live,
        Proxy(live.port, tmp_path / "first", extra_sets=(BODIES, f"mcp_faults={fault}")) as first,
    ):
        first_said = client(first.url)
    (recording,) = first.files()
    with replaying(recording) as (port, proc), Proxy(port, tmp_path / "second") as second:
        second_said = client(second.url)
    assert proc.stderr is not None
    return first.records(), second.records(), first_said, second_said, proc.stderr.read()


FAULTS = (
    "errors.http_status_sequence",
    "errors.rate_limited",
    "errors.session_expired",
    "errors.stream_cut",
    "errors.jsonrpc_error",
    "errors.tool_error",
    "middlebox.get_405",
    "middlebox.unavailable_retry_after",
)


@pytest.mark.parametrize(
    ("mode", "fault"),
    [(SSE_STATEFUL, f) for f in FAULTS]
    + [(JSON_STATEFUL, f) for f in ("errors.http_status_sequence", "errors.session_expired")]
    # The answer of a cut stream comes on a GET that resumes it (`Last-Event-ID`).
    + [(SSE_RESUMABLE, "errors.stream_cut")],
    ids=lambda v: v.name if isinstance(v, ServerMode) else v,
)
def test_the_python_sdk_client_meets_the_same_server_again(
    tmp_path: Path, mode: ServerMode, fault: str
) -> None:
    first, second, first_said, second_said, log = record_then_replay(
        tmp_path, mode, fault, python_client
    )
    assert any(r["injected"] for r in first), "the fault never fired: nothing was proved"
    assert not any(r["injected"] for r in second)  # the replay, not a fault, did it
    if mode is SSE_RESUMABLE:
        assert any((r["sse"] or {}).get("resumed") for r in first + second if r["method"])
    assert exchanges(second) == exchanges(first)
    assert stream_statuses(second) == stream_statuses(first)
    assert second_said == first_said
    assert "0 request(s) without an answer" in log, log


@pytest.mark.parametrize(
    "fault", ["errors.http_status_sequence", "errors.session_expired", "errors.stream_cut"]
)
def test_the_typescript_sdk_client_meets_the_same_server_again(tmp_path: Path, fault: str) -> None:
    found = npm.node_and_npm()
    if found is None:
        pytest.skip("npm (and node) not on PATH: the TypeScript SDK client cannot be installed")
    node, npm_path = found
    npm.ensure(npm.TS_CLIENT_DIR, npm_path)
    first, second, first_said, second_said, log = record_then_replay(
        tmp_path, SSE_STATEFUL, fault, lambda url: ts_client(node, url)
    )
    assert any(r["injected"] for r in first)
    assert exchanges(second) == exchanges(first)
    assert second_said == first_said
    assert "0 request(s) without an answer" in log, log


def test_a_recorded_drop_reaches_a_direct_client_as_a_drop(tmp_path: Path) -> None:
    """Behind mitmdump a dropped upstream becomes mitmproxy's own 502 (docs/replay.md), so
    the drop is proved with the client talking to the replay directly."""
    with (
        Server(SSE_STATEFUL, tmp_path) as live,
        Proxy(
            live.port,
            tmp_path / "first",
            extra_sets=(BODIES, "mcp_faults=errors.connection_dropped"),
        ) as first,
    ):
        first_said = python_client(first.url)
    (recording,) = first.files()
    with replaying(recording) as (port, _):
        second_said = python_client(f"http://127.0.0.1:{port}/mcp")
    assert any(r["outcome"] == "NO_RESPONSE" for r in first.records())
    assert second_said == first_said


def _recording(tmp_path: Path, servers: ServerPool, *sets: str) -> Path:
    with Proxy(servers.get(SSE_STATEFUL).port, tmp_path, extra_sets=sets) as proxy:
        anyio.run(run_calls, proxy.url, "legacy", "replay-test", [("echo", {"text": "hi"})])
    (recording,) = proxy.files()
    return recording


def _replay_exit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "replay", *args], capture_output=True, text=True, timeout=30)


def test_bad_inputs_exit_2_with_a_message_and_no_traceback(
    tmp_path: Path, servers: ServerPool
) -> None:
    plain = _recording(tmp_path / "plain", servers)
    done = _replay_exit(str(plain))
    assert done.returncode == 2 and "mcp_record_bodies=true" in done.stderr
    bodies = _recording(tmp_path / "bodies", servers, BODIES)
    done = _replay_exit(str(bodies), "--session", "s-nope")
    assert done.returncode == 2 and "its sessions: s-" in done.stderr
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(bodies.read_bytes()[:-40])
    done = _replay_exit(str(cut))
    assert done.returncode == 2 and re.search(r"cut\.jsonl:\d+: a line cut short", done.stderr)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        done = _replay_exit(str(bodies), "--port", str(taken.getsockname()[1]))
    assert done.returncode == 2 and "the port is in use" in done.stderr
    for what in (plain, bodies, cut):
        assert what.exists()
    assert "Traceback" not in done.stderr


def test_strict_exits_1_after_a_miss_and_lists_it(tmp_path: Path, servers: ServerPool) -> None:
    recording = _recording(tmp_path, servers, BODIES)
    with replaying(recording, "--strict") as (port, proc):
        said = anyio.run(
            run_calls, f"http://127.0.0.1:{port}/mcp", "legacy", "replay-test",
            [("echo", {"text": "something else"})],
        )  # fmt: skip
        assert "no recorded answer" in (said[0].error or "")
    assert proc.returncode == 1
    assert proc.stderr is not None
    log = proc.stderr.read()
    assert "miss: tools/call" in log and "arguments.text" in log
    assert "1 request(s) without an answer" in log
