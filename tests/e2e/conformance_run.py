"""conformance's client scenarios, with our wrapper (mitmdump with the addon + an SDK client)
as the client under test: one run, its checks (the suite's `-o` output) and its recording.

The wrapper is tests/peers/conformance_client.py: the official Python SDK client, or, with
`ts_client_env(peers)` in `env`, the official TypeScript SDK client (demo/node/client.mjs).
conformance's servers bind every interface, so it runs in a network namespace that has
only `lo`: nothing it opens can be reached from, or reach, outside this machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from mcp_layers_demo import procs
from mcp_layers_support import node_peers, recordings

REPO = Path(__file__).resolve().parents[2]
CONFORMANCE_CLIENT = REPO / "tests" / "peers" / "conformance_client.py"

#: conformance's own client timeout (ms); ours for the whole run is above it.
CONFORMANCE_CLIENT_TIMEOUT_MS = 25_000
CONFORMANCE_TIMEOUT_S = 60.0

#: The clients the wrapper runs, as their records name them (`name@version`).
CONFORMANCE_PY_CLIENT = "mcp-layers-conformance-client@0.1.0"
CONFORMANCE_TS_CLIENT = "mcp-layers-conformance-ts-client@1.32.2"


@dataclass
class ConformanceRun:
    scenario: str
    returncode: int | None
    output: str
    checks: list[dict[str, Any]]
    records: list[dict[str, Any]]
    workdir: Path

    def status(self, check_id: str) -> list[str]:
        return [c["status"] for c in self.checks if c["id"] == check_id]

    def recording(self) -> Path:
        """The run's records in one JSONL file (written once), for `mcp-layers`."""
        path = self.workdir / "recording.jsonl"
        if not path.exists():
            path.write_text("".join(json.dumps(r) + "\n" for r in self.records))
        return path

    def failure_context(self) -> str:
        lines = [f"conformance {self.scenario}: exit {self.returncode}", self.output[-4000:]]
        lines += ["checks:"] + [
            f"  {c['id']} {c['status']} {c.get('errorMessage') or ''}" for c in self.checks
        ]
        lines += ["records:"] + [f"  {json.dumps(r)}" for r in self.records]
        lines.append(procs.log_tail(self.workdir / "records" / "mitmdump.log", 40))
        return "\n".join(lines)


def ts_client_env(peers: node_peers.NodePeers) -> dict[str, str]:
    """The wrapper's environment to run the TypeScript SDK client instead of Python's."""
    return {"MCP_LAYERS_NODE": str(peers.node), "MCP_LAYERS_TS_CLIENT": str(peers.ts_client)}


@cache
def _netns_prefix() -> tuple[str, ...]:
    """`unshare` for a private network namespace, checked to work here; fails, never skips."""
    unshare, ip = shutil.which("unshare"), shutil.which("ip")
    if unshare is None or ip is None:
        pytest.fail("conformance needs `unshare` and `ip` (util-linux, iproute2) to stay local")
    # As root a network namespace is enough; otherwise a user namespace maps us to root.
    flags = ("-n",) if os.geteuid() == 0 else ("-r", "-n")
    probe = subprocess.run(
        [unshare, *flags, ip, "link", "set", "lo", "up"], capture_output=True, timeout=10
    )
    if probe.returncode != 0:
        pytest.fail(
            f"`unshare {' '.join(flags)}` does not work here ({probe.stderr.decode()[-300:]}); "
            "conformance's servers bind every interface, so it only runs in a private namespace"
        )
    return (unshare, *flags)


def run_conformance(
    peers: node_peers.NodePeers,
    scenario: str,
    workdir: Path,
    env: dict[str, str] | None = None,
) -> ConformanceRun:
    """conformance's client scenario, with our wrapper (proxy + SDK client) as the client;
    `env` adds to the wrapper's environment."""
    assert " " not in sys.executable + str(CONFORMANCE_CLIENT), "conformance splits on spaces"
    ip = shutil.which("ip")
    records_dir, results_dir = workdir / "records", workdir / "results"
    cmd = [
        *_netns_prefix(),
        "bash",
        "-c",
        f'{ip} link set lo up && exec "$0" "$@"',
        str(peers.node22),
        str(peers.conformance),
        "client",
        "--command",
        f"{sys.executable} {CONFORMANCE_CLIENT}",
        "--scenario",
        scenario,
        "--timeout",
        str(CONFORMANCE_CLIENT_TIMEOUT_MS),
        "-o",
        str(results_dir),
    ]
    env = {
        **os.environ,
        "MCP_LAYERS_RECORD_DIR": str(records_dir),
        "NO_COLOR": "1",
        **(env or {}),
    }
    # Its own process group: on a timeout, the group (conformance, the wrapper, mitmdump)
    # is ended by that group's id, and nothing else.
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=CONFORMANCE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=10)
        pytest.fail(f"conformance {scenario} ran over {CONFORMANCE_TIMEOUT_S} s:\n{out[-3000:]!r}")
    finally:
        # Whatever of the group outlived conformance (it kills only the shell of its
        # command on its own timeout) ends here too.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.wait(timeout=10)
    checks: list[dict[str, Any]] = []
    for path in sorted(results_dir.glob("*/checks.json")):
        checks += json.loads(path.read_text(encoding="utf-8"))
    records: list[dict[str, Any]] = []
    for path in recordings.recording_files(records_dir):
        records += recordings.read_jsonl(path)
    text = out.decode("utf-8", errors="replace")
    return ConformanceRun(scenario, proc.returncode, text, checks, records, workdir)
