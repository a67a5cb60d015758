"""`mcp-layers wrap --install CLIENT SERVER` / `--uninstall`: one server entry of a client's
config (JSON, or Codex's TOML) put behind the wrapper, and back.

Only the named entry changes: its `command` becomes this `mcp-layers` (an absolute path:
GUI clients start servers with a short PATH) and its `args` become `wrap [options] --`
followed by the old command and arguments; `env`, `cwd` and everything else stay. The
first change to a file keeps a copy of it beside it (`<file>.mcp-layers.bak`), never
overwritten. `--uninstall` takes the prefix off again (from the entry itself, not the
copy: the file may have changed since). Both are idempotent and say what they did in one
line. The file is replaced whole (a temporary file renamed over it, with its mode): it is
never left half-written.

A JSON config is rewritten whole (two-space indents). A TOML config (Codex's
`[mcp_servers.NAME]`, any `--config FILE.toml`) is a file people write by hand, with
comments: only the lines of the entry's `command` and `args` are rewritten (an `args` line
added after `command` if there was none, and taken out again by `--uninstall` if the
command had no arguments), every other byte stays. Python reads TOML (`tomllib`) but does
not write it, so each line's extent is found by reading it with `tomllib`, and the result
is read back and compared with what was meant before it replaces the file: a shape that
cannot be rewritten so (an inline table, dotted keys) is refused, never guessed at.

Why here and not in the wrapper module: it runs only on request, never at a server's
start, so it may take its time (and `json`).
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import sys
import tomllib
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
    "codex": "~/.codex/config.toml",  # `$CODEX_HOME/config.toml` when that is set
}

BACKUP_SUFFIX: Final = ".mcp-layers.bak"


class InstallError(Exception):
    """One line for the user: what is wrong and what to do."""


def config_path(client: str, config: str | None) -> Path:
    if config is not None:
        return Path(config).expanduser()
    if client == "codex" and os.environ.get("CODEX_HOME"):
        return Path(os.environ["CODEX_HOME"]).expanduser() / "config.toml"
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


def _entry(
    data: dict[str, Any], path: Path, server: str, table: str = "mcpServers"
) -> dict[str, Any]:
    """The server's entry in `table` (JSON configs: mcpServers; Codex's TOML: mcp_servers)."""
    servers = data.get(table)
    entry = servers.get(server) if isinstance(servers, dict) else None
    if not isinstance(entry, dict):
        names = ", ".join(sorted(servers)) if isinstance(servers, dict) else "none"
        raise InstallError(f"{path}: no server {server!r} in {table} (there: {names})")
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
    _replace(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def _replace(path: Path, text: str) -> None:
    """Keep the first copy of `path` beside it, then put `text` in its place at once, with
    its mode (a config may hold secrets in `env`: 0600 stays 0600)."""
    backup = path.with_name(path.name + BACKUP_SUFFIX)
    if not backup.exists():
        shutil.copy2(path, backup)
    tmp = path.with_name(path.name + ".mcp-layers.tmp")
    tmp.write_bytes(text.encode("utf-8"))
    os.chmod(tmp, path.stat().st_mode & 0o7777)
    os.replace(tmp, path)


def _is_toml(path: Path) -> bool:
    return path.suffix == ".toml"


def install(path: Path, server: str, wrapper: str, options: list[str]) -> str:
    """Put `server` behind `wrapper` (with its `options`); the line to print."""
    if _is_toml(path):
        return toml_install(path, server, wrapper, options)
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
    return _done_install(path, server)


def _done_install(path: Path, server: str) -> str:
    return (
        f"{path}: {server} now goes through mcp-layers wrap (a copy of the file: {BACKUP_SUFFIX})"
    )


def uninstall(path: Path, server: str) -> str:
    if _is_toml(path):
        return toml_uninstall(path, server)
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


# -- TOML (Codex) -----------------------------------------------------------------------------


def toml_install(path: Path, server: str, wrapper: str, options: list[str]) -> str:
    text, data = _toml_load(path)
    entry = _entry(data, path, server, "mcp_servers")
    if _wrapped(entry):
        return f"{path}: {server} already goes through mcp-layers wrap; nothing changed"
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise InstallError(f"{path}: server {server!r} has args that are not a list of strings")
    new_args = ["wrap", *options, "--", entry["command"], *args]
    _toml_rewrite(path, text, data, server, wrapper, new_args)
    return _done_install(path, server)


def toml_uninstall(path: Path, server: str) -> str:
    text, data = _toml_load(path)
    entry = _entry(data, path, server, "mcp_servers")
    if not _wrapped(entry):
        return f"{path}: {server} does not go through mcp-layers wrap; nothing changed"
    args: list[str] = entry["args"]
    rest = args[args.index("--") + 1 :]
    if not rest:
        raise InstallError(f"{path}: server {server!r} wraps no command; edit it by hand")
    _toml_rewrite(path, text, data, server, rest[0], rest[1:] or None)
    return f"{path}: {server} runs without mcp-layers wrap again"


def _toml_load(path: Path) -> tuple[str, dict[str, Any]]:
    try:
        text = path.read_bytes().decode("utf-8")
        return text, tomllib.loads(text)
    except FileNotFoundError:
        raise InstallError(f"{path}: no such file; name the config with --config") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise InstallError(f"{path}: cannot read it as TOML ({e})") from None


def _toml_rewrite(
    path: Path,
    text: str,
    data: dict[str, Any],
    server: str,
    command: str,
    args: list[str] | None,
) -> None:
    """Rewrite the entry's `command` and `args` lines (`args` None: no `args` line), check
    that the file now reads as meant, and replace it."""
    lines = text.split("\n")
    start, end = _toml_section(lines, path, server)
    cmd = _toml_span(lines, start, end, "command")
    if cmd is None:
        raise InstallError(_cannot(path, server, "its command is not a line of its table"))
    arg = _toml_span(lines, start, end, "args")
    edits: list[tuple[int, int, list[str]]] = [(*cmd, [_toml_line(lines, *cmd, command)])]
    if arg is not None:
        edits.append((*arg, [] if args is None else [_toml_line(lines, *arg, args)]))
    elif args is not None:
        indent = re.match(r"[ \t]*", lines[cmd[0]])
        cr = "\r" if lines[cmd[1] - 1].endswith("\r") else ""
        line = f"{indent.group() if indent else ''}args = {_toml_value(args)}{cr}"
        edits.append((cmd[1], cmd[1], [line]))
    for first, past, new in sorted(edits, reverse=True):
        lines[first:past] = new
    result = "\n".join(lines)
    meant = copy.deepcopy(data)  # (TOML has dates, which JSON would not copy)
    meant["mcp_servers"][server]["command"] = command
    if args is None:
        meant["mcp_servers"][server].pop("args", None)
    else:
        meant["mcp_servers"][server]["args"] = args
    try:
        read_back = tomllib.loads(result)
    except tomllib.TOMLDecodeError:
        read_back = None
    if read_back != meant:
        raise InstallError(_cannot(path, server, "its lines could not be rewritten safely"))
    _replace(path, result)


def _cannot(path: Path, server: str, why: str) -> str:
    return (
        f"{path}: server {server!r}: {why}; nothing changed. Write it as a [mcp_servers.{server}] "
        "table with command = ... and args = [...] lines, or edit it by hand (docs/stdio.md)"
    )


def _toml_header(line: str) -> tuple[str, ...] | None:
    """The key path of a `[table]` header line (`()` for `[[array]]` headers, which end a
    table too), None for any other line."""
    s = line.strip()
    if not s.startswith("["):
        return None
    try:
        node: object = tomllib.loads(s)
    except tomllib.TOMLDecodeError:
        return None  # a line of a multi-line array, say
    keys: list[str] = []
    while isinstance(node, dict) and len(node) == 1:
        key, node = next(iter(node.items()))
        keys.append(key)
    return tuple(keys) if node == {} else ()


def _toml_section(lines: list[str], path: Path, server: str) -> tuple[int, int]:
    """The lines of the table `[mcp_servers.<server>]`, past its header."""
    start = None
    for i, line in enumerate(lines):
        header = _toml_header(line)
        if header is None:
            continue
        if start is not None:
            return start, i
        if header == ("mcp_servers", server):
            start = i + 1
    if start is None:
        raise InstallError(_cannot(path, server, "it is not a table of its own (inline or dotted)"))
    return start, len(lines)


def _toml_span(lines: list[str], start: int, end: int, key: str) -> tuple[int, int] | None:
    """The lines `key = value` takes in the table (a multi-line array takes several):
    from its first line to the first that makes the value whole."""
    begins = re.compile(rf'[ \t]*("?){key}\1[ \t]*=')
    for i in range(start, end):
        if not begins.match(lines[i]):
            continue
        for past in range(i + 1, end + 1):
            try:
                # The last line's own CR, if any, would be a bare CR to tomllib.
                value = tomllib.loads("\n".join(lines[i:past]).removesuffix("\r"))
            except tomllib.TOMLDecodeError:
                continue
            return (i, past) if list(value) == [key] else None
        return None
    return None


def _toml_line(lines: list[str], first: int, past: int, value: str | list[str]) -> str:
    """The span's new line: its key as written, the new value, its trailing comment."""
    head = re.match(r'[ \t]*"?\w+"?[ \t]*=[ \t]*', lines[first])
    assert head is not None  # `_toml_span` matched it
    last = lines[past - 1]
    cr = "\r" if last.endswith("\r") else ""
    last = last.removesuffix("\r")
    trailing = ""
    # A comment after the value: the first `#` (of the last line) before which the span
    # reads whole (a `#` inside a string cuts the string short).
    span = "\n".join([*lines[first : past - 1], last])
    for at in [m.start() for m in re.finditer("#", last)]:
        cut = len(span) - len(last) + at
        try:
            tomllib.loads(span[:cut])
        except tomllib.TOMLDecodeError:
            continue
        before = span[:cut].rstrip(" \t")
        trailing = span[len(before) :]
        break
    return f"{head.group()}{_toml_value(value)}{trailing}{cr}"


def _toml_value(value: str | list[str]) -> str:
    """A TOML basic string (JSON's escapes are TOML's; DEL must be escaped too), or an
    array of them on one line."""
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
