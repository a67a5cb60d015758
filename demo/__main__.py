"""``python -m mcp_layers_demo`` (``make demo``): two real clients, the same faults, compared.

It starts the bundled MCP server (official Python SDK; a read-only tool and a
side-effecting one), then, for each fault scenario, a mitmdump reverse proxy with the
addon and that fault preset, and drives two real clients through it: the official
Python SDK client and the official TypeScript SDK client (installed from npm on first
use; without Node the demo says so and runs the Python one). Each proxy is stopped with
SIGTERM (the addon writes what is pending), the server last. Finally it prints
``mcp-layers compare --by client --by scenario`` over the recordings it made, which
stay in ``recordings/demo-<UTC>/``.

Everything binds 127.0.0.1 and every process is stopped at the end, even on failure.
"""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import anyio
from mcp_layers_demo import npm, procs
from mcp_layers_demo.client import CallResult, run_calls

#: Under the current directory (the checkout's, with `make demo`), never the install's.
RECORD_ROOT = Path("recordings")

#: The fault presets every client meets (docs/faults.md). Each fails the first matching
#: tools/call of a client: how it recovers is the point.
SCENARIOS = ("errors.http_status_sequence", "errors.rate_limited", "errors.session_expired")

#: The calls each client makes in each scenario: a read-only tool, a side-effecting one
#: (is repeating it safe?), a read, and a tool that fails on its own (organic).
CALLS: list[tuple[str, dict[str, object]]] = [
    ("echo", {"text": "hello"}),
    ("add_note", {"text": "remember the milk"}),
    ("get_notes", {}),
    ("fail", {"reason": "on purpose"}),
]

TS_TIMEOUT_S = 60.0
ANALYSIS_TIMEOUT_S = 120.0


def say(message: str) -> None:
    print(message, flush=True)


