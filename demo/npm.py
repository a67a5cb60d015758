"""Install a pinned npm package folder once: `npm ci`, under a lock, only when its lock
file changed since the last install.

The demo installs the TypeScript SDK client (`mcp_layers_demo/node`) with it, the lab
reuses that install for its `ts-sdk` client, and the tests install their Node peers with
it too (`mcp_layers_support.node_peers`). Installs are serialised across processes by a file
lock outside the repo, and a stamp in node_modules records which package-lock.json was
installed.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import IO

#: A cold `npm ci` of the largest folder downloads ~70 MB.
NPM_TIMEOUT_S = 600.0
LOCK_TIMEOUT_S = NPM_TIMEOUT_S + 60.0
_LOCK_POLL_S = 0.2
STAMP_NAME = ".mcp-layers-installed"

#: The official TypeScript SDK client the demo ships (demo/node/client.mjs) and its pinned
#: package; the end-to-end tests and the lab drive it too.
TS_CLIENT_DIR = Path(__file__).resolve().parent / "node"
TS_CLIENT = TS_CLIENT_DIR / "client.mjs"


class NpmInstallError(RuntimeError):
    """npm is there but the folder could not be installed; the message says why."""


def node_and_npm() -> tuple[str, str] | None:
    """The `node` and `npm` on PATH, or None when either is missing."""
    node, npm = shutil.which("node"), shutil.which("npm")
    return (node, npm) if node and npm else None


def ensure(folder: Path, npm: str) -> Path:
    """`npm ci` in `folder` unless its current lock file is installed; its node_modules."""
    modules = folder / "node_modules"
    key = hashlib.sha256(str(folder).encode()).hexdigest()[:12]
    lock_path = Path(tempfile.gettempdir()) / f"mcp-layers-npm-{key}.lock"
    with lock_path.open("w") as lock:
        _acquire(lock, lock_path)
        try:
            if not installed(folder):
                _npm_ci(folder, npm)
                (modules / STAMP_NAME).write_text(_lock_hash(folder) + "\n", encoding="ascii")
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return modules


def installed(folder: Path) -> bool:
    try:
        stamp = (folder / "node_modules" / STAMP_NAME).read_text(encoding="ascii").strip()
    except OSError:
        return False
    return stamp == _lock_hash(folder)


def _lock_hash(folder: Path) -> str:
    return hashlib.sha256((folder / "package-lock.json").read_bytes()).hexdigest()


def _npm_ci(folder: Path, npm: str) -> None:
    # npm's update check and funding notes would go to the registry for nothing.
    env = {**os.environ, "npm_config_update_notifier": "false", "npm_config_fund": "false"}
    try:
        done = subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund"],
            cwd=folder,
            capture_output=True,
            text=True,
            timeout=NPM_TIMEOUT_S,
            env=env,
        )
    except subprocess.TimeoutExpired as e:
        raise NpmInstallError(f"`npm ci` in {folder} took over {NPM_TIMEOUT_S:.0f} s") from e
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise NpmInstallError(f"`npm ci` in {folder} failed ({done.returncode}):\n{tail}")


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
    raise NpmInstallError(f"another process held {path} for over {LOCK_TIMEOUT_S:.0f} s")
