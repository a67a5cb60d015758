"""Shared tools of the hardening proofs: figures, mitmdump under odd conditions, file
systems that refuse.

MCP messages, process gauges, recording checks and the raw HTTP/1.1 client are in
`mcp_layers_support` (the benchmarks' runners use them too).

Figures: each proof prints one `HARDENING <proof>: k=v ...` line (shown with `-s`) and
puts the same line in its assertion messages, so a failure says what was measured.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from mcp_layers_demo import procs
from mcp_layers_support.harness import Proxy
from mcp_layers_support.rawhttp import RawClient


def figures(proof: str, **values: Any) -> str:
    """Print one summary line of a proof's figures and return it (for assertion messages)."""
    parts = " ".join(f"{k}={v}" for k, v in values.items())
    line = f"HARDENING {proof}: {parts}"
    print(line, flush=True)
    return line


def wait_for(predicate: Any, timeout: float, interval: float = 0.02) -> bool:
    """Poll `predicate()` until it is true or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)


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