class _Kept(logging.Handler):
    """Keeps the SDK's own warnings (\"Session termination failed: 404\") for the client's
    line, where they belong, instead of letting logging print them unindented."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def python_client(url: str) -> str:
    sdk = logging.getLogger("mcp")
    kept = _Kept()
    sdk.addHandler(kept)
    propagate, sdk.propagate = sdk.propagate, False
    try:
        results: list[CallResult] = anyio.run(run_calls, url, "legacy", "python-sdk", list(CALLS))
    finally:
        sdk.removeHandler(kept)
        sdk.propagate = propagate
    line = "; ".join(r.summary() for r in results)
    return f"{line} (then logged: {'; '.join(kept.messages)})" if kept.messages else line


def ts_client(node: str, url: str) -> str:
    done = subprocess.run(
        [
            node,
            str(npm.TS_CLIENT),
            url,
            json.dumps(CALLS),
            "--terminate",
            "--name",
            "typescript-sdk",
        ],
        capture_output=True,
        text=True,
        timeout=TS_TIMEOUT_S,
    )
    result = next(
        (line[7:] for line in reversed(done.stdout.splitlines()) if line.startswith("RESULT ")),
        None,
    )
    if result is None:
        return f"exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}"
    calls = json.loads(result).get("calls", [])
    made = "; ".join(
        f"{c['name']}: exception: {c['error']}"
        if c.get("error")
        else f"{c['name']}: isError={c['isError']}"
        for c in calls
    )
    failed = "" if done.returncode == 0 else f" (then failed: {_last_error(done.stderr)})"
    return (made or "no call completed") + failed


def _last_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    return lines[0][:160] if lines else "no message"


def prepare_ts_client() -> str | None:
    """The Node to run the TS SDK client with, installing it once; None without Node."""
    found = npm.node_and_npm()
    if found is None:
        say("Node.js/npm not found: running the Python SDK client only")
        return None
    node, npm_path = found
    if not npm.installed(npm.TS_CLIENT_DIR):
        say("installing the TypeScript SDK client (npm, once) ...")
    try:
        npm.ensure(npm.TS_CLIENT_DIR, npm_path)
    except npm.NpmInstallError as e:
        say(f"could not install the TypeScript SDK client ({e}); Python client only")
        return None
    return node


def run_scenario(
    scenario: str, server_port: int, record_dir: Path, logs: Path, node: str | None
) -> None:
    proxy_port = procs.free_port()
    proxy = procs.start_mitmdump(
        server_port,
        proxy_port,
        logs / f"mitmdump-{scenario}.log",
        record_dir=record_dir,
        scenario=scenario,
        extra_sets=(f"mcp_faults={scenario}",),
    )
    url = f"http://{procs.HOST}:{proxy_port}{procs.MCP_PATH}"
    try:
        say(f"\n== {scenario}: mitmdump with the addon and the fault on {url}")
        say(f"   python sdk: {python_client(url)}")
        if node is not None:
            say(f"   typescript sdk: {ts_client(node, url)}")
    finally:
        procs.stop(proxy)


def compare(record_dir: Path) -> int:
    cli = Path(sys.executable).with_name("mcp-layers")
    command = [str(cli), "compare", str(record_dir), "--by", "client", "--by", "scenario"]
    say(f"\n$ {shown_command()} compare {_shown(record_dir)} --by client --by scenario\n")
    done = subprocess.run(command, timeout=ANALYSIS_TIMEOUT_S)
    if done.returncode == 0:
        say(COUNTS_NOTE)
    return done.returncode


def report(record_dir: Path) -> int:
    """`mcp-layers report` over the recordings, written beside them; prints its path."""
    target = record_dir / "report.html"
    cli = Path(sys.executable).with_name("mcp-layers")
    command = [str(cli), "report", str(record_dir), "-o", str(target), "--title", "mcp-layers demo"]
    say(f"\n$ {shown_command()} report {_shown(record_dir)} -o {_shown(target)}")
    done = subprocess.run(command, timeout=ANALYSIS_TIMEOUT_S)
    if done.returncode == 0:
        say(f"report: {_shown(target)}  (open {target.resolve().as_uri()}; it works offline)")
    return done.returncode


#: What the closing table counts: without it, `calls 5` after six calls and a 0 % failure
#: rate under a failing fault read as wrong.
COUNTS_NOTE = (
    "\n(calls, failure rate, outcomes and latencies count organic calls only: the calls the\n"
    " fault answered are counted apart, as `injected calls` and `injected failure rate`,\n"
    " and version-negotiation probes as `negotiation probes`; retry figures count every call.)"
)


def shown_command(name: str = "mcp-layers") -> str:
    """How to type `name` here: bare when the shell finds this environment's own, else its
    path (after `make demo` the venv is not activated, so a bare name would not be found)."""
    mine = Path(sys.executable).with_name(name)
    found = shutil.which(name)
    if found is not None and Path(found).resolve() == mine.resolve():
        return name
    return _shown(mine)


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def main() -> int:
    if not procs.ADDON.exists():
        say(f"error: the addon {procs.ADDON} is missing; reinstall mcp-layers")
        return 1
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    record_dir = RECORD_ROOT / f"demo-{stamp}"
    record_dir.mkdir(parents=True, exist_ok=True)
    logs = Path(tempfile.mkdtemp(prefix="mcp-layers-demo-"))
    node = prepare_ts_client()
    server = None
    try:
        server_port = procs.free_port()
        say(f"starting the bundled MCP server on http://{procs.HOST}:{server_port}{procs.MCP_PATH}")
        server = procs.start_server(server_port, logs / "server.log")
        for scenario in SCENARIOS:
            run_scenario(scenario, server_port, record_dir, logs, node)
    except (procs.StartError, subprocess.TimeoutExpired, OSError) as exc:
        say(f"error: {exc}\nlogs kept in {logs}")
        return 1
    finally:
        if server is not None:
            procs.stop(server)
            say("\nstopped the server and every proxy")
    files = sorted(record_dir.glob("mcp-*.jsonl"))
    lines = sum(len(f.read_bytes().splitlines()) for f in files)
    say(f"recording: {_shown(record_dir)}/ ({len(files)} files, {lines} records)")
    code = compare(record_dir) or report(record_dir)
    if code == 0:
        shutil.rmtree(logs, ignore_errors=True)
        where, cli = _shown(record_dir), shown_command()
        say(f"\nNext: {cli} summary {where}")
        say(f"      {cli} sessions {where}")
        say(f"      {cli} show SESSION {where}   (SESSION: an id from the sessions list)")
    return code


if __name__ == "__main__":
    started = time.monotonic()
    code = main()
    print(f"\n(demo took {time.monotonic() - started:.0f} s)")
    sys.exit(code)
