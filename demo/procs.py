"""Start and stop the processes the demo and the lab run: the bundled MCP server and
mitmdump with the addon (the tests and the benchmarks use them too).

Part of the product (the demo and the lab are commands users run), so it imports only
product modules. Everything here binds or connects to 127.0.0.1 only, every wait has a
deadline, and a process is only ever stopped by the handle of the process we started.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mcp_layers_core import script

HOST = "127.0.0.1"
MCP_PATH = "/mcp"

# mitmdump needs ~1.5 s to come up; a loaded CI machine can be several times slower.
START_TIMEOUT_S = 20.0
STOP_TIMEOUT_S = 10.0
_POLL_S = 0.05

#: The addon script as installed (addon/mcp_layers.py in a checkout), so the demo and the
#: lab run from a plain `pip install` too.
ADDON = script.path()


class StartError(RuntimeError):
    """A process did not come up; the message names it and quotes the end of its log."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def port_open(port: int, host: str = HOST) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.2):
            return True
    except OSError:
        return False


def log_tail(path: Path | None, lines: int = 30) -> str:
    """The last lines of a log file, or '' (never raises: it is called while reporting)."""
    if path is None:
        return ""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def wait_for_port(
    port: int,
    proc: subprocess.Popen[Any] | None = None,
    timeout: float = START_TIMEOUT_S,
    what: str = "process",
    log: Path | None = None,
) -> None:
    """Wait until 127.0.0.1:port accepts connections; fail early if ``proc`` exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise StartError(
                _failure(f"{what} exited with code {proc.returncode} before listening", log)
            )
        if port_open(port):
            return
        time.sleep(_POLL_S)
    raise StartError(
        _failure(f"{what} did not listen on {HOST}:{port} within {timeout:.0f} s", log)
    )


def _failure(message: str, log: Path | None) -> str:
    tail = log_tail(log)
    if tail:
        return f"{message}; last lines of {log}:\n{tail}"
    return message


def start(
    cmd: Sequence[str], log: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``cmd`` with stdout and stderr appended to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        # The child keeps its own copy of the file descriptor; ours can close at once.
        return subprocess.Popen(
            list(cmd),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
        )


def stop(
    proc: subprocess.Popen[Any], sig: int = signal.SIGTERM, timeout: float = STOP_TIMEOUT_S
) -> int | None:
    """Signal ``proc`` and wait for it; SIGKILL it if it outlives ``timeout``.

    Returns its exit code (None only if even SIGKILL did not end it in time).
    """
    if proc.poll() is None:
        try:
            proc.send_signal(sig)
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            pass
        except ProcessLookupError:
            return proc.poll()
        proc.kill()
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
    return proc.returncode


def python() -> str:
    return sys.executable


def mitmdump() -> str:
    """The mitmdump of this interpreter's environment (the venv's, next to python)."""
    candidate = Path(sys.executable).with_name("mitmdump")
    if candidate.exists():
        return str(candidate)
    raise StartError(f"mitmdump not found next to {sys.executable}; install the project first")


def server_cmd(
    port: int, json_response: bool = False, stateless: bool = False, resumable: bool = False
) -> list[str]:
    cmd = [python(), "-m", "mcp_layers_demo.server", "--port", str(port), "--host", HOST]
    if json_response:
        cmd.append("--json")
    if stateless:
        cmd.append("--stateless")
    if resumable:
        cmd.append("--resumable")
    return cmd


def mitmdump_cmd(
    upstream_port: int,
    listen_port: int,
    addon: Path | None = ADDON,
    record_dir: Path | None = None,
    scenario: str | None = None,
    extra_sets: Sequence[str] = (),
    extra_modes: Sequence[str] = (),
) -> list[str]:
    """The reverse-proxy command line; ``addon=None`` gives a plain mitmdump.
    `extra_modes`: more `--mode` values (`reverse:URL@PORT`), e.g. the model API's, so that
    one mitmdump (and one recording) sees both halves of an agent's turn."""
    cmd = [
        mitmdump(),
        "--mode",
        f"reverse:http://{HOST}:{upstream_port}",
        "--listen-host",
        HOST,
        "-p",
        str(listen_port),
        # Lazy: the proxy connects upstream per request, so an unreachable server yields a
        # recorded error instead of a silently dropped client connection.
        "--set",
        "connection_strategy=lazy",
    ]
    for mode in extra_modes:
        cmd += ["--mode", mode]
    if addon is not None:
        cmd += ["-s", str(addon)]
        if record_dir is not None:
            cmd += ["--set", f"mcp_record_dir={record_dir}"]
        if scenario is not None:
            cmd += ["--set", f"mcp_scenario={scenario}"]
    for item in extra_sets:
        cmd += ["--set", item]
    return cmd


def start_server(
    port: int,
    log: Path,
    json_response: bool = False,
    stateless: bool = False,
    resumable: bool = False,
) -> subprocess.Popen[bytes]:
    """Start the bundled MCP server and wait until it listens (stops it again on failure)."""
    proc = start(server_cmd(port, json_response, stateless, resumable), log)
    try:
        wait_for_port(port, proc, what="the MCP server", log=log)
    except BaseException:
        stop(proc)
        raise
    return proc


def start_mitmdump(
    upstream_port: int,
    listen_port: int,
    log: Path,
    addon: Path | None = ADDON,
    record_dir: Path | None = None,
    scenario: str | None = None,
    extra_sets: Sequence[str] = (),
    extra_modes: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """Start mitmdump in reverse mode and wait until it listens, on every mode's port
    (stops it again on failure)."""
    if addon is not None and not addon.exists():
        raise StartError(f"the addon {addon} does not exist")
    cmd = mitmdump_cmd(
        upstream_port, listen_port, addon, record_dir, scenario, extra_sets, extra_modes
    )
    proc = start(cmd, log)
    try:
        wait_for_port(listen_port, proc, what="mitmdump", log=log)
        for mode in extra_modes:
            wait_for_port(int(mode.rsplit("@", 1)[1]), proc, what="mitmdump", log=log)
    except BaseException:
        stop(proc)
        raise
    return proc
