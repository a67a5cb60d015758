"""`mcp-layers wrap --install CLIENT SERVER` / `--uninstall`: one server entry of a client's
JSON config put behind the wrapper, and back.

Only the named entry changes: its `command` becomes this `mcp-layers` (an absolute path:
GUI clients start servers with a short PATH) and its `args` become `wrap [options] --`
followed by the old command and arguments; `env`, `cwd` and everything else stay. The
first change to a file keeps a copy of it beside it (`<file>.mcp-layers.bak`), never
overwritten. `--uninstall` takes the prefix off again (from the entry itself, not the
copy: the file may have changed since). Both are idempotent and say what they did in one
line. The file is replaced whole (a temporary file renamed over it): it is never left
half-written. Codex's TOML config is not handled (docs/stdio.md shows its entry).

Why here and not in the wrapper module: it runs only on request, never at a server's
start, so it may take its time (and `json`).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any, Final

#: Where each client keeps its servers (`mcpServers.<name>`), relative to home unless
#: absolute-looking; `--config FILE` names another.
CONFIGS: Final[dict[str, str]] = {
    "claude-code": ".mcp.json",  # the project's, in the current directory
    "cursor": "~/.cursor/mcp.json",
    "gemini": "~/.gemini/settings.json",
    "claude-desktop": (
        "~/Library/Application Support/Claude/claude_desktop_config.json"
        if sys.platform == "darwin"
        else "~/.config/Claude/claude_desktop_config.json"
    ),
}

BACKUP_SUFFIX: Final = ".mcp-layers.bak"


class InstallError(Exception):
    """One line for the user: what is wrong and what to do."""


def config_path(client: str, config: str | None) -> Path:
    if config is not None:
        return Path(config).expanduser()
    where = CONFIGS.get(client)
    if where is None:
        known = ", ".join(sorted(CONFIGS))
        raise InstallError(
            f"unknown client {client!r}; one of {known}, or name the file with --config"
        )
    return Path(where).expanduser()


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InstallError(f"{path}: no such file; name the config with --config") from None
    except (OSError, ValueError) as e:
        raise InstallError(f"{path}: cannot read it as JSON ({e})") from None
    if not isinstance(data, dict):
        raise InstallError(f"{path}: not a JSON object")
    return data


def _entry(data: dict[str, Any], path: Path, server: str) -> dict[str, Any]:
    servers = data.get("mcpServers")
    entry = servers.get(server) if isinstance(servers, dict) else None
    if not isinstance(entry, dict):
        names = ", ".join(sorted(servers)) if isinstance(servers, dict) else "none"
        raise InstallError(f"{path}: no server {server!r} in mcpServers (there: {names})")
    if not isinstance(entry.get("command"), str):
        raise InstallError(f"{path}: server {server!r} has no command (not a stdio server)")
    return entry


def _wrapped(entry: dict[str, Any]) -> bool:
    args = entry.get("args")
    return (
        os.path.basename(entry["command"]) == "mcp-layers"
        and isinstance(args, list)
        and args[:1] == ["wrap"]
        and "--" in args
    )


def _save(path: Path, data: dict[str, Any]) -> None:
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    if not backup.exists():
        shutil.copy2(path, backup)
    tmp = path.with_name(path.name + ".mcp-layers.tmp")
    tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def install(path: Path, server: str, wrapper: str, options: list[str]) -> str:
    """Put `server` behind `wrapper` (with its `options`); the line to print."""
    data = _load(path)
    entry = _entry(data, path, server)
    if _wrapped(entry):
        return f"{path}: {server} already goes through mcp-layers wrap; nothing changed"
    args = entry.get("args") or []
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise InstallError(f"{path}: server {server!r} has args that are not a list of strings")
    entry["args"] = ["wrap", *options, "--", entry["command"], *args]
    entry["command"] = wrapper
    _save(path, data)
    return (
        f"{path}: {server} now goes through mcp-layers wrap (a copy of the file: {BACKUP_SUFFIX})"
    )


def uninstall(path: Path, server: str) -> str:
    data = _load(path)
    entry = _entry(data, path, server)
    if not _wrapped(entry):
        return f"{path}: {server} does not go through mcp-layers wrap; nothing changed"
    args: list[str] = entry["args"]
    rest = args[args.index("--") + 1 :]
    if not rest:
        raise InstallError(f"{path}: server {server!r} wraps no command; edit it by hand")
    entry["command"], entry["args"] = rest[0], rest[1:]
    _save(path, data)
    return f"{path}: {server} runs without mcp-layers wrap again"
