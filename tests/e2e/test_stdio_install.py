"""`mcp-layers wrap --install CLIENT SERVER` and `--uninstall`: one entry of a client's JSON
config put behind the wrapper and back, with a copy of the file kept."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ORIGINAL = {
    "mcpServers": {
        "files": {"command": "npx", "args": ["-y", "server-files", "/tmp"], "env": {"K": "v"}},
        "other": {"command": "other-server"},
    },
    "theme": "dark",
}


def run(*args: str) -> subprocess.CompletedProcess[str]:
    wrapper = shutil.which("mcp-layers", path=os.path.dirname(sys.executable))
    assert wrapper
    return subprocess.run(
        [wrapper, "wrap", *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_install_then_uninstall(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps(ORIGINAL))
    done = run("--install", "cursor", "files", "--config", str(config), "--name", "files")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1 and "now goes through" in done.stdout
    data = json.loads(config.read_text())
    entry = data["mcpServers"]["files"]
    assert os.path.basename(entry["command"]) == "mcp-layers" and os.path.isabs(entry["command"])
    assert entry["args"] == ["wrap", "--name", "files", "--", "npx", "-y", "server-files", "/tmp"]
    assert entry["env"] == {"K": "v"}
    assert data["mcpServers"]["other"] == ORIGINAL["mcpServers"]["other"]
    assert data["theme"] == "dark"
    backup = tmp_path / "mcp.json.mcp-layers.bak"
    assert json.loads(backup.read_text()) == ORIGINAL

    again = run("--install", "cursor", "files", "--config", str(config))
    assert again.returncode == 0 and "nothing changed" in again.stdout

    back = run("--uninstall", "cursor", "files", "--config", str(config))
    assert back.returncode == 0, back.stderr
    assert json.loads(config.read_text()) == ORIGINAL
    assert json.loads(backup.read_text()) == ORIGINAL  # the first copy is kept


def test_a_server_that_is_not_there_is_named_with_those_that_are(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps(ORIGINAL))
    done = run("--install", "cursor", "nope", "--config", str(config))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "files, other" in done.stderr
    assert json.loads(config.read_text()) == ORIGINAL
    assert not (tmp_path / "mcp.json.mcp-layers.bak").exists()


def test_an_unknown_client_without_a_config(tmp_path: Path) -> None:
    done = run("--install", "notepad", "files")
    assert done.returncode == 2 and "--config" in done.stderr
