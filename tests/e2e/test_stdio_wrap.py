"""`mcp-layers wrap` with real processes: the official Python SDK's stdio client and server
through it, bytes both ways, exits, signals and a command that is not there.

The wrapper is run as installed (`.venv/bin/mcp-layers wrap`), so the console script's
dispatch before click is part of what is tested.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_layers_support import node_peers

PEERS = Path(__file__).resolve().parents[1] / "peers"
SERVER = PEERS / "stdio_server.py"
SCRIPTED = PEERS / "stdio_scripted.py"


def wrapper() -> str:
    path = shutil.which("mcp-layers", path=os.path.dirname(sys.executable))
    assert path, "mcp-layers is installed next to this Python (pip install -e .)"
    return path


def records(directory: Path) -> list[dict[str, Any]]:
    (path,) = directory.glob("mcp-stdio-*.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def wrap(directory: Path, *command: str) -> list[str]:
    return [wrapper(), "wrap", "--record-dir", str(directory), "--", *command]


# -- the official SDK, both ends -----------------------------------------------------------


async def sdk_session(directory: Path) -> dict[str, Any]:
    argv = wrap(directory, sys.executable, str(SERVER))
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    seen: dict[str, Any] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        seen["tools"] = sorted(t.name for t in (await session.list_tools()).tools)
        seen["echo"] = await session.call_tool("echo", {"text": "héllo ✓"})
        seen["fail"] = await session.call_tool("fail", {"reason": "nope"})
        with anyio.fail_after(30):
            try:
                await session.call_tool("crash", {"code": 3})
            except Exception as e:  # the SDK's error for a server gone mid-call
                seen["crash"] = e
    return seen


@pytest.fixture(scope="module")
def sdk_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    directory = tmp_path_factory.mktemp("sdk")
    seen = anyio.run(sdk_session, directory)
    return seen, records(directory)


def test_the_sdk_client_gets_what_the_sdk_server_said(
    sdk_run: tuple[dict[str, Any], list[dict[str, Any]]],
) -> None:
    seen, _ = sdk_run
    assert seen["tools"] == ["crash", "echo", "fail"]
    assert not seen["echo"].is_error and seen["echo"].content[0].text == "héllo ✓"
    assert seen["fail"].is_error
    assert "crash" in seen  # the call failed on the client's side too


def test_sdk_calls_are_paired_classified_and_named(
    sdk_run: tuple[dict[str, Any], list[dict[str, Any]]],
) -> None:
    _, recs = sdk_run
    requests = [r for r in recs if r["kind"] == "request"]
    assert [(r["method"], r["tool"], r["outcome"]) for r in requests] == [
        ("initialize", None, "SUCCESS"),
        ("tools/list", None, "SUCCESS"),
        ("tools/call", "echo", "TOOL_SUCCESS"),
        ("tools/call", "fail", "TOOL_ERROR"),
        ("tools/call", "crash", "NO_RESPONSE"),
    ]
    ids = [r["jsonrpc"]["id"] for r in requests]
    assert len(set(ids)) == len(ids)
    assert {r["client"] for r in recs} == {"mcp@0.1.0"}
    assert {r["transport"] for r in recs} == {"stdio"}
    assert {r["server"] for r in recs} == {f"stdio:{os.path.basename(sys.executable)}"}
    assert requests[2]["toolSafety"] == "read_only"  # learnt from tools/list, as over HTTP
    assert all(r["httpStatuses"] == [] for r in recs)


def test_a_crash_mid_call_is_a_transport_failure(
    sdk_run: tuple[dict[str, Any], list[dict[str, Any]]],
) -> None:
    _, recs = sdk_run
    crash = next(r for r in recs if r["tool"] == "crash")
    assert crash["layer"] == "transport"
    assert "server_exited:code=3" in crash["notes"]
    end = recs[-1]
    assert end["kind"] == "session_end" and end["endReason"] == "exited"
    assert end["notes"][0] == "server_exited:code=3"
    # The server's start-up line on stderr is counted, and is no failure.
    assert any(n.startswith("stderr_lines:") for n in end["notes"])


def test_the_typescript_sdk_client_through_the_wrapper(tmp_path: Path) -> None:
    peers = node_peers.ensure()
    if peers is None:
        pytest.skip(node_peers.NO_NPM)
    sdk = peers.ts_client.parent / "node_modules" / "@modelcontextprotocol" / "sdk"
    done = subprocess.run(
        [
            str(peers.node),
            str(PEERS / "ts_stdio_client.mjs"),
            str(sdk),
            *wrap(tmp_path, sys.executable, str(SERVER)),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.splitlines()[-1].removeprefix("RESULT "))
    assert seen == {
        "tools": ["crash", "echo", "fail"],
        "echo": "héllo ✓",
        "echoError": False,
        "failError": True,
    }
    recs = records(tmp_path)
    requests = [r for r in recs if r["kind"] == "request"]
    assert [(r["method"], r["tool"], r["outcome"]) for r in requests] == [
        ("initialize", None, "SUCCESS"),
        ("tools/list", None, "SUCCESS"),
        ("tools/call", "echo", "TOOL_SUCCESS"),
        ("tools/call", "fail", "TOOL_ERROR"),
    ]
    assert {r["client"] for r in recs} == {"mcp-layers-ts-stdio-peer@1.32.2"}
    assert recs[-1]["endReason"] == "exited"


# -- bytes --------------------------------------------------------------------------------

PAYLOAD = b"".join(
    [
        '{"jsonrpc":"2.0","id":1,"method":"ping","params":{"t":"héllo wörld ✓ 🚀"}}\n'.encode(),
        b'{"jsonrpc":"2.0","method":"x","params":{"big":"' + b"y" * (6 << 20) + b'"}}\n',
        b"not json at all\n",
        "\r\nкириллица 中文\r\n".encode(),
        b"\n\n",
        b'{"no final newline":',
    ]
)


def test_bytes_are_identical_both_ways(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    proc = subprocess.Popen(
        wrap(tmp_path / "rec", sys.executable, str(SCRIPTED), "echo", str(copy)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def feed() -> None:
        assert proc.stdin is not None
        # In uneven pieces, so lines are cut across reads.
        for i in range(0, len(PAYLOAD), 70_001):
            proc.stdin.write(PAYLOAD[i : i + 70_001])
        proc.stdin.close()

    feeder = threading.Thread(target=feed)
    feeder.start()
    out = proc.stdout.read()
    feeder.join()
    assert proc.wait(timeout=30) == 0
    assert out == PAYLOAD  # server -> client
    assert copy.read_bytes() == PAYLOAD  # client -> server
    end = records(tmp_path / "rec")[-1]
    assert "stdout_not_json:5" in end["notes"]  # the text lines and the blank ones
    assert f"partial_last_line:{len(b'{"no final newline":')}" in end["notes"]


def test_half_a_line_is_passed_on_at_once(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        wrap(tmp_path, sys.executable, str(SCRIPTED), "partial"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    got = os.read(proc.stdout.fileno(), 100)  # would block forever behind a line buffer
    assert got == b'{"jsonrpc":"2.0","id":1,'
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0


# -- exits and signals --------------------------------------------------------------------


def test_the_exit_code_and_the_signal_are_the_childs(tmp_path: Path) -> None:
    done = subprocess.run(wrap(tmp_path, "sh", "-c", "exit 7"), stdin=subprocess.DEVNULL)
    assert done.returncode == 7
    killed = subprocess.run(wrap(tmp_path, "sh", "-c", "kill -TERM $$"), stdin=subprocess.DEVNULL)
    assert killed.returncode == -signal.SIGTERM


@pytest.fixture
def term_child(tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    proc = subprocess.Popen(
        wrap(tmp_path, sys.executable, str(SCRIPTED), "term"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    yield proc
    if proc.poll() is None:
        proc.kill()
        proc.wait()


def test_sigterm_is_forwarded_and_the_child_stays_in_the_clients_group(
    term_child: subprocess.Popen[bytes], tmp_path: Path
) -> None:
    assert term_child.stdout is not None
    line = term_child.stdout.readline()
    assert line == f"pgid {os.getpgid(term_child.pid)}\n".encode()  # never setsid
    term_child.send_signal(signal.SIGTERM)  # to the wrapper alone
    assert term_child.stdout.readline() == b"got SIGTERM\n"
    assert term_child.wait(timeout=30) == 5
    assert records(tmp_path)[-1]["notes"][0] == "server_exited:code=5"


def test_a_command_that_is_not_there(tmp_path: Path) -> None:
    done = subprocess.run(
        wrap(tmp_path, "no-such-mcp-server-here", "--flag"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    assert done.returncode == 127
    assert done.stdout == b""
    assert done.stderr.decode().count("\n") == 1
    assert "no-such-mcp-server-here" in done.stderr.decode()
    (rec,) = records(tmp_path)
    assert rec["endReason"] == "spawn_failed" and rec["notes"] == ["spawn_failed:ENOENT"]


def test_an_unwritable_record_dir_refuses_before_the_server_starts(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    marker = tmp_path / "started"
    done = subprocess.run(
        wrap(blocker / "sub", "touch", str(marker)),
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )
    assert done.returncode == 2
    assert "--record-dir" in done.stderr.decode()
    assert not marker.exists()


def test_the_wrap_path_imports_neither_click_nor_duckdb(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}
    done = subprocess.run(
        wrap(tmp_path, "true"), stdin=subprocess.DEVNULL, capture_output=True, env=env
    )
    assert done.returncode == 0
    imported = {
        line.rsplit("|", 1)[-1].strip().split(".")[0]
        for line in done.stderr.decode().splitlines()
        if line.startswith("import time:")
    }
    assert "mcp_layers_stdio" in imported
    assert not imported & {"click", "duckdb", "sqlglot", "mitmproxy"}


def test_started_quickly(tmp_path: Path) -> None:
    """A loose bound on a shared machine; benchmarks/stdio_bench.py measures it."""
    t0 = time.perf_counter()
    subprocess.run(wrap(tmp_path, "true"), stdin=subprocess.DEVNULL, check=True)
    assert time.perf_counter() - t0 < 5


# -- faults -------------------------------------------------------------------------------

FAULTS = [
    "--fault",
    'tool_error="injected failure" tool=echo nth=1 name=te',
    "--fault",
    "jsonrpc_error=-32000 tool=fail name=je",
    "--fault",
    "delay=300 method=tools/list name=dl",
    "--fault",
    "drop upstream tool=echo nth=3 name=dr",
]


async def faulted_session(directory: Path) -> dict[str, Any]:
    argv = [
        wrapper(),
        "wrap",
        "--record-dir",
        str(directory),
        *FAULTS,
        "--",
        sys.executable,
        str(SERVER),
    ]
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    seen: dict[str, Any] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        t0 = time.perf_counter()
        await session.list_tools()
        seen["list_s"] = time.perf_counter() - t0
        seen["echo1"] = await session.call_tool("echo", {"text": "one"})
        seen["echo2"] = await session.call_tool("echo", {"text": "two"})
        try:
            await session.call_tool("fail", {"reason": "nope"})
        except Exception as e:  # the SDK raises a JSON-RPC error
            seen["fail"] = e
        with anyio.move_on_after(2) as scope:
            await session.call_tool("echo", {"text": "three"})
        seen["dropped"] = scope.cancelled_caught
    return seen


def test_faults_on_stdio_reach_the_client_and_the_records(tmp_path: Path) -> None:
    seen = anyio.run(faulted_session, tmp_path)
    assert seen["list_s"] >= 0.3
    assert seen["echo1"].is_error and seen["echo1"].content[0].text == "injected failure"
    assert not seen["echo2"].is_error
    assert getattr(seen["fail"], "code", None) == -32000
    assert seen["dropped"]
    calls = [
        (r["method"], r["tool"], r["outcome"], (r["injected"] or {}).get("action"))
        for r in records(tmp_path)
        if r["kind"] == "request"
    ]
    assert calls == [
        ("initialize", None, "SUCCESS", None),
        ("tools/list", None, "SUCCESS", "delay"),
        ("tools/call", "echo", "TOOL_ERROR", "tool_error"),
        ("tools/call", "echo", "TOOL_SUCCESS", None),
        ("tools/call", "fail", "JSONRPC_ERROR", "jsonrpc_error"),
        ("tools/call", "echo", "NO_RESPONSE", "drop"),
    ]


@pytest.mark.parametrize(
    ("rule", "says"),
    [
        ("http_status=503", '"http_status" needs HTTP'),
        ("tool_error=x sse", "no SSE on stdio"),
        ("delay=5 where=events", "no events on stdio"),
        ("tool_error=x nth=banana", "nth"),
    ],
)
def test_a_fault_stdio_cannot_do_is_refused_before_the_server_starts(
    tmp_path: Path, rule: str, says: str
) -> None:
    marker = tmp_path / "started"
    done = subprocess.run(
        [
            wrapper(),
            "wrap",
            "--record-dir",
            str(tmp_path),
            "--fault",
            rule,
            "--",
            "touch",
            str(marker),
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert says in done.stderr and done.stderr.count("\n") == 1
    assert not marker.exists()


def test_a_client_that_stops_reading_breaks_the_servers_pipe_as_it_would_directly(
    tmp_path: Path,
) -> None:
    proc = subprocess.Popen(
        wrap(tmp_path, "yes", '{"jsonrpc":"2.0","method":"notifications/message"}'),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert proc.stdout.read(4096)
    proc.stdout.close()  # the client stops reading
    assert proc.wait(timeout=30) == -signal.SIGPIPE  # as `yes` itself dies
    notes = records(tmp_path)[-1]["notes"]
    assert notes[0] == "server_exited:signal=SIGPIPE" and "epipe_to_client" in notes


async def crashed_session(directory: Path, *rule: str) -> dict[str, Any]:
    argv = wrap(directory, sys.executable, str(SERVER))
    argv[2:2] = list(rule) or ["--fault", "crash tool=echo nth=2"]
    params = StdioServerParameters(command=argv[0], args=argv[1:])
    seen: dict[str, Any] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        seen["first"] = await session.call_tool("echo", {"text": "one"})
        with anyio.fail_after(30):
            try:
                await session.call_tool("echo", {"text": "two"})
            except Exception as e:
                seen["second"] = e
    return seen


def test_the_crash_fault_kills_the_server_mid_call(tmp_path: Path) -> None:
    seen = anyio.run(crashed_session, tmp_path)
    assert not seen["first"].is_error and "second" in seen
    recs = records(tmp_path)
    second = [r for r in recs if r["tool"] == "echo"][1]
    assert second["outcome"] == "NO_RESPONSE"
    assert second["injected"] == {"rule": "crash", "action": "crash"}
    assert "server_exited:signal=SIGKILL" in second["notes"]


def test_the_crash_fault_from_a_rules_file(tmp_path: Path) -> None:
    rules = tmp_path / "rules.json"
    rules.write_text('[{"action": "crash", "tool": "echo", "nth": 2, "name": "kill-echo"}]')
    seen = anyio.run(crashed_session, tmp_path / "rec", "--faults", str(rules))
    assert not seen["first"].is_error and "second" in seen
    second = [r for r in records(tmp_path / "rec") if r["tool"] == "echo"][1]
    assert second["outcome"] == "NO_RESPONSE"
    assert second["injected"] == {"rule": "kill-echo", "action": "crash"}
    assert "server_exited:signal=SIGKILL" in second["notes"]


def test_stdin_closed_with_a_call_pending(tmp_path: Path) -> None:
    call = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}\n'
    done = subprocess.run(
        wrap(tmp_path, "sh", "-c", "cat >/dev/null"), input=call, capture_output=True
    )
    assert done.returncode == 0 and done.stdout == b""
    request, end = records(tmp_path)
    assert request["outcome"] == "NO_RESPONSE"
    assert request["notes"] == ["stdin_closed_pending", "server_exited:code=0"]
    assert end["notes"] == ["server_exited:code=0", "stdin_closed_pending:1"]


def test_a_line_over_the_cap_passes_whole_and_is_noted(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    answer = b'{"jsonrpc":"2.0","id":1,"result":{"blob":"' + b"z" * 300_000 + b'"}}\n'
    call = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}\n'
    argv = wrap(tmp_path / "rec", sys.executable, str(SCRIPTED), "echo", str(copy))
    argv[2:2] = ["--max-line-kb", "64"]
    done = subprocess.run(argv, input=call + answer, capture_output=True, timeout=60)
    assert done.returncode == 0 and done.stdout == call + answer
    recs = records(tmp_path / "rec")
    # The echo child sends the call back (a server request, to the recorder) and then the
    # answer, which the recorder pairs by the id at its start and cannot read whole.
    (request,) = [r for r in recs if r["kind"] == "request"]
    assert request["outcome"] == "UNINSPECTED"
    assert request["notes"] == [f"body_over_cap:{len(answer) - 1}"]
    assert f"line_over_cap:{len(answer) - 1}" in recs[-1]["notes"]


def test_a_signal_after_the_server_exited_ends_the_wait_for_its_stdout(tmp_path: Path) -> None:
    # The server exits, but what it started in the background still holds its stdout.
    proc = subprocess.Popen(
        wrap(tmp_path, "sh", "-c", "sleep 4 & echo started; exit 3"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline() == b"started\n"
    time.sleep(0.5)
    assert proc.poll() is None  # still waiting for the end of stdout
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=3) == 3
    assert records(tmp_path)[-1]["notes"][0] == "server_exited:code=3"


def test_with_fault_rules_that_do_not_act_the_bytes_are_still_identical(tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    argv = wrap(tmp_path / "rec", sys.executable, str(SCRIPTED), "echo", str(copy))
    argv[2:2] = ["--fault", "tool_error=x tool=no-such-tool"]
    done = subprocess.run(argv, input=PAYLOAD, capture_output=True, timeout=120)
    assert done.returncode == 0
    assert done.stdout == PAYLOAD and copy.read_bytes() == PAYLOAD


def test_stderr_passes_through_byte_for_byte_and_is_counted(tmp_path: Path) -> None:
    said = "starting ✓\nwarn: 中文\r\nno newline at the end".encode()
    script = f"import os; os.write(2, {said!r}); os.write(1, b'done\\n')"
    done = subprocess.run(
        wrap(tmp_path, sys.executable, "-c", script), capture_output=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout == b"done\n"
    assert done.stderr == said  # nothing of the wrapper's own
    assert "stderr_lines:2" in records(tmp_path)[-1]["notes"]


def test_a_client_that_kills_the_group_still_gets_every_record(tmp_path: Path) -> None:
    """The Python SDK kills the server's process group 2 s after closing its stdin. The
    recorder runs in a session of its own: it outlives the kill, reads the copies still in
    its spool, and writes the call that was waiting and the session's end."""
    call = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t"}}\n'
    proc = subprocess.Popen(
        wrap(tmp_path, "sh", "-c", "read line; echo got; sleep 60"),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        start_new_session=True,  # the wrapper's group, as a client makes it
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(call)
    proc.stdin.flush()
    assert proc.stdout.readline() == b"got\n"  # the call went through: its copy is spooled
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=10) == -signal.SIGKILL
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        recs = records(tmp_path)
        if recs and recs[-1]["kind"] == "session_end":
            break
        time.sleep(0.05)
    request, end = records(tmp_path)
    assert request["jsonrpc"]["id"] == 7 and request["outcome"] == "NO_RESPONSE"
    assert end["kind"] == "session_end" and end["endReason"] == "exited"
    assert "stdout_not_json:1" in end["notes"]
