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


# -- Codex's TOML ------------------------------------------------------------------------

CODEX = """\
# my Codex settings
model = "o4-mini"   # the default
updated = 2026-12-02T10:00:00Z  # TOML has dates: the check copes

[mcp_servers.files]
command = "npx"  # via npm
args = [
  "-y",
  "server-files",   # the package
  "/tmp/a b",
]
env = { K = "v" }

[mcp_servers.files.tools]
read = true

[mcp_servers."no args"]
command = "uvx"

[profiles.x]
model = "o3"
"""


def test_codex_toml_install_changes_only_the_entrys_lines(tmp_path: Path) -> None:
    import tomllib

    config = tmp_path / "config.toml"
    config.write_bytes(CODEX.encode())
    config.chmod(0o600)
    done = run("--install", "codex", "files", "--config", str(config), "--name", "files")
    assert done.returncode == 0, done.stderr
    assert "now goes through" in done.stdout and done.stdout.count("\n") == 1
    text = config.read_text()
    wrapper = tomllib.loads(text)["mcp_servers"]["files"]["command"]
    assert os.path.basename(wrapper) == "mcp-layers" and os.path.isabs(wrapper)
    # Every other line as it was, the comment on the command's line too.
    assert text == CODEX.replace(
        'command = "npx"  # via npm\nargs = [\n  "-y",\n  "server-files",   # the package\n'
        '  "/tmp/a b",\n]\n',
        f'command = "{wrapper}"  # via npm\nargs = ["wrap", "--name", "files", "--", "npx", '
        '"-y", "server-files", "/tmp/a b"]\n',
    )
    assert (config.stat().st_mode & 0o777) == 0o600
    assert (tmp_path / "config.toml.mcp-layers.bak").read_bytes() == CODEX.encode()
    assert "nothing changed" in run("--install", "codex", "files", "--config", str(config)).stdout

    back = run("--uninstall", "codex", "files", "--config", str(config))
    assert back.returncode == 0, back.stderr
    assert tomllib.loads(config.read_text()) == tomllib.loads(CODEX)


def test_codex_toml_without_args_comes_back_byte_for_byte(tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    home.mkdir()
    config = home / "config.toml"
    config.write_bytes(CODEX.replace("\n", "\r\n").encode())  # and CRLF lines
    env = {**os.environ, "CODEX_HOME": str(home)}
    wrapper = shutil.which("mcp-layers", path=os.path.dirname(sys.executable))
    assert wrapper
    for how in ("--install", "--uninstall"):
        done = subprocess.run(
            [wrapper, "wrap", how, "codex", "no args"], capture_output=True, text=True, env=env
        )
        assert done.returncode == 0, done.stderr
        if how == "--install":
            assert '\r\nargs = ["wrap", "--", "uvx"]\r\n' in config.read_bytes().decode()
    assert config.read_bytes() == CODEX.replace("\n", "\r\n").encode()


def test_codex_toml_shapes_that_cannot_be_rewritten_are_refused(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    for text, says in [
        ('mcp_servers = { files = { command = "npx" } }\n', "not a table of its own"),
        ('[mcp_servers]\nfiles.command = "npx"\n', "not a table of its own"),
        ('[mcp_servers.files]\n"command" = "npx"\n', None),  # a quoted key is fine
        ("[mcp_servers.files]\nurl = 'http://x'\n", "not a stdio server"),
        ("[mcp_servers.files\n", "cannot read it as TOML"),
    ]:
        config.write_text(text)
        done = run("--install", "codex", "files", "--config", str(config))
        if says is None:
            assert done.returncode == 0, done.stderr
            continue
        assert done.returncode == 2 and says in done.stderr, (text, done.stderr)
        assert done.stderr.count("\n") == 1
        assert config.read_text() == text
