"""Shared tools of the hardening proofs: MCP messages, process gauges, file checks.

The raw HTTP/1.1 client the proofs drive the proxy with is `tests/e2e/rawhttp.py`
(shared with the wire cases); whatever imports this kit puts `tests/e2e` on `sys.path`.

Figures: each proof prints one `HARDENING <proof>: k=v ...` line (shown with `-s`) and
puts the same line in its assertion messages, so a failure says what was measured.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rawhttp import RawClient


def figures(proof: str, **values: Any) -> str:
    """Print one summary line of a proof's figures and return it (for assertion messages)."""
    parts = " ".join(f"{k}={v}" for k, v in values.items())
    line = f"HARDENING {proof}: {parts}"
    print(line, flush=True)
    return line


# -- MCP messages ---------------------------------------------------------------------------


def mcp_headers(
    session: str | None = None, user_agent: str = "hardening/1.0", protocol: str = "2025-11-25"
) -> list[tuple[str, str]]:
    headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("User-Agent", user_agent),
        ("MCP-Protocol-Version", protocol),
    ]
    if session:
        headers.append(("Mcp-Session-Id", session))
    return headers


def jbytes(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def tool_call(rid: Any, tool: str = "echo", **arguments: Any) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments},
    }


def tool_result(rid: Any, text: str = "ok", is_error: bool = False) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "result": {"content": [{"type": "text", "text": text}], "isError": is_error},
    }


def sse_block(message: Any, event_id: str | None = None) -> bytes:
    out = b"event: message\n"
    if event_id is not None:
        out += b"id: " + event_id.encode() + b"\n"
    return out + b"data: " + jbytes(message) + b"\n\n"


# -- recordings -------------------------------------------------------------------------------


@dataclass
class FileCheck:
    """What a recording file holds, line by line."""

    path: Path
    size: int
    records: list[dict[str, Any]]
    bad_lines: list[int]  # 1-based numbers of lines that are not one whole JSON object
    ends_whole: bool  # empty, or the last byte is the newline of a whole line
    mode: int


def check_file(path: Path) -> FileCheck:
    data = path.read_bytes()
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    records: list[dict[str, Any]] = []
    bad: list[int] = []
    for number, line in enumerate(lines, start=1):
        try:
            value = json.loads(line)
        except ValueError:
            bad.append(number)
            continue
        if isinstance(value, dict):
            records.append(value)
        else:
            bad.append(number)
    if tail:
        bad.append(len(lines) + 1)
    return FileCheck(
        path, len(data), records, bad, ends_whole=not tail, mode=path.stat().st_mode & 0o777
    )


def check_dir(directory: Path) -> list[FileCheck]:
    return [check_file(p) for p in sorted(directory.glob("mcp-*.jsonl"))]


def wait_for(predicate: Any, timeout: float, interval: float = 0.02) -> bool:
    """Poll `predicate()` until it is true or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)


# -- process gauges (Linux /proc) -----------------------------------------------------------


def rss_kib(pid: int) -> int:
    """Resident set size of a process, KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for {pid}")


def hwm_kib(pid: int) -> int:
    """Peak resident set size of a process so far, KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmHWM for {pid}")


_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds a process has used."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def proxy_pid(proxy: Any) -> int:
    """The pid of a harness `Proxy`'s mitmdump (the harness keeps the handle private)."""
    proc = proxy._proc
    assert proc is not None, "the proxy is not running"
    return int(proc.pid)


# -- mitmdump with options the harness does not offer ----------------------------------------


def custom_proxy(
    strategy: str = "lazy", fsize_limit: int | None = None, precreate: bool = True
) -> type:
    """A harness `Proxy` class whose mitmdump uses `connection_strategy=<strategy>` and,
    with `fsize_limit`, runs under `RLIMIT_FSIZE` (no file it writes may grow past that
    many bytes: a disk that is full for it). `precreate=False` leaves the recording
    directory for the addon to create (the harness makes it first).

    The harness always passes `connection_strategy=lazy` (what the README tells users),
    and mitmdump refuses a second value for one option, so the command line is the
    harness's with that pair replaced.
    """
    import resource
    import subprocess

    from harness import Proxy
    from mcp_layers_demo import procs

    def limit() -> None:  # in the child, before exec; Python then ignores SIGXFSZ
        assert fsize_limit is not None
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_limit, fsize_limit))

    class CustomProxy(Proxy):
        def __enter__(self) -> CustomProxy:
            if precreate:
                self.record_dir.mkdir(parents=True, exist_ok=True)
            self.port = procs.free_port()
            cmd = procs.mitmdump_cmd(
                self.upstream_port,
                self.port,
                self.addon,
                self.record_dir,
                self.scenario,
                self.extra_sets,
            )
            cmd[cmd.index("connection_strategy=lazy")] = f"connection_strategy={strategy}"
            self.log.parent.mkdir(parents=True, exist_ok=True)
            with self.log.open("ab") as out:
                self._proc = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    preexec_fn=limit if fsize_limit is not None else None,
                )
            try:
                procs.wait_for_port(self.port, self._proc, what="mitmdump", log=self.log)
            except BaseException:
                self.stop()
                raise
            return self

    return CustomProxy


# -- file systems that refuse ------------------------------------------------------------------


def can_mount() -> bool:
    """Can this process mount a tmpfs (root with CAP_SYS_ADMIN, as in this container)?"""
    import shutil
    import subprocess
    import tempfile

    if os.geteuid() != 0 or shutil.which("mount") is None:
        return False
    probe = Path(tempfile.mkdtemp(prefix="mount-probe-"))
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)],
            capture_output=True,
            timeout=10,
        )
        if done.returncode != 0:
            return False
        subprocess.run(["umount", str(probe)], capture_output=True, timeout=10)
        return True
    finally:
        probe.rmdir()


def mount_tmpfs(path: Path, size: str, read_only: bool = False) -> None:
    import subprocess

    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size},mode=0700" + (",ro" if read_only else "")
    subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)], check=True, timeout=10
    )


def remount(path: Path, read_only: bool) -> None:
    import subprocess

    option = "remount,ro" if read_only else "remount,rw"
    subprocess.run(["mount", "-o", option, str(path)], check=True, timeout=10)


def unmount(path: Path) -> None:
    """Unmount (lazily if something still holds it); never raises."""
    import subprocess

    for cmd in (["umount", str(path)], ["umount", "-l", str(path)]):
        try:
            if subprocess.run(cmd, capture_output=True, timeout=10).returncode == 0:
                return
        except (OSError, subprocess.SubprocessError):
            pass


def addon_failures(log_text: str) -> list[str]:
    """Lines where the addon's guard caught an exception of its own (traffic unaffected,
    but a defect): `mcp-layers: <hook> failed (...)`."""
    return [line for line in log_text.splitlines() if "mcp-layers:" in line and "failed (" in line]


def wait_serving(port: int) -> None:
    """Until the proxy answers an HTTP request (a GET that is not MCP: nothing recorded).

    mitmdump's port accepts connections (the kernel's backlog) before its addons have
    finished `configure`; a test that changes the recording directory under it must
    wait for this, not just for the port.
    """
    with RawClient(port) as client:
        got = client.request("GET", path="/ready", deadline_s=20)
    assert got.status is not None, got
