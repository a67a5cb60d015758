"""Process gauges from Linux /proc: resident memory, its peak and CPU time."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any


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
